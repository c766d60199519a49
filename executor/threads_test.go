package executor_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
)

func rulesPlan(t *testing.T, name string) *plan.Plan {
	t.Helper()
	s, err := dag.LoadFile(filepath.Join("..", "specs", "rules", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func yamlPlan(t *testing.T, src string) *plan.Plan {
	t.Helper()
	s, err := dag.Load([]byte(src), "t.yaml", ".")
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// callLog records, across the threads' views, which view issued each
// Record and Wait, in the order the calls were made.
type callLog struct {
	mu    sync.Mutex
	calls []call
}

type call struct {
	thread string
	wait   bool
	event  executor.Event
}

// loggedSim is a simulator whose views log their records and waits, and
// whose thread slow (main: "") takes slowBy before each launch and wait (so that a
// thread not held back by a handoff runs ahead of it); failAt, when set,
// fails that stage's launch.
type loggedSim struct {
	*sim.Backend
	log    *callLog
	slow   string
	slowBy time.Duration
	failAt string
}

func (b *loggedSim) Thread(name string) (executor.Backend, error) {
	v, err := b.Backend.Thread(name)
	if err != nil {
		return nil, err
	}
	return &loggedView{Backend: v, HostSyncer: v.(executor.HostSyncer), hh: v.(executor.HostHandoff), name: name, b: b}, nil
}

type loggedView struct {
	executor.Backend
	executor.HostSyncer
	hh   executor.HostHandoff
	name string
	b    *loggedSim
}

func (v *loggedView) Release() any    { return v.hh.Release() }
func (v *loggedView) Acquire(tok any) { v.hh.Acquire(tok) }
func (v *loggedView) note(wait bool, e executor.Event) {
	v.b.log.mu.Lock()
	v.b.log.calls = append(v.b.log.calls, call{v.name, wait, e})
	v.b.log.mu.Unlock()
}

func (v *loggedView) Record(e executor.Event, s executor.Stream) error {
	v.note(false, e)
	return v.Backend.Record(e, s)
}

func (v *loggedView) Wait(s executor.Stream, e executor.Event) error {
	if v.name == v.b.slow && v.b.slowBy > 0 {
		time.Sleep(v.b.slowBy)
	}
	v.note(true, e)
	return v.Backend.Wait(s, e)
}

func (v *loggedView) Launch(s executor.Stream, l *executor.LaunchDesc) error {
	if v.name == v.b.slow && v.b.slowBy > 0 {
		time.Sleep(v.b.slowBy)
	}
	if l.Name == v.b.failAt {
		return errors.New("injected failure")
	}
	return v.Backend.Launch(s, l)
}

// TestThreadsHandOver: threads-fixed.yaml issued from its two host
// threads: the consumer's wait on infer_done comes, in every iteration,
// after main's record of it (the host event handed over orders the
// threads' issues), though main is slowed down; the simulator's detector
// sees no race and every seed gives the same outputs.
func TestThreadsHandOver(t *testing.T) {
	p := rulesPlan(t, "threads-fixed")
	var want string
	for seed := range int64(4) {
		b := &loggedSim{Backend: sim.New(sim.Options{Seed: seed}), log: &callLog{}, slowBy: 200 * time.Microsecond}
		res, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: 6})
		if cerr := b.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if seed == 0 {
			want = sums(res.Outputs)
		} else if got := sums(res.Outputs); got != want {
			t.Fatalf("seed %d: outputs %s, seed 0 %s", seed, got, want)
		}
		// The k-th device wait of the consumer on an event main records
		// follows main's k-th record of it.
		recs, waits := map[executor.Event]int{}, map[executor.Event]int{}
		mainRecorded := map[executor.Event]bool{}
		for _, c := range b.log.calls {
			if c.thread == "" && !c.wait {
				recs[c.event]++
				mainRecorded[c.event] = true
			}
			if c.thread == "consumer" && c.wait && mainRecorded[c.event] {
				waits[c.event]++
				if waits[c.event] > recs[c.event] {
					t.Fatalf("seed %d: the consumer's wait %d on an event of main came before main's record %d", seed, waits[c.event], waits[c.event])
				}
			}
		}
		if len(waits) == 0 {
			t.Fatalf("seed %d: the consumer never waited on main's event: %v", seed, b.log.calls)
		}
	}
}

// TestThreadsRacyUnordered: threads-racy.yaml, whose consumer waits on
// main's event with no handoff, is issued with main slowed down (the
// consumer's wait comes first and waits for nothing) and with the
// consumer slowed down (its wait takes main's record, as it happens): the
// detector reports the race under every seed either way, as the verifier
// does, because no handoff orders the record before the wait.
func TestThreadsRacyUnordered(t *testing.T) {
	p := rulesPlan(t, "threads-racy")
	for _, slow := range []string{"", "consumer"} {
		for seed := range int64(4) {
			b := &loggedSim{Backend: sim.New(sim.Options{Seed: seed}), log: &callLog{}, slow: slow, slowBy: 2 * time.Millisecond}
			_, err := executor.Run(context.Background(), p, b, executor.Options{})
			b.Close()
			var re *executor.RaceError
			if !errors.As(err, &re) {
				t.Fatalf("thread %q slowed, seed %d: want a race report, got %v", slow, seed, err)
			}
		}
	}
}

// TestThreadsStop: a launch that fails on one thread stops the run with
// its error; the other thread, waiting for a host event the failed thread
// will not signal, gives up instead of hanging.
func TestThreadsStop(t *testing.T) {
	p := rulesPlan(t, "threads-fixed")
	b := &loggedSim{Backend: sim.New(sim.Options{}), log: &callLog{}, failAt: "infer"}
	done := make(chan error, 1)
	go func() {
		_, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: 3})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "injected failure") || !strings.Contains(err.Error(), "stage infer") {
			t.Fatalf("want the failed launch of infer, got %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not stop")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestThreadsLazyWorkspace: specs/rules/threads-workspace.yaml, whose
// two host threads each allocate a lazy workspace on a stream of their
// own, runs from its threads and Close finds no handle leaked, also when
// a launch on the consumer thread fails after its workspace was allocated.
func TestThreadsLazyWorkspace(t *testing.T) {
	p := rulesPlan(t, "threads-workspace")
	for seed := range int64(3) {
		runOn(t, quickSim(seed), p, executor.Options{Iterations: 3})
	}
	b := &loggedSim{Backend: quickSim(0), log: &callLog{}, failAt: "fetch"}
	_, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: 3})
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("want the failed launch of fetch, got %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close after a failed run: %v", err)
	}
}

// TestThreadsRefused: what a run from several host threads does not
// support is refused before anything is created, and a backend that is no
// Threader is named.
func TestThreadsRefused(t *testing.T) {
	p := rulesPlan(t, "threads-fixed")
	for _, c := range []struct {
		o    executor.Options
		want string
	}{
		{executor.Options{Mode: executor.ModeGraph}, "graph mode"},
		{executor.Options{Alloc: executor.AllocDynamic}, "--alloc dynamic"},
		{executor.Options{InFlight: 2}, "in-flight"},
		{executor.Options{SyncEach: true}, "sync-each"},
	} {
		err := executor.CheckRun(p, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) || c.o.Mode == "" && !strings.Contains(err.Error(), "2 host threads") {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	b := sim.New(sim.Options{})
	_, err := executor.Run(context.Background(), p, struct{ executor.Backend }{b}, executor.Options{})
	b.Close()
	if !errors.Is(err, executor.ErrNoThreads) {
		t.Errorf("a backend without threads: %v", err)
	}
}

// TestCaptureRegionsMatchStreams: graph mode captures the specs' capture
// regions (emulated on the simulator, whose detector checks the replays):
// the outputs are stream mode's.
func TestCaptureRegionsMatchStreams(t *testing.T) {
	for _, name := range []string{"capture-fixed", "warmup-fixed"} {
		p := rulesPlan(t, name)
		want := runOn(t, quickSim(1), p, executor.Options{Iterations: 4})
		for seed := range int64(3) {
			b := executor.EmulateGraphs(sim.New(sim.Options{Seed: seed}))
			if got := runOn(t, b, p, executor.Options{Mode: executor.ModeGraph, Iterations: 4}); !equalMaps(got, want) {
				t.Errorf("%s seed %d: graph mode %v, stream mode %v", name, seed, got, want)
			}
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestCaptureRegionsRefused: a region that breaks a capture rule fails in
// graph mode, naming the stage: with the emulation's own error where it
// has one (the driver's code in it), else with the capture checker's
// verdict (the legacy default stream used while a blocking stream is
// captured, which the emulation runs).
func TestCaptureRegionsRefused(t *testing.T) {
	legacyInside := yamlPlan(t, `version: 1
sync: manual
streams: [{name: main, kind: blocking}, {name: default, kind: legacy}]
buffers: [{name: a, bytes: 64}, {name: b, bytes: 64, role: output}]
stages:
  - {name: k1, kernel: fill, args: {value: 1.0}, writes: [a], stream: main}
  - {name: side, kernel: fill, args: {value: 2.0}, writes: [b], stream: default}
  - {name: k2, kernel: scale, args: {a: 2.0}, reads: [a], writes: [a], stream: main}
captures: [{stream: main, first: k1, last: k2}]
`)
	if err := executor.CheckRun(rulesPlan(t, "capture-fixed"), executor.Options{Mode: executor.ModeGraph, InFlight: 2}); err == nil || !strings.Contains(err.Error(), "in-flight") {
		t.Errorf("capture regions with an in-flight bound: %v", err)
	}
	for _, c := range []struct {
		p    *plan.Plan
		want []string
	}{
		{rulesPlan(t, "capture-racy"), []string{"CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "stage branch", `capture rule "unjoined" broken by branch`}},
		{rulesPlan(t, "warmup-racy"), []string{"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "(stage gemm)", `capture rule "allocation" broken by gemm`}},
		{legacyInside, []string{"breaks a capture rule", `capture rule "legacy" broken by side`, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"}},
	} {
		b := executor.EmulateGraphs(quickSim(1))
		_, err := executor.Run(context.Background(), c.p, b, executor.Options{Mode: executor.ModeGraph, Iterations: 2})
		if cerr := b.Close(); cerr != nil {
			t.Fatalf("Close: %v", cerr)
		}
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", c.p.Spec, err, w)
			}
		}
	}
}
