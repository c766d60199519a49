package dag

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// prefixSpec is n stages appending to one buffer, each reading all that
// the earlier ones wrote (a prefix of the buffer, as a concatenation
// reads): n(n−1)/2 RAW pairs from 2n−1 accesses, each implied by the
// chain of the last writers but n−1.
func prefixSpec(n int) *Spec {
	s := &Spec{Name: "prefix", Buffers: []BufferSpec{{Name: "o", Bytes: int64(4 * n)}}}
	for i := range n {
		st := StageSpec{Name: fmt.Sprint("s", i), Kernel: BuiltinSpin, Writes: []Access{{Buffer: "o", Offset: int64(4 * i), Bytes: 4}}}
		if i > 0 {
			st.Reads = []Access{{Buffer: "o", Bytes: int64(4 * i)}}
		}
		s.Stages = append(s.Stages, st)
	}
	return s
}

// gatherSpec is n stages each writing its own slice of one buffer, then n
// stages each reading all of it: n² RAW pairs, none implied by another.
func gatherSpec(n int) *Spec {
	s := &Spec{Name: "gather", Buffers: []BufferSpec{{Name: "o", Bytes: int64(4 * n)}}}
	for i := range n {
		s.Stages = append(s.Stages, StageSpec{Name: fmt.Sprint("w", i), Kernel: BuiltinSpin, Writes: []Access{{Buffer: "o", Offset: int64(4 * i), Bytes: 4}}})
	}
	for i := range n {
		s.Stages = append(s.Stages, StageSpec{Name: fmt.Sprint("r", i), Kernel: BuiltinSpin, Reads: []Access{{Buffer: "o", Bytes: int64(4 * n)}}})
	}
	return s
}

// TestHazardsPrefix: a stage reading what every earlier stage wrote gets
// one edge, from the last, so the graph is a chain of n−1 edges where
// AllHazards has one per pair; past AllHazards' limit, Hazards plans it.
func TestHazardsPrefix(t *testing.T) {
	defer func(m int) { maxHazards = m }(maxHazards)
	const n = 100
	pairs := n * (n - 1) / 2
	maxHazards = pairs - 1
	if _, err := AllHazards(prefixSpec(n)); err == nil {
		t.Fatalf("AllHazards: %d hazards past the limit %d: no error", pairs, maxHazards)
	}
	maxHazards = 0 // the per-access allowance, 4 × 199
	g, err := Hazards(prefixSpec(n))
	if err != nil {
		t.Fatal(err)
	}
	if g.NumEdges() != n-1 {
		t.Fatalf("%d edges, want %d", g.NumEdges(), n-1)
	}
	for v := 1; v < n; v++ {
		if p := g.Pred(v); len(p) != 1 || int(p[0]) != v-1 {
			t.Fatalf("stage s%d: predecessors %v, want s%d", v, p, v-1)
		}
	}
}

// TestHazardsBound: a spec with more hazards than its limit (here
// MaxHazards, lowered; the per-access allowance is below it) is refused at
// the stage that passes it, naming the limit; at the limit it is not. The
// hazards counted are the edges kept: those of AllHazards on the prefix
// spec, those of Hazards on the gather spec, where none is implied.
func TestHazardsBound(t *testing.T) {
	defer func(m int) { maxHazards = m }(maxHazards)
	for _, tc := range []struct {
		name  string
		build func(*Spec) (*HazardGraph, error)
		spec  *Spec
		pairs int
		last  string // the stage that passes the limit
	}{
		{"AllHazards prefix", AllHazards, prefixSpec(100), 100 * 99 / 2, "s99"},
		{"Hazards gather", Hazards, gatherSpec(50), 50 * 50, "r49"},
	} {
		accesses := 0
		for _, st := range tc.spec.Stages {
			accesses += len(st.Reads) + len(st.Writes)
		}
		if HazardsPerAccess*accesses >= tc.pairs {
			t.Fatalf("%s: the per-access allowance %d covers the %d pairs", tc.name, HazardsPerAccess*accesses, tc.pairs)
		}
		maxHazards = tc.pairs
		g, err := tc.build(tc.spec)
		if err != nil || g.NumEdges() != tc.pairs {
			t.Fatalf("%s: at the limit (%d hazards): %v", tc.name, tc.pairs, err)
		}
		maxHazards = tc.pairs - 1
		_, err = tc.build(tc.spec)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("stage %s: the spec's hazards", tc.last)) || !strings.Contains(err.Error(), fmt.Sprint(tc.pairs-1)) {
			t.Fatalf("%s: one over the limit: %v", tc.name, err)
		}
		maxHazards = 0
		_, err = tc.build(tc.spec)
		if want := fmt.Sprintf("pass %d here", HazardsPerAccess*accesses); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: past the per-access allowance: %v, want %q", tc.name, err, want)
		}
	}
}

// TestHazardOverlapsBound: the overlaps the analysis examines are bounded
// whether or not their edges are kept: the prefix spec of n stages meets
// n² (stage k's read meets k segments and finds k pairs, its write one
// fresh range), refused one below, planned at the limit.
func TestHazardOverlapsBound(t *testing.T) {
	defer func(m int) { maxHazardOverlaps = m }(maxHazardOverlaps)
	const n = 100
	if OverlapsPerAccess*(2*n-1) >= n*n {
		t.Fatalf("the per-access allowance %d covers the %d overlaps", OverlapsPerAccess*(2*n-1), n*n)
	}
	maxHazardOverlaps = n * n
	if _, err := Hazards(prefixSpec(n)); err != nil {
		t.Fatalf("at the limit (%d overlaps): %v", n*n, err)
	}
	maxHazardOverlaps = n*n - 1
	_, err := Hazards(prefixSpec(n))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("stage s%d: the spec's overlaps", n-1)) || !strings.Contains(err.Error(), fmt.Sprint(n*n-1)) {
		t.Fatalf("one over the limit: %v", err)
	}
	maxHazardOverlaps = 0
	_, err = Hazards(prefixSpec(n))
	if want := fmt.Sprintf("pass %d here", OverlapsPerAccess*(2*n-1)); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("past the per-access allowance: %v, want %q", err, want)
	}
}

// BenchmarkHazardsPrefix: the prefix spec of 5,000 stages (about 650 KB of
// YAML, past AllHazards' limit): n²/2 overlaps examined, n−1 edges kept.
func BenchmarkHazardsPrefix(b *testing.B) {
	s := prefixSpec(5000)
	b.ReportAllocs()
	for b.Loop() {
		g, err := Hazards(s)
		if err != nil || g.NumEdges() != 4999 {
			b.Fatal(g.NumEdges(), err)
		}
	}
}

// TestHazardsPrefixMemory: the prefix spec's analysis takes memory linear
// in its stages: a byte range keeps none of its earlier readers that
// happen before a later reader (kept, they would be n²/2 entries, about
// 12 bytes each: 24 MB here).
func TestHazardsPrefixMemory(t *testing.T) {
	const n = 2000
	s := prefixSpec(n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	g, err := Hazards(s)
	runtime.ReadMemStats(&after)
	if err != nil || g.NumEdges() != n-1 {
		t.Fatalf("%v, %d edges", err, g.NumEdges())
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 2048*n {
		t.Fatalf("Hazards allocated %d bytes for %d stages, want at most %d", got, n, 2048*n)
	}
}
