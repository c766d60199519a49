package planner

import (
	"fmt"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/synth"
)

// TestUnrollWithoutNamesAgrees: the race-free check across iterations on
// the plan unrolled without names (unroll, named false: one name for
// every copy of a buffer) finds races exactly when the check on the plan
// unrolled with names does, on planned iterating plans (ring copies,
// stream sets, the arena, a host stream) and on each of them less one
// wait; so its verdict never needs the named plan but to report.
func TestUnrollWithoutNamesAgrees(t *testing.T) {
	type plan struct {
		name string
		p    *Plan
	}
	var plans []plan
	add := func(name string, s *dag.Spec, o Options) { plans = append(plans, plan{name, build(t, s, o)}) }
	add("one copy", ioPipe(), Options{})
	add("one copy, no arena", ioPipe(), Options{Arena: dag.ArenaOff})
	add("two copies, one set", withCopies(ioPipe(), 2, "frame", "x", "out", "res"), Options{StreamSets: 1})
	add("two copies", withCopies(ioPipe(), 2, "frame", "x", "out", "res"), Options{})
	add("mixed copies", withCopies(spec(
		stage("up", writes("frame"), on("h2d")),
		stage("pre", reads("frame"), writes("acc"), on("comp")),
		stage("sum", reads("acc"), writes("total"), on("d2h")),
	), 3, "frame"), Options{StreamSets: 1})
	host := spec( // a host stream: implicit order, so the unrolled stages are made
		stage("fill0", writes("staging"), on(dag.HostStream)),
		stage("up0", reads("staging"), writes("d0")),
		stage("fill1", writes("staging"), on(dag.HostStream)),
		stage("up1", reads("staging"), writes("d1")),
	)
	host.Buffer("staging").Where = dag.WhereHostPinned
	add("host stream", host, Options{})
	layered, _ := synth.Shape("layered", 300)
	add("layered", layered, Options{MaxStreams: 4})
	add("squeezenet", loadGraph(t, "squeezenet1_1"), Options{MaxStreams: 4})
	checked, racy := 0, 0
	for _, pc := range plans {
		p := pc.p
		if p.Iteration == nil {
			t.Fatalf("%s: no iteration info", pc.name)
		}
		try := func(what string, p *Plan) {
			k := UnrollIterations(p)
			named, err := Unroll(p, k)
			if err != nil {
				t.Fatal(err)
			}
			bare, err := unroll(p, k, false)
			if err != nil {
				t.Fatal(err)
			}
			want := verifyWith(named, false, false)
			got := verifyWith(bare, false, false)
			if (got == nil) != (want == nil) {
				t.Fatalf("%s%s: without names %v, with names %v", pc.name, what, got, want)
			}
			checked++
			if want != nil {
				racy++
			}
		}
		if bare, _ := unroll(p, 2, false); (bare.base == nil) != hasImplicit(p) {
			t.Fatalf("%s: unrolled without names, stages made %v, implicit order %v", pc.name, bare.base == nil, hasImplicit(p))
		}
		try("", p)
		n := 0
		for s := range p.Streams {
			for j, o := range p.Streams[s].Ops {
				if o.Kind == OpWait && n < 40 {
					n++
					try(fmt.Sprintf(" less wait %d of stream %d", j, s), dropOp(p, s, j))
				}
			}
		}
	}
	if racy == 0 || racy == checked {
		t.Errorf("%d of %d plans racy: the cases do not cover both verdicts", racy, checked)
	}
}
