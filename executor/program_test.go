package executor_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// recorder wraps the simulator and writes down every call the executor
// makes: streams and events by creation index, launches by stage name.
type recorder struct {
	*sim.Backend
	mu       sync.Mutex
	streams  map[executor.Stream]int
	events   map[executor.Event]int
	calls    []string
	launched []string // stage names given to Launch or LaunchFunc
	allocs   int
	frees    int
}

func newRecorder(seed int64) *recorder {
	return &recorder{Backend: sim.New(sim.Options{Seed: seed}), streams: map[executor.Stream]int{}, events: map[executor.Event]int{}}
}

func (r *recorder) NewStream() (executor.Stream, error) {
	s, err := r.Backend.NewStream()
	if err == nil {
		r.streams[s] = len(r.streams)
	}
	return s, err
}

func (r *recorder) NewEvent() (executor.Event, error) {
	e, err := r.Backend.NewEvent()
	if err == nil {
		r.events[e] = len(r.events)
	}
	return e, err
}

func (r *recorder) Launch(s executor.Stream, l *executor.LaunchDesc) error {
	r.calls = append(r.calls, fmt.Sprintf("launch %s on s%d", l.Name, r.streams[s]))
	r.launched = append(r.launched, l.Name)
	return r.Backend.Launch(s, l)
}

func (r *recorder) LaunchFunc(s executor.Stream, l *executor.LaunchDesc, f executor.StageFunc) error {
	r.calls = append(r.calls, fmt.Sprintf("launch %s on s%d", l.Name, r.streams[s]))
	r.launched = append(r.launched, l.Name)
	return r.Backend.LaunchFunc(s, l, f)
}

func (r *recorder) Record(e executor.Event, s executor.Stream) error {
	r.calls = append(r.calls, fmt.Sprintf("record e%d on s%d", r.events[e], r.streams[s]))
	return r.Backend.Record(e, s)
}

func (r *recorder) Wait(s executor.Stream, e executor.Event) error {
	r.calls = append(r.calls, fmt.Sprintf("wait e%d on s%d", r.events[e], r.streams[s]))
	return r.Backend.Wait(s, e)
}

func (r *recorder) SyncEvent(e executor.Event) error {
	r.calls = append(r.calls, fmt.Sprintf("host wait e%d", r.events[e]))
	return r.Backend.SyncEvent(e)
}

func (r *recorder) AllocAsync(d executor.BufferDesc, s executor.Stream) (executor.Buffer, error) {
	r.allocs++
	return r.Backend.AllocAsync(d, s)
}

func (r *recorder) FreeAsync(b executor.Buffer, s executor.Stream) error {
	r.frees++
	return r.Backend.FreeAsync(b, s)
}

// unrolledCalls is what the executor must issue for iters iterations of p
// with no host I/O: Unroll's issue order, with CUDA's host-stream rules (a
// host launch runs on the host, a host record issues nothing, a wait on an
// event last recorded by the host is left out, a host wait is
// cuEventSynchronize). Only streams below phys are the plan's.
func unrolledCalls(t interface {
	Helper()
	Fatal(...any)
}, p *plan.Plan, iters int) []string {
	t.Helper()
	if p.Iteration == nil && iters > 1 {
		p = planner.WithIteration(p)
	}
	q, err := plan.Unroll(p, iters)
	if err != nil {
		t.Fatal(err)
	}
	hostRec := make([]bool, q.Events)
	var calls []string
	for _, so := range q.IssueOrder {
		o := q.Streams[so[0]].Ops[so[1]]
		host := q.Streams[so[0]].Host
		switch o.Kind {
		case plan.OpLaunch:
			if !host {
				name, _, _ := strings.Cut(q.Stages[o.Stage].Name, "@")
				calls = append(calls, fmt.Sprintf("launch %s on s%d", name, so[0]))
			}
		case plan.OpRecord:
			hostRec[o.Event] = host
			if !host {
				calls = append(calls, fmt.Sprintf("record e%d on s%d", o.Event, so[0]))
			}
		case plan.OpWait:
			switch {
			case hostRec[o.Event]:
			case host:
				calls = append(calls, fmt.Sprintf("host wait e%d", o.Event))
			default:
				calls = append(calls, fmt.Sprintf("wait e%d on s%d", o.Event, so[0]))
			}
		}
	}
	return calls
}

// planCalls drops calls on streams of the executor's own (the free stream
// of dynamic allocation) from a recording.
func planCalls(calls []string, phys int) []string {
	var out []string
	for _, c := range calls {
		var s int
		if i := strings.LastIndex(c, " on s"); i >= 0 {
			fmt.Sscanf(c[i+5:], "%d", &s)
			if s >= phys {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// genRingSpec draws a small spec with ring buffers, pinned streams (so
// that iterations need cross-iteration waits), and optionally a host stage.
func genRingSpec(t *rapid.T) *dag.Spec {
	s := &dag.Spec{Version: 1, Name: "gen", Sync: dag.SyncAuto}
	nb := rapid.IntRange(2, 4).Draw(t, "buffers")
	for i := range nb {
		s.Buffers = append(s.Buffers, dag.BufferSpec{Name: fmt.Sprintf("b%d", i), Bytes: 64, Where: dag.WhereDevice,
			Role: dag.RoleTemp, Copies: rapid.IntRange(1, 3).Draw(t, fmt.Sprintf("copies%d", i))})
	}
	s.Buffers = append(s.Buffers, dag.BufferSpec{Name: "out", Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleOutput})
	streams := []string{"", "a", "b", "c"}
	acc := func(name string) []dag.Access { return []dag.Access{{Buffer: name, Bytes: 64}} }
	n := rapid.IntRange(2, 7).Draw(t, "stages")
	for i := range n {
		st := dag.StageSpec{Name: fmt.Sprintf("v%d", i), Kernel: dag.BuiltinMix, DurationUS: float64(rapid.IntRange(1, 9).Draw(t, "dur")),
			Stream: rapid.SampledFrom(streams).Draw(t, "stream")}
		w := rapid.IntRange(0, nb-1).Draw(t, "write")
		st.Writes = acc(fmt.Sprintf("b%d", w))
		for _, r := range rapid.SliceOfNDistinct(rapid.IntRange(0, nb-1), 0, 2, rapid.ID).Draw(t, "reads") {
			if r != w {
				st.Reads = append(st.Reads, acc(fmt.Sprintf("b%d", r))[0])
			}
		}
		s.Stages = append(s.Stages, st)
	}
	var last []dag.Access
	for _, b := range s.Buffers[:nb] {
		last = append(last, dag.Access{Buffer: b.Name, Bytes: 64})
	}
	s.Stages = append(s.Stages, dag.StageSpec{Name: "sum", Kernel: dag.BuiltinMix, Reads: last, Writes: acc("out"), DurationUS: 1})
	if rapid.Bool().Draw(t, "host") {
		s.Buffers = append(s.Buffers,
			dag.BufferSpec{Name: "h", Bytes: 64, Where: dag.WhereHostPinned, Role: dag.RoleTemp},
			dag.BufferSpec{Name: "hres", Bytes: 8, Where: dag.WhereHostPinned, Role: dag.RoleOutput})
		s.Stages = append(s.Stages,
			dag.StageSpec{Name: "down", Kernel: dag.BuiltinCopy, Reads: acc("out"), Writes: acc("h"), DurationUS: 3},
			dag.StageSpec{Name: "hsum", Kernel: dag.BuiltinChecksum, Reads: acc("h"), Writes: []dag.Access{{Buffer: "hres", Bytes: 8}}, Stream: dag.HostStream, DurationUS: 2})
	}
	return s
}

// TestProgramIssuesUnroll is the executor's differential test: for random
// plans with rings, cross-iteration waits, event slots, stream sets, host
// stages and both allocation modes, the backend calls of Run are exactly
// Unroll's issue order (the plan-level semantics Verify checks), and the
// simulator's race detector sees no race.
func TestProgramIssuesUnroll(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genRingSpec(t)
		p, err := planner.Build(s, planner.Options{StreamSets: rapid.IntRange(0, 3).Draw(t, "sets"), Check: true})
		if err != nil {
			t.Fatalf("%v", err)
		}
		if rapid.Bool().Draw(t, "no iteration info") {
			p = p.WithoutOps(func(_, _ int, o plan.Op) bool { return o.Lag > 0 })
			p.Iteration = nil
		}
		iters := rapid.IntRange(1, 7).Draw(t, "iterations")
		alloc := rapid.SampledFrom([]string{executor.AllocStatic, executor.AllocDynamic}).Draw(t, "alloc")
		rec := newRecorder(rapid.Int64().Draw(t, "seed"))
		defer rec.Close()
		res, err := executor.Run(context.Background(), p, rec, executor.Options{Iterations: iters, Alloc: alloc})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		_, phys := p.PhysicalStreams()
		if iters > 1 && p.Iteration == nil {
			_, phys = planner.WithIteration(p).PhysicalStreams()
		}
		want := unrolledCalls(t, p, iters)
		if got := planCalls(rec.calls, phys); !slices.Equal(got, want) {
			t.Fatalf("backend calls differ from Unroll's issue order:\n got %q\nwant %q", got, want)
		}
		host := 0
		for _, st := range p.Stages {
			if p.Streams[st.Stream].Host {
				host += iters
			}
		}
		if res.Launches != len(rec.launched)+host {
			t.Errorf("Result.Launches %d, backend saw %d and the host ran %d", res.Launches, len(rec.launched), host)
		}
		if alloc == executor.AllocDynamic && rec.allocs != rec.frees {
			t.Errorf("%d stream-ordered allocations, %d frees", rec.allocs, rec.frees)
		}
	})
}

// slotPlan is a two-stream ring whose cross-iteration wait has a lag (2)
// below its event's slot count (3), so that the wait's slot, (it−lag) mod
// slots, differs from the current iteration's: w writes copy i mod 2 of x
// on stream a after r of iteration i−2 (the last reader of that copy) is
// done with it; r reads it on stream b after w.
func slotPlan() *plan.Plan {
	x := []plan.Access{{Buffer: "x", Bytes: 64}}
	y := []plan.Access{{Buffer: "y", Bytes: 64}}
	return &plan.Plan{
		Version: plan.PlanVersion,
		Buffers: []plan.Buffer{
			{Name: "x", Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleTemp, Copies: 2},
			{Name: "y", Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleOutput, Copies: 2},
		},
		Stages: []plan.Stage{
			{Name: "w", Stream: 0, Kernel: dag.BuiltinMix, Args: map[string]any{"spin_us": 50.0}, Writes: x, DurationUS: 50},
			{Name: "r", Stream: 1, Kernel: dag.BuiltinMix, Reads: x, Writes: y, DurationUS: 1},
		},
		Streams: []plan.Stream{
			{ID: 0, Name: "a", Ops: []plan.Op{{Kind: plan.OpWait, Event: 1, Lag: 2}, {Kind: plan.OpLaunch, Stage: 0}, {Kind: plan.OpRecord, Event: 0}}},
			{ID: 1, Name: "b", Ops: []plan.Op{{Kind: plan.OpWait, Event: 0}, {Kind: plan.OpLaunch, Stage: 1}, {Kind: plan.OpRecord, Event: 1}}},
		},
		IssueOrder: [][2]int{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}},
		Events:     2,
		Iteration:  &plan.Iteration{StreamSets: 1, Slots: []int{1, 3}, CrossWaits: 1, InFlight: 2},
	}
}

// TestLaggedWaitSlot runs slotPlan on the simulator under several seeds:
// a lagged wait resolved to the wrong slot (the current iteration's instead
// of its record's) leaves w of iteration i unordered after r of i−2 on the
// same copy of x, which the detector reports.
func TestLaggedWaitSlot(t *testing.T) {
	p := slotPlan()
	if err := verify.Verify(p); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for seed := range int64(8) {
		b := sim.New(sim.Options{Seed: seed})
		_, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: 9})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Without the lagged wait the same run races: the test can fail.
	q := p.WithoutOps(func(_, _ int, o plan.Op) bool { return o.Lag > 0 })
	if _, err := executor.Run(context.Background(), q, sim.New(sim.Options{Seed: 1}), executor.Options{Iterations: 9}); err == nil {
		t.Error("without its lagged wait the ring ran with no race report")
	}
}

// Options combine: a host stage with completion tracking still runs on
// the host, dynamic allocation applies with it, and graph mode honours
// Progress and InFlight and rejects what it cannot do.
func TestOptionsCombine(t *testing.T) {
	s, err := dag.LoadFile("../specs/memory/d-pinned-readback.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := mustPlan(t, s, planner.Options{})
	for _, alloc := range []string{executor.AllocStatic, executor.AllocDynamic} {
		rec := newRecorder(1)
		var seen []int
		res, err := executor.Run(context.Background(), p, rec, executor.Options{Iterations: 2, Alloc: alloc,
			Progress: func(it int, _ time.Duration) { seen = append(seen, it) }})
		if err != nil {
			t.Fatalf("%s: %v", alloc, err)
		}
		if slices.Contains(rec.launched, "consume") {
			t.Errorf("%s: the host stage went to Backend.Launch: %v", alloc, rec.launched)
		}
		if !slices.Equal(seen, []int{0, 1}) {
			t.Errorf("%s: progress for iterations %v, want [0 1]", alloc, seen)
		}
		if want := map[string]int{executor.AllocStatic: 0, executor.AllocDynamic: 2}[alloc]; rec.allocs != want {
			t.Errorf("%s: %d stream-ordered allocations, want %d", alloc, rec.allocs, want)
		}
		if len(res.Outputs) != 1 {
			t.Errorf("%s: outputs %v", alloc, res.Outputs)
		}
		rec.Close()
	}

	g := mustPlan(t, ringSpec(2, true), planner.Options{})
	var seen []int
	res, err := executor.Run(context.Background(), g, executor.EmulateGraphs(sim.New(sim.Options{})), executor.Options{Mode: executor.ModeGraph, Iterations: 4, InFlight: 1,
		Progress: func(it int, _ time.Duration) { seen = append(seen, it) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []int{0, 1, 2, 3}) || len(res.Latencies) != 4 {
		t.Errorf("graph mode: progress for %v, %d latencies; want 4 iterations", seen, len(res.Latencies))
	}
	// An in-flight bound beyond the run's iterations bounds nothing: it
	// must not create an event per bound (1<<40 of them).
	b := sim.New(sim.Options{})
	if _, err := executor.Run(context.Background(), g, b, executor.Options{Iterations: 3, InFlight: 1 << 40,
		Progress: func(int, time.Duration) {}}); err != nil {
		t.Errorf("huge in-flight bound: %v", err)
	}
	b.Close()
	in := func(int, []byte) error { return nil }
	out := func(int, []byte) error { return nil }
	for name, o := range map[string]executor.Options{
		"inputs":    {Inputs: map[string]executor.InputFunc{"frame_h": in}},
		"outputs":   {Outputs: map[string]executor.OutputFunc{"res_h": out}},
		"dynamic":   {Alloc: executor.AllocDynamic},
		"sync each": {SyncEach: true},
	} {
		o.Mode, o.Iterations = executor.ModeGraph, 2
		b := sim.New(sim.Options{})
		if _, err := executor.Run(context.Background(), g, executor.EmulateGraphs(b), o); err == nil || !strings.Contains(err.Error(), "graph mode") {
			t.Errorf("graph mode with %s: %v, want a graph-mode error", name, err)
		}
		if s, e, bufs := b.Live(); s+e+bufs != 0 {
			t.Errorf("graph mode with %s: rejected after creating %d streams, %d events, %d buffers", name, s, e, bufs)
		}
	}
}
