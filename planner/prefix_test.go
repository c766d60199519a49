package planner_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// TestPlanPrefixSpec: a spec of 5,000 stages appending to one buffer, each
// reading all that the earlier ones wrote (a concatenation's shape, about
// 650 KB of YAML, n²/2 = 12.5 million conflicting pairs, past the limit of
// an edge per pair: dag.AllHazards refuses it), is planned: its hazard graph keeps one edge per stage,
// the chain of the last writers, and its plan is that chain on one stream.
func TestPlanPrefixSpec(t *testing.T) {
	const n = 5000
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nname: prefix\nbuffers:\n  - {name: o, bytes: %d}\nstages:\n", 4*n)
	for i := range n {
		fmt.Fprintf(&b, "  - name: s%d\n    kernel: spin\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "    reads: [{buffer: o, offset: 0, bytes: %d}]\n", 4*i)
		}
		fmt.Fprintf(&b, "    writes: [{buffer: o, offset: %d, bytes: 4}]\n", 4*i)
	}
	if b.Len() < 600_000 {
		t.Fatalf("the spec is %d bytes", b.Len())
	}
	s, err := dag.LoadWith([]byte(b.String()), "prefix.yaml", t.TempDir(), dag.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := dag.Hazards(s)
	if err != nil {
		t.Fatal(err)
	}
	if g.NumEdges() != n-1 {
		t.Fatalf("hazard graph: %d edges, want %d", g.NumEdges(), n-1)
	}
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stats; st.Streams != 1 || st.Waits != 0 || st.ReducedEdges != n-1 {
		t.Fatalf("plan: %d streams, %d waits, %d reduced edges; want 1, 0, %d", st.Streams, st.Waits, st.ReducedEdges, n-1)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatal(err)
	}
}
