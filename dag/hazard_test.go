package dag

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/topo"
)

// hz builds a spec from a compact description: each stage is
// "name: r=x[0:8],y w=z after=a,b" (ranges optional: whole 64-byte buffer).
func hzSpec(t testing.TB, stages ...string) *Spec {
	t.Helper()
	s := &Spec{Name: "t"}
	bufs := map[string]bool{}
	acc := func(a string) Access {
		name, rng, ok := strings.Cut(a, "[")
		if !bufs[name] {
			bufs[name] = true
			s.Buffers = append(s.Buffers, BufferSpec{Name: name, Bytes: 64})
		}
		if !ok {
			return Access{Buffer: name, Bytes: 64}
		}
		var lo, hi int64
		if _, err := fmt.Sscanf(strings.TrimSuffix(rng, "]"), "%d:%d", &lo, &hi); err != nil {
			t.Fatalf("bad range %q", a)
		}
		return Access{Buffer: name, Offset: lo, Bytes: hi - lo}
	}
	for _, d := range stages {
		name, rest, _ := strings.Cut(d, ":")
		st := StageSpec{Name: name, Kernel: BuiltinSpin}
		for _, f := range strings.Fields(rest) {
			k, v, _ := strings.Cut(f, "=")
			for _, item := range strings.Split(v, ",") {
				switch k {
				case "r":
					st.Reads = append(st.Reads, acc(item))
				case "w":
					st.Writes = append(st.Writes, acc(item))
				case "after":
					st.After = append(st.After, item)
				default:
					t.Fatalf("bad field %q", f)
				}
			}
		}
		s.Stages = append(s.Stages, st)
	}
	return s
}

// edges lists "u->v KIND buf[lo:hi] ..." for every edge, sorted.
func edges(g *HazardGraph) []string {
	var out []string
	s := g.Spec()
	for v := 0; v < g.Len(); v++ {
		for _, u := range g.Pred(v) {
			var hs []string
			for _, h := range g.EdgeHazards(int(u), v) {
				hs = append(hs, h.String())
			}
			out = append(out, fmt.Sprintf("%s->%s %s", s.Stages[u].Name, s.Stages[v].Name, strings.Join(hs, ", ")))
		}
	}
	slices.Sort(out)
	return out
}

// TestHazards: the edges of AllHazards (want), and those Hazards leaves
// out because other edges imply them (implied).
func TestHazards(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stages  []string
		want    []string
		implied []string
	}{
		{"raw", []string{"a: w=x", "b: r=x"}, []string{"a->b RAW x[0:64]"}, nil},
		{"war", []string{"a: r=x", "b: w=x"}, []string{"a->b WAR x[0:64]"}, nil},
		{"waw", []string{"a: w=x", "b: w=x"}, []string{"a->b WAW x[0:64]"}, nil},
		{"rar is free", []string{"a: r=x", "b: r=x"}, nil, nil},
		{"disjoint halves", []string{"a: w=x[0:32]", "b: w=x[32:64]", "c: r=x[0:32]"}, []string{"a->c RAW x[0:32]"}, nil},
		{"partial overlap is the intersection", []string{"a: w=x[0:40]", "b: r=x[32:64]"}, []string{"a->b RAW x[32:40]"}, nil},
		{"covering write supersedes", []string{"a: w=x", "b: r=x", "c: w=x", "d: r=x"},
			[]string{"a->b RAW x[0:64]", "a->c WAW x[0:64]", "b->c WAR x[0:64]", "c->d RAW x[0:64]"}, []string{"a->c WAW x[0:64]"}},
		{"partial write keeps the rest live", []string{"a: w=x[0:32]", "b: w=x[16:48]", "c: r=x[0:64]"},
			[]string{"a->b WAW x[16:32]", "a->c RAW x[0:32]", "b->c RAW x[16:48]"}, []string{"a->c RAW x[0:32]"}},
		{"in-place", []string{"a: w=x", "b: r=x w=x", "c: r=x"}, []string{"a->b RAW x[0:64], WAW x[0:64]", "b->c RAW x[0:64]"}, nil},
		{"readers since last write", []string{"a: w=x", "b: r=x", "c: r=x", "d: w=x[0:8]"},
			[]string{"a->b RAW x[0:64]", "a->c RAW x[0:64]", "a->d WAW x[0:8]", "b->d WAR x[0:8]", "c->d WAR x[0:8]"}, []string{"a->d WAW x[0:8]"}},
		{"after", []string{"a: w=x", "b: w=y after=a", "c: r=y"}, []string{"a->b after", "b->c RAW y[0:64]"}, nil},
		{"after and data", []string{"a: w=x", "b: r=x after=a"}, []string{"a->b RAW x[0:64], after"}, nil},
		{"two buffers one edge", []string{"a: w=x,y", "b: r=y,x"}, []string{"a->b RAW x[0:64], RAW y[0:64]"}, nil},
		// A concatenation: each stage reads all that the earlier ones
		// appended, and gets one edge, from the last.
		{"prefix", []string{"a: w=x[0:8]", "b: r=x[0:8] w=x[8:16]", "c: r=x[0:16] w=x[16:24]", "d: r=x[0:24]"},
			[]string{"a->b RAW x[0:8]", "a->c RAW x[0:8]", "a->d RAW x[0:8]", "b->c RAW x[8:16]", "b->d RAW x[8:16]", "c->d RAW x[16:24]"},
			[]string{"a->c RAW x[0:8]", "a->d RAW x[0:8]", "b->d RAW x[8:16]"}},
		// Implied through two edges: a → b → c → d.
		{"prefix through a temporary", []string{"a: w=x[0:8]", "b: r=x[0:8] w=t", "c: r=t w=x[8:16]", "d: r=x[0:16]"},
			[]string{"a->b RAW x[0:8]", "a->d RAW x[0:8]", "b->c RAW t[0:64]", "c->d RAW x[8:16]"}, []string{"a->d RAW x[0:8]"}},
		// Unordered writers: each edge is needed.
		{"gather", []string{"a: w=x[0:8]", "b: w=x[8:16]", "c: r=x[0:16]", "d: r=x[0:16]"},
			[]string{"a->c RAW x[0:8]", "a->d RAW x[0:8]", "b->c RAW x[8:16]", "b->d RAW x[8:16]"}, nil},
		// b read x and c, which read it too, happens after b: a write of x
		// is ordered after b through c.
		{"earlier reader", []string{"a: w=x", "b: r=x w=y", "c: r=x,y", "d: w=x"},
			[]string{"a->b RAW x[0:64]", "a->c RAW x[0:64]", "a->d WAW x[0:64]", "b->c RAW y[0:64]", "b->d WAR x[0:64]", "c->d WAR x[0:64]"},
			[]string{"a->c RAW x[0:64]", "a->d WAW x[0:64]", "b->d WAR x[0:64]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all, err := AllHazards(hzSpec(t, tc.stages...))
			if err != nil {
				t.Fatal(err)
			}
			if got := edges(all); !slices.Equal(got, tc.want) {
				t.Errorf("AllHazards edges:\n got %q\nwant %q", got, tc.want)
			}
			g, err := Hazards(hzSpec(t, tc.stages...))
			if err != nil {
				t.Fatal(err)
			}
			want := slices.DeleteFunc(slices.Clone(tc.want), func(e string) bool { return slices.Contains(tc.implied, e) })
			if got := edges(g); !slices.Equal(got, want) {
				t.Errorf("Hazards edges:\n got %q\nwant %q", got, want)
			}
			if !g.Forward() || !all.Forward() {
				t.Errorf("Forward() = false")
			}
		})
	}
}

func TestHazardsAfterLater(t *testing.T) {
	g, err := Hazards(hzSpec(t, "a: w=x after=c", "b: r=x", "c: w=y"))
	if err != nil {
		t.Fatal(err)
	}
	if g.Forward() {
		t.Error("Forward() = true with an after: naming a later stage")
	}
	var names []string
	for _, v := range g.Order() {
		names = append(names, g.Spec().Stages[v].Name)
	}
	if got := strings.Join(names, " "); got != "c a b" {
		t.Errorf("Order = %s, want c a b", got)
	}
}

func TestHazardsErrors(t *testing.T) {
	for _, tc := range []struct {
		stages []string
		want   string
	}{
		{[]string{"a: w=x after=nope"}, `after: names no stage "nope"`},
		{[]string{"a: w=x after=a"}, "names the stage itself"},
		{[]string{"a: w=x after=c", "b: r=x", "c: r=x"}, "dependency cycle through stages a, c"},
	} {
		_, err := Hazards(hzSpec(t, tc.stages...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.stages, err, tc.want)
		}
	}
}

func TestHazardGraphGonum(t *testing.T) {
	g, err := AllHazards(hzSpec(t, "a: w=x", "b: r=x w=y", "c: r=x", "d: r=y,x"))
	if err != nil {
		t.Fatal(err)
	}
	var _ graph.Directed = g
	if n := g.Nodes().Len(); n != 4 {
		t.Errorf("Nodes().Len() = %d", n)
	}
	if !g.HasEdgeFromTo(0, 1) || g.HasEdgeFromTo(1, 0) || !g.HasEdgeBetween(1, 0) || g.HasEdgeFromTo(0, 3) == false {
		t.Error("HasEdge* wrong")
	}
	if g.Edge(2, 3) != nil || g.Node(9) != nil {
		t.Error("Edge or Node returned a non-nil value for a missing id")
	}
	e := g.Edge(1, 3).(HazardEdge)
	if e.From().ID() != 1 || e.To().ID() != 3 || len(e.Hazards) != 1 || e.Hazards[0].Kind != RAW {
		t.Errorf("Edge(1,3) = %+v", e)
	}
	if got := graph.NodesOf(g.To(3)); len(got) != 2 {
		t.Errorf("To(3) = %v", got)
	}
	order, err := topo.Sort(g)
	if err != nil || len(order) != 4 {
		t.Errorf("topo.Sort = %v, %v", order, err)
	}
}

// TestHazardsBruteForce checks the graph's reachability against every
// conflicting pair on random specs with byte ranges: each conflicting pair
// i < j must be joined by a path, and each edge must be a conflict or after.
// Hazards and AllHazards must have the same reachability (so the same
// transitive reduction), Hazards' edges must be AllHazards' with the same
// hazards, and on these small specs none that another path implies.
func TestHazardsBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		n := 2 + rng.IntN(14)
		s := &Spec{Name: "r"}
		for b := 0; b < 3; b++ {
			s.Buffers = append(s.Buffers, BufferSpec{Name: fmt.Sprintf("b%d", b), Bytes: 16})
		}
		rnd := func() Access {
			lo := int64(rng.IntN(16))
			hi := lo + 1 + int64(rng.IntN(int(16-lo)))
			return Access{Buffer: fmt.Sprintf("b%d", rng.IntN(3)), Offset: lo, Bytes: hi - lo}
		}
		for i := 0; i < n; i++ {
			st := StageSpec{Name: fmt.Sprintf("s%d", i)}
			for k := rng.IntN(3); k > 0; k-- {
				st.Reads = append(st.Reads, rnd())
			}
			for k := rng.IntN(3); k > 0; k-- {
				st.Writes = append(st.Writes, rnd())
			}
			s.Stages = append(s.Stages, st)
		}
		g, err := Hazards(s)
		if err != nil {
			t.Fatal(err)
		}
		conflict := func(i, j int) bool {
			a, b := s.Stages[i], s.Stages[j]
			for _, w := range a.Writes {
				for _, x := range slices.Concat(b.Reads, b.Writes) {
					if w.Overlaps(x) {
						return true
					}
				}
			}
			for _, r := range a.Reads {
				for _, w := range b.Writes {
					if r.Overlaps(w) {
						return true
					}
				}
			}
			return false
		}
		closure := func(g *HazardGraph) [][]bool {
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
			return reach
		}
		reach := closure(g)
		all, err := AllHazards(s)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(reach, closure(all), slices.Equal) {
			t.Fatalf("iter %d: Hazards and AllHazards order different pairs\n%v\n%v", iter, edges(g), edges(all))
		}
		for v := range n {
			for _, u := range g.Pred(v) {
				if !slices.Equal(g.EdgeHazards(int(u), v), all.EdgeHazards(int(u), v)) {
					t.Fatalf("iter %d: edge %d->%d: Hazards %v, AllHazards %v", iter, u, v, g.EdgeHazards(int(u), v), all.EdgeHazards(int(u), v))
				}
				for _, w := range g.Succ(int(u)) {
					if int(w) != v && reach[w][v] {
						t.Fatalf("iter %d: edge %s->%s is implied through %s\n%v", iter, s.Stages[u].Name, s.Stages[v].Name, s.Stages[w].Name, edges(g))
					}
				}
			}
		}
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if conflict(i, j) && !reach[i][j] {
					t.Fatalf("iter %d: %s and %s conflict but are not ordered\n%v", iter, s.Stages[i].Name, s.Stages[j].Name, edges(g))
				}
				if g.HasEdgeFromTo(int64(i), int64(j)) && !conflict(i, j) {
					t.Fatalf("iter %d: edge %s->%s without a conflict", iter, s.Stages[i].Name, s.Stages[j].Name)
				}
			}
		}
	}
}

// TestAccessBuffers: each stage's reads, then writes, by their index in
// Spec.Buffers, zero-byte accesses included, an undeclared buffer past
// the declared ones.
func TestAccessBuffers(t *testing.T) {
	s := hzSpec(t, "a: r=x w=y", "b: r=y,x w=z")
	s.Buffers = append([]BufferSpec{{Name: "unused", Bytes: 8}}, s.Buffers...) // x 1, y 2, z 3
	s.Stages[1].Reads = append(s.Stages[1].Reads, Access{Buffer: "ghost", Bytes: 4}, Access{Buffer: "z"})
	g, err := Hazards(s)
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range [][]int32{{1, 2}, {2, 1, 4, 3, 3}} {
		if got := g.AccessBuffers(v); !slices.Equal(got, want) {
			t.Errorf("stage %s: buffers %v, want %v", s.Stages[v].Name, got, want)
		}
	}
}
