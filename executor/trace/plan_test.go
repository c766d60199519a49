package trace

import (
	"math"
	"testing"

	"github.com/dagrun/dagrun/executor/trace/internal/plantest"
)

func TestIdealChain(t *testing.T) {
	p := plantest.New("main").Launch(0, "a", 1).Launch(0, "b", 2).Launch(0, "c", 3).Plan(t)
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
	p := plantest.New("s0", "s1").
		Launch(0, "a", 2).Record(0, 0).
		Wait(1, 0).Launch(1, "b", 5).Record(1, 1).
		Launch(0, "c", 1).Wait(0, 1).Launch(0, "d", 1).
		Plan(t)
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
	p := plantest.New("s0", "s1").
		Wait(1, 0).
		Launch(0, "a", 5).Record(0, 0).
		Launch(1, "b", 1).
		Plan(t)
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
	p := plantest.New("s0", "s1", "s2").
		Launch(0, "a", 1).Record(0, 0).
		Wait(1, 0).Launch(1, "b", 1).
		Launch(0, "c0", 4).Launch(0, "c", 6).Record(0, 0).
		Wait(2, 0).Launch(2, "d", 1).
		Plan(t)
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
	p := plantest.New("s0", "s1", "s2").
		Launch(0, "a", 4).Record(0, 0).
		Wait(1, 0).Record(1, 1).
		Wait(2, 1).Launch(2, "c", 1).
		Wait(2, 0).Launch(2, "d", 1).
		Plan(t)
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
	p := plantest.New("s0", "s1", "s2").
		Launch(0, "a", 1).Record(0, 0).
		Launch(1, "b", 2).Record(1, 1).
		Wait(2, 1).Wait(2, 0).Launch(2, "c", 1).
		Wait(0, 1).
		Plan(t)
	got := Ideal(p)
	if got[2].StartUS != 2 {
		t.Errorf("c starts at %g µs, want 2", got[2].StartUS)
	}
	checkFlows(t, FromPlan(p, got).Flows, []Flow{{1, 2, 1, 0, 0}, {0, 2, 0, 0, 0}})
}

func TestIdealRandomMatchesRecurrence(t *testing.T) {
	for seed := range uint64(20) {
		p, deps := plantest.Random(t, seed, 300, 1+int(seed)%12)
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
