package planner

import (
	"bytes"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

func TestSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *dag.Spec
		o    Options
		want string
	}{
		{"diamond", spec(stage("a", writes("x")), stage("b", reads("x"), writes("y")), stage("c", reads("x"), writes("z")), stage("d", reads("y", "z"))), Options{},
			"s0: a rec0 b wait1 d\ns1: wait0 c rec1\n"},
		// d on t needs a (via stream order: b waited on a) and c.
		{"stream order covers", spec(stage("a", writes("x"), on("p")), stage("b", reads("x"), on("t")), stage("c", writes("y"), on("p")), stage("d", reads("x", "y"), on("t"))), Options{},
			"p: a rec0 c rec1\nt: wait0 b wait1 d\n"},
		// a's clock reaches u through v's wait: one wait covers both edges into w.
		{"transitive clock", spec(stage("a", writes("x"), on("p")), stage("b", reads("x"), writes("y"), on("q")), stage("c", reads("x", "y"), on("r"))), Options{},
			"p: a rec0\nq: wait0 b rec1\nr: wait1 c\n"},
		// a → d is a reduced edge, but d's wait on b covers a through b's
		// wait on c, which follows a on stream p.
		{"clock through another stream", spec(stage("a", writes("x"), on("p")), stage("c", writes("y"), on("p")), stage("b", reads("y"), writes("z"), on("q")), stage("d", reads("x", "z"), on("r"))), Options{},
			"p: a c rec0\nq: wait0 b rec1\nr: wait1 d\n"},
		{"naive waits on every cross edge", spec(stage("a", writes("x"), on("p")), stage("b", reads("x"), on("t")), stage("c", writes("y"), on("p")), stage("d", reads("x", "y"), on("t"))), Options{Strategy: "naive"},
			"p: a rec0 c rec1\nt: wait0 b wait0 wait1 d\n"},
		{"single stream needs nothing", spec(stage("a", writes("x")), stage("b", reads("x")), stage("c", writes("x"))), Options{Strategy: "single"},
			"s0: a b c\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := upTo(t, tc.s, tc.o, "sync")
			if got := ops(st.plan); got != tc.want {
				t.Errorf("got\n%swant\n%s", got, tc.want)
			}
		})
	}
}

// TestSyncIssueOrder: every record is issued before each wait on it in
// the same iteration.
func TestSyncIssueOrder(t *testing.T) {
	p := build(t, loadGraph(t, "nasnetalarge"), Options{ShuffleSeed: 7})
	recorded := make([]bool, p.Events)
	for _, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		switch o.Kind {
		case plan.OpRecord:
			recorded[o.Event] = true
		case plan.OpWait: // a cross-iteration wait (Lag > 0) needs an earlier iteration's record
			if o.Lag == 0 && !recorded[o.Event] {
				t.Fatalf("wait on e%d issued before its record", o.Event)
			}
		}
	}
	var buf bytes.Buffer
	p.WriteTable(&buf)
}
