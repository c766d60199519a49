package planner

import (
	"flag"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
)

// Synthetic DAGs for scaling benchmarks. Each stage writes
// one buffer of its own and reads its producers' buffers, so edges are RAW
// hazards found by the real analysis.

type synth struct {
	s    *dag.Spec
	next int
}

func newSynth(name string, n int) *synth {
	return &synth{s: &dag.Spec{Name: name, Sync: dag.SyncAuto, Stages: make([]dag.StageSpec, 0, n), Buffers: make([]dag.BufferSpec, 0, n)}}
}

// add appends a stage reading the outputs of the given stages; it returns its index.
func (y *synth) add(dur float64, from ...int) int {
	i := len(y.s.Stages)
	out := "t" + strconv.Itoa(i)
	y.s.Buffers = append(y.s.Buffers, dag.BufferSpec{Name: out, Bytes: 256})
	st := dag.StageSpec{Name: "n" + strconv.Itoa(i), Kernel: dag.BuiltinMix, DurationUS: dur,
		Writes: []dag.Access{{Buffer: out, Bytes: 256}}}
	for _, f := range from {
		st.Reads = append(st.Reads, dag.Access{Buffer: "t" + strconv.Itoa(f), Bytes: 256})
	}
	y.s.Stages = append(y.s.Stages, st)
	return i
}

// layered: layers of 64 stages; each reads 2 random stages of the layer
// before and, one time in 8, one of the 2–4 layers before that (a skip edge).
func layered(n int) *dag.Spec {
	const W = 64
	rng := rand.New(rand.NewPCG(1, 1))
	y := newSynth("layered", n)
	for i := 0; i < n; i++ {
		l := i / W
		var from []int
		if l > 0 {
			from = append(from, (l-1)*W+rng.IntN(W), (l-1)*W+rng.IntN(W))
			if l > 4 && rng.IntN(8) == 0 {
				from = append(from, (l-2-rng.IntN(3))*W+rng.IntN(W))
			}
		}
		y.add(float64(1+rng.IntN(20)), from...)
	}
	return y.s
}

// wavefront: a 2-D grid 32 wide, row-major; (i, j) reads (i-1, j) and (i, j-1).
func wavefront(n int) *dag.Spec {
	const C = 32
	y := newSynth("wavefront", n)
	for k := 0; k < n; k++ {
		i, j := k/C, k%C
		var from []int
		if i > 0 {
			from = append(from, k-C)
		}
		if j > 0 {
			from = append(from, k-1)
		}
		y.add(5, from...)
	}
	return y.s
}

// seriesParallel: random series and parallel (2–3 branches, joined by one
// stage) compositions, n stages in all.
func seriesParallel(n int) *dag.Spec {
	rng := rand.New(rand.NewPCG(2, 2))
	y := newSynth("series-parallel", n)
	var gen func(in []int, size int) int
	gen = func(in []int, size int) int {
		switch {
		case size <= 2:
			last := y.add(float64(1+rng.IntN(10)), in...)
			if size == 2 {
				last = y.add(float64(1+rng.IntN(10)), last)
			}
			return last
		case rng.IntN(2) == 0 || size < 8: // series
			k := 1 + rng.IntN(size-1)
			mid := gen(in, k)
			return gen([]int{mid}, size-k)
		default: // parallel
			b := 2 + rng.IntN(2)
			rest := size - 1
			var outs []int
			for i := 0; i < b; i++ {
				part := rest / (b - i)
				if i < b-1 {
					part = max(1, part/2+rng.IntN(part+1))
					part = min(part, rest-(b-1-i))
				}
				outs = append(outs, gen(in, part))
				rest -= part
			}
			return y.add(1, outs...)
		}
	}
	gen(nil, n)
	return y.s
}

// fanChains: blocks of one source fanning out to 64 chains of 16 stages that
// fan back into one join, the join being the next block's source.
func fanChains(n int) *dag.Spec {
	const F, L = 64, 16
	rng := rand.New(rand.NewPCG(3, 3))
	y := newSynth("fan-chains", n)
	src := y.add(1)
	for len(y.s.Stages) < n {
		var tails []int
		for f := 0; f < F && len(y.s.Stages) < n-1; f++ {
			prev := src
			for k := 0; k < L && len(y.s.Stages) < n-1; k++ {
				prev = y.add(float64(1+rng.IntN(10)), prev)
			}
			tails = append(tails, prev)
		}
		src = y.add(1, tails...)
	}
	return y.s
}

var synthetic = []struct {
	name string
	gen  func(int) *dag.Spec
}{{"layered", layered}, {"wavefront", wavefront}, {"series-parallel", seriesParallel}, {"fan-chains", fanChains}}

// BenchmarkBuild plans synthetic DAGs of 1k, 10k and 100k stages (1M too
// when the -bench pattern names it, e.g. -bench 'Build/.*/1M'), reporting
// ns/stage and B/stage.
func BenchmarkBuild(b *testing.B) {
	pattern := ""
	if f := flag.Lookup("test.bench"); f != nil {
		pattern = f.Value.String()
	}
	for _, g := range synthetic {
		for _, size := range []struct {
			label string
			n     int
		}{{"1k", 1000}, {"10k", 10000}, {"100k", 100000}, {"1M", 1000000}} {
			b.Run(g.name+"/"+size.label, func(b *testing.B) {
				if size.n >= 1000000 && !strings.Contains(pattern, "1M") {
					b.Skip("1M stages: name 1M in -bench to run it")
				}
				s := g.gen(size.n)
				var p *Plan
				var ms0, ms1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms0)
				b.ResetTimer()
				for b.Loop() {
					var err error
					if p, err = Build(s, Options{}); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				runtime.ReadMemStats(&ms1)
				n := float64(len(s.Stages))
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/stage")
				b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/n, "B/stage")
				b.ReportMetric(float64(p.Stats.Streams), "streams")
				b.ReportMetric(float64(p.Stats.ReducedEdges)/n, "edges/stage")
			})
		}
	}
}

// TestSyntheticPlansVerify: the benchmark graphs plan to verified,
// optimal plans at a small size.
func TestSyntheticPlansVerify(t *testing.T) {
	for _, g := range synthetic {
		s := g.gen(3000)
		if len(s.Stages) != 3000 {
			t.Fatalf("%s: %d stages", g.name, len(s.Stages))
		}
		p := build(t, s, Options{})
		st := p.Stats
		if st.Waits > st.LowerBoundWaits || st.IdealMakespanUS != st.CriticalPathUS {
			t.Errorf("%s: %s", g.name, p.StatsLine())
		}
		t.Logf("%s: %s", g.name, p.StatsLine())
	}
}
