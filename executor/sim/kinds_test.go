package sim_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// withKinds gives p's streams random kinds: at most one legacy default
// stream, the others blocking or non-blocking.
func withKinds(r *rand.Rand, p *plan.Plan) *plan.Plan {
	legacy := r.IntN(len(p.Streams) + 1) // == len: none
	for s := range p.Streams {
		switch {
		case s == legacy:
			p.Streams[s].Kind = plan.StreamLegacy
		case r.IntN(2) == 0:
			p.Streams[s].Kind = plan.StreamBlocking
		}
	}
	return p
}

// verifierRacy says whether the verifier, with CUDA's implicit order,
// finds a race in p.
func verifierRacy(t *testing.T, p *plan.Plan) bool {
	t.Helper()
	err := verify.Verify(p)
	var re *verify.RaceError
	if err != nil && !errors.As(err, &re) {
		t.Fatal(err)
	}
	return re != nil && len(re.Races) > 0
}

// TestDetectorAgreesOnStreamKinds: over random plans whose streams have
// random kinds (the legacy default stream, blocking, non-blocking) and
// random waits dropped, the simulator's detector, which orders the legacy
// default stream with blocking streams at its API, flags a run under every
// seed exactly when the verifier's implicit order leaves a race; race-free
// runs give one stream's outputs.
func TestDetectorAgreesOnStreamKinds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var nracy, nclean, nordered int
	for c := range 200 {
		p := withKinds(r, randomPlan(r, 0.5))
		want := verifierRacy(t, p)
		if racy(p) && !want {
			nordered++ // a race that only the legacy rule orders
		}
		ref, err := run(t, oneStream(p), sim.Options{MaxDelay: -1}, 1)
		if err != nil {
			t.Fatal(err)
		}
		for seed := range int64(3) {
			res, err := run(t, p, sim.Options{Seed: seed, MaxDelay: 5000}, 1)
			var re *executor.RaceError
			if err != nil && !errors.As(err, &re) {
				t.Fatalf("case %d seed %d: %v", c, seed, err)
			}
			if got := re != nil; got != want {
				t.Fatalf("case %d seed %d: detector says race=%v, the verifier %v (%v)\n%v", c, seed, got, want, err, verify.Verify(p))
			}
			if !want && checksums(res) != checksums(ref) {
				t.Fatalf("case %d seed %d: outputs %s, one stream %s", c, seed, checksums(res), checksums(ref))
			}
		}
		if want {
			nracy++
		} else {
			nclean++
		}
	}
	t.Logf("%d racy plans, %d race-free (%d of them ordered only by the legacy default stream's rule)", nracy, nclean, nordered)
	if nordered == 0 {
		t.Error("no plan was ordered by the legacy rule alone: the test does not exercise it")
	}
}

// TestDetectorAgreesOnRulesSpecs: the runnable patterns of specs/rules/
// (stream kinds, copy modes, pageable memory and its asynchronous copies,
// host functions, host threads) on the simulator under 20 seeds: the
// detector flags the buggy spec under every seed and the fixed one under
// none, as the verifier does.
func TestDetectorAgreesOnRulesSpecs(t *testing.T) {
	for _, name := range []string{"legacy", "pageable", "pageable-async", "copy", "hostfunc", "threads"} {
		for _, variant := range []string{"racy", "fixed"} {
			t.Run(name+"-"+variant, func(t *testing.T) {
				s, err := dag.LoadFile(filepath.Join("..", "..", "specs", "rules", name+"-"+variant+".yaml"))
				if err != nil {
					t.Fatal(err)
				}
				p, err := planner.Build(s, planner.Options{})
				if err != nil {
					t.Fatal(err)
				}
				want := verifierRacy(t, p)
				if want != (variant == "racy") {
					t.Fatalf("verifier: race=%v", want)
				}
				for seed := range int64(20) {
					_, err := run(t, p, sim.Options{Seed: seed, MaxDelay: 2000}, 2)
					var re *executor.RaceError
					if err != nil && !errors.As(err, &re) {
						t.Fatalf("seed %d: %v", seed, err)
					}
					if got := re != nil; got != want {
						t.Fatalf("seed %d: detector says race=%v, the verifier %v (%v)", seed, got, want, err)
					}
				}
			})
		}
	}
}

// TestDetectorDefaultStreamCopy: an asynchronous device-to-host copy on
// the legacy or a per-thread default stream, whose destination the host
// reads at once (copy-racy.yaml on a default stream), checked as `dagrun
// check` and `dagrun run` check it (verify.Verify, whose fix proposes a
// synchronous copy instead of a wait) and then run: the detector reports
// the host's read under every seed; the synchronous copy (copy: sync)
// under none.
func TestDetectorDefaultStreamCopy(t *testing.T) {
	for _, kind := range []string{plan.StreamLegacy, plan.StreamPerThread} {
		for _, copyMode := range []string{"async", "sync"} {
			t.Run(kind+"-"+copyMode, func(t *testing.T) {
				src := fmt.Sprintf(`version: 1
sync: manual
streams: [{name: work, kind: %s}]
buffers:
  - {name: y, bytes: 4096, init: {random: 1}}
  - {name: y_h, bytes: 4096, where: host_pinned}
  - {name: sum, bytes: 8, where: host_pinned, role: output}
stages:
  - {name: produce, kernel: mix, writes: [y], stream: work}
  - {name: download, kernel: copy, copy: %s, reads: [y], writes: [y_h], stream: work}
  - {name: total, kernel: checksum, reads: [y_h], writes: [sum], stream: host}
`, kind, copyMode)
				s, err := dag.Load([]byte(src), "t.yaml", ".")
				if err != nil {
					t.Fatal(err)
				}
				p, err := planner.Build(s, planner.Options{})
				if err != nil {
					t.Fatal(err)
				}
				want := copyMode == "async"
				if got := verifierRacy(t, p); got != want {
					t.Fatalf("verifier: race=%v, want %v", got, want)
				}
				for seed := range int64(5) {
					_, err := run(t, p, sim.Options{Seed: seed}, 2)
					var re *executor.RaceError
					if err != nil && !errors.As(err, &re) {
						t.Fatalf("seed %d: %v", seed, err)
					}
					if got := re != nil; got != want {
						t.Fatalf("seed %d: detector says race=%v, the verifier %v (%v)", seed, got, want, err)
					}
					if want && !strings.Contains(err.Error(), "total") {
						t.Fatalf("seed %d: the report does not name the host read by total: %v", seed, err)
					}
				}
			})
		}
	}
}

// TestGraphModeRefusesCaptureRules: graph mode refuses what a capture does
// not allow, naming the stage.
func TestGraphModeRefusesCaptureRules(t *testing.T) {
	const perThreadCopy = `version: 1
sync: manual
streams: [{name: pt, kind: per_thread}]
buffers:
  - {name: a, bytes: 64}
  - {name: b, bytes: 64, role: output}
stages:
  - {name: k, kernel: fill, args: {value: 1.0}, writes: [a], stream: pt}
  - {name: download, kernel: copy, copy: sync, reads: [a], writes: [b], stream: pt}
`
	legacy, err := os.ReadFile(filepath.Join("..", "..", "specs", "rules", "legacy-fixed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ spec, want string }{
		{perThreadCopy, "stage download is a synchronous copy"},
		{string(legacy), "stream default is the legacy default stream"},
	} {
		s, err := dag.Load([]byte(c.spec), "t.yaml", ".")
		if err != nil {
			t.Fatal(err)
		}
		p, err := planner.Build(s, planner.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b := sim.New(sim.Options{})
		_, err = executor.Run(context.Background(), p, b, executor.Options{Mode: executor.ModeGraph})
		b.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("graph mode: %v, want %q", err, c.want)
		}
	}
}

// TestEmulatedCaptureJoins: the simulator's graph mode (EmulateGraphs)
// holds a capture to CUDA's join rule: a stream forked into the capture by
// a wait and not joined back fails the end of the capture, naming its
// stage; joined back, the capture ends.
func TestEmulatedCaptureJoins(t *testing.T) {
	for _, join := range []bool{false, true} {
		b := sim.New(sim.Options{})
		g := executor.EmulateGraphs(b)
		s0, _ := g.NewStream()
		s1, _ := g.NewStream()
		e0, _ := g.NewEvent()
		e1, _ := g.NewEvent()
		buf, _ := g.Alloc(executor.BufferDesc{Name: "x", Bytes: 64, Where: "device"})
		fill := func(name string) *executor.LaunchDesc {
			return &executor.LaunchDesc{Name: name, Kernel: "fill", Args: map[string]any{"value": 1.0}, Writes: []executor.Arg{{Buffer: buf, Name: "x", Bytes: 64}}}
		}
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(g.BeginCapture(s0))
		must(g.Launch(s0, fill("fork")))
		must(g.Record(e0, s0))
		must(g.Wait(s1, e0))
		must(g.Launch(s1, fill("branch")))
		if join {
			must(g.Record(e1, s1))
			must(g.Wait(s0, e1))
		}
		gr, err := g.EndCapture(s0)
		switch {
		case !join && (err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_STREAM_CAPTURE_UNJOINED") || !strings.Contains(err.Error(), "stage branch")):
			t.Errorf("unjoined: EndCapture = %v", err)
		case join && err != nil:
			t.Errorf("joined: EndCapture = %v", err)
		case join:
			must(g.DestroyGraph(gr))
		}
		must(g.Synchronize())
		for _, h := range []executor.Stream{s0, s1} {
			must(g.DestroyStream(h))
		}
		for _, h := range []executor.Event{e0, e1} {
			must(g.DestroyEvent(h))
		}
		must(g.Free(buf))
		must(b.Close())
	}
}

// TestEmulatedCaptureIsolation: the simulator's graph mode holds a capture
// to CUDA's isolation rule: a captured stream's wait on an event recorded
// outside the capture (before it, or during it on a stream that did not
// join) fails as CUDA_ERROR_STREAM_CAPTURE_ISOLATION and invalidates the
// capture; a wait on an event recorded in the capture, or a wait before
// the capture begins, does not.
func TestEmulatedCaptureIsolation(t *testing.T) {
	for _, c := range []struct {
		name     string
		body     func(g executor.GraphBackend, s0, s1 executor.Stream, e executor.Event, fill func(string) *executor.LaunchDesc) error
		isolated bool
	}{
		{"recorded before the capture", func(g executor.GraphBackend, s0, s1 executor.Stream, e executor.Event, fill func(string) *executor.LaunchDesc) error {
			g.Launch(s1, fill("prefetch"))
			g.Record(e, s1)
			g.BeginCapture(s0)
			g.Launch(s0, fill("k"))
			return g.Wait(s0, e)
		}, true},
		{"recorded in the capture by a stream that did not join", func(g executor.GraphBackend, s0, s1 executor.Stream, e executor.Event, fill func(string) *executor.LaunchDesc) error {
			g.BeginCapture(s0)
			g.Launch(s1, fill("prefetch"))
			g.Record(e, s1)
			return g.Wait(s0, e)
		}, true},
		{"waited for before the capture", func(g executor.GraphBackend, s0, s1 executor.Stream, e executor.Event, fill func(string) *executor.LaunchDesc) error {
			g.Launch(s1, fill("prefetch"))
			g.Record(e, s1)
			g.Wait(s0, e)
			g.BeginCapture(s0)
			g.Launch(s0, fill("k"))
			return nil
		}, false},
		{"recorded in the capture", func(g executor.GraphBackend, s0, s1 executor.Stream, e executor.Event, fill func(string) *executor.LaunchDesc) error {
			g.BeginCapture(s0)
			g.Launch(s0, fill("k"))
			g.Record(e, s0)
			return g.Wait(s0, e)
		}, false},
	} {
		b := sim.New(sim.Options{})
		g := executor.EmulateGraphs(b)
		s0, _ := g.NewStream()
		s1, _ := g.NewStream()
		e, _ := g.NewEvent()
		buf, _ := g.Alloc(executor.BufferDesc{Name: "x", Bytes: 64, Where: "device"})
		fill := func(name string) *executor.LaunchDesc {
			return &executor.LaunchDesc{Name: name, Kernel: "fill", Args: map[string]any{"value": 1.0}, Writes: []executor.Arg{{Buffer: buf, Name: "x", Bytes: 64}}}
		}
		werr := c.body(g, s0, s1, e, fill)
		gr, eerr := g.EndCapture(s0)
		if c.isolated {
			if werr == nil || !strings.Contains(werr.Error(), "CUDA_ERROR_STREAM_CAPTURE_ISOLATION") {
				t.Errorf("%s: wait %v, want CUDA_ERROR_STREAM_CAPTURE_ISOLATION", c.name, werr)
			}
			if eerr == nil || !strings.Contains(eerr.Error(), "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED") {
				t.Errorf("%s: EndCapture %v, want CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", c.name, eerr)
			}
		} else {
			if werr != nil || eerr != nil {
				t.Errorf("%s: wait %v, EndCapture %v; want a graph", c.name, werr, eerr)
			} else {
				g.DestroyGraph(gr)
			}
		}
		g.Synchronize()
		g.Free(buf)
		b.Close()
	}
}

// TestEmulatedCaptureHostWait: the simulator's graph mode refuses a host
// wait (cuEventSynchronize, cuEventQuery) during a capture in global or
// thread-local mode, as the driver does (a potentially unsafe call:
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), and allows it in relaxed mode
// and outside a capture.
func TestEmulatedCaptureHostWait(t *testing.T) {
	for _, mode := range []string{plan.CaptureGlobal, plan.CaptureThreadLocal, plan.CaptureRelaxed} {
		b := sim.New(sim.Options{})
		g := executor.EmulateGraphs(b)
		hs := g.(executor.HostSyncer)
		s0, _ := g.NewStream()
		s1, _ := g.NewStream()
		e, _ := g.NewEvent()
		if err := g.Record(e, s1); err != nil {
			t.Fatal(err)
		}
		if err := hs.SyncEvent(e); err != nil {
			t.Fatalf("outside a capture: %v", err)
		}
		if err := g.(executor.CaptureModer).BeginCaptureMode(s0, mode); err != nil {
			t.Fatal(err)
		}
		serr := hs.SyncEvent(e)
		_, qerr := hs.QueryEvent(e)
		if mode == plan.CaptureRelaxed {
			if serr != nil || qerr != nil {
				t.Errorf("relaxed mode: SyncEvent %v, QueryEvent %v", serr, qerr)
			}
		} else {
			for _, err := range []error{serr, qerr} {
				if err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED") {
					t.Errorf("mode %q: %v, want CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", mode, err)
				}
			}
		}
		if gr, err := g.EndCapture(s0); err == nil {
			g.DestroyGraph(gr)
		}
		g.Synchronize()
		b.Close()
	}
}
