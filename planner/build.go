package planner

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// Strategy is a strategy of stream assignment (Options.Strategy; in a
// spec, dag.Options.Strategy; in a plan, Plan.Strategy): one of the
// Strategy constants.
type Strategy string

// Strategies of stream assignment.
const (
	StrategyDefault    Strategy = "default"     // minimum path cover by maximum matching (Nimble §4.2), fewest waits
	StrategySingle     Strategy = "single"      // every stage on one stream
	StrategyRoundRobin Strategy = "round-robin" // stages of each level dealt round-robin over streams (Taskflow's capturer)
	StrategyNaive      Strategy = "naive"       // default streams, a wait on every cross-stream edge of the reduced graph
	StrategyHazardDAG  Strategy = "hazard-dag"  // greedy chains of the hazard DAG, a wait on every other hazard edge (no transitive reduction)
)

// Options control Build. The spec's own options (dag.Spec.Options) are the
// defaults; a field set here overrides them.
type Options struct {
	// Strategy is one of the Strategy constants; "" takes the spec's, else default.
	Strategy Strategy
	// MaxStreams caps the number of streams (per device): 0 takes the
	// spec's max_streams, else DefaultMaxStreams for the default strategy
	// of an automatically synchronized spec (Plan.Notes says when that cap
	// folded chains) and no cap for the others; Uncapped (any negative
	// value) means no cap whatever the spec says. Pinned streams count
	// toward the cap; if pins alone exceed it, pins win. The hazard-dag
	// strategy is never capped (Plan.Notes says so when a cap was asked
	// for).
	MaxStreams int
	// Check runs Validate and Verify after every pass that produced a plan,
	// and (with ShuffleSeed ≠ 0) shuffles the order of independent stages.
	Check bool
	// DumpAfter names a pass (see Passes) after which the plan, or the
	// pass's intermediate state, is written to Dump as text: that of the
	// pipeline run whose plan Build returns (the last one when
	// memory_budget re-planned).
	DumpAfter string
	Dump      io.Writer
	// ShuffleSeed, in check mode, seeds a random tiebreak between
	// independent stages in the topological order every pass uses; a correct
	// plan must not depend on the accidental order of the YAML. 0 = no shuffle.
	ShuffleSeed int64
	// Arena is the arena mode (dag.ArenaPlanned, ArenaOff, ArenaStreamOrder);
	// "" takes the spec's, else planned.
	Arena string
	// MemoryBudget caps the arena in bytes, with several devices each
	// device's (BudgetArena; Build's budget loop, budget.go):
	// 0 takes the spec's memory_budget; BudgetAuto aims at 1.1× the live
	// bound with edges of no makespan cost; BudgetNone means no budget.
	MemoryBudget int64
	// StreamSets is how many copies of the streams consecutive iterations
	// rotate through (Iteration.StreamSets): 0 takes the largest copies of
	// any buffer (1 with the single strategy), 1 runs every iteration on the
	// same streams. A manual spec runs on one stream set: more is an error.
	StreamSets int
}

// pass is one planner pass over the shared state. Passes read what earlier
// passes left in the state and never call each other or the pipeline.
type pass struct {
	name string
	fn   func(*state) error
	// required passes run for every spec; the others only for
	// automatically synchronized specs (a sync: manual spec brings its own
	// streams, waits and issue order, which those passes would compute).
	required bool
	// final passes run once, on the plan that the memory_budget loop keeps
	// (the loop compares arenas, which they do not change).
	final bool
}

// passes is the pipeline, in order; it is the reference for readers.
var passes = []pass{
	{name: "reduce", fn: reduce, required: true},                // transitive reduction of the hazard DAG
	{name: "assign", fn: assign},                                // stages → streams (path cover, caps, baselines, pins)
	{name: "sync", fn: syncStreams},                             // record/wait pairs by vector clocks; issue order
	{name: "lifetimes", fn: lifetimes, required: true},          // per buffer and stream, the event after its last use
	{name: "arena", fn: arena, required: true},                  // temps share one arena where happens-before orders their lifetimes
	{name: "stats", fn: stats, required: true},                  // Plan.Stats
	{name: "iterate", fn: iterate, required: true, final: true}, // cross-iteration waits, stream sets, event slots; else the barrier form
}

// passOrder lists the ordering constraints between passes, each with its
// reason; TestPassOrder checks the table against it.
var passOrder = []struct{ before, after, why string }{
	{"reduce", "assign", "the path cover is a matching on the reduced graph"},
	{"reduce", "sync", "sync orders exactly the reduced edges"},
	{"reduce", "stats", "the lower bound on waits is a matching on the reduced graph"},
	{"assign", "sync", "sync needs each stage's stream"},
	{"sync", "lifetimes", "lifetimes reuse the records that sync placed"},
	{"lifetimes", "stats", "stats counts the events lifetimes appended"},
	{"sync", "arena", "arena shares bytes by the happens-before of sync's records and waits"},
	{"lifetimes", "arena", "arena names each lifetime's first stage, and must see the events lifetimes appended"},
	{"sync", "iterate", "cross waits reuse the records sync placed after producers"},
	{"lifetimes", "iterate", "a cross wait's producer reuses lifetimes' end record when it follows the launch"},
	{"arena", "iterate", "buffers in the arena share its bytes across iterations too"},
	{"stats", "iterate", "Stats.Waits counts the waits of one iteration; cross waits are counted in Iteration"},
}

// Passes returns the names of the planner passes in order.
func Passes() []string {
	names := make([]string, len(passes))
	for i, p := range passes {
		names[i] = p.name
	}
	return names
}

// state is what the passes of one pipeline run share.
type state struct {
	spec     *dag.Spec
	opts     Options
	strategy Strategy
	maxStr   int // 0 = uncapped
	g        *dag.HazardGraph
	n        int
	topo     []int32   // topological order every pass uses (stream order follows it)
	pos      []int32   // pos[v] = index of v in topo
	dur      []float64 // effective durations in µs (0 → 1)
	level    []int32   // longest-path depth in edges from a source (reduce)

	red     *adjacency // reduced graph, rows sorted by pos (reduce)
	redPred *adjacency
	stream  []int32 // stage → stream id (assign); stream ids ordered by first stage
	// dev is each stage's device (nil: every stage on device 0);
	// streamDev each stream's (assign).
	dev       []int32
	streamDev []int32
	// coll is each stage's rank of a collective (nil: none; lowerDevices).
	coll []*plan.Collective
	// origin is each stage's index in the user's spec (-1: a stage the
	// planner added; nil: the spec's own stages; lowerDevices).
	origin   []int
	names    []string
	matching int // size of the unconstrained maximum matching of the reduced graph, -1 unknown

	manual bool // sync: manual; the plan comes from the spec
	// layoutHint, from the budget loop, is an arena layout (offset per
	// Plan.Buffers index) that the arena pass takes when it is smaller than
	// its own and valid for this plan.
	layoutHint map[int]int64
	// keep, from the budget loop's reuse steps, is the plan whose streams
	// and per-stream order this run keeps (keptStreams); nil: assign
	// chooses the streams.
	keep *keptStreams
	// ordered says the spec carries the budget loop's orders (after:
	// edges), which may lengthen its critical path.
	ordered bool
	// assignNotes are the notes the assign pass gave (a kept plan's are
	// carried to the re-plan).
	assignNotes []string
	notes       []string      // quality limits met so far (Plan.Notes)
	arenaInfo   *arenaInfo    // the arena pass's view of plan, for the budget loop
	acc         *planAccesses // the buffer of each access of accPlan (accesses)
	accPlan     *plan.Plan
	plan        *plan.Plan
	start       time.Time
	timings     []plan.PassTime // this run's hazard analysis and passes
	dumped      bytes.Buffer    // DumpAfter's output of this run
	// passRace, in check mode, is the first race Verify found after a
	// pass of this run; the passes go on, so that the plan is finished.
	passRace *PassRaceError
}

// PassRaceError is Build's error in check mode (Options.Check) when Verify
// found a race in the plan a pass produced: Pass names the first such pass
// and Err is Verify's *RaceError for that pass's plan. Build returns it
// with the finished plan (the later passes still run), so that a caller
// can print the plan anyway.
type PassRaceError struct {
	Pass string
	Err  *verify.RaceError
}

func (e *PassRaceError) Error() string { return fmt.Sprintf("after pass %q: %v", e.Pass, e.Err) }
func (e *PassRaceError) Unwrap() error { return e.Err }

// adjacency is a graph in compressed sparse rows.
type adjacency struct {
	off []int32
	adj []int32
}

func (a *adjacency) row(i int) []int32 { return a.adj[a.off[i]:a.off[i+1]] }
func (a *adjacency) edges() int        { return len(a.adj) }

// Build plans s. It is a driver around the pass pipeline (Passes): hazard
// analysis and the passes in order give a plan; while memory_budget is not
// met it chooses buffer orders from that plan (budget.go), adds them to the
// spec as after: edges and runs the pipeline again, and returns the last
// plan. For `sync: manual` specs the plan is the spec's own streams and
// waits (see buildManual) and only the required passes run; the result may
// have races, which Verify reports.
//
// Every plan Build returns has iteration info (Plan.Iteration): the iterate
// pass's cross-iteration waits, or, for manual specs and plans beyond the
// pass's cost bounds, the barrier form (WithIteration), with a note saying
// why (Plan.Notes).
//
// Errors: an unknown strategy or dump pass, a stage with no stream in a
// manual spec, hazard-analysis errors (dependency cycles), a pass that
// panicked (named), in check mode the first pass after which Validate
// failed, and for memory_budget a *BudgetError when the budget cannot be
// met (or an error when the spec or arena mode cannot be re-ordered). In
// check mode a race after a pass is a *PassRaceError returned with the
// finished plan (not nil). docs/design/driver.md has the design.
func Build(s *dag.Spec, o Options) (*plan.Plan, error) {
	start := time.Now()
	o, defaultCap := withDefaultCap(s, o) // defaultcap.go
	if err := ringCopiesFit(s); err != nil {
		return nil, err
	}
	s, low, err := lowerDevices(s) // place.go
	if err != nil {
		return nil, err
	}
	// The budget loop re-plans from s; without it nothing below reads s
	// but its placement, so that (with the caller letting go of it too)
	// the spec can be freed once the passes have read it.
	var budgetSpec *dag.Spec
	if budgetAsked(s, o) {
		budgetSpec = s
	}
	balance := s.Options.Placement == dag.PlacementBalance
	st, err := pipeline(s, o, start, replan{}, low)
	var timings []plan.PassTime // of the runs before st's
	if err != nil {
		st.flushDump()
		return nil, err
	}
	passRace := st.passRace // the first over the budget loop's runs
	// The budget loop: plan, and while the plan is over memory_budget, add
	// the orders chosen from it to the spec and plan again.
	b, err := newBudget(st)
	for err == nil && b != nil && !b.met(st) {
		t0 := time.Now()
		kind, ok := b.choose(st)
		timings = addTime(timings, "budget", time.Since(t0))
		if !ok {
			break // no order left to try
		}
		spec := b.spec(budgetSpec)
		next, perr := pipeline(spec, o, start, replan{layout: b.hint, ordered: true}, low)
		timings = addTimes(timings, st.timings)
		if perr == nil && b.keep != nil && longer(next, st) {
			// The streams chosen anew cost makespan: re-plan on st's.
			timings = addTimes(timings, next.timings)
			next, perr = pipeline(spec, o, start, replan{layout: b.hint, keep: b.keep, ordered: true}, low)
		}
		if perr != nil {
			err = fmt.Errorf("planner: re-planning after %s step %d: %w", kind, len(b.steps)+1, perr)
			break
		}
		if b.worse(st, next) {
			// memory_budget auto keeps the plan before the step.
			timings = addTimes(timings, next.timings)
			st.timings = nil // counted above
			break
		}
		st = next
		if passRace == nil {
			passRace = st.passRace
		}
		b.record(kind, st)
	}
	if err == nil && b != nil {
		t0 := time.Now()
		err = b.finish(st)
		timings = addTime(timings, "budget", time.Since(t0))
	}
	if err == nil {
		err = st.runFinal()
		st.collect()
	}
	st.flushDump()
	if err != nil {
		return nil, err
	}
	st.plan.Notes = st.notes
	if b != nil && len(st.plan.Budget) > 0 {
		st.plan.BudgetStart = &b.start
	}
	plan.SetUnrollNote(st.plan)
	if n := idleDevicesNote(st.plan, balance); n != "" {
		st.plan.Notes = append(st.plan.Notes, n)
	}
	if defaultCap {
		capNote(st.plan)
	}
	timings = addTimes(timings, st.timings)
	st.plan.Timings = timings
	st.plan.Stats.PlanningMS = ms(time.Since(start)) // every pass and budget step
	if passRace == nil {
		passRace = st.passRace // from a final pass
	}
	if passRace != nil {
		return st.plan, passRace
	}
	return st.plan, nil
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// addTimes adds each phase of run (one pipeline run's timings) to list.
func addTimes(list, run []plan.PassTime) []plan.PassTime {
	for _, t := range run {
		list = addTime(list, t.Pass, time.Duration(t.MS*1e6))
	}
	return list
}

// addTime adds d to phase name of list.
func addTime(list []plan.PassTime, name string, d time.Duration) []plan.PassTime {
	for i := range list {
		if list[i].Pass == name {
			list[i].MS += ms(d)
			list[i].Runs++
			return list
		}
	}
	return append(list, plan.PassTime{Pass: name, MS: ms(d), Runs: 1})
}

// replan is what the budget loop hands the pipeline run after a step: an
// arena layout to try (offset per Plan.Buffers index; nil: none), a plan
// whose streams and per-stream order to keep (nil: assign chooses), and
// whether the spec carries the loop's orders (false for the first run).
type replan struct {
	layout  map[int]int64
	keep    *keptStreams
	ordered bool
}

// pipeline runs hazard analysis and the passes on s, with r's hints (the
// zero replan for the first run). The state it returns is nil only when s
// could not be analysed.
func pipeline(s *dag.Spec, o Options, start time.Time, r replan, low *lowering) (*state, error) {
	t0 := time.Now()
	st, err := newState(s, o, low, r.keep)
	if err != nil {
		return nil, err
	}
	st.start, st.layoutHint, st.ordered = start, r.layout, r.ordered
	st.timings = addTime(st.timings, "hazards", time.Since(t0))
	for _, ps := range passes {
		if st.manual && !ps.required || ps.final {
			continue
		}
		if err := st.run(ps); err != nil {
			return st, err
		}
		if ps.name == "sync" && !budgetAsked(st.spec, o) {
			st.releaseSpec()
			st.collect()
		}
	}
	return st, nil
}

// budgetLimit is the memory budget asked for: o's, else s's (bytes,
// BudgetAuto, BudgetNone, or 0 for none).
func budgetLimit(s *dag.Spec, o Options) int64 {
	if o.MemoryBudget != 0 {
		return o.MemoryBudget
	}
	return s.Options.MemoryBudget
}

// budgetAsked reports whether o or s asks for a memory budget, which the
// budget loop meets by re-planning s.
func budgetAsked(s *dag.Spec, o Options) bool {
	limit := budgetLimit(s, o)
	return limit > 0 || limit == BudgetAuto
}

// releaseSpec lets go of the spec's stages and buffers and of the hazard
// graph once the plan holds what the passes after sync read of them (the
// plan's strings are copies: newPlan), keeping the spec's other fields:
// on a big spec the later passes and the verifier then run without them
// in memory, when the caller holds the spec no more.
func (st *state) releaseSpec() {
	head := *st.spec
	head.Stages, head.Buffers = nil, nil
	st.spec, st.g = &head, nil
}

// collectAt is the size (stages) from which Build collects garbage where
// most of its memory dies: once the spec and the hazard graph are let go
// (releaseSpec) and once the passes' state is (after runFinal).
var collectAt = 10_000

// collect runs a garbage collection (runtime.GC) when the spec has
// collectAt stages or more, so that the collector's next heap goal is set
// by what is live once the spec and the passes' state are dead, not by a
// cycle that found them all live; docs/design/driver.md says why, with
// the figures measured.
func (st *state) collect() {
	if st.n >= collectAt {
		runtime.GC()
	}
}

// runFinal runs the final passes on the state Build keeps. They read the
// plan alone, so the spec, the hazard graph and the earlier passes' state
// are let go first: on a big spec the final passes run in that much less
// memory (the caller's spec is freed too if the caller holds it no more).
func (st *state) runFinal() error {
	st.spec, st.g, st.red, st.redPred, st.arenaInfo, st.keep = nil, nil, nil, nil, nil, nil
	st.topo, st.pos, st.dur, st.level, st.stream = nil, nil, nil, nil, nil
	for _, ps := range passes {
		if ps.final && (ps.required || !st.manual) {
			if err := st.run(ps); err != nil {
				return err
			}
		}
	}
	return nil
}

// flushDump writes the run's DumpAfter output to Options.Dump (st may be nil).
func (st *state) flushDump() {
	if st != nil && st.opts.Dump != nil && st.dumped.Len() > 0 {
		st.opts.Dump.Write(st.dumped.Bytes())
	}
}

// note records a quality limit the plan met, for Plan.Notes.
func (st *state) note(format string, args ...any) {
	st.notes = append(st.notes, fmt.Sprintf(format, args...))
}

// newState checks the options, analyses hazards and fixes the shared
// topological order (with keep, that of keep's plan: keptStreams); for
// manual specs it also builds the plan as written.
func newState(s *dag.Spec, o Options, low *lowering, keep *keptStreams) (st *state, err error) {
	st = &state{spec: s, opts: o, start: time.Now(), matching: -1, n: len(s.Stages), keep: keep}
	if low != nil {
		st.coll, st.origin = low.coll, low.origin
		st.notes = append(st.notes, low.notes...)
	}
	if o.StreamSets > 1 && s.Sync == dag.SyncManual {
		return nil, fmt.Errorf("planner: %d stream sets with a manual spec (sync: manual): its waits, lagged ones included, are its own and order its iterations on one stream set; drop the stream sets, or let dagrun plan the waits (sync: auto)", o.StreamSets)
	}
	st.strategy = cmp.Or(o.Strategy, Strategy(s.Options.Strategy), StrategyDefault)
	switch st.strategy {
	case StrategyDefault, StrategySingle, StrategyRoundRobin, StrategyNaive, StrategyHazardDAG:
	default:
		return nil, fmt.Errorf("planner: unknown strategy %q (want default, single, round-robin, naive or hazard-dag)", st.strategy)
	}
	switch {
	case o.MaxStreams > 0:
		st.maxStr = o.MaxStreams
	case o.MaxStreams == 0:
		st.maxStr = max(s.Options.MaxStreams, 0)
	default:
		st.maxStr = 0 // uncapped
	}
	if o.DumpAfter != "" {
		known := false
		for _, ps := range passes {
			known = known || ps.name == o.DumpAfter
		}
		if !known {
			return nil, fmt.Errorf("planner: --dump-after %q (in Go, Options.DumpAfter): no such pass (passes: %v)", o.DumpAfter, Passes())
		}
		if o.Dump == nil {
			return nil, fmt.Errorf("planner: Options.DumpAfter %q without Options.Dump: set Dump to the writer the plan after that pass goes to", o.DumpAfter)
		}
	}
	if o.MemoryBudget < 0 && o.MemoryBudget != BudgetAuto && o.MemoryBudget != BudgetNone {
		return nil, fmt.Errorf("planner: memory budget %d (in Go, Options.MemoryBudget): want bytes > 0, 0 for the spec's own, BudgetAuto or BudgetNone (on the command line, --memory-budget BYTES, auto or none)", o.MemoryBudget)
	}
	// The hazard-dag strategy plans the whole hazard DAG, implied edges
	// included; the others see its transitive reduction (reduce), the
	// same for both graphs.
	hazards := dag.Hazards
	if st.strategy == StrategyHazardDAG {
		hazards = dag.AllHazards
	}
	if st.g, err = hazards(s); err != nil {
		return nil, err
	}
	st.dur = make([]float64, st.n)
	for i, sg := range s.Stages {
		st.dur[i] = plan.CostUS(sg.DurationUS)
	}
	st.setDevices()
	if err := st.order(); err != nil {
		return nil, err
	}
	if s.Sync == dag.SyncManual {
		st.manual = true
		st.strategy = Strategy(dag.SyncManual)
		for _, ps := range passes {
			if ps.name == o.DumpAfter && !ps.required {
				var ran []string
				for _, q := range passes {
					if q.required {
						ran = append(ran, q.name)
					}
				}
				return nil, fmt.Errorf("planner: --dump-after %q (in Go, Options.DumpAfter): a sync: manual spec does not run that pass (its streams and waits are the spec's own); dump after one of %s", o.DumpAfter, strings.Join(ran, ", "))
			}
		}
		if err := st.buildManual(); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// run runs one pass, recovering a panic into an error that names the pass.
func (st *state) run(ps pass) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("planner: pass %q panicked: %v\n%s", ps.name, r, debug.Stack())
		}
	}()
	t0 := time.Now()
	err = ps.fn(st)
	st.timings = addTime(st.timings, ps.name, time.Since(t0))
	if err != nil {
		if errors.As(err, new(dag.ErrorList)) {
			return err // a spec error: at its file:line:col, as the loader's
		}
		return fmt.Errorf("planner: pass %q: %w", ps.name, err)
	}
	if st.opts.Check && st.plan != nil {
		if err := st.plan.Validate(); err != nil {
			return fmt.Errorf("after pass %q: %w", ps.name, err)
		}
		if st.acc != nil && st.accPlan == st.plan && !slices.Equal(st.acc.buf, newPlanAccesses(st.plan).buf) {
			return fmt.Errorf("after pass %q: the buffers of the plan's accesses are not those the passes share", ps.name)
		}
		// A manual plan is the user's to check (Verify reports its races).
		if err := verifyPlan(st.plan); err != nil && !st.manual {
			var race *verify.RaceError
			if !errors.As(err, &race) {
				return fmt.Errorf("after pass %q: %w", ps.name, err)
			}
			if st.passRace == nil {
				st.passRace = &PassRaceError{Pass: ps.name, Err: race}
			}
		}
	}
	if st.opts.DumpAfter == ps.name && st.opts.Dump != nil {
		fmt.Fprintf(&st.dumped, "# after pass %q\n", ps.name)
		st.dump(&st.dumped, ps.name)
	}
	return nil
}

// dump writes the state after pass name: the plan once sync has made one,
// else the pass's own result.
func (st *state) dump(w io.Writer, name string) {
	if st.plan != nil {
		st.plan.WriteTable(w)
		return
	}
	switch name {
	case "reduce":
		fmt.Fprintf(w, "reduced edges: %d of %d\n", st.red.edges(), st.g.NumEdges())
		for _, u := range st.topo {
			for _, v := range st.red.row(int(u)) {
				fmt.Fprintf(w, "%s -> %s\n", st.spec.Stages[u].Name, st.spec.Stages[v].Name)
			}
		}
	case "assign":
		for _, v := range st.topo {
			if s := int(st.stream[v]); st.spec.Devices > 1 && s < len(st.streamDev) && !st.spec.IsHostStream(st.names[s]) && st.names[s] != dag.HostStream {
				fmt.Fprintf(w, "%s: %s (device %d)\n", st.spec.Stages[v].Name, st.names[s], st.streamDevice(s))
				continue
			}
			fmt.Fprintf(w, "%s: %s\n", st.spec.Stages[v].Name, st.names[st.stream[v]])
		}
	}
}

// verifyPlan is the check run after each pass in check mode.
var verifyPlan = verify.Verify

// ringCopiesFit returns a spec error at the buffer whose ring copies take
// the spec's copies beyond one each past MaxExtraSlots, the most a plan
// holds (Validate), or nil.
func ringCopiesFit(s *dag.Spec) error {
	extra := 0
	for _, b := range s.Buffers {
		if b.Copies <= 1 {
			continue
		}
		if extra += b.Copies - 1; extra > plan.MaxExtraSlots {
			return dag.ErrorList{{Pos: b.Pos,
				Msg:  fmt.Sprintf("buffer %s: copies %d takes the spec's ring copies to %d beyond one each, more than %d", b.Name, b.Copies, extra, plan.MaxExtraSlots),
				Hint: "give fewer copies: one per iteration in flight is enough"}}
		}
	}
	return nil
}
