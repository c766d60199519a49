package planner

import (
	"bytes"
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// Strategies of stream assignment (Options.Strategy, dag.Options.Strategy).
const (
	StrategyDefault    = "default"     // minimum path cover by maximum matching (Nimble §4.2), fewest waits
	StrategySingle     = "single"      // every stage on one stream
	StrategyRoundRobin = "round-robin" // stages of each level dealt round-robin over streams (Taskflow's capturer)
	StrategyNaive      = "naive"       // default streams, a wait on every cross-stream edge of the reduced graph
	StrategyHazardDAG  = "hazard-dag"  // greedy chains of the hazard DAG, a wait on every other hazard edge (no transitive reduction)
)

// Options control Build. The spec's own options (dag.Spec.Options) are the
// defaults; a field set here overrides them.
type Options struct {
	// Strategy is one of the Strategy constants; "" takes the spec's, else default.
	Strategy string
	// MaxStreams caps the number of streams: 0 takes the spec's max_streams
	// (uncapped if it has none), a negative value means uncapped whatever the
	// spec says. Pinned streams count toward the cap; if pins alone exceed
	// it, pins win. The hazard-dag strategy is never capped (Plan.Notes
	// says so when a cap was asked for).
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
	strategy string
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
	Err  *RaceError
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
// finished plan (not nil).
func Build(s *dag.Spec, o Options) (*plan.Plan, error) {
	start := time.Now()
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
	timings = addTimes(timings, st.timings)
	st.plan.Timings = timings
	if st.acc != nil && st.accPlan == st.plan {
		st.plan.AccBuf = st.acc.buf // a hint for Verify and WaitReasons (AccessBuffers)
	}
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
// collectAt stages or more. Left to itself, Go's collector sets the next
// heap goal to twice what its last cycle found live (GOGC=100); a cycle
// that marks during the sync pass finds the spec, the hazard graph and the
// plan all live, and lets the heap grow to twice that while the later
// passes and the verifier run, after the spec is dead: up to 3.4 KB per
// stage of peak memory at 100k stages where it is otherwise 2.3. A
// collection at the moment they die bases the goal on what is live then.
// Its cost is one mark of the live heap each: at 100k stages the whole
// `dagrun plan` takes 1–6% longer (six runs of each scale shape).
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
	st.strategy = cmp.Or(o.Strategy, s.Options.Strategy, StrategyDefault)
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
			return nil, fmt.Errorf("planner: --dump-after %q: no such pass (passes: %v)", o.DumpAfter, Passes())
		}
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
		st.strategy = dag.SyncManual
		for _, ps := range passes {
			if ps.name == o.DumpAfter && !ps.required {
				var ran []string
				for _, q := range passes {
					if q.required {
						ran = append(ran, q.name)
					}
				}
				return nil, fmt.Errorf("planner: --dump-after %q: a sync: manual spec does not run that pass (its streams and waits are the spec's own); dump after one of %s", o.DumpAfter, strings.Join(ran, ", "))
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
			var race *RaceError
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

// order computes the topological order the passes share: the hazard graph's
// stable order, or in check mode with a shuffle seed, Kahn's algorithm with
// a seeded random priority among ready stages, or with a kept plan
// (st.keep), Kahn's algorithm with the kept plan's order as the priority
// (keptStreams: its stages by start in its ideal schedule, a topological
// order of this graph too, which Kahn's algorithm then returns as it is,
// so that each stream keeps its order). A collective's ranks are one
// rendezvous, issued as one group, so they are consecutive in the order
// (rank 0 first): with collectives the order is Kahn's algorithm on the
// graph with each collective's ranks taken as one node, the smallest
// declaration index (or the seeded priority) first among ready nodes.
//
// Errors: a collective whose ranks cannot be consecutive (a stage must run
// after one rank and before another: the collective would deadlock).
func (st *state) order() error {
	n := st.n
	shuffle := st.opts.Check && st.opts.ShuffleSeed != 0
	if !shuffle && st.coll == nil && st.keep == nil {
		st.topo = st.g.Order()
	} else {
		prio := make([]uint64, n)
		if st.keep != nil {
			prio = st.keep.prio
		} else if shuffle {
			rng := rand.New(rand.NewPCG(uint64(st.opts.ShuffleSeed), 0x9E3779B97F4A7C15))
			for i := range prio {
				prio[i] = rng.Uint64()
			}
		} else {
			for i := range prio {
				prio[i] = uint64(i)
			}
		}
		unit := st.units()
		size := make([]int32, n)
		for v := 0; v < n; v++ {
			size[unit[v]]++
		}
		indeg := make([]int32, n)
		for v := 0; v < n; v++ {
			for _, u := range st.g.Pred(v) {
				if unit[u] != unit[v] {
					indeg[unit[v]]++
				}
			}
		}
		h := &prioHeap{prio: prio}
		for v := 0; v < n; v++ {
			if unit[v] == int32(v) && indeg[v] == 0 {
				heap.Push(h, int32(v))
			}
		}
		st.topo = make([]int32, 0, n)
		for h.Len() > 0 {
			u := heap.Pop(h).(int32)
			for m := u; m < u+size[u]; m++ {
				st.topo = append(st.topo, m)
			}
			for m := u; m < u+size[u]; m++ {
				for _, v := range st.g.Succ(int(m)) {
					if w := unit[v]; w != u {
						if indeg[w]--; indeg[w] == 0 {
							heap.Push(h, w)
						}
					}
				}
			}
		}
		if len(st.topo) < n {
			for v := 0; v < n; v++ {
				if unit[v] == int32(v) && size[v] > 1 && indeg[v] > 0 {
					return fmt.Errorf("planner: the ranks of collective %s cannot be issued as one group: a stage is ordered after one of its ranks and before another, and no rank completes before every rank has started (a deadlock); order that stage before every rank or after every rank",
						rankGroupName([]string{st.spec.Stages[v].Name}))
				}
			}
			return fmt.Errorf("planner: the order has a cycle")
		}
	}
	st.pos = make([]int32, n)
	for i, v := range st.topo {
		st.pos[v] = int32(i)
	}
	return nil
}

// units returns, per stage, the node it is in the graph the order and the
// budget loop work on: a collective's ranks are one node, numbered by its
// rank 0 (lowerDevices puts the ranks consecutively, rank 0 first); every
// other stage is its own.
func (st *state) units() []int32 {
	unit := make([]int32, st.n)
	for v := range unit {
		unit[v] = int32(v)
		if st.coll != nil && v > 0 && v < len(st.coll) && st.coll[v] != nil && st.coll[v].Rank > 0 {
			unit[v] = unit[v-1]
		}
	}
	return unit
}

type prioHeap struct {
	prio []uint64
	a    []int32
}

func (h *prioHeap) Len() int           { return len(h.a) }
func (h *prioHeap) Less(i, j int) bool { return h.prio[h.a[i]] < h.prio[h.a[j]] }
func (h *prioHeap) Swap(i, j int)      { h.a[i], h.a[j] = h.a[j], h.a[i] }
func (h *prioHeap) Push(x any)         { h.a = append(h.a, x.(int32)) }
func (h *prioHeap) Pop() any {
	x := h.a[len(h.a)-1]
	h.a = h.a[:len(h.a)-1]
	return x
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

// newPlan fills the spec-derived parts of a plan (stages without streams, buffers, kernels).
// The plan's strings are its own copies (planText), interned, so that the
// plan holds none of the spec's memory once the spec is let go.
func (st *state) newPlan() *plan.Plan {
	s := st.spec
	var src sourceText
	p := &plan.Plan{Version: plan.PlanVersion, Spec: strings.Clone(s.Name), Dir: s.Dir, Strategy: src.intern(st.strategy)}
	if s.Devices > 1 {
		p.Devices = s.Devices
	}
	p.Buffers = make([]plan.Buffer, len(s.Buffers))
	for i, b := range s.Buffers {
		p.Buffers[i] = plan.Buffer{Where: src.intern(cmp.Or(b.Where, dag.WhereDevice)), Role: src.intern(cmp.Or(b.Role, dag.RoleTemp)),
			Bytes: b.Bytes, Init: src.intern(b.Init.Kind), InitValue: b.Init.Value, InitPath: strings.Clone(b.Init.Path), InitSeed: b.Init.Seed, Copies: b.Copies, Device: max(b.Device, 0)}
		src.addString(&p.Buffers[i].Name, b.Name)
	}
	src.flush()
	p.Stages = make([]plan.Stage, len(s.Stages))
	na := 0
	used := map[string]bool{} // kernels
	for i := range s.Stages {
		sg := &s.Stages[i]
		na += len(sg.Reads) + len(sg.Writes)
		if i == 0 || sg.Kernel != s.Stages[i-1].Kernel {
			used[sg.Kernel] = true
		}
	}
	// The hazard analysis looked every access's buffer up already; the
	// plan's stages and buffers are the spec's, in its order.
	acc := &planAccesses{off: make([]int32, len(p.Stages)+1)}
	acc.buf = make([]int32, 0, na)
	flat := make([]plan.Access, 0, na) // one allocation for every stage's accesses
	conv := func(as []dag.Access) []plan.Access {
		start := len(flat)
		for _, a := range as {
			b := acc.buf[len(flat)]
			name := a.Buffer
			if b >= 0 {
				name = p.Buffers[b].Name
			} else {
				name = src.intern(name)
			}
			flat = append(flat, plan.Access{Buffer: name, Offset: a.Offset, Bytes: a.Bytes})
		}
		return flat[start:len(flat):len(flat)]
	}
	for i := range s.Stages {
		sg := &s.Stages[i]
		for _, b := range st.g.AccessBuffers(i) {
			if int(b) >= len(p.Buffers) {
				b = -1 // not declared: Validate reports it
			}
			acc.buf = append(acc.buf, b)
		}
		acc.off[i+1] = int32(len(acc.buf))
		p.Stages[i] = plan.Stage{DurationUS: sg.DurationUS, Kernel: src.intern(sg.Kernel), Go: sg.Go, Args: sg.Args,
			Grid: sg.Launch.Grid, Block: sg.Launch.Block, Reads: conv(sg.Reads), Writes: conv(sg.Writes), Pinned: src.intern(sg.Stream)}
		src.addString(&p.Stages[i].Name, sg.Name)
		if st.coll != nil {
			p.Stages[i].Collective = st.coll[i]
		}
		if i < len(st.origin) && st.origin[i] >= 0 && st.origin[i] != i {
			p.Stages[i].Seed = &st.origin[i]
		}
		if sg.Pos.Line > 0 {
			src.add(&p.Stages[i].Source, sg.Pos)
		}
	}
	src.flush()
	for _, k := range s.Kernels {
		if !used[k.Name] {
			continue
		}
		params := make([]string, len(k.Params))
		for i, pr := range k.Params {
			params[i] = pr.Name + ":" + pr.Type
		}
		p.Kernels = append(p.Kernels, plan.Kernel{Name: src.intern(k.Name), PTX: strings.Clone(k.PTX), Entry: strings.Clone(k.Entry), Params: params})
	}
	st.acc, st.accPlan = acc, p
	return p
}

// verifyPlan is the check run after each pass in check mode.
var verifyPlan = Verify

// sourceText writes positions as Pos.String() does ("file:line:col"),
// and copies of names (addString), into shared chunks of text, one string
// per chunk, so that a plan of a million stages does not hold a million
// small strings; intern copies the few distinct strings of a field (kernel
// names, stream names, enums) once each.
type sourceText struct {
	buf  []byte
	dsts []*string
	ends []int
	seen map[string]string
	// last is intern's latest answer: a field's strings repeat from
	// stage to stage, which the map need not be asked.
	lastIn, lastOut string
}

func (t *sourceText) add(dst *string, p dag.Pos) {
	t.grow()
	t.buf = append(t.buf, p.File...)
	t.buf = append(t.buf, ':')
	t.buf = strconv.AppendInt(t.buf, int64(p.Line), 10)
	t.buf = append(t.buf, ':')
	t.buf = strconv.AppendInt(t.buf, int64(p.Col), 10)
	t.dsts = append(t.dsts, dst)
	t.ends = append(t.ends, len(t.buf))
}

// addString sets *dst, at the next flush, to a copy of s.
func (t *sourceText) addString(dst *string, s string) {
	if len(s) > 4<<10 {
		*dst = strings.Clone(s)
		return
	}
	t.grow()
	t.buf = append(t.buf, s...)
	t.dsts = append(t.dsts, dst)
	t.ends = append(t.ends, len(t.buf))
}

func (t *sourceText) grow() {
	if len(t.buf) > 60<<10 {
		t.flush()
	}
	if t.buf == nil {
		t.buf = make([]byte, 0, 64<<10)
	}
}

// internMax bounds the strings intern keeps: past it, each is copied on its own.
const internMax = 4096

// intern returns a copy of s, the same copy for equal strings (the first
// internMax distinct ones).
func (t *sourceText) intern(s string) string {
	if s == "" {
		return ""
	}
	if s == t.lastIn {
		return t.lastOut
	}
	if c, ok := t.seen[s]; ok {
		t.lastIn, t.lastOut = s, c
		return c
	}
	if t.seen == nil {
		t.seen = map[string]string{}
	}
	c := strings.Clone(s)
	if len(t.seen) < internMax {
		t.seen[c] = c
	}
	return c
}

// flush sets the strings added since the last flush.
func (t *sourceText) flush() {
	text := string(t.buf)
	start := 0
	for k, dst := range t.dsts {
		*dst = text[start:t.ends[k]]
		start = t.ends[k]
	}
	t.buf, t.dsts, t.ends = t.buf[:0], t.dsts[:0], t.ends[:0]
}

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
