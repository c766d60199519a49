package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dagrun/dagrun/dag"
)

// reducedEdges lists "u->v" for the reduced graph, sorted.
func reducedEdges(st *state) []string {
	var out []string
	for u := 0; u < st.n; u++ {
		for _, v := range st.red.row(u) {
			out = append(out, st.spec.Stages[u].Name+"->"+st.spec.Stages[v].Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestReduce(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *dag.Spec
		want []string
	}{
		{"chain keeps all", spec(stage("a", writes("x")), stage("b", reads("x"), writes("y")), stage("c", reads("y"))),
			[]string{"a->b", "b->c"}},
		{"shortcut dropped", spec(stage("a", writes("x")), stage("b", reads("x"), writes("y")), stage("c", reads("x", "y"))),
			[]string{"a->b", "b->c"}},
		{"diamond with shortcut", spec(stage("a", writes("x")), stage("b", reads("x"), writes("y")), stage("c", reads("x"), writes("z")),
			stage("d", reads("x", "y", "z"))), []string{"a->b", "a->c", "b->d", "c->d"}},
		{"long shortcut", spec(stage("a", writes("x")), stage("b", after("a")), stage("c", after("b")), stage("d", after("c")), stage("e", reads("x"), after("d"))),
			[]string{"a->b", "b->c", "c->d", "d->e"}},
		{"readers then writer", spec(stage("a", writes("x")), stage("b", reads("x")), stage("c", reads("x")), stage("d", writes("x"))),
			[]string{"a->b", "a->c", "b->d", "c->d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := upTo(t, tc.s, Options{}, "reduce")
			if got := reducedEdges(st); !slices.Equal(got, tc.want) {
				t.Errorf("reduced edges %v, want %v", got, tc.want)
			}
		})
	}
}

// randomDAG returns a spec whose stages depend on random earlier stages
// through after: (probability p per pair, biased to near neighbours when local).
func randomDAG(rng *rand.Rand, n int, p float64, local bool) *dag.Spec {
	s := &dag.Spec{Name: "random", Sync: dag.SyncAuto}
	for i := 0; i < n; i++ {
		st := dag.StageSpec{Name: fmt.Sprintf("n%d", i), Kernel: dag.BuiltinSpin, DurationUS: float64(1 + rng.IntN(9))}
		for j := 0; j < i; j++ {
			q := p
			if local {
				q = p * 4 / float64(i-j)
			}
			if rng.Float64() < q {
				st.After = append(st.After, fmt.Sprintf("n%d", j))
			}
		}
		s.Stages = append(s.Stages, st)
	}
	return s
}

// TestReduceBruteForce compares with the definition: u -> v stays iff no
// other successor of u reaches v.
func TestReduceBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 200; iter++ {
		n := 1 + rng.IntN(40)
		s := randomDAG(rng, n, rng.Float64()*0.5, iter%2 == 0)
		st := upTo(t, s, Options{}, "reduce")
		g := st.g
		reach := make([][]bool, n)
		for i := n - 1; i >= 0; i-- {
			reach[i] = make([]bool, n)
			for _, v := range g.Succ(i) {
				reach[i][v] = true
				for k := range n {
					reach[i][k] = reach[i][k] || reach[v][k]
				}
			}
		}
		var want []string
		for u := 0; u < n; u++ {
			for _, v := range g.Succ(u) {
				implied := false
				for _, w := range g.Succ(u) {
					implied = implied || (w != v && reach[w][v])
				}
				if !implied {
					want = append(want, s.Stages[u].Name+"->"+s.Stages[v].Name)
				}
			}
		}
		slices.Sort(want)
		if got := reducedEdges(st); !slices.Equal(got, want) {
			t.Fatalf("iter %d: reduced %v\nwant %v", iter, got, want)
		}
	}
}
