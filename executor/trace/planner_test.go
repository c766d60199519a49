package trace_test

import (
	"bytes"
	"flag"
	"math"
	"path/filepath"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/trace"
	"github.com/dagrun/dagrun/executor/trace/tracepng"
	"github.com/dagrun/dagrun/planner"
)

// TestIdealMatchesPlannerStats plans every spec in the repository with every
// strategy and checks that Ideal's makespan is the planner's
// Stats.IdealMakespanUS, and that the timeline writes.
func TestIdealMatchesPlannerStats(t *testing.T) {
	var files []string
	for _, pat := range []string{"../../specs/*/*.yaml", "../../specs/*.yaml"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Skip("no specs under ../../specs")
	}
	planned := 0
	for _, file := range files {
		s, err := dag.LoadFile(file)
		if err != nil {
			continue // racy or deliberately broken examples are other tests' business
		}
		for _, strategy := range []planner.Strategy{"", "naive", "round-robin", "single"} {
			p, err := planner.Build(s, planner.Options{Strategy: strategy})
			if err != nil {
				continue
			}
			planned++
			spans := trace.Ideal(p)
			got, want := trace.Makespan(spans), p.Stats.IdealMakespanUS
			if math.Abs(got-want) > 1e-9*math.Max(1, want) {
				t.Errorf("%s (%s): Ideal makespan %g µs, plan stats say %g µs", file, p.Strategy, got, want)
			}
			if len(spans) != len(p.Stages) {
				t.Errorf("%s (%s): %d spans for %d stages", file, p.Strategy, len(spans), len(p.Stages))
			}
			if err := trace.FromPlan(p, spans).WriteChromeTrace(&bytes.Buffer{}); err != nil {
				t.Errorf("%s (%s): %v", file, p.Strategy, err)
			}
		}
	}
	if planned == 0 {
		t.Skip("no spec could be planned")
	}
	t.Logf("%d plans from %d specs", planned, len(files))
}

// sharedGraphs holds the timed model graphs (specs/models/graphs/README.md).
const sharedGraphs = "../../specs/models/graphs"

// TestIdealMatchesPlannerStatsModels does the same for the real model
// graphs, when they are there; -trace.pngdir also draws each default plan.
func TestIdealMatchesPlannerStatsModels(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(sharedGraphs, "*.json"))
	if len(files) == 0 {
		t.Skipf("no model graphs under %s", sharedGraphs)
	}
	for _, file := range files {
		g, err := dag.ReadGraphFile(file)
		if err != nil {
			t.Fatal(err)
		}
		s, err := dag.ImportGraph(g, dag.ImportOptions{})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		p, err := planner.Build(s, planner.Options{})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		tl := trace.FromPlan(p, trace.Ideal(p))
		got, want := trace.Makespan(tl.Spans), p.Stats.IdealMakespanUS
		if math.Abs(got-want) > 1e-9*math.Max(1, want) {
			t.Errorf("%s: Ideal makespan %g µs, plan stats say %g µs", file, got, want)
		}
		if len(tl.Flows) > p.Stats.Waits {
			t.Errorf("%s: %d flows, plan has %d waits", file, len(tl.Flows), p.Stats.Waits)
		}
		if dir := *pngDir; dir != "" {
			name := filepath.Base(file)
			name = name[:len(name)-len(filepath.Ext(name))]
			if err := tracepng.Write(tl, filepath.Join(dir, name+".png"), 0, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// -trace.pngdir DIR draws each model's default plan there, for a person
// to look at.
var pngDir = flag.String("trace.pngdir", "", "directory to write the model graphs' timeline PNGs into")

// TestIdealZeroDurations: stages without duration_us take 1 µs in the
// timeline, as in the planner's stats, so both give the same makespan.
func TestIdealZeroDurations(t *testing.T) {
	s := &dag.Spec{Name: "no-durations", Sync: dag.SyncAuto,
		Buffers: []dag.BufferSpec{{Name: "x", Bytes: 64}, {Name: "y", Bytes: 64}},
		Stages: []dag.StageSpec{
			{Name: "a", Kernel: dag.BuiltinSpin, Writes: []dag.Access{{Buffer: "x", Bytes: 64}}},
			{Name: "b", Kernel: dag.BuiltinSpin, Reads: []dag.Access{{Buffer: "x", Bytes: 64}}, Writes: []dag.Access{{Buffer: "y", Bytes: 64}}},
		}}
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spans := trace.Ideal(p)
	if got, want := trace.Makespan(spans), p.Stats.IdealMakespanUS; got != want || want != 2 {
		t.Errorf("Ideal makespan %g µs, plan stats %g µs, want 2 for both", got, want)
	}
	if len(spans) != 2 || spans[1].StartUS != 1 || spans[1].EndUS != 2 {
		t.Errorf("spans %+v, want b at [1, 2] µs", spans)
	}
}
