package planner

import "testing"

func TestStats(t *testing.T) {
	// a(2) -> b(5) -> d(1); a -> c(3) -> d; e(0 → 1 µs) alone.
	s := spec(stage("a", writes("x"), dur(2)), stage("b", reads("x"), writes("y"), dur(5)), stage("c", reads("x"), writes("z"), dur(3)),
		stage("d", reads("y", "z"), dur(1)), stage("e", writes("w")))
	for _, tc := range []struct {
		o    Options
		want Stats
	}{
		{Options{}, Stats{Stages: 5, Streams: 3, Waits: 2, Events: 4, CrossStreamEdges: 2, ReducedEdges: 4, LowerBoundWaits: 2,
			CriticalPathUS: 8, IdealMakespanUS: 8, SumUS: 12, ArenaBytes: 4096}},
		{Options{Strategy: "single"}, Stats{Stages: 5, Streams: 1, Waits: 0, Events: 1, CrossStreamEdges: 0, ReducedEdges: 4, LowerBoundWaits: 2,
			CriticalPathUS: 8, IdealMakespanUS: 12, SumUS: 12, ArenaBytes: 3072}},
	} {
		st := upTo(t, s, tc.o, "stats")
		got := st.plan.Stats
		if got.PlanningMS <= 0 {
			t.Errorf("%s: planning_ms = %v", tc.o.Strategy, got.PlanningMS)
		}
		got.PlanningMS = 0
		if got != tc.want {
			t.Errorf("%s: stats\n got %+v\nwant %+v", tc.o.Strategy, got, tc.want)
		}
	}
}

func TestIdealMakespanWaitBeforeRecord(t *testing.T) {
	// Manual: b waits for a, but a is declared (and recorded) later: the wait
	// orders nothing, so b starts at 0.
	s := manual(spec(stage("b", writes("y"), on("q"), waits("a"), dur(4)), stage("a", writes("x"), on("p"), dur(10))))
	p, err := Build(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Stats.IdealMakespanUS != 10 {
		t.Errorf("ideal makespan %v, want 10", p.Stats.IdealMakespanUS)
	}
}
