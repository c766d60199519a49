package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/num"
	"github.com/dagrun/dagrun/plan"
)

// Kinds of budget steps (BudgetStep.Kind).
const (
	// BudgetReuse orders buffers whose live ranges are already disjoint in
	// the plan's ideal schedule, so that they may share bytes. Where that
	// schedule is the hazard graph's earliest (the default strategy,
	// uncapped, no pins) the ordering edges do not lengthen the critical
	// path; elsewhere it is that of the plan's streams, and the edges can
	// lengthen it (BudgetStep.CostUS).
	BudgetReuse = "reuse"
	// BudgetSerialize delays a buffer's first use until another buffer
	// live at the peak is dead: the step trades makespan for memory.
	BudgetSerialize = "serialize"
)

// BudgetError is Build's error when memory_budget cannot be met by the
// budget steps: no more buffer orders are possible (every pair of buffers
// live together at the peak is a producer and its consumer, or would make
// a cycle), or three steps in a row did not lower the smallest arena. A
// plan on fewer streams (a serial schedule, at the extreme) may still meet
// it, at the cost of concurrency; the message says so.
type BudgetError struct {
	Budget int64             // bytes asked for, per device
	Arena  int64             // the smallest arena reached, bytes (the largest device's: BudgetArena)
	Steps  []plan.BudgetStep // the steps taken
	// PerDevice is set when the plan has several devices: the budget caps
	// each device's arena, and Arena and StartArena are the largest's.
	PerDevice bool
	// StartArena and StartMakespanUS describe the plan before the first step.
	StartArena      int64
	StartMakespanUS float64
	// StageBytes is the most arena bytes one stage touches (aligned, of
	// one device), by stage StageName: they are live together while it
	// runs, in every plan, so no plan meets a budget below it.
	StageBytes int64
	StageName  string
}

func (e *BudgetError) Error() string {
	var b strings.Builder
	what := "arena"
	if e.PerDevice {
		what = "arena of the largest device (the budget caps each device's)"
	}
	over := fmt.Sprintf("(%.1f%%) over", 100*float64(e.Arena-e.Budget)/float64(max(e.Budget, 1)))
	if e.Arena > 10*e.Budget { // a percentage of a small budget says little
		over = fmt.Sprintf("over (%.0f× the budget)", float64(e.Arena)/float64(max(e.Budget, 1)))
	}
	fmt.Fprintf(&b, "memory_budget %d bytes cannot be met: the smallest %s reached is %d bytes, %d bytes %s, after %d step(s) from %d bytes; ",
		e.Budget, what, e.Arena, e.Arena-e.Budget, over, len(e.Steps), e.StartArena)
	if e.StageBytes > e.Budget {
		fmt.Fprintf(&b, "no plan meets it: stage %s alone touches %d bytes of arena temps, live together while it runs whatever the order; raise the budget to at least %d bytes or split its buffers",
			e.StageName, e.StageBytes, e.StageBytes)
	} else {
		fmt.Fprintf(&b, "raise the budget by at least %d bytes, plan on fewer streams (--max-streams N; --strategy single: one stream, usually the least memory, no concurrency) or split large buffers", e.Arena-e.Budget)
	}
	return b.String()
}

// Special values of Options.MemoryBudget.
const (
	// BudgetAuto aims at 1.1× the live bound of the plan's own schedule
	// (LiveBound) with reuse steps only, which cost no makespan (a step
	// whose re-plan on capped streams comes out longer is not taken); it
	// stops where those cannot get there, with a note (Plan.Notes).
	BudgetAuto = dag.MemoryBudgetAuto
	// BudgetNone plans without a budget, whatever the spec says.
	BudgetNone = -2
)

// BudgetArena is the arena bytes memory_budget caps in p: its arena, or
// with several devices the largest device's (Stats.ArenaBytesPerDevice),
// since each GPU has its own memory and the budget holds for each.
func BudgetArena(p *plan.Plan) int64 {
	if per := p.Stats.ArenaBytesPerDevice; len(per) > 0 {
		return slices.Max(per)
	}
	return p.Stats.ArenaBytes
}

// budgetMaxSteps bounds the budget loop's steps.
const budgetMaxSteps = 2000

// budget is the state of Build's memory_budget loop. The loop meets
// memory_budget (bytes) by adding ordering edges (after: edges between
// stages) and re-planning: first edges that only order buffers already
// dead-before-alive in the ideal schedule, which the arena can then share
// (laid out over the schedule's live ranges; where that schedule is the
// hazard graph's earliest these do not lengthen the critical path), then,
// while the arena is still over the budget, one serializing order at a
// time at the peak of live bytes, the cheapest
// first (the smallest increase of the critical path, exact for one order
// since all its edges run from one buffer's stages to another's), larger
// buffers first among equals. Each step is reported in Plan.Budget with
// its makespan cost; *BudgetError says by how much an unreachable budget is
// missed.
type budget struct {
	limit int64 // bytes
	auto  bool
	names []string          // buffer names (Plan.Buffers order, the same in every re-plan)
	extra map[[2]int32]bool // after: edges added so far (u → v: u before v)
	hint  map[int]int64     // the arena layout the next re-plan tries (reuse steps)
	// keep is the plan's streams for a reuse step's re-plan to keep when
	// one with streams chosen anew comes out longer (keptStreams).
	keep   *keptStreams
	reused bool   // the last step was a reuse step
	swept  string // the note of a reuse step laid out by timeSweep (the last taken one's), for the final plan
	// sweptNext is that note of the step being taken, kept in swept once
	// the plan takes the step (record).
	sweptNext string
	// notTaken is the note of an auto step not taken (worse).
	notTaken string
	// start is the plan's Stats before the first step (Plan.BudgetStart).
	start plan.Stats
	steps []plan.BudgetStep
	berr  BudgetError
	// the step being taken
	pairs [][2]int
	edges int
}

// newBudget returns the loop state for st's first plan, or nil when there
// is no budget to meet (none asked for, or met already; auto with a manual
// spec).
//
// Errors: a budget (auto too) with an arena mode other than planned, or a
// byte budget for a sync: manual spec whose arena is over it (its order is
// the user's). docs/design/budget.md has the design of the loop.
func newBudget(st *state) (*budget, error) {
	limit := budgetLimit(st.spec, st.opts)
	p := st.plan
	auto := limit == BudgetAuto
	if limit <= 0 && !auto {
		return nil, nil
	}
	if mode := cmp.Or(st.opts.Arena, st.spec.Options.Arena, dag.ArenaPlanned); mode != dag.ArenaPlanned {
		return nil, fmt.Errorf("planner: memory_budget needs the planned arena (arena: %s): drop the budget, or plan the arena (arena: planned)", mode)
	}
	if auto {
		// Each device's arena within 10% of the largest device's live
		// bound (one device: of the plan's).
		var lb int64
		for d := range p.DeviceCount() {
			if p.DeviceCount() == 1 {
				d = -1
			}
			lb = max(lb, liveBound(p, st.accesses(), d, nil))
		}
		limit = lb * 11 / 10
	}
	if BudgetArena(p) <= limit {
		return nil, nil
	}
	if st.manual {
		if auto {
			return nil, nil
		}
		return nil, fmt.Errorf("planner: memory_budget %d bytes: the arena is %d bytes, and a sync: manual spec cannot be re-ordered; order its stages by hand or use sync: auto", limit, BudgetArena(p))
	}
	b := &budget{limit: limit, auto: auto, extra: map[[2]int32]bool{}}
	for _, pb := range p.Buffers {
		b.names = append(b.names, pb.Name)
	}
	b.berr = BudgetError{Budget: limit, StartArena: BudgetArena(p), StartMakespanUS: p.Stats.IdealMakespanUS, PerDevice: p.DeviceCount() > 1}
	if !auto {
		// Every re-plan has the same buffers and stages: a stage whose
		// temps alone are over the budget is over it in all of them, and
		// no step is tried (met).
		b.berr.StageBytes, b.berr.StageName = st.stageBytes()
	}
	b.start = p.Stats
	return b, nil
}

// met reports whether st's plan is within the budget or the loop is out
// of steps: budgetMaxSteps in all, budgetStale in a row that did not
// lower the smallest arena reached, or none at all where one stage alone
// touches more than the budget (BudgetError.StageBytes).
func (b *budget) met(st *state) bool {
	if BudgetArena(st.plan) <= b.limit || len(b.steps) >= budgetMaxSteps || b.berr.StageBytes > b.limit {
		return true
	}
	best, stale := b.berr.StartArena, 0
	for _, s := range b.steps {
		if s.ArenaBytes < best {
			best, stale = s.ArenaBytes, 0
		} else {
			stale++
		}
	}
	return stale >= budgetStale
}

// worse reports whether next, the re-plan after a step of memory_budget
// auto, is worse than st's plan, with a longer ideal makespan or a larger
// arena (BudgetArena), and then keeps a note of it for the final plan
// (b.notTaken): auto takes only orders that cost nothing. A reuse step
// orders buffers that st's ideal schedule already runs one after the
// other, but under a stream cap (or pins, or another strategy) that
// schedule is that of st's streams, not the hazard graph's earliest: the
// edges can lengthen the critical path (docs/design/budget.md has an
// example), and the re-plan folds its chains onto other streams,
// which can cost makespan. The step's layout is laid out over st's ideal
// schedule; the re-plan's arena pass takes it only where it holds for the
// re-plan, and lays the arena out anew where it does not (on several
// devices, for each device), which can come out larger. A byte budget
// takes the step whatever it costs (its cost is in Plan.Budget).
func (b *budget) worse(st, next *state) bool {
	if !b.auto {
		return false
	}
	const not = "memory_budget auto: a reuse step (%d buffer orders) was not taken: "
	if longer(next, st) {
		was, now := st.plan.Stats.IdealMakespanUS, next.plan.Stats.IdealMakespanUS
		b.notTaken = fmt.Sprintf(not+"re-planned on %d streams its ideal makespan was %.1f µs, %.1f µs over the %.1f µs of the plan before it, and auto takes only orders that cost no makespan (a budget in bytes takes them, with their cost)",
			len(b.pairs), len(next.plan.Streams), now, now-was, was)
		return true
	}
	if was, now := BudgetArena(st.plan), BudgetArena(next.plan); now > was {
		b.notTaken = fmt.Sprintf(not+"re-planned, its arena was %s bytes, %s over the %s of the plan before it",
			len(b.pairs), num.Thousands(int(now)), num.Thousands(int(now-was)), num.Thousands(int(was)))
		return true
	}
	return false
}

// budgetStale is how many steps in a row may leave the smallest arena
// reached where it is before the loop gives up.
const budgetStale = 3

// choose picks the next step's buffer orders from st's plan and adds their
// edges to b.extra: the reuse pairs of the ideal schedule's layout (once
// after each serializing step), else (not auto) the cheapest serializing
// pair. ok is false when no step is left.
func (b *budget) choose(st *state) (kind string, ok bool) {
	kind = BudgetReuse
	b.pairs, b.hint, b.keep = nil, nil, nil
	if !b.reused {
		b.pairs, b.hint, b.sweptNext = st.reusePairs()
		b.reused = true
		if len(b.pairs) > 0 {
			b.keep = st.keepStreams()
		}
	}
	if len(b.pairs) == 0 {
		if b.auto {
			return "", false // auto: free orders only
		}
		kind = BudgetSerialize
		pairs := st.serializePairs(b.limit)
		if len(pairs) == 0 {
			return "", false
		}
		b.pairs, b.hint, b.reused = pairs, nil, false
	}
	b.edges = 0
	stages := st.bufferStages()
	if st.coll != nil {
		b.pairs = keepRendezvous(st, b.pairs, stages)
		if len(b.pairs) == 0 {
			return "", false
		}
	}
	for _, pr := range b.pairs {
		for _, u := range stages[pr[0]] {
			for _, v := range stages[pr[1]] {
				if e := [2]int32{u, v}; !b.extra[e] {
					b.extra[e] = true
					b.edges++
				}
			}
		}
	}
	return kind, true
}

// spec returns s with b's extra orders as after: edges.
func (b *budget) spec(s *dag.Spec) *dag.Spec {
	out := *s
	out.Stages = slices.Clone(s.Stages)
	es := make([][2]int32, 0, len(b.extra))
	for e := range b.extra {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b [2]int32) int { return cmp.Or(cmp.Compare(a[1], b[1]), cmp.Compare(a[0], b[0])) })
	for i, e := range es {
		v := &out.Stages[e[1]]
		if i == 0 || es[i-1][1] != e[1] {
			v.After = slices.Clip(v.After)
		}
		v.After = append(v.After, out.Stages[e[0]].Name)
	}
	return &out
}

// record adds the step just re-planned as st.
func (b *budget) record(kind string, st *state) {
	orders := make([]string, 0, len(b.pairs))
	for _, pr := range b.pairs {
		orders = append(orders, b.names[pr[0]]+"<"+b.names[pr[1]])
	}
	slices.Sort(orders)
	n := len(orders)
	if len(orders) > 8 {
		orders = append(orders[:8:8], "…")
	}
	prev := b.berr.StartMakespanUS
	if len(b.steps) > 0 {
		prev = b.steps[len(b.steps)-1].MakespanUS
	}
	if b.sweptNext != "" {
		b.swept, b.sweptNext = b.sweptNext, ""
	}
	m := st.plan.Stats.IdealMakespanUS
	b.steps = append(b.steps, plan.BudgetStep{Kind: kind, Orders: orders, Pairs: n, Edges: b.edges, KeptStreams: st.keep != nil,
		ArenaBytes: BudgetArena(st.plan), MakespanUS: m, CostUS: m - prev})
}

// longer reports whether next's plan has a longer ideal makespan than st's.
func longer(next, st *state) bool {
	return next.plan.Stats.IdealMakespanUS > st.plan.Stats.IdealMakespanUS+1e-6
}

// finish ends the loop on st's plan: a *BudgetError when a byte budget is
// not met, else the steps in Plan.Budget (and, for auto, a note when the
// free orders stop short of the aim).
func (b *budget) finish(st *state) error {
	arena := BudgetArena(st.plan)
	if arena > b.limit && !b.auto {
		e := b.berr
		e.Arena, e.Steps = arena, b.steps
		for _, s := range b.steps {
			e.Arena = min(e.Arena, s.ArenaBytes)
		}
		return &e
	}
	st.plan.Budget = b.steps
	for _, n := range []string{b.swept, b.notTaken} {
		if n != "" {
			st.note("%s", n)
		}
	}
	if arena > b.limit {
		what, bound := "the arena", "the live bound"
		if per := st.plan.Stats.ArenaBytesPerDevice; len(per) > 1 {
			// The aim caps each device's arena: name the largest.
			what = fmt.Sprintf("the arena of device %d (the largest; the aim caps each device's)", slices.Index(per, arena))
			bound = "the largest device's live bound"
		}
		st.note("memory_budget auto: %s is %s bytes, %s bytes above its aim of 1.1× %s (%s bytes): the orders that cost no makespan are used up, and serializing ones would trade makespan for memory (a budget in bytes takes those)",
			what, num.Thousands(int(arena)), num.Thousands(int(arena-b.limit)), bound, num.Thousands(int(b.limit)))
	}
	return nil
}

// stageBytes returns the most arena bytes one stage of st's plan touches
// (aligned sizes, the buffers of one device) and that stage's name.
func (st *state) stageBytes() (int64, string) {
	bv := st.view()
	p := st.plan
	type key struct{ stage, device int32 }
	sum := map[key]int64{}
	var most int64
	name := ""
	for k, b := range bv.a.bufs {
		for _, v := range bv.stages[k] {
			at := key{v, int32(p.Buffers[b.idx].Device)}
			if sum[at] += b.size; sum[at] > most {
				most, name = sum[at], p.Stages[v].Name
			}
		}
	}
	return most, name
}
