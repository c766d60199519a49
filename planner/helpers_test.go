package planner

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/spectest"
	"github.com/dagrun/dagrun/plan"
)

// Test builders (internal/spectest): spec(stage("a", writes("x")),
// stage("b", reads("x"))).
type stageOpt = spectest.StageOpt

var (
	spec     = spectest.Spec
	manual   = spectest.Manual
	stage    = spectest.Stage
	whole    = spectest.Whole
	reads    = spectest.Reads
	writes   = spectest.Writes
	readsAt  = spectest.ReadsAt
	writesAt = spectest.WritesAt
	after    = spectest.After
	on       = spectest.On
	waits    = spectest.Waits
	dur      = spectest.Dur
)

// build plans s in check mode and fails the test on any error.
func build(t testing.TB, s *dag.Spec, o Options) *plan.Plan {
	t.Helper()
	o.Check = true
	p, err := Build(s, o)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := Verify(p); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return p
}

// streamOf returns the name of the stream stage name runs on.
func streamOf(p *plan.Plan, name string) string {
	for _, s := range p.Stages {
		if s.Name == name {
			return p.Streams[s.Stream].Name
		}
	}
	panic("no stage " + name)
}

const graphsDir = "../specs/models/graphs"

// loadGraph imports one of specs/models/graphs (skipping the test if absent).
func loadGraph(t testing.TB, model string) *dag.Spec {
	t.Helper()
	path := filepath.Join(graphsDir, model+".json")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s: %v", path, err)
	}
	g, err := dag.ReadGraphFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dag.ImportGraph(g, dag.ImportOptions{})
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", path, err))
	}
	return s
}
