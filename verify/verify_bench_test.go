package verify_test

import (
	"errors"
	"flag"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/synth"
	"github.com/dagrun/dagrun/verify"
)

// verifyBenchStreams is the stream cap of the plans BenchmarkVerifyScale
// verifies: the command's default (dagrun.DefaultMaxStreams).
const verifyBenchStreams = 8

// BenchmarkVerifyScale verifies the plans a user gets by default (at most 8
// streams) of the scale shapes (synth.Shapes) and of chained nasnetalarge
// copies, plus the uncapped shared-read plan (one stream per reader), at
// 10k, 100k and 1M stages (1M only when the -bench pattern names it),
// reporting ns/stage, B/stage (allocated by Verify) and the plan's streams;
// a plan Verify refuses for its work (WorkBoundError: the uncapped one at
// 100k) is skipped, saying how soon it was refused.
func BenchmarkVerifyScale(b *testing.B) {
	pattern := ""
	if f := flag.Lookup("test.bench"); f != nil {
		pattern = f.Value.String()
	}
	type bench struct {
		name       string
		gen        func(int) *dag.Spec
		maxStreams int
	}
	var benches []bench
	for _, sh := range synth.Shapes {
		benches = append(benches, bench{sh, func(n int) *dag.Spec { s, _ := synth.Shape(sh, n); return s }, verifyBenchStreams})
	}
	benches = append(benches,
		bench{"nasnetalarge-chain", func(n int) *dag.Spec {
			m := loadGraph(b, "nasnetalarge")
			s, err := synth.Chain(m, (n+1+len(m.Stages))/(len(m.Stages)+1))
			if err != nil {
				b.Fatal(err)
			}
			return s
		}, verifyBenchStreams},
		bench{"shared-read-uncapped", synth.SharedRead, 0})
	for _, bc := range benches {
		for _, size := range []struct {
			label string
			n     int
		}{{"10k", 10000}, {"100k", 100000}, {"1M", 1000000}} {
			b.Run(bc.name+"/"+size.label, func(b *testing.B) {
				if size.n >= 1000000 && !strings.Contains(pattern, "1M") {
					b.Skip("1M stages: name 1M in -bench to run it")
				}
				s := bc.gen(size.n)
				p, err := planner.Build(s, planner.Options{MaxStreams: bc.maxStreams})
				if err != nil {
					b.Fatal(err)
				}
				var ms0, ms1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms0)
				b.ResetTimer()
				for b.Loop() {
					err := verify.Verify(p)
					if wb := (*verify.WorkBoundError)(nil); errors.As(err, &wb) {
						b.Skipf("refused in %v: %v", b.Elapsed(), err) // uncapped plans of thousands of streams
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				runtime.ReadMemStats(&ms1)
				reportPerStage(b, len(s.Stages), &ms0, &ms1)
				b.ReportMetric(float64(len(p.Streams)), "streams")
			})
		}
	}
}

// BenchmarkVerifyRules verifies the fixed twins of specs/rules/ (rulesSpecs):
// small plans (a few stages) whose order comes mostly from CUDA's implicit
// rules (legacy default stream, host returns, copies, host functions, host
// threads, graph capture), where Verify's fixed cost per plan shows.
func BenchmarkVerifyRules(b *testing.B) {
	for _, c := range rulesSpecs {
		b.Run(c.name, func(b *testing.B) {
			s, err := dag.LoadFile(filepath.Join("..", "specs", "rules", c.name+"-fixed.yaml"))
			if err != nil {
				b.Fatal(err)
			}
			p, err := planner.Build(s, planner.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := verify.Verify(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
