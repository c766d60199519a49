package planner

import (
	"testing"

	"github.com/dagrun/dagrun/dag"
	"pgregory.net/rapid"
)

// The oracles here share no code with the planner: a brute-force
// transitive reduction and Kuhn's augmenting-path matching (Kuhn 1955,
// O(V·E)), so that a weaker reduction or matcher fails these tests even
// though the plan's own Stats.LowerBoundWaits would agree with it.

// oracleReduce returns the transitive reduction of g as successor lists:
// u → v is kept when no other successor of u reaches v (a DAG's reduction
// is unique; Aho, Garey & Ullman 1972).
func oracleReduce(g *dag.HazardGraph) [][]int {
	n := g.Len()
	reach := make([][]bool, n) // reach[u][v]: a path of one or more edges u → … → v
	var visit func(u int) []bool
	visit = func(u int) []bool {
		if reach[u] != nil {
			return reach[u]
		}
		r := make([]bool, n)
		for _, w := range g.Succ(u) {
			r[w] = true
			for v, ok := range visit(int(w)) {
				r[v] = r[v] || ok
			}
		}
		reach[u] = r
		return r
	}
	out := make([][]int, n)
	for u := range n {
		for _, v := range g.Succ(u) {
			implied := false
			for _, w := range g.Succ(u) {
				if w != v && visit(int(w))[v] {
					implied = true
				}
			}
			if !implied {
				out[u] = append(out[u], int(v))
			}
		}
	}
	return out
}

// kuhn returns the size of a maximum matching of the bipartite graph with
// left and right nodes 0..n-1 and edges adj[u] (allowed(u, v) false drops
// one; nil allows all), by one augmenting-path search per left node.
func kuhn(n int, adj [][]int, allowed func(u, v int) bool) int {
	matchR := make([]int, n)
	for i := range matchR {
		matchR[i] = -1
	}
	var seen []bool
	var try func(u int) bool
	try = func(u int) bool {
		for _, v := range adj[u] {
			if seen[v] || (allowed != nil && !allowed(u, v)) {
				continue
			}
			seen[v] = true
			if matchR[v] < 0 || try(matchR[v]) {
				matchR[v] = u
				return true
			}
		}
		return false
	}
	size := 0
	for u := range n {
		seen = make([]bool, n)
		if try(u) {
			size++
		}
	}
	return size
}

// The matcher (Hopcroft–Karp) finds maximum matchings: on random bipartite
// graphs, with and without forbidden edges, its size is Kuhn's.
func TestPropertyMatcherMaximum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "n")
		adj := make([][]int, n)
		a := &adjacency{off: make([]int32, n+1)}
		for u := range n {
			for v := range n {
				if rapid.IntRange(0, 3).Draw(t, "edge") == 0 {
					adj[u] = append(adj[u], v)
					a.adj = append(a.adj, int32(v))
				}
			}
			a.off[u+1] = int32(len(a.adj))
		}
		forbid := map[[2]int]bool{}
		if rapid.Bool().Draw(t, "constrained") {
			for u := range n {
				for _, v := range adj[u] {
					forbid[[2]int{u, v}] = rapid.IntRange(0, 4).Draw(t, "forbid") == 0
				}
			}
		}
		order := make([]int32, n)
		for i := range order {
			order[i] = int32(i)
		}
		m := newMatcher(n, a)
		m.ok = func(u, v int32) bool { return !forbid[[2]int{int(u), int(v)}] }
		got := m.match(order)
		want := kuhn(n, adj, func(u, v int) bool { return !forbid[[2]int{u, v}] })
		if got != want {
			t.Fatalf("matcher: %d, Kuhn: %d (adj %v, forbidden %v)", got, want, adj, forbid)
		}
		for u, v := range m.matchL {
			if v >= 0 && (m.matchR[v] != int32(u) || forbid[[2]int{u, int(v)}]) {
				t.Fatalf("matchL[%d] = %d, matchR[%d] = %d", u, v, v, m.matchR[v])
			}
		}
	})
}

// Uncapped, unpinned default plans are a minimum path cover of the
// transitive reduction: n − M streams and at most reduced edges − M waits
// for the maximum matching M, both computed by the oracles; the plan's
// reduced edges and lower bound are theirs.
func TestPropertyPathCoverOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSpec(t, true, false)
		p := mustBuild(t, s, Options{MaxStreams: -1, ShuffleSeed: rapid.Int64Range(0, 3).Draw(t, "shuffle")})
		g, err := dag.Hazards(s)
		if err != nil {
			t.Fatal(err)
		}
		red := oracleReduce(g)
		edges := 0
		for _, r := range red {
			edges += len(r)
		}
		m := kuhn(len(s.Stages), red, nil)
		st := p.Stats
		if st.ReducedEdges != edges || st.LowerBoundWaits != edges-m {
			t.Fatalf("reduced edges %d, lower bound %d; oracle: %d edges, matching %d\n%s", st.ReducedEdges, st.LowerBoundWaits, edges, m, describe(s))
		}
		if len(p.Streams) != len(s.Stages)-m || st.Waits > edges-m {
			t.Fatalf("%d streams, %d waits; a minimum path cover has %d chains and needs at most %d waits\n%s", len(p.Streams), st.Waits, len(s.Stages)-m, edges-m, describe(s))
		}
	})
}

// The crown a→c, a→d, b→c: its minimum path cover is a→d and b→c (two
// streams, one wait for a→c); a greedy matching that takes a→c first
// leaves three chains and two waits.
func TestCrownPathCover(t *testing.T) {
	s := spec(stage("a", writes("x")), stage("b", writes("y")), stage("c", reads("x", "y")), stage("d", reads("x")))
	p := build(t, s, Options{})
	if len(p.Streams) != 2 || p.Stats.Waits != 1 || p.Stats.LowerBoundWaits != 1 {
		t.Fatalf("%d streams, %d waits (lower bound %d), want 2 and 1\n%s", len(p.Streams), p.Stats.Waits, p.Stats.LowerBoundWaits, table(t, p))
	}
	if streamOf(p, "a") != streamOf(p, "d") || streamOf(p, "b") != streamOf(p, "c") {
		t.Errorf("chains a→%s d→%s b→%s c→%s, want a with d and b with c", streamOf(p, "a"), streamOf(p, "d"), streamOf(p, "b"), streamOf(p, "c"))
	}
}
