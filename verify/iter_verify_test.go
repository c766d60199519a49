package verify_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/synth"
	"github.com/dagrun/dagrun/verify"
)

// TestUnrollWithoutNamesAgrees: the race-free check across iterations on
// the plan unrolled without names (UnrollDerived, named false: one name for
// every copy of a buffer) finds races exactly when the check on the plan
// unrolled with names does, on planned iterating plans (ring copies,
// stream sets, the arena, a host stream) and on each of them less one
// wait; so its verdict never needs the named plan but to report.
func TestUnrollWithoutNamesAgrees(t *testing.T) {
	type namedPlan struct {
		name string
		p    *plan.Plan
	}
	var plans []namedPlan
	add := func(name string, s *dag.Spec, o planner.Options) {
		plans = append(plans, namedPlan{name, build(t, s, o)})
	}
	add("one copy", ioPipe(), planner.Options{})
	add("one copy, no arena", ioPipe(), planner.Options{Arena: dag.ArenaOff})
	add("two copies, one set", withCopies(ioPipe(), 2, "frame", "x", "out", "res"), planner.Options{StreamSets: 1})
	add("two copies", withCopies(ioPipe(), 2, "frame", "x", "out", "res"), planner.Options{})
	add("mixed copies", withCopies(spec(
		stage("up", writes("frame"), on("h2d")),
		stage("pre", reads("frame"), writes("acc"), on("comp")),
		stage("sum", reads("acc"), writes("total"), on("d2h")),
	), 3, "frame"), planner.Options{StreamSets: 1})
	host := spec( // a host stream: implicit order, so the unrolled stages are made
		stage("fill0", writes("staging"), on(dag.HostStream)),
		stage("up0", reads("staging"), writes("d0")),
		stage("fill1", writes("staging"), on(dag.HostStream)),
		stage("up1", reads("staging"), writes("d1")),
	)
	host.Buffer("staging").Where = dag.WhereHostPinned
	add("host stream", host, planner.Options{})
	layered, _ := synth.Shape("layered", 300)
	add("layered", layered, planner.Options{MaxStreams: 4})
	add("squeezenet", loadGraph(t, "squeezenet1_1"), planner.Options{MaxStreams: 4})
	checked, racy := 0, 0
	for _, pc := range plans {
		p := pc.p
		if p.Iteration == nil {
			t.Fatalf("%s: no iteration info", pc.name)
		}
		try := func(what string, p *plan.Plan) {
			k := plan.UnrollIterations(p)
			named, err := plan.Unroll(p, k)
			if err != nil {
				t.Fatal(err)
			}
			bare, err := plan.UnrollDerived(p, k, false)
			if err != nil {
				t.Fatal(err)
			}
			want := verify.VerifyWith(named, false, false)
			got := verify.VerifyWith(bare, false, false)
			if (got == nil) != (want == nil) {
				t.Fatalf("%s%s: without names %v, with names %v", pc.name, what, got, want)
			}
			checked++
			if want != nil {
				racy++
			}
		}
		if bare, _ := plan.UnrollDerived(p, 2, false); (bare.Base == nil) != plan.HasImplicit(p) {
			t.Fatalf("%s: unrolled without names, stages made %v, implicit order %v", pc.name, bare.Base == nil, plan.HasImplicit(p))
		}
		try("", p)
		n := 0
		for s := range p.Streams {
			for j, o := range p.Streams[s].Ops {
				if o.Kind == plan.OpWait && n < 40 {
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

// TestUnrollIterationsSuffice: a plan unrolled over UnrollIterations(p)
// iterations is race-free exactly when it is over many more, on planned
// iterating plans changed at random where they stay valid: waits dropped,
// lags set from 0 to 3, event slots, ring copies and stream sets from 1 to
// 3. So the bound of UnrollIterations (twice the period) misses no race
// between iterations further apart or in a later phase.
func TestUnrollIterationsSuffice(t *testing.T) {
	layered, _ := synth.Shape("layered", 120)
	bases := []*plan.Plan{
		build(t, ioPipe(), planner.Options{}),
		build(t, ioPipe(), planner.Options{Arena: dag.ArenaOff}),
		build(t, withCopies(ioPipe(), 2, "frame", "x", "out", "res"), planner.Options{StreamSets: 1}),
		build(t, withCopies(ioPipe(), 2, "frame", "x", "out", "res"), planner.Options{}),
		build(t, withCopies(ioPipe(), 3, "frame"), planner.Options{StreamSets: 1}),
		build(t, layered, planner.Options{MaxStreams: 4}),
		build(t, loadGraph(t, "squeezenet1_1"), planner.Options{MaxStreams: 3}),
	}
	racy, clean := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		p := verify.ClonePlan(bases[rapid.IntRange(0, len(bases)-1).Draw(t, "plan")])
		p.Buffers = slices.Clone(p.Buffers)
		// Each kind of change alone or all together, so that most plans
		// keep enough of their order to race in one place only.
		mode := rapid.IntRange(0, 4).Draw(t, "mode")
		if mode == 0 || mode == 4 {
			for s := range p.Streams {
				ops := p.Streams[s].Ops
				for j := range ops {
					if ops[j].Kind == plan.OpWait && rapid.IntRange(0, 5).Draw(t, "change wait") == 0 {
						ops[j].Lag = rapid.IntRange(0, 3).Draw(t, "lag")
					}
				}
			}
		}
		if mode == 1 || mode == 4 {
			p.Iteration.StreamSets = rapid.IntRange(1, 3).Draw(t, "stream sets")
			for e := range p.Iteration.Slots {
				if rapid.IntRange(0, 3).Draw(t, "change slots") == 0 {
					p.Iteration.Slots[e] = rapid.IntRange(1, 3).Draw(t, "slots")
				}
			}
		}
		if mode == 2 || mode == 4 {
			for b := range p.Buffers {
				if p.Buffers[b].ArenaOffset == nil && rapid.IntRange(0, 3).Draw(t, "change copies") == 0 {
					p.Buffers[b].Copies = rapid.IntRange(1, 3).Draw(t, "copies")
				}
			}
		}
		drops := rapid.IntRange(0, 1).Draw(t, "waits dropped")
		if mode == 3 {
			drops = 1
		}
		for range drops {
			if waits := verify.WaitOps(p); len(waits) > 0 {
				w := waits[rapid.IntRange(0, len(waits)-1).Draw(t, "wait")]
				p = dropOp(p, w[0], w[1])
			}
		}
		if err := p.ValidateShape(); err != nil {
			t.Skip(err)
		}
		k := plan.UnrollIterations(p)
		verdict := func(iterations int) error {
			q, err := plan.UnrollDerived(p, iterations, false)
			if err != nil {
				t.Fatal(err)
			}
			return verify.VerifyWith(q, false, false)
		}
		got, want := verdict(k), verdict(3*k+8)
		if (got == nil) != (want == nil) {
			t.Fatalf("over %d iterations: %v; over %d: %v", k, got, 3*k+8, want)
		}
		if want != nil {
			racy++
		} else {
			clean++
		}
	})
	t.Logf("%d racy and %d race-free plans", racy, clean)
	if racy == 0 || clean == 0 {
		t.Errorf("%d racy and %d race-free plans: the cases do not cover both verdicts", racy, clean)
	}
}

// A race across iterations in a plan of period 63 (ring copies 7 and 9, a
// wait of lag 8): 64 iterations unrolled, past the bound of relaxLags, so
// the fix keeps the shortest lag and the report says a longer one may also
// do; a plan of period 2 (copies 2, lag 3) gets its lag lengthened and no
// such word.
func TestFixLagsShortest(t *testing.T) {
	ring := func(a, b, lag int) *plan.Plan {
		s := loadSpec(t, fmt.Sprintf(`version: 1
sync: manual
buffers:
  - {name: frame, bytes: 4096, copies: %d}
  - {name: res, bytes: 4096, role: output, copies: %d}
stages:
  - {name: up, kernel: fill, args: {value: 1.0}, writes: [frame], stream: h2d, waits: [{stage: pre, lag: %d}]}
  - {name: pre, kernel: scale, args: {a: 2.0}, reads: [frame], writes: [res], stream: comp, waits: [up]}
`, a, b, lag))
		p, err := planner.Build(s, planner.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		a, b, lag int
		shortest  bool
	}{{7, 9, 8, true}, {2, 2, 3, false}} {
		p := ring(c.a, c.b, c.lag)
		var re *verify.RaceError
		if err := verify.Verify(p); !errors.As(err, &re) || len(re.Fixes) == 0 {
			t.Fatalf("copies %d, %d, lag %d: Verify = %v, want races and a fix", c.a, c.b, c.lag, err)
		}
		said := strings.Contains(re.Error(), "lags are not lengthened")
		if re.LagsShortest != c.shortest || said != c.shortest {
			t.Errorf("copies %d, %d, lag %d: LagsShortest %v, said %v; want %v (fix %s)", c.a, c.b, c.lag, re.LagsShortest, said, c.shortest, re.Fixes[0].Edit)
		}
	}
}
