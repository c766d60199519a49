package plan_test

import (
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/spectest"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// Test builders (internal/spectest).
var (
	spec     = spectest.Spec
	stage    = spectest.Stage
	reads    = spectest.Reads
	writes   = spectest.Writes
	on       = spectest.On
	loadSpec = spectest.Load
)

// build plans s in check mode and fails the test on any error.
func build(t testing.TB, s *dag.Spec, o planner.Options) *plan.Plan {
	t.Helper()
	o.Check = true
	p, err := planner.Build(s, o)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return p
}
