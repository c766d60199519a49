package dag

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
)

// bigSpec builds a layered spec of n mix stages over n/4 buffers, each stage
// reading two buffers and writing one byte range of a third.
func bigSpec(n int) *Spec {
	nb := max(n/4, 3)
	s := &Spec{Version: 1, Name: "big"}
	for i := range nb {
		s.Buffers = append(s.Buffers, BufferSpec{Name: fmt.Sprintf("t%d", i), Bytes: 4096})
	}
	for i := range n {
		st := StageSpec{
			Name:       fmt.Sprintf("s%d", i),
			Kernel:     BuiltinMix,
			Args:       map[string]any{"spin_us": 1.5, "max_words": 64},
			Reads:      []Access{{Buffer: fmt.Sprintf("t%d", i%nb)}, {Buffer: fmt.Sprintf("t%d", (i*7+1)%nb), Offset: 1024, Bytes: 1024}},
			Writes:     []Access{{Buffer: fmt.Sprintf("t%d", (i+1)%nb), Offset: int64(i%4) * 1024, Bytes: 1024}},
			DurationUS: 2,
		}
		if i > 0 && i%10 == 0 {
			st.After = []string{fmt.Sprintf("s%d", i-1)}
		}
		s.Stages = append(s.Stages, st)
	}
	return s
}

func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		var buf bytes.Buffer
		if err := WriteYAML(&buf, bigSpec(n)); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(buf.Len()))
			for b.Loop() {
				if _, err := Load(buf.Bytes(), "big.yaml", ""); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/stage")
		})
	}
}

func BenchmarkWriteYAML(b *testing.B) {
	s := bigSpec(10000)
	for b.Loop() {
		if err := WriteYAML(&bytes.Buffer{}, s); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRoundTripModelGraphs imports each model graph of specs/models/graphs
// (ImportGraph), writes it with WriteYAML, loads it back and checks the
// round trip: the path the importer's specs take.
func TestRoundTripModelGraphs(t *testing.T) {
	files, _ := filepath.Glob("../specs/models/graphs/*.json")
	if len(files) == 0 {
		t.Skip("no specs/models/graphs here")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			g, err := ReadGraphFile(f)
			if err != nil {
				t.Fatal(err)
			}
			s, err := ImportGraph(g, ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WriteYAML(&buf, s); err != nil {
				t.Fatal(err)
			}
			s2, err := Load(buf.Bytes(), filepath.Base(f)+".yaml", "")
			if err != nil {
				t.Fatal(err)
			}
			if len(s2.Stages) != len(s.Stages) || len(s2.Buffers) != len(s.Buffers) {
				t.Fatalf("lost stages or buffers: %v vs %v", s2, s)
			}
			roundTrip(t, s2, "")
		})
	}
}
