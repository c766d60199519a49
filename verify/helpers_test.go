package verify_test

import (
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/spectest"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
	"pgregory.net/rapid"
)

// Test builders (internal/spectest): spec(stage("a", writes("x")),
// stage("b", reads("x"))).
type stageOpt = spectest.StageOpt

var (
	spec   = spectest.Spec
	manual = spectest.Manual
	stage  = spectest.Stage
	reads  = spectest.Reads
	writes = spectest.Writes
	on     = spectest.On
	waits  = spectest.Waits

	outputs        = spectest.Outputs
	withCopies     = spectest.WithCopies
	ioPipe         = spectest.IOPipe
	loadSpec       = spectest.Load
	loadGraph      = spectest.LoadGraph
	dropOp         = spectest.DropOp
	kernel         = spectest.Kernel
	genSpec        = spectest.Gen
	describe       = spectest.Describe
	ops            = spectest.Ops
	reportPerStage = spectest.ReportPerStage
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

// mustBuild plans s in check mode and verifies the plan, failing t on any
// error.
func mustBuild(t *rapid.T, s *dag.Spec, o planner.Options) *plan.Plan {
	o.Check = true
	p, err := planner.Build(s, o)
	if err != nil {
		t.Fatalf("Build(%+v): %v", o, err)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatalf("Verify(%+v): %v", o, err)
	}
	return p
}
