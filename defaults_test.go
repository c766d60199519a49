package dagrun_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/synth"
)

// Plan caps the default strategy's streams at DefaultMaxStreams unless the
// options or the spec set a cap, says so when the cap binds, and plans
// uncapped with MaxStreams: Uncapped.
func TestDefaultMaxStreams(t *testing.T) {
	s, err := dagrun.Load("specs/models/nasnetalarge.yaml") // 159 chains uncapped
	if err != nil {
		t.Fatal(err)
	}
	plan := func(o dagrun.PlanOptions) *dagrun.StreamPlan { return mustPlanSpec(t, s, o) }
	noted := func(p *dagrun.StreamPlan) bool { return defaultCapNote(p) != "" }
	uncapped := plan(dagrun.PlanOptions{MaxStreams: dagrun.Uncapped})
	if uncapped.Stats.Streams != 159 || noted(uncapped) {
		t.Fatalf("uncapped: %d streams, notes %q", uncapped.Stats.Streams, uncapped.Notes)
	}
	def := plan(dagrun.PlanOptions{})
	switch dagrun.DefaultMaxStreams {
	case 0:
		if def.Stats.Streams != 159 || noted(def) {
			t.Errorf("no default cap: %d streams, notes %q", def.Stats.Streams, def.Notes)
		}
	default:
		if def.Stats.Streams != dagrun.DefaultMaxStreams || !noted(def) {
			t.Errorf("default: %d streams, notes %q; want %d and a note", def.Stats.Streams, def.Notes, dagrun.DefaultMaxStreams)
		}
	}
	if p := plan(dagrun.PlanOptions{MaxStreams: 4}); p.Stats.Streams != 4 || noted(p) {
		t.Errorf("--max-streams 4: %d streams, notes %q", p.Stats.Streams, p.Notes)
	}
	spec := *s
	spec.Options.MaxStreams = 32
	if p, err := dagrun.Plan(&spec, dagrun.PlanOptions{}); err != nil || p.Stats.Streams != 32 || noted(p) {
		t.Errorf("the spec's max_streams 32: %v streams, %v", p.Stats.Streams, err)
	}
	if p := plan(dagrun.PlanOptions{Strategy: dagrun.StrategyHazardDAG}); p.Stats.Streams != 159 || noted(p) {
		t.Errorf("hazard-dag: %d streams, notes %q; want its own streams, no cap", p.Stats.Streams, p.Notes)
	}
	// A spec narrower than the cap: no note.
	r, err := dagrun.Load("specs/models/resnet50.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := dagrun.Plan(r, dagrun.PlanOptions{}); err != nil || noted(p) {
		t.Errorf("resnet50 (5 chains): %v, notes %q", err, p.Notes)
	}
}

// The default cap's note states the cap's cost against the spec's own
// critical path, also where memory_budget auto's orders lengthened the
// critical path of the capped plan: those orders are the cap's doing
// (uncapped, auto needs none of them), so the note does not call the
// capped plan as fast as uncapped.
func TestDefaultCapNoteUnderBudgetAuto(t *testing.T) {
	s := synth.Wavefront(200, 0) // 15 wide; uncapped 135 µs, capped at 8 310 µs
	plan := func(o dagrun.PlanOptions) *dagrun.StreamPlan { return mustPlanSpec(t, s, o) }
	capNote := defaultCapNote
	uncapped := plan(dagrun.PlanOptions{MaxStreams: dagrun.Uncapped, MemoryBudget: dagrun.BudgetAuto})
	none := plan(dagrun.PlanOptions{MemoryBudget: dagrun.BudgetNone})
	auto := plan(dagrun.PlanOptions{MemoryBudget: dagrun.BudgetAuto})
	if len(auto.Budget) == 0 {
		t.Fatalf("auto at the default cap took no budget step (notes %q): the case this test is for is gone", auto.Notes)
	}
	if auto.Stats.IdealMakespanUS <= uncapped.Stats.IdealMakespanUS*1.0005 {
		t.Fatalf("auto at the default cap: ideal makespan %.1f µs, uncapped %.1f: the cap costs nothing here", auto.Stats.IdealMakespanUS, uncapped.Stats.IdealMakespanUS)
	}
	for _, p := range []*dagrun.StreamPlan{none, auto} {
		n := capNote(p)
		if n == "" {
			t.Fatalf("no cap note: %q", p.Notes)
		}
		if strings.Contains(n, "the same ideal makespan as uncapped") {
			t.Errorf("ideal makespan %.1f µs at the cap against %.1f uncapped, yet the note says %q", p.Stats.IdealMakespanUS, uncapped.Stats.IdealMakespanUS, n)
		}
		if want := fmt.Sprintf("the critical path's %.1f µs", none.Stats.CriticalPathUS); !strings.Contains(n, want) {
			t.Errorf("note %q: want %q (the spec's critical path)", n, want)
		}
		if want := fmt.Sprintf("(the uncapped plan has %d)", uncapped.Stats.Streams); !strings.Contains(n, want) {
			t.Errorf("note %q: want %q", n, want)
		}
	}
}

// mustPlanSpec plans s with o, failing the test on an error.
func mustPlanSpec(t *testing.T, s *dagrun.Spec, o dagrun.PlanOptions) *dagrun.StreamPlan {
	t.Helper()
	p, err := dagrun.Plan(s, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// defaultCapNote is p's note on the default stream cap, "" if none.
func defaultCapNote(p *dagrun.StreamPlan) string {
	for _, n := range p.Notes {
		if strings.Contains(n, "capped at") && strings.Contains(n, "by default") {
			return n
		}
	}
	return ""
}

// PlanOptions.MaxStreams has one meaning in dagrun.Plan and in
// planner.Build (the same struct): 0 is the default cap, Uncapped no cap;
// the note of a plan the default cap folded names the setting in the
// command line's words and Go's.
func TestMaxStreamsOneMeaning(t *testing.T) {
	s, err := dagrun.Load("specs/models/nasnetalarge.yaml") // 159 chains uncapped
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		max, streams int
		noted        bool
	}{{0, dagrun.DefaultMaxStreams, true}, {dagrun.Uncapped, 159, false}, {-7, 159, false}, {12, 12, false}} {
		o := dagrun.PlanOptions{MaxStreams: c.max}
		viaPlan := mustPlanSpec(t, s, o)
		viaBuild, err := planner.Build(s, o)
		if err != nil {
			t.Fatal(err)
		}
		for who, p := range map[string]*dagrun.StreamPlan{"dagrun.Plan": viaPlan, "planner.Build": viaBuild} {
			note := defaultCapNote(p)
			if p.Stats.Streams != c.streams || (note != "") != c.noted {
				t.Errorf("%s, MaxStreams %d: %d streams, note %q; want %d streams, a note %v", who, c.max, p.Stats.Streams, note, c.streams, c.noted)
			}
			if c.noted && (!strings.Contains(note, "--max-streams 0") || !strings.Contains(note, "MaxStreams: dagrun.Uncapped")) {
				t.Errorf("%s: note %q; want the command line's --max-streams 0 and Go's dagrun.Uncapped", who, note)
			}
		}
	}
}
