package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dagrun/dagrun/plan"
)

// builder makes plans by hand, op by op in host issue order.
type builder struct{ p *plan.Plan }

func newPlan(streams ...string) *builder {
	p := &plan.Plan{Version: plan.PlanVersion, Spec: "test"}
	for i, name := range streams {
		p.Streams = append(p.Streams, plan.Stream{ID: i, Name: name})
	}
	return &builder{p: p}
}

func (b *builder) op(stream int, o plan.Op) *builder {
	s := &b.p.Streams[stream]
	b.p.IssueOrder = append(b.p.IssueOrder, [2]int{stream, len(s.Ops)})
	s.Ops = append(s.Ops, o)
	if o.Kind != plan.OpLaunch && o.Event >= b.p.Events {
		b.p.Events = o.Event + 1
	}
	return b
}

// launch adds stage name on stream with duration dur µs and launches it.
func (b *builder) launch(stream int, name string, dur float64) *builder {
	b.p.Stages = append(b.p.Stages, plan.Stage{Name: name, Stream: stream, DurationUS: dur, Kernel: "spin"})
	return b.op(stream, plan.Op{Kind: plan.OpLaunch, Stage: len(b.p.Stages) - 1})
}

func (b *builder) record(stream, event int) *builder {
	return b.op(stream, plan.Op{Kind: plan.OpRecord, Event: event})
}

func (b *builder) wait(stream, event int) *builder {
	return b.op(stream, plan.Op{Kind: plan.OpWait, Event: event})
}

func (b *builder) plan(t testing.TB) *plan.Plan {
	t.Helper()
	if err := b.p.Validate(); err != nil {
		t.Fatalf("hand-built plan is invalid: %v", err)
	}
	return b.p
}

// randomPlan is a layered random DAG of n stages on k streams: each stage
// depends on up to three earlier ones; a dependency on another stream is an
// event recorded right after the producer and waited on right before the
// consumer. It returns the plan and each stage's predecessors.
func randomPlan(t testing.TB, seed uint64, n, k int) (*plan.Plan, [][]int) {
	r := rand.New(rand.NewPCG(seed, 0))
	names := make([]string, k)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
	}
	b := newPlan(names...)
	deps := make([][]int, n)
	streamOf := make([]int, n)
	event := make([]int, n) // event recorded after stage i, -1 if none yet
	for i := range n {
		streamOf[i] = r.IntN(k)
		event[i] = -1
		if i > 0 {
			for range r.IntN(4) {
				j := max(0, i-1-r.IntN(min(i, 3*k)))
				deps[i] = append(deps[i], j)
			}
		}
	}
	// A producer records once, right after its launch, if a consumer on
	// another stream needs it; decide that before issuing.
	needs := make([]bool, n)
	for i, ds := range deps {
		for _, j := range ds {
			if streamOf[j] != streamOf[i] {
				needs[j] = true
			}
		}
	}
	events := 0
	for i := range n {
		s := streamOf[i]
		for _, j := range deps[i] {
			if streamOf[j] != s {
				b.wait(s, event[j])
			}
		}
		b.launch(s, fmt.Sprintf("op%d_%s", i, []string{"conv", "relu", "add", "pool_3x3", "concat"}[r.IntN(5)]), 1+r.Float64()*20)
		if needs[i] {
			event[i] = events
			events++
			b.record(s, event[i])
		}
	}
	return b.plan(t), deps
}

func TestIdealChain(t *testing.T) {
	p := newPlan("main").launch(0, "a", 1).launch(0, "b", 2).launch(0, "c", 3).plan(t)
	got := Ideal(p)
	want := []Span{
		{Name: "a", Stage: 0, Stream: 0, StartUS: 0, EndUS: 1},
		{Name: "b", Stage: 1, Stream: 0, StartUS: 1, EndUS: 3},
		{Name: "c", Stage: 2, Stream: 0, StartUS: 3, EndUS: 6},
	}
	checkSpans(t, got, want)
	if m := Makespan(got); m != 6 {
		t.Errorf("Makespan = %g µs, want 6", m)
	}
	if tl := FromPlan(p, got); len(tl.Flows) != 0 {
		t.Errorf("flows = %v, want none", tl.Flows)
	}
}

func TestIdealForkJoin(t *testing.T) {
	// a forks to b (stream 1) and c (stream 0); d joins them.
	p := newPlan("s0", "s1").
		launch(0, "a", 2).record(0, 0).
		wait(1, 0).launch(1, "b", 5).record(1, 1).
		launch(0, "c", 1).wait(0, 1).launch(0, "d", 1).
		plan(t)
	got := Ideal(p)
	checkSpans(t, got, []Span{
		{Name: "a", Stage: 0, Stream: 0, StartUS: 0, EndUS: 2},
		{Name: "b", Stage: 1, Stream: 1, StartUS: 2, EndUS: 7},
		{Name: "c", Stage: 2, Stream: 0, StartUS: 2, EndUS: 3},
		{Name: "d", Stage: 3, Stream: 0, StartUS: 7, EndUS: 8},
	})
	tl := FromPlan(p, got)
	checkFlows(t, tl.Flows, []Flow{{0, 1, 0, 0, 0}, {1, 3, 1, 0, 0}})
	if tl.Title != "test" || tl.Streams[1] != "s1" {
		t.Errorf("title %q, streams %q", tl.Title, tl.Streams)
	}
}

func TestIdealWaitBeforeRecord(t *testing.T) {
	// Stream 1 waits on e0 before stream 0 records it: CUDA makes that wait a
	// no-op, so b starts at 0 and there is no flow.
	p := newPlan("s0", "s1").
		wait(1, 0).
		launch(0, "a", 5).record(0, 0).
		launch(1, "b", 1).
		plan(t)
	got := Ideal(p)
	checkSpans(t, got, []Span{
		{Name: "a", Stage: 0, Stream: 0, StartUS: 0, EndUS: 5},
		{Name: "b", Stage: 1, Stream: 1, StartUS: 0, EndUS: 1},
	})
	checkFlows(t, FromPlan(p, got).Flows, nil)
}

func TestIdealReRecordedEvent(t *testing.T) {
	// e0 is recorded twice; each wait pairs with the latest record issued
	// before it, and the producer is the last launch before that record.
	p := newPlan("s0", "s1", "s2").
		launch(0, "a", 1).record(0, 0).
		wait(1, 0).launch(1, "b", 1).
		launch(0, "c0", 4).launch(0, "c", 6).record(0, 0).
		wait(2, 0).launch(2, "d", 1).
		plan(t)
	got := Ideal(p)
	checkSpans(t, got, []Span{
		{Name: "a", Stage: 0, Stream: 0, StartUS: 0, EndUS: 1},
		{Name: "b", Stage: 1, Stream: 1, StartUS: 1, EndUS: 2},
		{Name: "c0", Stage: 2, Stream: 0, StartUS: 1, EndUS: 5},
		{Name: "c", Stage: 3, Stream: 0, StartUS: 5, EndUS: 11},
		{Name: "d", Stage: 4, Stream: 2, StartUS: 11, EndUS: 12},
	})
	checkFlows(t, FromPlan(p, got).Flows, []Flow{{0, 1, 0, 0, 0}, {3, 4, 0, 0, 0}})
}

func TestIdealRecordCarriesWaits(t *testing.T) {
	// Stream 1 waits for a, then records e1 with no launch in between; the
	// record completes after a, so c (waiting on e1) starts at 4. There is no
	// launch before e1's record, so that wait draws no flow.
	p := newPlan("s0", "s1", "s2").
		launch(0, "a", 4).record(0, 0).
		wait(1, 0).record(1, 1).
		wait(2, 1).launch(2, "c", 1).
		wait(2, 0).launch(2, "d", 1).
		plan(t)
	got := Ideal(p)
	checkSpans(t, got, []Span{
		{Name: "a", Stage: 0, Stream: 0, StartUS: 0, EndUS: 4},
		{Name: "c", Stage: 1, Stream: 2, StartUS: 4, EndUS: 5},
		{Name: "d", Stage: 2, Stream: 2, StartUS: 5, EndUS: 6},
	})
	checkFlows(t, FromPlan(p, got).Flows, []Flow{{0, 2, 0, 0, 0}})
}

func TestFromPlanSeveralWaits(t *testing.T) {
	// Two waits before one launch give two flows, in issue order; a wait at
	// the end of a stream (no launch after it) gives none.
	p := newPlan("s0", "s1", "s2").
		launch(0, "a", 1).record(0, 0).
		launch(1, "b", 2).record(1, 1).
		wait(2, 1).wait(2, 0).launch(2, "c", 1).
		wait(0, 1).
		plan(t)
	got := Ideal(p)
	if got[2].StartUS != 2 {
		t.Errorf("c starts at %g µs, want 2", got[2].StartUS)
	}
	checkFlows(t, FromPlan(p, got).Flows, []Flow{{1, 2, 1, 0, 0}, {0, 2, 0, 0, 0}})
}

func TestIdealRandomMatchesRecurrence(t *testing.T) {
	for seed := range uint64(20) {
		p, deps := randomPlan(t, seed, 300, 1+int(seed)%12)
		got := Ideal(p)
		if len(got) != len(p.Stages) {
			t.Fatalf("seed %d: %d spans for %d stages", seed, len(got), len(p.Stages))
		}
		// With one record per producer and waits right before consumers,
		// the ideal start is max(end of the stream's previous stage, end of
		// every dependency on another stream).
		streamEnd := make([]float64, len(p.Streams))
		end := make([]float64, len(p.Stages))
		wantFlows := 0
		for i, st := range p.Stages {
			start := streamEnd[st.Stream]
			for _, j := range deps[i] {
				if p.Stages[j].Stream != st.Stream {
					start = math.Max(start, end[j])
					wantFlows++
				}
			}
			end[i] = start + st.DurationUS
			streamEnd[st.Stream] = end[i]
			if got[i].Stage != i || got[i].StartUS != start || got[i].EndUS != end[i] || got[i].Stream != st.Stream {
				t.Fatalf("seed %d: span %d = %+v, want stage %d on stream %d at [%g, %g]", seed, i, got[i], i, st.Stream, start, end[i])
			}
		}
		if fl := FromPlan(p, got).Flows; len(fl) != wantFlows {
			t.Errorf("seed %d: %d flows, want %d (one per cross-stream dependency)", seed, len(fl), wantFlows)
		}
	}
}

func checkSpans(t *testing.T, got, want []Span) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("spans = %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("span %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func checkFlows(t *testing.T, got, want []Flow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("flows = %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("flow %d = %v, want %v", i, got[i], want[i])
		}
	}
}
