package sim_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
	"pgregory.net/rapid"
)

// handOver issues plan p from host threads: stream s from thread[s]
// ("" the main thread), each thread with a host stream of its own, and
// every device wait on another thread's record preceded by a host event
// handed over: a record on the recording thread's host stream right after
// the record, waited on (with the wait's lag) on the waiting thread's host
// stream right before the wait. It returns the plan and how many waits
// cross threads.
func handOver(p *plan.Plan, thread []string) (*plan.Plan, int) {
	q := *p
	q.Streams = slices.Clone(p.Streams)
	host := map[string]int{}
	for s := range q.Streams {
		q.Streams[s].Thread = thread[s]
		q.Streams[s].Ops = nil
		if _, ok := host[thread[s]]; !ok {
			host[thread[s]] = -1
		}
	}
	for _, t := range slices.Sorted(func(yield func(string) bool) {
		for t := range host {
			if !yield(t) {
				return
			}
		}
	}) {
		host[t] = len(q.Streams)
		q.Streams = append(q.Streams, plan.Stream{ID: len(q.Streams), Name: "host-" + t, Host: true, Thread: t})
	}
	// The record each wait takes: the latest before it, or with a lag the
	// iteration's last.
	last := map[int]int{}
	for k, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpRecord {
			last[o.Event] = k
		}
	}
	latest := map[int]int{}
	takes := map[int]int{} // wait position → record position, across threads
	for k, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		switch o.Kind {
		case plan.OpRecord:
			latest[o.Event] = k
		case plan.OpWait:
			r, ok := latest[o.Event]
			if o.Lag > 0 {
				r, ok = last[o.Event]
			}
			if ok && thread[p.IssueOrder[r][0]] != thread[so[0]] {
				takes[k] = r
			}
		}
	}
	handoff := map[int]int{} // record position → its host event
	for _, r := range takes {
		if _, ok := handoff[r]; !ok {
			handoff[r] = q.Events
			q.Events++
		}
	}
	if q.Iteration != nil {
		it := *q.Iteration
		it.Slots = append(slices.Clone(it.Slots), make([]int, q.Events-p.Events)...)
		for e := p.Events; e < q.Events; e++ {
			it.Slots[e] = 1
		}
		q.Iteration = &it
	}
	q.IssueOrder = nil
	add := func(s int, o plan.Op) {
		q.IssueOrder = append(q.IssueOrder, [2]int{s, len(q.Streams[s].Ops)})
		q.Streams[s].Ops = append(q.Streams[s].Ops, o)
	}
	for k, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		if r, ok := takes[k]; ok {
			add(host[thread[so[0]]], plan.Op{Kind: plan.OpWait, Event: handoff[r], Lag: o.Lag})
		}
		add(so[0], o)
		if h, ok := handoff[k]; ok {
			add(host[thread[so[0]]], plan.Op{Kind: plan.OpRecord, Event: h})
		}
	}
	q.Stats.Streams, q.Stats.Events = len(q.Streams), q.Events
	return &q, len(takes)
}

// TestPlansRaceFreeFromThreads: the planner's plans of random specs, issued
// from two or three host threads with a host event handed over before
// every wait that crosses threads, verify race-free; the simulator's
// detector agrees over iterations, and the outputs are the one-thread
// plan's. Without the handoffs the verifier finds the races.
func TestPlansRaceFreeFromThreads(t *testing.T) {
	crossed, raced := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		s := &dag.Spec{Name: "threads", Sync: dag.SyncAuto}
		nb := rapid.IntRange(1, 3).Draw(rt, "buffers")
		for b := range nb {
			s.Buffers = append(s.Buffers, dag.BufferSpec{Name: fmt.Sprint("b", b), Bytes: 64, Role: dag.RoleOutput, Init: dag.Init{Kind: dag.InitRandom, Seed: int64(b + 1)}})
		}
		n := rapid.IntRange(2, 12).Draw(rt, "stages")
		for i := range n {
			st := dag.StageSpec{Name: fmt.Sprint("s", i), Kernel: dag.BuiltinMix, Stream: fmt.Sprint("p", rapid.IntRange(0, 2).Draw(rt, "stream"))}
			st.Writes = []dag.Access{{Buffer: fmt.Sprint("b", rapid.IntRange(0, nb-1).Draw(rt, "write")), Bytes: 64}}
			if rapid.Bool().Draw(rt, "reads?") {
				if r := fmt.Sprint("b", rapid.IntRange(0, nb-1).Draw(rt, "read")); r != st.Writes[0].Buffer {
					st.Reads = []dag.Access{{Buffer: r, Bytes: 64}}
				}
			}
			s.Stages = append(s.Stages, st)
		}
		p, err := planner.Build(s, planner.Options{})
		if err != nil {
			rt.Fatal(err)
		}
		threads := make([]string, len(p.Streams))
		names := []string{"", "b", "c"}
		for i := range threads {
			threads[i] = names[rapid.IntRange(0, 2).Draw(rt, "thread")]
		}
		q, cross := handOver(p, threads)
		if err := q.Validate(); err != nil {
			rt.Fatalf("handed-over plan: %v", err)
		}
		if err := verify.Verify(q); err != nil {
			rt.Fatalf("from threads %q: %v", threads, err)
		}
		if cross > 0 {
			crossed++
			bare := *q // the threads without the handoffs: unordered waits
			bare.Streams = slices.Clone(p.Streams)
			for s := range bare.Streams {
				bare.Streams[s].Thread = threads[s]
			}
			bare.IssueOrder, bare.Events, bare.Iteration = p.IssueOrder, p.Events, p.Iteration
			// A crossing wait may order nothing a race needs (stream order
			// or another wait does it too); the others leave races.
			if re := (*verify.RaceError)(nil); errors.As(verify.Verify(&bare), &re) && len(re.Races) > 0 {
				raced++
			}
		}
		want := simRun(rt, p, 0)
		for seed := range int64(2) {
			if got := simRun(rt, q, seed); got != want {
				rt.Fatalf("seed %d from threads %q: outputs %s, one thread %s", seed, threads, got, want)
			}
		}
	})
	t.Logf("%d plans with waits across threads, %d of them racy without the handoffs", crossed, raced)
	if crossed == 0 || raced == 0 {
		t.Error("no plan needed a handoff: the test does not exercise them")
	}
}

// simRun runs p for 3 iterations on the simulator and returns its outputs'
// checksums; a race report or another error fails.
func simRun(t *rapid.T, p *plan.Plan, seed int64) string {
	b := sim.New(sim.Options{Seed: seed, MaxDelay: 200})
	res, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: 3})
	if cerr := b.Close(); cerr != nil {
		t.Fatalf("Close: %v", cerr)
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return checksums(res)
}
