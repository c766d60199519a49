package planner

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/num"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/synth"
	"github.com/dagrun/dagrun/verify"
)

// offsetOf returns buffer name's arena offset, or -1.
func offsetOf(p *plan.Plan, name string) int64 {
	for _, b := range p.Buffers {
		if b.Name == name && b.ArenaOffset != nil {
			return *b.ArenaOffset
		}
	}
	return -1
}

func firstOf(p *plan.Plan, name string) string {
	for _, l := range p.Lifetimes {
		if l.Buffer == name {
			return l.First
		}
	}
	return "?"
}

func shareBytes(p *plan.Plan, x, y string) bool {
	bx, by := p.Buffers[slices.IndexFunc(p.Buffers, func(b plan.Buffer) bool { return b.Name == x })], p.Buffers[slices.IndexFunc(p.Buffers, func(b plan.Buffer) bool { return b.Name == y })]
	if bx.ArenaOffset == nil || by.ArenaOffset == nil {
		return false
	}
	return *bx.ArenaOffset < *by.ArenaOffset+by.Bytes && *by.ArenaOffset < *bx.ArenaOffset+bx.Bytes
}

// patternA is specs/memory's pattern a: ones on A, a copy on B reads it, A then
// writes a new temp.
func patternA() *dag.Spec {
	return spec(
		stage("make_ones", writes("ones"), on("A")),
		stage("copy", reads("ones"), writes("dst"), on("B")),
		stage("zeros", writes("fresh"), on("A")),
		stage("use", reads("fresh"), writes("sum"), on("A")),
	)
}

func TestArenaSharesOnlyAlongHappensBefore(t *testing.T) {
	// A chain: x is dead when z is born (b, which reads x, happens-before c).
	p := build(t, spec(stage("a", writes("x")), stage("b", reads("x"), writes("y")), stage("c", reads("y"), writes("z"))), Options{})
	if !shareBytes(p, "x", "z") || shareBytes(p, "x", "y") || shareBytes(p, "y", "z") {
		t.Errorf("offsets x=%d y=%d z=%d: want x and z shared, y apart", offsetOf(p, "x"), offsetOf(p, "y"), offsetOf(p, "z"))
	}
	if p.Stats.ArenaBytes != 2048 || plan.NoReuseBytes(p) != 3072 {
		t.Errorf("arena %d bytes, no reuse %d: want 2048 and 3072", p.Stats.ArenaBytes, plan.NoReuseBytes(p))
	}
	// Pattern a: A's own work on ones is done when zeros runs, but the copy
	// on B is not ordered before it: no sharing.
	p = build(t, patternA(), Options{})
	if shareBytes(p, "ones", "fresh") {
		t.Errorf("ones and fresh share arena bytes though copy (stream B) is not ordered before zeros (stream A)")
	}
}

func TestArenaStreamOrderIsTheBug(t *testing.T) {
	for _, s := range []*dag.Spec{patternA(), spec(
		stage("gather0", writes("bucket0"), on("G")),
		stage("compute0", reads("bucket0"), writes("out0"), on("C")),
		stage("gather1", writes("bucket1"), on("G")),
		stage("compute1", reads("bucket1"), writes("out1"), on("C")),
	)} {
		p, err := Build(s, Options{Arena: dag.ArenaStreamOrder})
		if err != nil {
			t.Fatal(err)
		}
		var re *verify.RaceError
		if err := verify.Verify(p); !errors.As(err, &re) {
			t.Fatalf("Verify of the stream-order arena: %v, want races", err)
		}
		found := false
		for _, r := range re.Races {
			found = found || r.Shared != ""
		}
		if !found {
			t.Errorf("no race names shared arena bytes:\n%v", re)
		}
	}
}

func TestArenaEligibility(t *testing.T) {
	mix := func(mw int) stageOpt {
		return func(s *dag.StageSpec) { s.Kernel = dag.BuiltinMix; s.Args = map[string]any{"max_words": mw} }
	}
	sum := func(s *dag.StageSpec) { s.Kernel = dag.BuiltinChecksum }
	cp := func(s *dag.StageSpec) { s.Kernel = dag.BuiltinCopy }
	s := spec(
		stage("a", writes("t", "out", "pin")),
		stage("b", reads("in", "t", "pin"), writes("ring")),
		stage("r", reads("early"), writes("early2"), cp),      // early: read before any write
		stage("m", writes("part"), mix(4)),                    // writes 16 bytes of part
		stage("m2", reads("part"), writes("part2"), mix(4)),   // reads 16 bytes: covered
		stage("m3", writes("half"), mix(4)),                   // writes 16 bytes of half
		stage("full", reads("half"), writes("half_sum"), sum), // reads all 1024: not covered
	)
	s.Buffer("in").Role = dag.RoleInput
	s.Buffer("out").Role = dag.RoleOutput
	s.Buffer("pin").Where = dag.WhereHostPinned
	s.Buffer("ring").Copies = 2
	s.Buffers = append(s.Buffers, dag.BufferSpec{Name: "unused", Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleTemp})
	p := build(t, s, Options{})
	for _, tc := range []struct {
		buf string
		in  bool
	}{{"t", true}, {"out", false}, {"pin", false}, {"in", false}, {"ring", false}, {"early", false}, {"early2", true},
		{"part", true}, {"part2", true}, {"half", false}, {"half_sum", true}, {"unused", false}} {
		if got := offsetOf(p, tc.buf) >= 0; got != tc.in {
			t.Errorf("buffer %s in the arena: %v, want %v", tc.buf, got, tc.in)
		}
	}
}

func TestArenaOff(t *testing.T) {
	s := spec(stage("a", writes("x")), stage("b", reads("x"), writes("y")), stage("c", reads("y"), writes("z")))
	p := build(t, s, Options{Arena: dag.ArenaOff})
	if p.Stats.ArenaBytes != 0 || slices.ContainsFunc(p.Buffers, func(b plan.Buffer) bool { return b.ArenaOffset != nil }) {
		t.Errorf("arena off: %d bytes, buffers %+v", p.Stats.ArenaBytes, p.Buffers)
	}
	if got := firstOf(p, "y"); got != "b" {
		t.Errorf("lifetime of y: first %q, want b (dynamic allocation needs it with the arena off)", got)
	}
	s.Options.Arena = dag.ArenaOff // the spec's option, and a flag overriding it
	if p := build(t, s, Options{}); p.Stats.ArenaBytes != 0 {
		t.Errorf("spec arena: off: %d bytes", p.Stats.ArenaBytes)
	}
	if p := build(t, s, Options{Arena: dag.ArenaPlanned}); p.Stats.ArenaBytes == 0 {
		t.Errorf("--arena planned over the spec's off: no arena")
	}
	if _, err := Build(s, Options{Arena: "bogus"}); err == nil || !strings.Contains(err.Error(), "unknown arena mode") {
		t.Errorf("bogus mode: %v", err)
	}
}

func TestLifetimeFirst(t *testing.T) {
	// Two unordered writers of x's halves: no single first stage.
	s := spec(stage("w0", writesAt("x", 0, 512), on("p")), stage("w1", writesAt("x", 512, 512), on("q")),
		stage("r", reads("x"), writes("y"), on("p")))
	p := build(t, s, Options{})
	if got := firstOf(p, "x"); got != "" {
		t.Errorf("x: first %q, want none", got)
	}
	if got := firstOf(p, "y"); got != "r" {
		t.Errorf("y: first %q, want r", got)
	}
}

// TestVerifyArena: Verify checks arena layouts on its own, whatever made them.
func TestVerifyArena(t *testing.T) {
	at := func(p *plan.Plan, name string, off int64) {
		for i := range p.Buffers {
			if p.Buffers[i].Name == name {
				p.Buffers[i].ArenaOffset = &off
				p.Stats.ArenaBytes = max(p.Stats.ArenaBytes, off+p.Buffers[i].Bytes)
			}
		}
	}
	// Pattern a laid out by hand: ones and fresh at 0.
	p := build(t, patternA(), Options{Arena: dag.ArenaOff})
	at(p, "ones", 0)
	at(p, "fresh", 0)
	var re *verify.RaceError
	if err := verify.Verify(p); !errors.As(err, &re) || re.Races[0].Shared == "" || !strings.Contains(re.Error(), "arena bytes shared with") {
		t.Fatalf("Verify: %v, want an arena race", err)
	}
	// Interleaved lifetimes in one stream: x, then y, then x again. Every
	// pair is ordered, but y's write lands between x's write and its read.
	p = build(t, spec(stage("wx", writes("x")), stage("wy", writes("y")), stage("rx", reads("x"), writes("o")), stage("ry", reads("y"), writes("o2"))),
		Options{Strategy: StrategySingle, Arena: dag.ArenaOff})
	at(p, "x", 0)
	at(p, "y", 0)
	if err := verify.Verify(p); !errors.As(err, &re) {
		t.Fatalf("interleaved lifetimes: Verify %v, want a race", err)
	}
	// The planned arena relies on a cross-stream wait: without it, races.
	s := spec(stage("a", writes("x"), on("p")), stage("b", reads("x"), writes("y"), on("q")), stage("c", reads("y"), writes("z"), on("p")))
	p = build(t, s, Options{})
	if !shareBytes(p, "x", "z") {
		t.Fatalf("x and z should share: %d %d", offsetOf(p, "x"), offsetOf(p, "z"))
	}
	if err := verify.Verify(p); err != nil {
		t.Fatal(err)
	}
	for si := range p.Streams {
		if p.Streams[si].Name == "p" {
			str := &p.Streams[si]
			for j, o := range str.Ops {
				if o.Kind == plan.OpWait {
					p = dropOp(p, si, j)
					p.Iteration = nil
					break
				}
			}
		}
	}
	if err := verify.Verify(p); !errors.As(err, &re) {
		t.Fatalf("without the wait: %v, want races", err)
	}
	found := false
	for _, r := range re.Races {
		found = found || r.Shared != ""
	}
	if !found {
		t.Errorf("no arena race in %v", re)
	}
}

func TestValidateArena(t *testing.T) {
	base := func() *plan.Plan {
		p := build(t, spec(stage("a", writes("x")), stage("b", reads("x"), writes("y"))), Options{})
		p.Iteration = nil
		return p
	}
	for _, tc := range []struct {
		name string
		edit func(p *plan.Plan)
		want string
	}{
		{"misaligned", func(p *plan.Plan) { o := int64(4); p.Buffers[0].ArenaOffset = &o }, "multiple of 256"},
		{"past the end", func(p *plan.Plan) { o := p.Stats.ArenaBytes; p.Buffers[0].ArenaOffset = &o }, "past the arena"},
		{"output", func(p *plan.Plan) { p.Buffers[0].Role = dag.RoleOutput }, "only device temps"},
		{"first", func(p *plan.Plan) { p.Lifetimes[0].First = "nope" }, "not a stage"},
	} {
		p := base()
		tc.edit(p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestRangeSet(t *testing.T) {
	var r rangeSet
	r.add(10, 20)
	r.add(30, 40)
	r.add(20, 25)
	if !r.covers(10, 25) || r.covers(10, 26) || r.covers(24, 31) || !r.covers(5, 5) {
		t.Errorf("covers wrong: %v", r)
	}
	if !r.intersects(24, 31) || r.intersects(25, 30) || !r.intersects(0, 11) {
		t.Errorf("intersects wrong: %v", r)
	}
	r.add(0, 100)
	if len(r) != 1 || r[0] != [2]int64{0, 100} {
		t.Errorf("merge: %v", r)
	}
}

// modelSpecs loads the eight model graphs.
func modelSpecs(t testing.TB) map[string]*dag.Spec {
	paths, err := filepath.Glob("../specs/models/*.yaml")
	if err != nil || len(paths) != 8 {
		t.Fatalf("model specs: %v %v", paths, err)
	}
	out := map[string]*dag.Spec{}
	for _, path := range paths {
		s, err := dag.LoadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(path), ".yaml")] = s
	}
	return out
}

// TestArenaModels: on the model graphs the arena verifies, lies between the
// live bound of its own schedule and no reuse, and the one-stream plan's
// arena is no larger than the default's.
func TestArenaModels(t *testing.T) {
	for name, s := range modelSpecs(t) {
		p := build(t, s, Options{})
		single := build(t, s, Options{Strategy: StrategySingle})
		lb, a, none := LiveBound(p), p.Stats.ArenaBytes, plan.NoReuseBytes(p)
		if lb <= 0 || a < lb || a > none || single.Stats.ArenaBytes > a {
			t.Errorf("%s: bound %d, arena %d, no reuse %d, one stream %d", name, lb, a, none, single.Stats.ArenaBytes)
		}
		// Check mode verifies after every pass; shuffled orders too.
		if _, err := Build(s, Options{Check: true, ShuffleSeed: 3}); err != nil {
			t.Errorf("%s shuffled: %v", name, err)
		}
	}
}

func TestLiveBound(t *testing.T) {
	// a(2) writes x; b(5) reads x writes y; c(3) reads x writes z (parallel
	// with b); d(1) reads y, z. x: [0,7), y: [2,8), z: [2,8): peak 3 KiB.
	s := spec(stage("a", writes("x"), dur(2)), stage("b", reads("x"), writes("y"), dur(5)), stage("c", reads("x"), writes("z"), dur(3)),
		stage("d", reads("y", "z"), writes("o"), dur(1)))
	p := build(t, s, Options{})
	if got := LiveBound(p); got != 3072 {
		t.Errorf("live bound %d, want 3072", got)
	}
	if p.Stats.ArenaBytes != 3072 {
		t.Errorf("arena %d, want 3072 (o reuses x)", p.Stats.ArenaBytes)
	}
}

func TestHostStream(t *testing.T) {
	pinned := func(s *dag.Spec, bufs ...string) *dag.Spec {
		for _, b := range bufs {
			s.Buffer(b).Where = dag.WhereHostPinned
		}
		return s
	}
	// Host fills staging, a device copy reads it, the host refills it.
	s := pinned(spec(
		stage("fill0", writes("staging"), on(dag.HostStream)),
		stage("up0", reads("staging"), writes("d0")),
		stage("fill1", writes("staging"), on(dag.HostStream)),
		stage("up1", reads("staging"), writes("d1")),
	), "staging")
	p := build(t, s, Options{})
	for _, sg := range p.Stages {
		host := p.Streams[sg.Stream].Host
		if host != strings.HasPrefix(sg.Name, "fill") {
			t.Errorf("stage %s on stream %s (host %v)", sg.Name, p.Streams[sg.Stream].Name, host)
		}
	}
	// The host waits for up0 before fill1.
	hostOps := ops(p)
	if !regexp.MustCompile(`host: .*fill0 rec\d+ wait\d+ fill1`).MatchString(hostOps) {
		t.Errorf("ops:\n%s", hostOps)
	}
	// Manual: the host's launches order later-issued device work without a
	// wait (host → device), but the host must wait for device work it
	// overwrites or reads (device → host).
	ok := pinned(manual(spec(stage("fill", writes("buf"), on(dag.HostStream)), stage("up", reads("buf"), writes("d"), on("s")))), "buf")
	if p, err := Build(ok, Options{}); err != nil || verify.Verify(p) != nil {
		t.Errorf("host write then device read: %v / %v", err, verify.Verify(p))
	}
	racy := pinned(manual(spec(stage("down", writes("buf"), on("s")), stage("read", reads("buf"), writes("h"), on(dag.HostStream)))), "buf", "h")
	p, err := Build(racy, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var re *verify.RaceError
	if err := verify.Verify(p); !errors.As(err, &re) || re.Races[0].SecondName != "read" {
		t.Errorf("device write then host read without a host wait: %v", err)
	}
	fixed := pinned(manual(spec(stage("down", writes("buf"), on("s")), stage("read", reads("buf"), writes("h"), on(dag.HostStream), waits("down")))), "buf", "h")
	if p, err := Build(fixed, Options{}); err != nil || verify.Verify(p) != nil {
		t.Errorf("with the host wait: %v / %v", err, verify.Verify(p))
	}
}

// TestHostStreamNotShared: device stages never join the host stream, under
// every strategy and cap.
func TestHostStreamNotShared(t *testing.T) {
	s := spec(
		stage("h0", writes("a"), on(dag.HostStream), dur(100)),
		stage("d0", reads("a"), writes("b"), dur(100)),
		stage("h1", reads("b"), writes("c"), on(dag.HostStream), dur(100)),
		stage("d1", reads("c"), writes("e"), dur(100)),
		stage("d2", writes("f")),
	)
	for _, b := range []string{"a", "b", "c"} {
		s.Buffer(b).Where = dag.WhereHostPinned
	}
	for _, o := range []Options{{}, {Strategy: StrategyNaive}, {Strategy: StrategyRoundRobin}, {Strategy: StrategySingle}, {MaxStreams: 2}} {
		p, err := Build(s, o)
		if err != nil {
			t.Errorf("%+v: %v", o, err)
			continue
		}
		if err := verify.Verify(p); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
		for _, sg := range p.Stages {
			if p.Streams[sg.Stream].Host != strings.HasPrefix(sg.Name, "h") {
				t.Errorf("%+v: stage %s on stream %s", o, sg.Name, p.Streams[sg.Stream].Name)
			}
		}
	}
}

func TestTouched(t *testing.T) {
	sg := &plan.Stage{Kernel: dag.BuiltinMix, Args: map[string]any{"max_words": 8},
		Reads: []plan.Access{{Buffer: "a", Bytes: 1024}, {Buffer: "b", Bytes: 16}}, Writes: []plan.Access{{Buffer: "c", Bytes: 1024}}}
	r, w := touched(sg)
	if got := fmt.Sprint(r, w); got != "[{a 0 32} {b 0 16}] [{c 0 32}]" {
		t.Errorf("mix: %s", got)
	}
	r, w = touched(&plan.Stage{Kernel: dag.BuiltinSpin, Reads: sg.Reads, Writes: sg.Writes})
	if r != nil || w != nil {
		t.Errorf("spin touches %v %v", r, w)
	}
	_, w = touched(&plan.Stage{Kernel: dag.BuiltinChecksum, Reads: sg.Reads[:1], Writes: sg.Writes})
	if w[0].Bytes != 8 || sg.Writes[0].Bytes != 1024 {
		t.Errorf("checksum writes %v (the stage's own write must not change: %v)", w, sg.Writes)
	}
}

// TestArenaChainedCopies: in a chain of k copies of nasnetalarge every temp
// of copy i is dead (happens-before) before copy i+1 starts, so the arena of
// k copies is at most 1.1× the arena of one copy (it shares bytes far below
// one allocation per temp), the plan verifies, and with memory_budget auto
// it is within 1.1× the live-bytes bound.
func TestArenaChainedCopies(t *testing.T) {
	m := loadGraph(t, "nasnetalarge")
	var one int64
	for _, k := range []int{1, 2, 8} {
		s, err := synth.Chain(m, k)
		if err != nil {
			t.Fatal(err)
		}
		p := build(t, s, Options{MemoryBudget: BudgetNone, MaxStreams: Uncapped})
		a := p.Stats.ArenaBytes
		if k == 1 {
			one = a
		}
		if a == 0 || 10*a > 11*one {
			t.Errorf("%d copies: arena %d bytes, want at most 1.1× one copy's %d", k, a, one)
		}
		for _, n := range p.Notes {
			if strings.Contains(n, "arena") {
				t.Errorf("%d copies: note %q", k, n)
			}
		}
		if k == 1 || k > 2 && testing.Short() {
			continue
		}
		p = build(t, s, Options{MemoryBudget: BudgetAuto})
		if a, lb := p.Stats.ArenaBytes, LiveBound(p); 10*a > 11*lb {
			t.Errorf("%d copies, memory_budget auto: arena %d bytes, want at most 1.1× the live bound %d", k, a, lb)
		}
	}
}

// TestArenaGreedyBoundSegments: the greedy layout's pair bound goes to the
// segments of the largest sweep first, and a segment no larger than the
// first one past the bound keeps its sweep, as it cannot make the arena
// smaller. Three chained nasnetalarge copies are three segments of about
// 10⁵ pairs each: with room for one, none is worth the greedy layout (the
// arena is the sweep's, and the note counts all three); with room for all
// three, the arena is no larger and has no note.
func TestArenaGreedyBoundSegments(t *testing.T) {
	s, err := synth.Chain(loadGraph(t, "nasnetalarge"), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer func(b int) { greedyMaxPairs = b }(greedyMaxPairs)
	arena := func(bound int) (int64, string) {
		greedyMaxPairs = bound
		p := build(t, s, Options{MemoryBudget: BudgetNone, MaxStreams: Uncapped})
		return p.Stats.ArenaBytes, strings.Join(p.Notes, "; ")
	}
	sweep, note := arena(0)
	if !strings.Contains(note, "sweep alone in 3 of 3 segments") {
		t.Fatalf("no pairs: note %q, want the sweep alone in all three segments", note)
	}
	// The note says what the sweep alone may cost: the arena's bytes over
	// the schedule's live bound, in bytes.
	greedyMaxPairs = 0
	p := build(t, s, Options{MemoryBudget: BudgetNone, MaxStreams: Uncapped})
	lb := LiveBound(p)
	if want := fmt.Sprintf("the arena is %s bytes, %s bytes", num.Thousands(int(p.Stats.ArenaBytes)), num.Thousands(int(p.Stats.ArenaBytes-lb))); !strings.Contains(note, want) ||
		!strings.Contains(note, fmt.Sprintf("over the %s bytes live at once", num.Thousands(int(lb)))) || strings.Contains(note, "planner.") {
		t.Errorf("no pairs: note %q; want %q and the live bound %d bytes, and no Go identifier", note, want, lb)
	}
	one, note := arena(150_000)
	if one != sweep || !strings.Contains(note, "sweep alone in 3 of 3 segments") {
		t.Errorf("room for one segment: arena %d bytes, note %q; want the sweep's %d and all three segments named", one, note, sweep)
	}
	all, note := arena(1_000_000)
	if all > sweep || note != "" {
		t.Errorf("room for all: arena %d bytes (sweep %d), note %q", all, sweep, note)
	}
}

// TestStableOrder: stableOrder is slices.SortStableFunc by key, ties in
// index order, on keys with many ties, close together or spread out, from
// 0 or far from it.
func TestStableOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 1000} {
		for _, base := range []int{0, 1 << 20} {
			for _, spread := range []int{n/3 + 1, 100*n + 1} {
				keys := make([]int, n)
				for i := range keys {
					keys[i] = base + rng.IntN(spread)
				}
				want := make([]int, n)
				for i := range want {
					want[i] = i
				}
				slices.SortStableFunc(want, func(i, j int) int { return cmp.Compare(keys[i], keys[j]) })
				if got := stableOrder(n, func(i int) int { return keys[i] }); !slices.Equal(got, want) {
					t.Fatalf("n %d, keys from %d over %d: stableOrder %v, want %v", n, base, spread, got, want)
				}
			}
		}
	}
}

// TestIssueSpansColumns: the spans issueSpans finds by clock columns are
// those of a happens-before test per launch, on model graphs, chained
// copies and the scale shapes.
func TestIssueSpansColumns(t *testing.T) {
	var specs []*dag.Spec
	for _, m := range []string{"inception_v3", "nasnetalarge"} {
		specs = append(specs, loadGraph(t, m))
	}
	if c, err := synth.Chain(loadGraph(t, "resnet50"), 3); err == nil {
		specs = append(specs, c)
	}
	for _, sh := range synth.Shapes {
		if s, err := synth.Shape(sh, 3000); err == nil {
			specs = append(specs, s)
		}
	}
	for _, s := range specs {
		for _, ms := range []int{3, 8} {
			p := build(t, s, Options{MaxStreams: ms, MemoryBudget: BudgetNone})
			a := newArenaInfo(p, nil)
			if _, ok := a.hb.(*launchHB); !ok || len(p.Streams) > spanColumnsMax {
				t.Fatalf("%s: %d streams, want dense clocks within the columns' bound", s.Name, len(p.Streams))
			}
			by, tests := a.issueSpansBy(true), a.issueSpansBy(false)
			if !slices.Equal(by.lo, tests.lo) || !slices.Equal(by.hi, tests.hi) {
				for k := range by.hi {
					if by.hi[k] != tests.hi[k] {
						t.Fatalf("%s, %d streams: temp %d spans [%v, %v) by columns, [%v, %v) by tests", s.Name, ms, k, by.lo[k], by.hi[k], tests.lo[k], tests.hi[k])
					}
				}
			}
		}
	}
}

// TestLiveBoundDevices: with several devices the bound is the sum of the
// devices' own bounds, what their arenas (one per device) add up to at
// least, even when the devices peak at different instants: here device
// 0's 1 MiB temp is dead before device 1's is born, and each arena is its
// device's bound exactly.
func TestLiveBoundDevices(t *testing.T) {
	p := build(t, loadSpec(t, `version: 1
devices: 2
buffers:
  - {name: t0, bytes: 1048576, device: 0}
  - {name: s0, bytes: 4096, device: 0}
  - {name: s1, bytes: 4096, device: 1}
  - {name: t1, bytes: 1048576, device: 1}
  - {name: out, bytes: 8, role: output, device: 1}
stages:
  - {name: a0, kernel: fill, args: {value: 1.0}, writes: [t0], duration_us: 100}
  - {name: b0, kernel: copy, reads: ["t0[0:4096]"], writes: [s0], duration_us: 100}
  - {name: send, kernel: copy, reads: [s0], writes: [s1], duration_us: 10}
  - {name: a1, kernel: fill, args: {value: 2.0}, writes: [t1], after: [send], duration_us: 100}
  - {name: b1, kernel: checksum, reads: [t1], writes: [out], duration_us: 100}
`), Options{})
	d0, d1 := DeviceLiveBound(p, 0), DeviceLiveBound(p, 1)
	if d0 != 1048576+4096 || d1 != 1048576 {
		t.Fatalf("device bounds %d, %d; want %d, %d", d0, d1, 1048576+4096, 1048576)
	}
	if got := LiveBound(p); got != d0+d1 || got != p.Stats.ArenaBytes {
		t.Errorf("live bound %d, want the devices' %d + %d (the arena is %d)", got, d0, d1, p.Stats.ArenaBytes)
	}
}

// The note on an arena laid out by the sweep alone says what it may lose
// against the live bound, and that nothing is lost where it is at it.
func TestOverLive(t *testing.T) {
	if got := overLive(1000, 1000, "the ideal schedule"); !strings.Contains(got, "1,000 bytes, the 1,000 bytes live at once in the ideal schedule, which no layout goes below: no memory is lost") || strings.Contains(got, "over") {
		t.Errorf("at the bound: %q", got)
	}
	if got := overLive(1500, 1000, "the ideal schedule"); !strings.Contains(got, "1,500 bytes, 500 bytes (50.0%) over the 1,000 bytes live at once in the ideal schedule, which no layout goes below: at most that much memory is lost") {
		t.Errorf("over the bound: %q", got)
	}
}
