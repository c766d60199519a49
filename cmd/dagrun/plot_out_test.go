package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchMemoryPlotPathRefusedFirst: a --plot name the plotter cannot
// write, or the name of a SPEC it reads, is a usage error (exit 2) before
// any benchmark runs, with nothing on stdout and the file untouched.
func TestBenchMemoryPlotPathRefusedFirst(t *testing.T) {
	t.Parallel()
	spec, dir := specCopy(t, "seed/three-stage.yaml")
	src, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, plot := range []string{filepath.Join(dir, "m.json"), spec} {
		out, errs, code := cli(t, "bench", "memory", "--no-sim", "--plot", plot, spec)
		if code != exitUsage || out != "" || !strings.Contains(errs, "--plot") {
			t.Errorf("--plot %s: exit %d, stdout %q, stderr %q; want exit 2 naming --plot", plot, code, out, errs)
		}
	}
	if got, _ := os.ReadFile(spec); string(got) != string(src) {
		t.Error("the spec was overwritten")
	}
	if _, err := os.Stat(filepath.Join(dir, "m.json")); err == nil {
		t.Error("m.json was written")
	}
}
