package verify_test

import (
	"errors"
	"testing"

	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// TestVerifyRefusesUnknownBuffer: a plan whose access names a buffer the
// plan does not declare, or bytes past a buffer's end, is malformed (no
// wait can fix it), so Verify returns a *plan.PlanError as Plan.Validate
// does, instead of proving it race-free.
func TestVerifyRefusesUnknownBuffer(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(a *plan.Access)
	}{
		{"unknown buffer", func(a *plan.Access) { a.Buffer = "nope" }},
		{"past the end", func(a *plan.Access) { a.Bytes = 1 << 40 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, spec(stage("a", writes("x")), stage("b", reads("x"), writes("y"))), planner.Options{})
			tc.edit(&p.Stages[1].Reads[0])
			if err := p.Validate(); err == nil {
				t.Fatal("Plan.Validate passes the edited plan")
			}
			err := verify.Verify(p)
			var pe *plan.PlanError
			if !errors.As(err, &pe) {
				t.Errorf("Verify of a plan that Plan.Validate refuses (%v) = %v, want a *plan.PlanError", p.Validate(), err)
			}
		})
	}
}

// TestVerifyReadsEditedAccesses: Verify proves the plan it is given, as
// it is now: an access whose buffer is changed after planning (to another
// declared buffer) is checked against the buffer it names, not the one
// the planner resolved it to.
func TestVerifyReadsEditedAccesses(t *testing.T) {
	p := build(t, spec(stage("a", writes("x")), stage("b", writes("y"))), planner.Options{})
	if p.Stages[0].Stream == p.Stages[1].Stream {
		t.Fatalf("a and b share stream %d; the test wants them apart", p.Stages[0].Stream)
	}
	p.Stages[1].Writes[0].Buffer = "x" // now a and b both write x, unordered
	if err := p.Validate(); err != nil {
		t.Fatalf("Plan.Validate: %v", err)
	}
	var re *verify.RaceError
	if err := verify.Verify(p); !errors.As(err, &re) {
		t.Errorf("Verify of a plan in which a and b write x on streams %d and %d with no wait = %v, want a *verify.RaceError", p.Stages[0].Stream, p.Stages[1].Stream, err)
	}
}
