package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/synth"
)

// streams renders the assignment as "stage:stream ..." in declaration order.
func streams(st *state) string {
	out := ""
	for v, sg := range st.spec.Stages {
		if v > 0 {
			out += " "
		}
		out += sg.Name + ":" + st.names[st.stream[v]]
	}
	return out
}

func fanOutIn(width int) *dag.Spec {
	var stages []dag.StageSpec
	stages = append(stages, stage("src", writes("x"), dur(1)))
	var outs []string
	for i := 0; i < width; i++ {
		b := fmt.Sprintf("y%d", i)
		outs = append(outs, b)
		stages = append(stages, stage(fmt.Sprintf("b%d", i), reads("x"), writes(b), dur(float64(10+i))))
	}
	stages = append(stages, stage("sink", reads(outs...), dur(1)))
	return spec(stages...)
}

func TestAssign(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *dag.Spec
		o    Options
		want string
	}{
		{"chain on one stream", spec(stage("a", writes("x")), stage("b", reads("x"), writes("y")), stage("c", reads("y"))), Options{},
			"a:s0 b:s0 c:s0"},
		{"independent stages spread", spec(stage("a", writes("x")), stage("b", writes("y")), stage("c", writes("z"))), Options{},
			"a:s0 b:s1 c:s2"},
		{"fan-out fan-in", fanOutIn(3), Options{}, "src:s0 b0:s0 b1:s1 b2:s2 sink:s0"},
		{"single", fanOutIn(3), Options{Strategy: "single"}, "src:s0 b0:s0 b1:s0 b2:s0 sink:s0"},
		{"round-robin by level", fanOutIn(3), Options{Strategy: "round-robin"}, "src:s0 b0:s0 b1:s1 b2:s2 sink:s0"},
		{"round-robin capped", fanOutIn(5), Options{Strategy: "round-robin", MaxStreams: 2}, "src:s0 b0:s0 b1:s1 b2:s0 b3:s1 b4:s0 sink:s0"},
		{"pins share a stream", spec(stage("a", writes("x"), on("io")), stage("b", writes("y")), stage("c", reads("y"), on("io"))), Options{},
			"a:io b:s1 c:io"},
		{"pins under single", spec(stage("a", writes("x"), on("io")), stage("b", writes("y")), stage("c", reads("x", "y"))), Options{Strategy: "single"},
			"a:io b:s1 c:s1"},
		{"different pins never merge", spec(stage("a", writes("x"), on("p")), stage("b", reads("x"), writes("y")), stage("c", reads("y"), on("q"))), Options{},
			"a:p b:p c:q"},
		{"pin named like a free stream", spec(stage("a", writes("x")), stage("b", writes("y"), on("s0"))), Options{},
			"a:s0_1 b:s0"},
		{"cap keeps the critical path", fanOutIn(4), Options{MaxStreams: 2}, "src:s0 b0:s0 b1:s1 b2:s1 b3:s0 sink:s0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := upTo(t, tc.s, tc.o, "assign")
			if got := streams(st); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			build(t, tc.s, tc.o) // and the whole plan verifies
		})
	}
}

// TestAssignCapKeepsCriticalMatches: u → v is the critical path (100 µs
// each); x also feeds v and u also feeds w, so the maximum matching
// (u → w, x → v) splits it; y1 and y2 are independent. Uncapped, or with
// a cap of the 4 chains that matching gives, u and v run on different
// streams; under a cap of 3 the critical path's matches are fixed before
// matching, and no augmenting path may re-match them: u and v share a
// stream, whatever else the fold does.
func TestAssignCapKeepsCriticalMatches(t *testing.T) {
	s := spec(
		stage("u", writes("a"), dur(100)),
		stage("x", writes("b"), dur(1)),
		stage("v", reads("a", "b"), dur(100)),
		stage("w", reads("a"), dur(1)),
		stage("y1", writes("c"), dur(1)),
		stage("y2", writes("d"), dur(1)),
	)
	for _, c := range []struct {
		cap  int
		same bool // u and v on one stream
	}{{0, false}, {4, false}, {3, true}, {2, true}} {
		p := build(t, s, Options{MaxStreams: c.cap})
		if c.cap > 0 && p.Stats.Streams > c.cap {
			t.Errorf("cap %d: %d streams", c.cap, p.Stats.Streams)
		}
		if got := streamOf(p, "u") == streamOf(p, "v"); got != c.same {
			t.Errorf("cap %d: u on %s and v on %s, want them on one stream: %v", c.cap, streamOf(p, "u"), streamOf(p, "v"), c.same)
		}
	}
}

func TestAssignCap(t *testing.T) {
	s := loadGraph(t, "nasnetalarge")
	full := build(t, s, Options{})
	for _, cap := range []int{1, 2, 4, 8, 16} {
		p := build(t, s, Options{MaxStreams: cap})
		if p.Stats.Streams > cap {
			t.Errorf("cap %d: %d streams", cap, p.Stats.Streams)
		}
		if p.Stats.IdealMakespanUS < full.Stats.CriticalPathUS-1e-9 {
			t.Errorf("cap %d: ideal makespan %.1f below the critical path %.1f", cap, p.Stats.IdealMakespanUS, full.Stats.CriticalPathUS)
		}
		t.Logf("cap %2d: %s (%.0f%% of the critical-path bound)", cap, p.StatsLine(), 100*full.Stats.CriticalPathUS/p.Stats.IdealMakespanUS)
	}
	// The critical path stays on one stream.
	st := upTo(t, s, Options{MaxStreams: 8}, "assign")
	cp := st.criticalPath()
	for _, v := range cp {
		if st.stream[v] != st.stream[cp[0]] {
			t.Fatalf("critical path split over streams %s and %s", st.names[st.stream[cp[0]]], st.names[st.stream[v]])
		}
	}
}

func TestSpecOptionsAreDefaults(t *testing.T) {
	s := fanOutIn(6)
	s.Options = dag.Options{Strategy: "round-robin", MaxStreams: 2}
	if p := build(t, s, Options{}); p.Strategy != "round-robin" || p.Stats.Streams != 2 {
		t.Errorf("spec options: strategy %s, %d streams", p.Strategy, p.Stats.Streams)
	}
	if p := build(t, s, Options{Strategy: "default", MaxStreams: -1}); p.Strategy != "default" || p.Stats.Streams != 6 {
		t.Errorf("overridden: strategy %s, %d streams", p.Strategy, p.Stats.Streams)
	}
}

// Under the hazard-dag strategy pins win (free stages chain only onto free
// streams), and a cap it does not apply is a note.
func TestHazardDAGPinsAndCap(t *testing.T) {
	s := spec(stage("a", writes("x"), on("p")), stage("b", reads("x"), writes("y")), stage("c", reads("y"), writes("z"), on("p")), stage("d", reads("y")))
	p := build(t, s, Options{Strategy: StrategyHazardDAG, MaxStreams: 1})
	if streamOf(p, "a") != "p" || streamOf(p, "c") != "p" || streamOf(p, "b") == "p" || streamOf(p, "d") != streamOf(p, "b") {
		t.Errorf("streams a=%s b=%s c=%s d=%s, want a and c on p, b and d on a free stream", streamOf(p, "a"), streamOf(p, "b"), streamOf(p, "c"), streamOf(p, "d"))
	}
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "a stream cap of 1 (--max-streams, or the spec's max_streams) is not applied") {
		t.Errorf("notes %q", p.Notes)
	}
	if q := build(t, s, Options{Strategy: StrategyHazardDAG}); len(q.Notes) != 0 {
		t.Errorf("uncapped: notes %q", q.Notes)
	}
}

// TestFoldBoundNote: when the local search after the greedy fold is past
// its bound, the note says what that may cost: the fold's ideal makespan
// over the critical path, in µs.
func TestFoldBoundNote(t *testing.T) {
	s := loadGraph(t, "googlenet")
	defer func(b int) { foldBudget = b }(foldBudget)
	foldBudget = 1
	p := build(t, s, Options{MaxStreams: 4})
	note := strings.Join(p.Notes, "; ")
	cp := p.Stats.CriticalPathUS
	if !strings.Contains(note, "local search after the greedy fold is bounded") ||
		!strings.Contains(note, fmt.Sprintf("over the critical path of %.1f µs", cp)) || !strings.Contains(note, "its ideal makespan is ") {
		t.Errorf("notes %q; want the bounded search's cost against the critical path %.1f µs", note, cp)
	}
}

// TestFoldBoundNoteUnderBudget: under memory_budget the fold's note names
// the bound it measures against. A re-plan on new streams folds the spec
// with the budget's orders, whose critical path may be longer than the
// spec's own, and the note says so (wavefront 100: the step's re-plan is
// taken); a re-plan on the kept streams keeps the first plan's note,
// against the spec's own critical path, or the streams' floor where that
// is higher (layered 400).
func TestFoldBoundNoteUnderBudget(t *testing.T) {
	defer func(b int) { foldBudget = b }(foldBudget)
	foldBudget = 1
	for _, c := range []struct {
		shape string
		n     int
		kept  bool
	}{{"wavefront", 100, false}, {"layered", 400, true}} {
		s, err := synth.Shape(c.shape, c.n)
		if err != nil {
			t.Fatal(err)
		}
		p := build(t, s, Options{MaxStreams: 4, MemoryBudget: BudgetAuto})
		if len(p.Budget) == 0 || p.Budget[0].KeptStreams != c.kept {
			t.Fatalf("%s %d: steps %v: want one with kept streams %v, the case this test is for", c.shape, c.n, p.Budget, c.kept)
		}
		note := strings.Join(p.Notes, "; ")
		cp, of := p.Stats.CriticalPathUS, " of the spec with memory_budget's orders"
		if c.kept {
			cp, of = p.BudgetStart.CriticalPathUS, ""
		}
		want := fmt.Sprintf("over the critical path of %.1f µs%s", cp, of)
		if floor := workOf(s) / float64(p.Stats.Streams); floor > cp {
			want = fmt.Sprintf("over the %.1f µs that no plan on these %d streams goes below (their stages' %.1f µs of work over %d streams; the critical path%s is %.1f µs)",
				floor, p.Stats.Streams, workOf(s), p.Stats.Streams, of, cp)
		}
		if !strings.Contains(note, want) {
			t.Errorf("%s %d: notes %q; want %q", c.shape, c.n, note, want)
		}
	}
}

// TestFoldBoundNoteFloor: on a wide graph folded onto few streams the
// stages' work over the streams, not the critical path, is what no fold
// goes below, and the note measures the bounded search's cost against it.
// The bound is a true floor: the plan with the search run is not below it.
func TestFoldBoundNoteFloor(t *testing.T) {
	s := synth.Layered(400)
	searched := build(t, s, Options{MaxStreams: 4})
	defer func(b int) { foldBudget = b }(foldBudget)
	foldBudget = 1
	p := build(t, s, Options{MaxStreams: 4})
	floor := workOf(s) / float64(p.Stats.Streams)
	if floor <= p.Stats.CriticalPathUS {
		t.Fatalf("floor %.1f µs ≤ critical path %.1f µs: not the case this test is for", floor, p.Stats.CriticalPathUS)
	}
	if searched.Stats.IdealMakespanUS < floor-1e-6 {
		t.Errorf("the searched plan's ideal makespan %.1f µs is below the floor %.1f µs", searched.Stats.IdealMakespanUS, floor)
	}
	got := p.Stats.IdealMakespanUS
	want := fmt.Sprintf("its ideal makespan is %.1f µs, %.1f µs (%.1f%%) over the %.1f µs that no plan on these %d streams goes below", got, got-floor, 100*(got-floor)/floor, floor, p.Stats.Streams)
	if note := strings.Join(p.Notes, "; "); !strings.Contains(note, want) {
		t.Errorf("notes %q; want %q", note, want)
	}
}

// workOf is the sum of s's stages' durations as the planner counts them
// (CostUS), in µs.
func workOf(s *dag.Spec) float64 {
	w := 0.0
	for _, st := range s.Stages {
		w += plan.CostUS(st.DurationUS)
	}
	return w
}
