//go:build cuda

package cudart

// The executor's host threads and capture regions on the device, with the
// specs of specs/rules/ as `dagrun run` runs them (executor.Run): the buggy
// spec goes wrong (or fails with the driver's capture error, the stage
// named), the fixed one gives the simulator's outputs. Each figure goes to
// $DAGRUN_OUT/figures.txt.

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
)

const specTrials = 20

// ruleSpec plans specs/rules/NAME-VARIANT.yaml.
func ruleSpec(t *testing.T, name, variant string) *plan.Plan {
	t.Helper()
	return planFile(t, filepath.Join(specsDir(t), "rules", name+"-"+variant+".yaml"), planner.Options{})
}

// wrongRuns runs p trials times on b (one iteration each) and counts the
// runs whose outputs differ from want.
func wrongRuns(t *testing.T, p *plan.Plan, b executor.Backend, want string, trials int) int {
	t.Helper()
	wrong := 0
	for range trials {
		if got := checksums(t, p, b, 1); got != want {
			wrong++
		}
	}
	return wrong
}

// TestRulesSpecsRun: the runnable specs of specs/rules/ through the
// executor, as `dagrun run --backend cuda` runs them: the buggy variant's
// outputs differ from the simulator's outputs of the fixed one in most
// runs, the fixed variant's never. The pageable race is the API's
// contract, latent on the H200's driver (the copy had landed by the
// return in every run): reported, not asserted.
func TestRulesSpecsRun(t *testing.T) {
	b := newTB(t, testOptions(t))
	defer func() { must(t, b.Close()) }()
	for _, name := range []string{"legacy", "pageable", "pageable-async", "copy", "hostfunc", "threads"} {
		t.Run(name, func(t *testing.T) {
			fixed, racy := ruleSpec(t, name, "fixed"), ruleSpec(t, name, "racy")
			want := simSums(t, fixed, 3)
			wr := wrongRuns(t, racy, b, want, specTrials)
			wf := wrongRuns(t, fixed, b, want, specTrials)
			figure(t, "%s: racy %d of %d runs wrong; fixed %d of %d wrong", name, wr, specTrials, wf, specTrials)
			if wr == 0 && name != "pageable" || wf != 0 {
				t.Errorf("want the racy spec wrong and the fixed one right, got %d and %d of %d", wr, wf, specTrials)
			}
		})
	}
}

// TestThreadsExecutor: threads-fixed.yaml, whose host threads hand host
// events to each other, over many iterations on the device: every run
// gives the simulator's outputs, and the counts of issued ops are the
// plan's.
func TestThreadsExecutor(t *testing.T) {
	b := newTB(t, testOptions(t))
	defer func() { must(t, b.Close()) }()
	p := ruleSpec(t, "threads", "fixed")
	const iters = 50
	sb := sim.New(sim.Options{Seed: 3})
	defer sb.Close()
	ref, err := executor.Run(context.Background(), p, sb, executor.Options{Iterations: iters})
	must(t, err)
	wrong := 0
	for range 5 {
		res, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: iters})
		must(t, err)
		if outSums(res.Outputs) != outSums(ref.Outputs) {
			wrong++
		}
		if res.Launches != ref.Launches || res.Waits != ref.Waits || res.Records != ref.Records {
			t.Errorf("issued %d launches, %d waits, %d records; the simulator %d, %d, %d", res.Launches, res.Waits, res.Records, ref.Launches, ref.Waits, ref.Records)
		}
	}
	figure(t, "threads-fixed, %d iterations from 2 host threads: %d of 5 runs wrong", iters, wrong)
	if wrong != 0 {
		t.Errorf("%d of 5 runs wrong", wrong)
	}
	if s, e, bufs := b.Live(); s+e+bufs != 0 {
		t.Errorf("leaked %d streams, %d events, %d buffers: %v", s, e, bufs, b.Leaks())
	}
}

// TestThreadsLazyWorkspace: specs/rules/threads-workspace.yaml, whose
// two host threads each allocate a lazy workspace (cuMemAlloc at its
// first use) on a stream of their own: the run gives the simulator's
// outputs and, once it returns, no buffer is left alive.
func TestThreadsLazyWorkspace(t *testing.T) {
	b := newTB(t, testOptions(t))
	defer func() { must(t, b.Close()) }()
	p := planFile(t, filepath.Join(specsDir(t), "rules", "threads-workspace.yaml"), planner.Options{})
	want := simSums(t, p, 3)
	if got := checksums(t, p, b, 1); got != want {
		t.Errorf("outputs %s, the simulator's %s", got, want)
	}
	if s, e, bufs := b.Live(); s+e+bufs != 0 {
		t.Errorf("leaked %d streams, %d events, %d buffers: %v", s, e, bufs, b.Leaks())
	}
}

// TestCaptureRegions: graph mode captures the specs' capture regions on
// the device. The buggy specs fail with the driver's error that the
// capture checker predicts, the stage named; the fixed ones replay their
// graphs and give stream mode's outputs.
func TestCaptureRegions(t *testing.T) {
	b := newTB(t, testOptions(t))
	defer func() { must(t, b.Close()) }()
	for _, c := range []struct{ name, driver, stage string }{
		{"capture", "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "branch"},
		{"warmup", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "gemm"},
		{"isolation", "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "attention"}, // refused before the capture: graph mode does not move the wait
	} {
		t.Run(c.name, func(t *testing.T) {
			racy := ruleSpec(t, c.name, "racy")
			_, err := executor.RunGraph(context.Background(), racy, b, executor.Options{Iterations: 3})
			figure(t, "%s-racy in graph mode: %v", c.name, err)
			if err == nil || !strings.Contains(err.Error(), c.driver) || !strings.Contains(err.Error(), c.stage) {
				t.Errorf("want the driver's %s naming stage %s, got %v", c.driver, c.stage, err)
			}
			fixed := ruleSpec(t, c.name, "fixed")
			want := checksums(t, fixed, b, 3)
			res, err := executor.RunGraph(context.Background(), fixed, b, executor.Options{Iterations: 3})
			must(t, err)
			got := outSums(res.Outputs)
			figure(t, "%s-fixed in graph mode: %s (stream mode %s)", c.name, got, want)
			if got != want {
				t.Errorf("graph mode %s, stream mode %s", got, want)
			}
		})
	}
	if s, e, bufs := b.Live(); s+e+bufs != 0 {
		t.Errorf("leaked %d streams, %d events, %d buffers: %v", s, e, bufs, b.Leaks())
	}
}

// TestCaptureRegionsEagerWork: the specs of specs/graph (eager work inside
// a capture region: a side stream's copy that the host waits for before
// the captured stage reads it; a stream that works eagerly, then joins
// the capture) in graph mode on the device give stream mode's outputs in
// every run.
func TestCaptureRegionsEagerWork(t *testing.T) {
	b := newTB(t, testOptions(t))
	defer func() { must(t, b.Close()) }()
	files, _ := filepath.Glob(filepath.Join(specsDir(t), "graph", "*.yaml"))
	if len(files) == 0 {
		t.Skip("no specs/graph here")
	}
	for _, f := range files {
		p := planFile(t, f, planner.Options{})
		want := checksums(t, p, b, 3)
		wrong := 0
		for range 10 {
			res, err := executor.RunGraph(context.Background(), p, b, executor.Options{Iterations: 3})
			must(t, err)
			if outSums(res.Outputs) != want {
				wrong++
			}
		}
		figure(t, "%s in graph mode, 3 iterations: %d of 10 runs differ from stream mode", filepath.Base(f), wrong)
		if wrong != 0 {
			t.Errorf("%s: %d of 10 graph-mode runs differ from stream mode", f, wrong)
		}
	}
}
