package planner

import (
	"reflect"
	"testing"

	"github.com/dagrun/dagrun/plan"
)

func TestStats(t *testing.T) {
	// a(2) -> b(5) -> d(1); a -> c(3) -> d; e(0 → 1 µs) alone.
	s := spec(stage("a", writes("x"), dur(2)), stage("b", reads("x"), writes("y"), dur(5)), stage("c", reads("x"), writes("z"), dur(3)),
		stage("d", reads("y", "z"), dur(1)), stage("e", writes("w")))
	for _, tc := range []struct {
		o    Options
		want plan.Stats
	}{
		{Options{}, plan.Stats{Stages: 5, Streams: 3, Waits: 2, Events: 4, CrossStreamEdges: 2, ReducedEdges: 4, LowerBoundWaits: 2,
			CriticalPathUS: 8, IdealMakespanUS: 8, SumUS: 12, ArenaBytes: 4096}},
		{Options{Strategy: "single"}, plan.Stats{Stages: 5, Streams: 1, Waits: 0, Events: 1, CrossStreamEdges: 0, ReducedEdges: 4, LowerBoundWaits: 2,
			CriticalPathUS: 8, IdealMakespanUS: 12, SumUS: 12, ArenaBytes: 3072}},
	} {
		st := upTo(t, s, tc.o, "stats")
		got := st.plan.Stats
		got.PlanningMS = 0
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: stats\n got %+v\nwant %+v", tc.o.Strategy, got, tc.want)
		}
	}
}

// TestPlanningTime: planning_ms covers every pass, the last (iterate)
// included, and Timings names each pass once.
func TestPlanningTime(t *testing.T) {
	s := spec(stage("a", writes("x")), stage("b", reads("x"), writes("y")), stage("c", reads("x"), writes("z")))
	p := build(t, s, Options{MemoryBudget: BudgetNone})
	var sum float64
	seen := map[string]bool{}
	for _, pt := range p.Timings {
		if seen[pt.Pass] {
			t.Errorf("phase %s listed twice", pt.Pass)
		}
		seen[pt.Pass] = true
		sum += pt.MS
	}
	for _, name := range append(Passes(), "hazards") {
		if !seen[name] {
			t.Errorf("Timings %v: no %s", p.Timings, name)
		}
	}
	if p.Stats.PlanningMS <= 0 || p.Stats.PlanningMS < sum {
		t.Errorf("planning_ms = %v, want > 0 and ≥ the phases' %v", p.Stats.PlanningMS, sum)
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

// IdealSchedule: durations of 0 take 1 µs; a wait with a lag orders an
// earlier iteration and holds nothing here; out-of-range ops are skipped.
func TestIdealSchedule(t *testing.T) {
	p := &plan.Plan{
		Stages: []plan.Stage{{Name: "a", Stream: 0, DurationUS: 4}, {Name: "b", Stream: 1}, {Name: "c", Stream: 1, DurationUS: 2}},
		Streams: []plan.Stream{
			{ID: 0, Ops: []plan.Op{{Kind: plan.OpLaunch, Stage: 0}, {Kind: plan.OpRecord, Event: 0}}},
			{ID: 1, Ops: []plan.Op{{Kind: plan.OpWait, Event: 0, Lag: 1}, {Kind: plan.OpLaunch, Stage: 1}, {Kind: plan.OpWait, Event: 0}, {Kind: plan.OpLaunch, Stage: 2}, {Kind: plan.OpWait, Event: 7}}},
		},
		IssueOrder: [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4}, {5, 0}},
		Events:     1,
	}
	start, end := plan.IdealSchedule(p)
	want := [][2]float64{{0, 4}, {0, 1}, {4, 6}}
	for v, w := range want {
		if start[v] != w[0] || end[v] != w[1] {
			t.Errorf("%s: [%g, %g] µs, want %v", p.Stages[v].Name, start[v], end[v], w)
		}
	}
}
