package main

import (
	"path/filepath"
	"strconv"
	"testing"
)

// TestGraphModeCaptureOrder: the specs of specs/graph (eager work inside a
// capture region: a side stream's copy that the host waits for before
// the captured stage reads it; a stream that works eagerly, then joins
// the capture) pass check --mode graph, and run --mode graph gives stream
// mode's outputs with no race, over several iterations and seeds.
func TestGraphModeCaptureOrder(t *testing.T) {
	t.Parallel()
	specs, _ := filepath.Glob(specPath("graph/*.yaml"))
	if len(specs) < 2 {
		t.Fatalf("%d specs in specs/graph, want 2 or more", len(specs))
	}
	for _, p := range specs {
		t.Run(filepath.Base(p), func(t *testing.T) {
			t.Parallel()
			if out, errs, code := cli(t, "check", "--mode", "graph", p); code != exitOK {
				t.Fatalf("check --mode graph: exit %d\n%s%s", code, out, errs)
			}
			want := checksums(t, "--iterations", "3", p)
			for seed := 1; seed <= 5; seed++ {
				if got := checksums(t, "--mode", "graph", "--iterations", "3", "--seed", strconv.Itoa(seed), p); got != want {
					t.Errorf("seed %d: graph mode %s, stream mode %s", seed, got, want)
				}
			}
		})
	}
}
