package trace_test

import (
	"fmt"

	"github.com/dagrun/dagrun/executor/trace"
	"github.com/dagrun/dagrun/plan"
)

// A plan drawn without a GPU: stage a forks to b on a second stream, and c
// joins it back on the first.
func ExampleIdeal() {
	p := &plan.Plan{
		Version: plan.PlanVersion,
		Spec:    "fork-join",
		Stages: []plan.Stage{
			{Name: "a", Stream: 0, DurationUS: 2},
			{Name: "b", Stream: 1, DurationUS: 5},
			{Name: "c", Stream: 0, DurationUS: 1},
		},
		Streams: []plan.Stream{
			{ID: 0, Name: "main", Ops: []plan.Op{
				{Kind: plan.OpLaunch, Stage: 0}, {Kind: plan.OpRecord, Event: 0},
				{Kind: plan.OpWait, Event: 1}, {Kind: plan.OpLaunch, Stage: 2}}},
			{ID: 1, Name: "side", Ops: []plan.Op{
				{Kind: plan.OpWait, Event: 0}, {Kind: plan.OpLaunch, Stage: 1},
				{Kind: plan.OpRecord, Event: 1}}},
		},
		IssueOrder: [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}, {0, 2}, {0, 3}},
		Events:     2,
	}
	tl := trace.FromPlan(p, trace.Ideal(p))
	for _, s := range tl.Spans {
		fmt.Printf("%s on %s: %g–%g µs\n", s.Name, tl.Streams[s.Stream], s.StartUS, s.EndUS)
	}
	for _, f := range tl.Flows {
		fmt.Printf("wait e%d: %s → %s\n", f.Event, p.Stages[f.FromStage].Name, p.Stages[f.ToStage].Name)
	}
	fmt.Printf("makespan %g µs\n", trace.Makespan(tl.Spans))
	// Then tl.WriteChromeTrace(w) or tracepng.Write(tl, "fork-join.png", 0, 0).

	// Output:
	// a on main: 0–2 µs
	// b on side: 2–7 µs
	// c on main: 7–8 µs
	// wait e0: a → b
	// wait e1: b → c
	// makespan 8 µs
}
