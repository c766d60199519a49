package planner

import (
	"testing"

	"github.com/dagrun/dagrun/dag"
)

// TestWarningsLaggedWaitOrdersNothingNow: a wait on the previous
// iteration's record of a stage does not order this iteration's record, so
// the plain wait on the same stage that follows it is not redundant (it is
// the one that orders the two writers).
func TestWarningsLaggedWaitOrdersNothingNow(t *testing.T) {
	for _, waits := range [][]dag.WaitSpec{
		{{Stage: "w1", Lag: 1}, {Stage: "w1"}},
		{{Stage: "w1"}, {Stage: "w1", Lag: 1}},
	} {
		s := manual(spec(stage("w1", on("a"), writes("x")), stage("w2", on("b"), writes("x"))))
		s.Stages[1].WaitFor = waits
		p, err := Build(s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if w := waitWarnings(p); len(w) != 0 {
			t.Errorf("waits %+v: warnings %q, want none", waits, w)
		}
	}
}
