package verify_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/synth"
	"github.com/dagrun/dagrun/verify"
)

// TestClockBound: the happens-before clocks stop at their bound of steps
// (at it they finish; one below, they stop), and Verify refuses a plan
// whose clocks pass verifyMaxClock, naming its streams and the cap to
// plan with, while the same spec planned on 8 streams verifies.
func TestClockBound(t *testing.T) {
	s := synth.Layered(3000)
	p, err := planner.Build(s, planner.Options{MaxStreams: planner.Uncapped}) // hundreds of streams
	if err != nil {
		t.Fatal(err)
	}
	q, err := plan.UnrollDerived(p, plan.UnrollIterations(p), false)
	if err != nil {
		t.Fatal(err)
	}
	n := verify.HBEdges(q).Steps()
	if h := verify.BuildHB(q, verify.HBAuto, n); h.Over() {
		t.Errorf("bound %d, the steps the clocks take: stopped", n)
	}
	if h := verify.BuildHB(q, verify.HBAuto, n-1); !h.Over() {
		t.Errorf("bound %d, one below the steps the clocks take: not stopped", n-1)
	}

	capped, err := planner.Build(s, planner.Options{MaxStreams: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer func(m int64) { (*verify.VerifyMaxClock) = m }((*verify.VerifyMaxClock))
	(*verify.VerifyMaxClock) = n / 4
	err = verify.Verify(p)
	var cb *verify.WorkBoundError
	if !errors.As(err, &cb) || cb.Streams != len(p.Streams) || !strings.Contains(err.Error(), "--max-streams 8") {
		t.Errorf("uncapped plan of %d streams, clocks of %d steps, bound %d: %v", len(p.Streams), n, (*verify.VerifyMaxClock), err)
	}
	if err := verify.Verify(capped); err != nil {
		t.Errorf("the plan on 8 streams, bound %d: %v", (*verify.VerifyMaxClock), err)
	}
}

// TestArenaBound: Verify's arena check stops at its bound of
// happens-before queries (at it the plan verifies, one below it is
// refused, naming the cap to plan with): an uncapped shared-read plan,
// whose temps that share arena bytes are read by one stream per reader.
func TestArenaBound(t *testing.T) {
	p, err := planner.Build(synth.SharedRead(60), planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatal(err)
	}
	n := (*verify.ArenaPairsLast).Load()
	if n < int64(len(p.Streams)) {
		t.Fatalf("the arena check of %d streams asked %d queries", len(p.Streams), n)
	}
	defer func(m int64) { (*verify.VerifyMaxArenaPairs) = m }((*verify.VerifyMaxArenaPairs))
	(*verify.VerifyMaxArenaPairs) = n
	if err := verify.Verify(p); err != nil {
		t.Errorf("bound %d, the queries the check asks: %v", n, err)
	}
	(*verify.VerifyMaxArenaPairs) = n - 1
	err = verify.Verify(p)
	var wb *verify.WorkBoundError
	if !errors.As(err, &wb) || !strings.Contains(err.Error(), "checking the arena") || !strings.Contains(err.Error(), "--max-streams 8") {
		t.Errorf("bound %d, one below the queries the check asks: %v", n-1, err)
	}
}
