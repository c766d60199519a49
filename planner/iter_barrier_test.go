package planner

import (
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// TestWithIterationVerifies checks that the barrier form of plans without
// iteration info is race-free over several iterations, and that without its
// barrier waits Verify finds races across iterations (so the barrier is what
// orders them).
func TestWithIterationVerifies(t *testing.T) {
	for name, crossRaces := range map[string]bool{
		"seed/three-stage":        true,
		"examples/fan-out-fan-in": false, // its cross-iteration conflicts are all within one stream
		"shared-io/shared-io":     true,
	} {
		t.Run(name, func(t *testing.T) {
			s, err := dag.LoadFile("../specs/" + name + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			p := build(t, s, Options{})
			p.Iteration = nil
			p = p.WithoutOps(func(_, _ int, o plan.Op) bool { return o.Lag > 0 })
			q := WithIteration(p)
			if q.Iteration == nil || !q.Iteration.Barrier {
				t.Fatalf("no barrier iteration info")
			}
			if err := q.Validate(); err != nil {
				t.Fatal(err)
			}
			if err := verify.Verify(q); err != nil {
				t.Fatalf("barrier plan: %v", err)
			}
			if len(q.Streams) < 2 {
				return
			}
			broken := q.WithoutOps(func(_, _ int, o plan.Op) bool { return o.Kind == plan.OpWait && o.Event >= p.Events })
			if err := verify.Verify(broken); (err != nil) != crossRaces {
				t.Errorf("without its barrier waits: Verify = %v, want races across iterations: %v", err, crossRaces)
			}
		})
	}
}
