package planner

import (
	"math"
	"testing"
)

// Reference figures from specs/models/graphs/README.md.
var graphRefs = []struct {
	model               string
	reduced, chains, lb int
	criticalPathUS      float64
}{
	{"inception_v3", 347, 36, 70, 957},
	{"googlenet", 222, 28, 54, 394},
	{"resnet50", 177, 5, 8, 848},
	{"densenet121", 429, 1, 0, 1970},
	{"squeezenet1_1", 72, 9, 16, 261},
	{"mobilenet_v3_large", 185, 1, 0, 571},
	{"nasnetalarge", 1441, 159, 334, 1552},
	{"inception_v4", 697, 56, 110, 1615},
}

func TestModelGraphs(t *testing.T) {
	for _, ref := range graphRefs {
		t.Run(ref.model, func(t *testing.T) {
			s := loadGraph(t, ref.model)
			p := build(t, s, Options{MaxStreams: Uncapped})
			st := p.Stats
			t.Logf("%s: %s", ref.model, p.StatsLine())
			if st.ReducedEdges != ref.reduced {
				t.Errorf("reduced edges = %d, want %d", st.ReducedEdges, ref.reduced)
			}
			if st.Streams != ref.chains {
				t.Errorf("streams = %d, want %d chains", st.Streams, ref.chains)
			}
			if st.LowerBoundWaits != ref.lb {
				t.Errorf("lower bound = %d, want %d", st.LowerBoundWaits, ref.lb)
			}
			if st.Waits > ref.lb {
				t.Errorf("waits = %d > lower bound %d", st.Waits, ref.lb)
			}
			if math.Abs(st.CriticalPathUS-ref.criticalPathUS) > 1 {
				t.Errorf("critical path = %.1f µs, want ≈ %.0f", st.CriticalPathUS, ref.criticalPathUS)
			}
			if math.Abs(st.IdealMakespanUS-st.CriticalPathUS) > 1e-6 {
				t.Errorf("ideal makespan %.3f ≠ critical path %.3f", st.IdealMakespanUS, st.CriticalPathUS)
			}
		})
	}
}
