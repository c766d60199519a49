package planner

import (
	"errors"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// TestManualLagPastSlotBound: a lag the loader takes but whose event slots
// the plan cannot hold is a spec error at the wait, with a hint, not a
// plan file error without a position.
func TestManualLagPastSlotBound(t *testing.T) {
	s := manual(spec(stage("w1", on("a"), writes("x")), stage("w2", on("b"), writes("x"))))
	s.Stages[0].Event = "e"
	s.Stages[1].WaitFor = []dag.WaitSpec{{Event: "e", Lag: plan.MaxExtraSlots + 1, Pos: dag.Pos{File: "s.yaml", Line: 8, Col: 84}}}
	_, err := Build(s, Options{})
	var el dag.ErrorList
	if !errors.As(err, &el) || el[0].Pos.Line != 8 || el[0].Hint == "" || !strings.Contains(el[0].Msg, "stage w2") {
		t.Fatalf("Build = %v, want a dag.ErrorList at s.yaml:8:84 naming w2, with a hint", err)
	}
	s.Stages[1].WaitFor[0].Lag = plan.MaxExtraSlots
	if _, err := Build(s, Options{}); err != nil {
		t.Errorf("lag %d: %v", plan.MaxExtraSlots, err)
	}
}

// formatMax is the largest value the spec loader takes for field key of
// mapping name (dag.Format: what its error message states).
func formatMax(t *testing.T, name, key string) int {
	t.Helper()
	for _, m := range dag.Format() {
		for _, f := range m.Fields {
			if m.Name == name && f.Key == key && f.HasMax {
				return int(f.Max)
			}
		}
	}
	t.Fatalf("dag.Format has no bounded %s.%s", name, key)
	return 0
}

// TestLoaderBoundsPlan: the largest lag and copies the loader takes (and
// its errors state) are what a plan holds: a spec with one wait of that
// lag, or one buffer of that many copies, plans and its plan validates;
// one more of either, in a spec the loader has not checked, is refused.
func TestLoaderBoundsPlan(t *testing.T) {
	lag, copies := formatMax(t, "wait", "lag"), formatMax(t, "buffer", "copies")
	if lag != plan.MaxLag || copies != plan.MaxLag {
		t.Errorf("the loader takes lags to %d and copies to %d, plan files to %d", lag, copies, plan.MaxLag)
	}
	waitSpec := func(lag int) *dag.Spec {
		s := manual(spec(stage("w1", on("a"), writes("x")), stage("w2", on("b"), writes("x"))))
		s.Stages[0].Event = "e"
		s.Stages[1].WaitFor = []dag.WaitSpec{{Event: "e", Lag: lag, Pos: dag.Pos{File: "s.yaml", Line: 8, Col: 84}}}
		return s
	}
	ringSpec := func(copies int) *dag.Spec {
		return withCopies(outputs(spec(stage("a", writes("x")), stage("b", reads("x"), writes("o"))), "o"), copies, "x")
	}
	for _, c := range []struct {
		what string
		s    func(int) *dag.Spec
		max  int
	}{{"lag", waitSpec, lag}, {"copies", ringSpec, copies}} {
		p, err := Build(c.s(c.max), Options{})
		if err == nil {
			err = p.Validate()
		}
		if err != nil {
			t.Errorf("%s %d, the loader's largest: %v", c.what, c.max, err)
		}
		if _, err := Build(c.s(c.max+1), Options{}); err == nil {
			t.Errorf("%s %d: planned, want an error", c.what, c.max+1)
		}
	}
}
