//go:build cuda

package memory_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/cudart"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/specs/memory"
	"github.com/dagrun/dagrun/verify"
)

// trials is how many times each variant runs on the GPU ($DAGRUN_TRIALS,
// default 20).
func trials() int {
	if n, err := strconv.Atoi(os.Getenv("DAGRUN_TRIALS")); err == nil && n > 0 {
		return n
	}
	return 20
}

func gpu(t *testing.T) executor.Backend {
	b, err := cudart.New(cudart.Options{})
	if errors.Is(err, cudart.ErrNotSupported) || errors.Is(err, cudart.ErrNoDevice) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// record logs a line and appends it to $DAGRUN_OUT/memory_gpu.txt.
func record(t *testing.T, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	if dir := os.Getenv("DAGRUN_OUT"); dir != "" {
		if f, err := os.OpenFile(filepath.Join(dir, "memory_gpu.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}

// TestGPUTrials runs each pattern's planned spec (static arena and
// --alloc dynamic) and racy spec on the GPU, trials() times each, and
// counts the trials whose outputs differ from the right ones. Planned:
// none may. Racy: most should (the bug reproduced).
func TestGPUTrials(t *testing.T) {
	b := gpu(t)
	defer b.Close()
	wants := want()
	n := trials()
	for i, pat := range memory.Patterns {
		for _, v := range []struct {
			file, alloc string
			racy        bool
		}{{pat[0], executor.AllocStatic, false}, {pat[0], executor.AllocDynamic, false}, {pat[1], executor.AllocStatic, true}} {
			p := planFile(t, v.file)
			wrong, failed := 0, 0
			var example string
			for k := 0; k < n; k++ {
				res, err := executor.Run(context.Background(), p, b, executor.Options{Alloc: v.alloc})
				if err != nil {
					failed++
					example = err.Error()
					continue
				}
				got := outputs(res)
				for name, w := range wants[i] {
					if got[name] != w {
						wrong++
						example = fmt.Sprintf("%s = %s, want %s", name, got[name], w)
						break
					}
				}
			}
			record(t, "%-28s alloc %-7s racy %-5v: %d/%d trials wrong, %d failed %s", v.file, v.alloc, v.racy, wrong, n, failed, example)
			switch {
			case failed > 0:
				t.Errorf("%s (%s): %d runs failed: %s", v.file, v.alloc, failed, example)
			case !v.racy && wrong > 0:
				t.Errorf("%s (%s): %d/%d wrong: %s", v.file, v.alloc, wrong, n, example)
			case v.racy && 2*wrong <= n:
				t.Errorf("%s: the race showed in %d/%d trials only", v.file, wrong, n)
			}
		}
	}
}

// TestGPUModelsMatchSim: the model graphs' default plans (arena on) give
// the simulator's checksums on the GPU, in stream mode with the static
// arena and with --alloc dynamic, and in graph mode.
func TestGPUModelsMatchSim(t *testing.T) {
	b := gpu(t)
	defer b.Close()
	files, _ := filepath.Glob("../models/*.yaml")
	if len(files) != 8 {
		t.Fatalf("model specs: %v", files)
	}
	for _, f := range files {
		s, err := dag.LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := planner.Build(s, planner.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := verify.Verify(p); err != nil {
			t.Fatal(err)
		}
		sb := sim.New(sim.Options{Seed: 1})
		res, err := executor.Run(context.Background(), p, sb, executor.Options{})
		sb.Close()
		if err != nil {
			t.Fatalf("%s on the simulator: %v", f, err)
		}
		want := fmt.Sprint(outputs(res))
		var results []string
		for _, o := range []executor.Options{{}, {Alloc: executor.AllocDynamic}, {Mode: executor.ModeGraph, Iterations: 2}} {
			res, err := executor.Run(context.Background(), p, b, o)
			got := fmt.Sprint(outputs(res))
			what := fmt.Sprintf("mode %s alloc %s", cmpOr(string(o.Mode), "streams"), cmpOr(o.Alloc, "static"))
			if err != nil || got != want {
				t.Errorf("%s, %s: %v: cuda %s, sim %s", f, what, err, got, want)
				results = append(results, what+" DIFFERS")
				continue
			}
			results = append(results, what+" ==")
		}
		record(t, "%-34s arena %9d bytes: sim %s; cuda: %s", filepath.Base(f), p.Stats.ArenaBytes, strings.Trim(want, "map[]"), strings.Join(results, ", "))
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
