package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// lifetimesOf renders lifetimes as "buf: stream@event ...; ...".
func lifetimesOf(p *plan.Plan) string {
	var parts []string
	for _, l := range p.Lifetimes {
		s := l.Buffer + ":"
		for _, d := range l.Done {
			s += fmt.Sprintf(" %s@e%d", p.Streams[d.Stream].Name, d.Event)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func TestLifetimes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		s         *dag.Spec
		want, ops string
	}{
		{"reuse the record after the last use", spec(stage("a", writes("x"), on("p")), stage("b", reads("x"), on("q"))),
			"x: p@e0 q@e1", "p: a rec0\nq: wait0 b rec1\n"},
		{"one end record per stream", spec(stage("a", writes("x")), stage("b", reads("x"), writes("y")), stage("c", writes("z"))),
			"x: s0@e0; y: s0@e0; z: s1@e1", "s0: a b rec0\ns1: c rec1\n"},
		{"later record on the stream", spec(stage("a", writes("x"), on("p")), stage("b", writes("y"), on("p")), stage("c", reads("y"), on("q"))),
			"x: p@e0; y: p@e0 q@e1", "p: a b rec0\nq: wait0 c rec1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := upTo(t, tc.s, Options{}, "lifetimes")
			if got := lifetimesOf(st.plan); got != tc.want {
				t.Errorf("lifetimes %q, want %q", got, tc.want)
			}
			if got := ops(st.plan); got != tc.ops {
				t.Errorf("ops\n%swant\n%s", got, tc.ops)
			}
		})
	}
}

// TestLifetimesCoverEveryUse: each listed event is recorded on its stream
// after the stream's last launch touching the buffer, and every stream that
// touches a buffer is listed.
func TestLifetimesCoverEveryUse(t *testing.T) {
	for _, strat := range []Strategy{"default", "round-robin", "naive"} {
		p := build(t, loadGraph(t, "inception_v3"), Options{Strategy: strat})
		for _, l := range p.Lifetimes {
			done := map[int]int{}
			for _, d := range l.Done {
				done[d.Stream] = d.Event
			}
			for s, str := range p.Streams {
				lastUse, recAt := -1, -1
				for j, o := range str.Ops {
					if o.Kind == plan.OpLaunch {
						for _, a := range append(append([]plan.Access{}, p.Stages[o.Stage].Reads...), p.Stages[o.Stage].Writes...) {
							if a.Buffer == l.Buffer {
								lastUse = j
							}
						}
					}
					if e, ok := done[s]; ok && o.Kind == plan.OpRecord && o.Event == e {
						recAt = j
					}
				}
				_, listed := done[s]
				if listed != (lastUse >= 0) || (listed && recAt < lastUse) {
					t.Fatalf("%s: buffer %s stream %s: last use op %d, done record op %d", strat, l.Buffer, str.Name, lastUse, recAt)
				}
			}
		}
	}
}
