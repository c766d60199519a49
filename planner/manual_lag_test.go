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
