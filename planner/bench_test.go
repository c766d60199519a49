package planner

import (
	"errors"
	"flag"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/synth"
	"github.com/dagrun/dagrun/verify"
)

// synthetic are the synth package's shapes for scaling benchmarks (the
// wavefront 32 wide, as BenchmarkBuild has always measured it).
var synthetic = []struct {
	name string
	gen  func(int) *dag.Spec
}{{"layered", synth.Layered}, {"wavefront", func(n int) *dag.Spec { return synth.Wavefront(n, 32) }},
	{"series-parallel", synth.SeriesParallel}, {"fan-chains", synth.FanChains}}

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
				var p *plan.Plan
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
				reportPerStage(b, len(s.Stages), &ms0, &ms1)
				b.ReportMetric(float64(p.Stats.Streams), "streams")
				b.ReportMetric(float64(p.Stats.ReducedEdges)/float64(len(s.Stages)), "edges/stage")
			})
		}
	}
}

// BenchmarkScale plans and verifies the scale shapes (synth.Shapes:
// layered, the square wavefront, shared-read, …) and chains of copies of
// the nasnetalarge graph at 10k, 100k and 1M stages (1M only when the
// -bench pattern names it), reporting ns/stage and B/stage of Build and of
// Verify apart. The plans are uncapped: one Verify refuses for its work
// (WorkBoundError: layered and shared-read at 100k, thousands of streams)
// is skipped, saying how soon it was refused.
func BenchmarkScale(b *testing.B) {
	pattern := ""
	if f := flag.Lookup("test.bench"); f != nil {
		pattern = f.Value.String()
	}
	gens := map[string]func(int) *dag.Spec{}
	names := slices.Clone(synth.Shapes)
	for _, sh := range synth.Shapes {
		gens[sh] = func(n int) *dag.Spec { s, _ := synth.Shape(sh, n); return s }
	}
	names = append(names, "nasnetalarge-chain")
	gens["nasnetalarge-chain"] = func(n int) *dag.Spec {
		m := loadGraph(b, "nasnetalarge")
		s, err := synth.Chain(m, (n+1+len(m.Stages))/(len(m.Stages)+1))
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	for _, name := range names {
		for _, size := range []struct {
			label string
			n     int
		}{{"10k", 10000}, {"100k", 100000}, {"1M", 1000000}} {
			for _, phase := range []string{"build", "verify"} {
				b.Run(name+"/"+size.label+"/"+phase, func(b *testing.B) {
					if size.n >= 1000000 && !strings.Contains(pattern, "1M") {
						b.Skip("1M stages: name 1M in -bench to run it")
					}
					s := gens[name](size.n)
					var p *plan.Plan
					var err error
					if phase == "verify" {
						if p, err = Build(s, Options{}); err != nil {
							b.Fatal(err)
						}
					}
					var ms0, ms1 runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&ms0)
					b.ResetTimer()
					for b.Loop() {
						if phase == "build" {
							p, err = Build(s, Options{})
						} else {
							err = verify.Verify(p)
						}
						if cb := (*verify.WorkBoundError)(nil); errors.As(err, &cb) {
							b.Skipf("refused in %v: %v", b.Elapsed(), err) // uncapped plans of thousands of streams
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					runtime.ReadMemStats(&ms1)
					reportPerStage(b, len(s.Stages), &ms0, &ms1)
					b.ReportMetric(float64(p.Stats.Streams), "streams")
				})
			}
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
		p := build(t, s, Options{MaxStreams: Uncapped})
		st := p.Stats
		if st.Waits > st.LowerBoundWaits || st.IdealMakespanUS != st.CriticalPathUS {
			t.Errorf("%s: %s", g.name, p.StatsLine())
		}
		t.Logf("%s: %s", g.name, p.StatsLine())
	}
}
