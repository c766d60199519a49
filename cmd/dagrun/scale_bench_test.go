package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/bench"
)

// BenchmarkPlanCommand runs the whole `dagrun plan --json SPEC` (load,
// hazards, every pass, verify, write) on the specs `dagrun bench scale
// --write` makes: the layered, wavefront and shared-read shapes and
// nasnetalarge copies chained, at 10k and 100k stages (1M too when the
// -bench pattern names it). It reports ns/stage and the bytes allocated per
// stage; run it with -cpuprofile or -memprofile to see where a phase goes.
func BenchmarkPlanCommand(b *testing.B) {
	pattern := ""
	if f := flag.Lookup("test.bench"); f != nil {
		pattern = f.Value.String()
	}
	shapes := []string{"layered", "wavefront", "shared-read", "nasnetalarge-chain"}
	for _, sh := range shapes {
		for _, size := range []struct {
			label string
			n     int
		}{{"10k", 10000}, {"100k", 100000}, {"1M", 1000000}} {
			b.Run(sh+"/"+size.label, func(b *testing.B) {
				if size.n >= 1000000 && !strings.Contains(pattern, "1M") {
					b.Skip("1M stages: name 1M in -bench to run it")
				}
				var s *dagrun.Spec
				var err error
				if sh == "nasnetalarge-chain" {
					s, err = bench.ChainSpec("../../specs/models/graphs/nasnetalarge.json", 0, size.n)
				} else {
					s, err = bench.ScaleSpec(sh, size.n)
				}
				if err != nil {
					b.Fatal(err)
				}
				var buf bytes.Buffer
				if err := dagrun.WriteSpec(&buf, s); err != nil {
					b.Fatal(err)
				}
				stages := len(s.Stages)
				s = nil
				path := filepath.Join(b.TempDir(), sh+".yaml")
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					b.Fatal(err)
				}
				buf = bytes.Buffer{}
				var ms0, ms1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms0)
				b.ResetTimer()
				for b.Loop() {
					if err := run(context.Background(), []string{"plan", "--json", path}, io.Discard, io.Discard); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				runtime.ReadMemStats(&ms1)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(stages), "ns/stage")
				b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/float64(stages), "B/stage")
			})
		}
	}
}
