package planner

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// upTo prepares s and runs the passes up to and including last, verifying
// the plan (once one exists) before and after last: verify → pass → verify.
func upTo(t testing.TB, s *dag.Spec, o Options, last string) *state {
	t.Helper()
	st, err := newState(s, o, nil, nil)
	if err != nil {
		t.Fatalf("newState: %v", err)
	}
	for _, ps := range passes {
		if st.manual && !ps.required {
			continue
		}
		if ps.name == last && st.plan != nil && !st.manual {
			if err := verify.Verify(st.plan); err != nil {
				t.Fatalf("before pass %q: %v", last, err)
			}
		}
		if err := st.run(ps); err != nil {
			t.Fatal(err)
		}
		if ps.name == last {
			if st.plan != nil && !st.manual {
				if err := verify.Verify(st.plan); err != nil {
					t.Fatalf("after pass %q: %v", last, err)
				}
			}
			return st
		}
	}
	t.Fatalf("no pass %q", last)
	return nil
}

func TestPassOrder(t *testing.T) {
	at := map[string]int{}
	for i, p := range passes {
		if _, dup := at[p.name]; dup {
			t.Errorf("pass %q listed twice", p.name)
		}
		at[p.name] = i
	}
	for _, c := range passOrder {
		b, ok1 := at[c.before]
		a, ok2 := at[c.after]
		if !ok1 || !ok2 {
			t.Errorf("constraint %s < %s names an unknown pass", c.before, c.after)
			continue
		}
		if b >= a {
			t.Errorf("pass %q must run before %q: %s", c.before, c.after, c.why)
		}
	}
	if got := Passes(); !slices.Equal(got, []string{"reduce", "assign", "sync", "lifetimes", "arena", "stats", "iterate"}) {
		t.Errorf("Passes() = %v", got)
	}
}

func TestPassPanicIsNamed(t *testing.T) {
	saved := passes
	defer func() { passes = saved }()
	passes = slices.Clone(passes)
	passes[1].fn = func(*state) error { panic("boom") }
	_, err := Build(spec(stage("a", writes("x"))), Options{})
	if err == nil || !strings.Contains(err.Error(), `pass "assign" panicked: boom`) {
		t.Fatalf("err = %v", err)
	}
}

func TestBuildErrors(t *testing.T) {
	s := spec(stage("a", writes("x")))
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Strategy: "fastest"}, `unknown strategy "fastest"`},
		{Options{DumpAfter: "frobnicate"}, `no such pass`},
	} {
		if _, err := Build(s, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.o, err, tc.want)
		}
	}
	cyc := spec(stage("a", writes("x"), after("b")), stage("b", reads("x")))
	if _, err := Build(cyc, Options{}); err == nil || !strings.Contains(err.Error(), "cycle through stages a, b") {
		t.Errorf("cycle: err = %v", err)
	}
}

func TestDumpAfter(t *testing.T) {
	s := spec(stage("a", writes("x")), stage("b", reads("x")), stage("c", reads("x"), writes("y")), stage("d", reads("x", "y")))
	for _, tc := range []struct{ pass, want string }{
		{"reduce", "reduced edges: 3 of 3\na -> b\na -> c\nc -> d\n"},
		{"assign", "a: s0\nb: s0\nc: s1\nd: s1\n"},
		{"sync", "launch  b"},
		{"stats", "streams=2 waits=1"},
	} {
		var buf bytes.Buffer
		if _, err := Build(s, Options{DumpAfter: tc.pass, Dump: &buf}); err != nil {
			t.Fatal(err)
		}
		if got := buf.String(); !strings.HasPrefix(got, `# after pass "`+tc.pass+`"`) || !strings.Contains(got, tc.want) {
			t.Errorf("dump after %s:\n%s\nwant it to contain %q", tc.pass, got, tc.want)
		}
	}
}

// TestDumpAfterAssignDevices: with several devices the assign dump names
// each device stream's device (host stages stay "host").
func TestDumpAfterAssignDevices(t *testing.T) {
	s := loadSpec(t, `version: 1
devices: 2
buffers:
  - {name: a, bytes: 4096, device: 1}
  - {name: b, bytes: 4096, device: 0}
  - {name: h, bytes: 4096, where: host_pinned}
  - {name: s, bytes: 8, where: host_pinned}
stages:
  - {name: w, kernel: fill, args: {value: 1.0}, writes: [a]}
  - {name: peer, kernel: copy, reads: [a], writes: [b]}
  - {name: down, kernel: copy, reads: [b], writes: [h]}
  - {name: sum, kernel: checksum, reads: [h], writes: [s], stream: host}
`)
	var buf bytes.Buffer
	if _, err := Build(s, Options{DumpAfter: "assign", Dump: &buf}); err != nil {
		t.Fatal(err)
	}
	if want := "w: s0 (device 1)\npeer: s1 (device 0)\ndown: s1 (device 0)\nsum: host\n"; !strings.HasSuffix(buf.String(), want) {
		t.Errorf("dump after assign:\n%s\nwant it to end %q", buf.String(), want)
	}
}

// TestShuffleSeeds: plans made with shuffled independent stages all verify.
func TestShuffleSeeds(t *testing.T) {
	s := loadGraph(t, "inception_v3")
	for seed := int64(1); seed <= 10; seed++ {
		p := build(t, s, Options{ShuffleSeed: seed, MaxStreams: Uncapped})
		if p.Stats.Waits > p.Stats.LowerBoundWaits {
			t.Errorf("seed %d: waits %d > lower bound %d", seed, p.Stats.Waits, p.Stats.LowerBoundWaits)
		}
	}
}

// TestDeterministic: planning twice gives identical bytes.
func TestDeterministic(t *testing.T) {
	s := loadGraph(t, "nasnetalarge")
	for _, strat := range []Strategy{"default", "naive", "round-robin", "single"} {
		a, b := table(t, build(t, s, Options{Strategy: strat})), table(t, build(t, s, Options{Strategy: strat}))
		if a != b {
			t.Errorf("%s: two plans differ", strat)
		}
	}
}

// table renders p without its planning time.
func table(t interface{ Fatal(...any) }, p *plan.Plan) string {
	var buf bytes.Buffer
	q := *p
	q.Stats.PlanningMS = 0
	q.WriteTable(&buf)
	var dot bytes.Buffer
	if err := q.WriteDOT(&dot); err != nil {
		t.Fatal(err)
	}
	return buf.String() + dot.String()
}

// TestCheckPassRaceKeepsPlan: in check mode a race after a pass is a
// *PassRaceError naming the pass, returned with the finished plan (that
// of the same options without check mode).
func TestCheckPassRaceKeepsPlan(t *testing.T) {
	s, err := dag.LoadFile(filepath.Join("..", "specs", "memory", "a-stream-reuse-racy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Build(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(s, Options{Check: true})
	var pr *PassRaceError
	if !errors.As(err, &pr) || pr.Pass != "arena" || len(pr.Err.Races) == 0 {
		t.Fatalf("Build in check mode: %v; want a *PassRaceError after pass arena", err)
	}
	if p == nil {
		t.Fatal("Build in check mode returned no plan with the pass's race")
	}
	var a, b bytes.Buffer
	p.WriteTable(&a)
	want.WriteTable(&b)
	re := regexp.MustCompile(`planning=\S+`)
	if re.ReplaceAllString(a.String(), "") != re.ReplaceAllString(b.String(), "") {
		t.Errorf("check mode's plan\n%s\nwant\n%s", a.String(), b.String())
	}
}

// TestDrawingsDuration: DOT and Mermaid label a stage by its duration_us,
// and a stage without one by the 1 µs the statistics count for it.
func TestDrawingsDuration(t *testing.T) {
	p := build(t, spec(stage("a", writes("x"), dur(2.5)), stage("b", reads("x"), writes("y"))), Options{})
	var dot, mm bytes.Buffer
	if err := p.WriteDOT(&dot); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteMermaid(&mm); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, text, a, b string }{
		{"DOT", dot.String(), "2.5us", "1.0us (no duration_us)"},
		{"Mermaid", mm.String(), "2.5 µs", "1.0 µs (no duration_us)"},
	} {
		if !strings.Contains(c.text, c.a) || !strings.Contains(c.text, c.b) || strings.Contains(c.text, "0.0") {
			t.Errorf("%s: want %q for a and %q for b:\n%s", c.what, c.a, c.b, c.text)
		}
	}
}

// TestDrawingsCollective: DOT and Mermaid join consecutive ranks of a
// collective with a line of their own, and their keys say what it is (no
// wait orders the ranks' devices: they meet); a plan without collectives
// has neither.
func TestDrawingsCollective(t *testing.T) {
	p := build(t, loadSpec(t, `version: 1
devices: 3
buffers:
  - {name: g0, dtype: f32, shape: [256], device: 0}
  - {name: g1, dtype: f32, shape: [256], device: 1}
  - {name: g2, dtype: f32, shape: [256], device: 2}
stages:
  - {name: reduce, kernel: all_reduce, args: {op: sum}, reads: [g0, g1, g2], writes: [g0, g1, g2]}
`), Options{})
	id := map[string]int{}
	for i, s := range p.Stages {
		id[s.Name] = i
	}
	draw := func(p *plan.Plan) (string, string) {
		var dot, mm bytes.Buffer
		if err := p.WriteDOT(&dot); err != nil {
			t.Fatal(err)
		}
		if err := p.WriteMermaid(&mm); err != nil {
			t.Fatal(err)
		}
		return dot.String(), mm.String()
	}
	dot, mm := draw(p)
	for _, want := range []string{`"reduce/0" -> "reduce/1" [`, `"reduce/1" -> "reduce/2" [`, `label="all_reduce rendezvous"`, "bold lines: the ranks of a collective"} {
		if !strings.Contains(dot, want) {
			t.Errorf("DOT: no %q in\n%s", want, dot)
		}
	}
	for _, want := range []string{fmt.Sprintf(`n%d ===|"all_reduce rendezvous"| n%d`, id["reduce/0"], id["reduce/1"]),
		fmt.Sprintf(`n%d ===|"all_reduce rendezvous"| n%d`, id["reduce/1"], id["reduce/2"]), "thick lines: the ranks of a collective"} {
		if !strings.Contains(mm, want) {
			t.Errorf("Mermaid: no %q in\n%s", want, mm)
		}
	}
	dot, mm = draw(build(t, spec(stage("a", writes("x")), stage("b", reads("x"), writes("y"))), Options{}))
	if strings.Contains(dot+mm, "rendezvous") {
		t.Errorf("a plan without collectives:\n%s\n%s", dot, mm)
	}
}

// TestDOTDeclaresEachStageOnce: the DOT output declares every stage once,
// in its stream's cluster (not again at the top level), for plans of one
// stream, of several, of several devices with a collective (quoted
// names), and of one stage with no edge.
func TestDOTDeclaresEachStageOnce(t *testing.T) {
	plans := map[string]*plan.Plan{
		"one stage": build(t, spec(stage("a", writes("x"))), Options{}),
		"single":    build(t, spec(stage("a", writes("x")), stage("b", reads("x"), writes("y"))), Options{Strategy: StrategySingle}),
	}
	for _, f := range []string{"examples/fan-out-fan-in.yaml", "multigpu/data-parallel.yaml", "shared-io/shared-io.yaml"} {
		s, err := dag.LoadFile(filepath.Join("..", "specs", f))
		if err != nil {
			t.Fatal(err)
		}
		plans[f] = build(t, s, Options{})
	}
	decl := regexp.MustCompile(`(?m)^( *)("(?:[^"\\]|\\.)*"|[A-Za-z0-9_]+) \[label=`)
	for name, p := range plans {
		var b bytes.Buffer
		if err := p.WriteDOT(&b); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, m := range decl.FindAllStringSubmatch(b.String(), -1) {
			id := strings.Trim(m[2], `"`)
			seen[id]++
			if len(m[1]) != 4 {
				t.Errorf("%s: %s declared at indent %d, outside its cluster", name, id, len(m[1]))
			}
		}
		for _, s := range p.Stages {
			if seen[s.Name] != 1 {
				t.Errorf("%s: stage %s declared %d times in\n%s", name, s.Name, seen[s.Name], b.String())
			}
		}
		if strings.Count(b.String(), "// Node definitions.") != len(p.Streams) {
			t.Errorf("%s: %d node blocks for %d streams", name, strings.Count(b.String(), "// Node definitions."), len(p.Streams))
		}
	}
}
