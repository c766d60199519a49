package planner

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/dagrun/dagrun/dag"
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
		fmt.Fprintf(&b, "no plan meets it: stage %s alone touches %d bytes of temps, live together while it runs whatever the order; raise the budget to at least %d bytes or split its buffers",
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
// the user's).
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
// edges can lengthen the critical path (layered 200 at the default cap of
// 8: 72 µs → 200), and the re-plan folds its chains onto other streams,
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
			len(b.pairs), plan.Thousands(int(now)), plan.Thousands(int(now-was)), plan.Thousands(int(was)))
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

// keptStreams is a plan's streams, which the re-plan after a reuse step
// keeps (state.keep). A reuse step orders only buffers that the plan's
// ideal schedule runs one after the other already (every stage of x ends
// before any stage of y starts), so that schedule meets the new orders as
// it is: with every stage on its stream there, in the same order, the
// re-plan's ideal schedule is the same, stage for stage, and so is its
// ideal makespan, where a re-plan that chose its streams anew (a new path
// cover, under a cap folded anew) could come out longer. The order is the
// plan's stages by start in that schedule (ties in its issue order): a
// topological order of the graph with the new orders, since each of its
// edges runs from a stage's end to a start no earlier (durations are at
// least 1 µs), and on each stream the order of the plan.
type keptStreams struct {
	stream []int32  // per stage: its stream in the kept plan
	names  []string // per stream of the kept plan: its name
	prio   []uint64 // per stage: its rank in the order above
	notes  []string // the kept plan's assign notes
}

// keepStreams returns st's plan's streams for the re-plan to keep.
func (st *state) keepStreams() *keptStreams {
	p := st.plan
	k := &keptStreams{stream: make([]int32, st.n), names: make([]string, len(p.Streams)), prio: make([]uint64, st.n), notes: st.assignNotes}
	for i, s := range p.Streams {
		k.names[i] = s.Name
	}
	for v := range p.Stages {
		k.stream[v] = int32(p.Stages[v].Stream)
	}
	start, _ := plan.IdealSchedule(p)
	order := slices.Clone(st.topo) // the issue order
	slices.SortStableFunc(order, func(u, v int32) int { return cmp.Compare(start[u], start[v]) })
	for i, v := range order {
		k.prio[v] = uint64(i)
	}
	return k
}

// groups sets grp, each stage's group for setStreams, to its kept stream:
// the pin's group (0..len(pinNames)-1) for a stream named by a pin, else
// one group per stream after those.
func (k *keptStreams) groups(grp []int32, pinNames []string) {
	pinned := make(map[string]int32, len(pinNames))
	for i, n := range pinNames {
		pinned[n] = int32(i)
	}
	P := int32(len(pinNames))
	for v, s := range k.stream {
		if g, ok := pinned[k.names[s]]; ok {
			grp[v] = g
		} else {
			grp[v] = P + s
		}
	}
}

// keepRendezvous returns the pairs whose orders, with those of st's graph,
// keep each collective's ranks one node of an acyclic graph (acyclicWith):
// an order from one rank to another through other stages would leave a
// rank waiting for another's completion, a deadlock, and the ranks could
// not be issued as one group. The whole batch is tried first, then, if it
// fails, each pair in turn.
func keepRendezvous(st *state, pairs [][2]int, stages [][]int32) [][2]int {
	var extra [][2]int32 // the orders of earlier steps are in st.g already
	add := func(extra [][2]int32, pr [2]int) [][2]int32 {
		for _, u := range stages[pr[0]] {
			for _, v := range stages[pr[1]] {
				extra = append(extra, [2]int32{u, v})
			}
		}
		return extra
	}
	all := extra
	for _, pr := range pairs {
		all = add(all, pr)
	}
	if st.acyclicWith(all) {
		return pairs
	}
	var kept [][2]int
	for _, pr := range pairs {
		if next := add(extra, pr); st.acyclicWith(next) {
			kept, extra = append(kept, pr), next
		}
	}
	return kept
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
			what, plan.Thousands(int(arena)), plan.Thousands(int(arena-b.limit)), bound, plan.Thousands(int(b.limit)))
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

// budgetView is the arena's view of a state for the budget loop: eligible
// buffers, their stages and their live ranges in the ideal schedule.
type budgetView struct {
	a      *arenaInfo
	stages [][]int32 // per arena buffer (index into a.bufs): stages touching it
	lo, hi []float64 // per arena buffer: live range in the ideal schedule, µs
}

func (st *state) view() *budgetView {
	p := st.plan
	a := st.arenaInfo // the arena pass's, of this plan (its eligible buffers and happens-before)
	if a == nil || a.p != p {
		a = newArenaInfo(p, st.accesses())
	}
	bv := &budgetView{a: a, stages: make([][]int32, len(a.bufs)), lo: make([]float64, len(a.bufs)), hi: make([]float64, len(a.bufs))}
	at := make([]int32, len(p.Buffers)) // per Plan.Buffers index: its a.bufs index, -1 if none
	for i := range at {
		at[i] = -1
	}
	for k, b := range a.bufs {
		at[b.idx] = int32(k)
		bv.lo[k], bv.hi[k] = math.Inf(1), math.Inf(-1)
	}
	start, end := plan.IdealSchedule(p)
	acc := st.accesses()
	for v := range p.Stages {
		for _, i := range acc.buf[acc.off[v]:acc.off[v+1]] {
			if i < 0 || at[i] < 0 {
				continue
			}
			k := at[i]
			if l := bv.stages[k]; len(l) == 0 || l[len(l)-1] != int32(v) {
				bv.stages[k] = append(l, int32(v))
			}
			bv.lo[k], bv.hi[k] = min(bv.lo[k], start[v]), max(bv.hi[k], end[v])
		}
	}
	return bv
}

// bufferStages returns, per Plan.Buffers index, the stages touching the
// buffer, in stage order: one pass over the accesses.
func (st *state) bufferStages() [][]int32 {
	p := st.plan
	idx := make(map[string]int32, len(p.Buffers))
	for i, b := range p.Buffers {
		idx[b.Name] = int32(i)
	}
	out := make([][]int32, len(p.Buffers))
	for v, sg := range p.Stages {
		for _, list := range [2][]plan.Access{sg.Reads, sg.Writes} {
			for _, x := range list {
				i, ok := idx[x.Buffer]
				if l := out[i]; ok && (len(l) == 0 || l[len(l)-1] != int32(v)) {
					out[i] = append(l, int32(v))
				}
			}
		}
	}
	return out
}

// reusePairs lays the arena out over the ideal schedule's live ranges
// (buffer x may precede y when x is dead before y is alive) and returns the
// pairs sharing bytes in that layout, with the layout (offset per
// Plan.Buffers index). It returns no pairs when that layout is no smaller
// than the arena. A pair is left out only when another occupant of its
// bytes orders it; one the plan orders already is kept, because that order
// may come from its streams alone (two buffers on one stream), which the
// re-plan, with the new orders in its path cover, need not keep (the
// reduce pass drops the edges the hazard order implies).
func (st *state) reusePairs() (pairs [][2]int, hint map[int]int64, swept string) {
	bv := st.view()
	a := bv.a
	k := make(map[*arenaBuf]int, len(a.bufs))
	for i, b := range a.bufs {
		k[b] = i
	}
	p := st.plan
	device := func(i int) int { return p.Buffers[a.bufs[i].idx].Device }
	timeBefore := func(x, y *arenaBuf) bool { // bytes are shared on one device only
		return bv.hi[k[x]] <= bv.lo[k[y]] && p.Buffers[x.idx].Device == p.Buffers[y.idx].Device
	}
	var offs []int64
	var size int64
	order := allBufs(len(a.bufs))
	slices.SortStableFunc(order, func(i, j int) int { return cmp.Compare(bv.lo[i], bv.lo[j]) })
	if live := overlapPairs(spans{bv.lo, bv.hi}.sub(order)); live <= greedyMaxPairs {
		offs, size = a.layout(timeBefore, spans{bv.lo, bv.hi}, allBufs(len(a.bufs)), bv.lo)
	} else {
		offs, size = a.timeSweep(bv.lo, bv.hi, device)
		in := make([]bool, len(p.Buffers))
		for _, b := range a.bufs {
			in[b.idx] = true
		}
		lb := liveBoundAll(p, st.accesses(), in)
		swept = fmt.Sprintf("memory_budget: the reuse step laid the arena out over the ideal schedule by a sweep in order of start alone: the greedy layout by size, which may find a smaller arena, is bounded at %s pairs of temps live together (this schedule has %s); the sweep's layout is %s",
			plan.Thousands(greedyMaxPairs), plan.Thousands(live), overLive(size, lb, "the ideal schedule"))
	}
	if size >= st.plan.Stats.ArenaBytes {
		return nil, nil, swept
	}
	// Only consecutive occupants of the same bytes need an order of their
	// own: x<y is implied when some z sharing bytes with both has x<z<y
	// (happens-before is transitive). A sweep in order of start keeps, per
	// device, the buffer that last took each byte of the layout: what y
	// finds over its bytes are its predecessors there (buffers sharing
	// bytes are disjoint in time: the layout's rule). Of those, by
	// decreasing end, one whose bytes a later one of them shares is ordered
	// through that one. Each buffer looks only at the occupants it
	// replaces, so the sweep is near-linear in buffers, however many share
	// the arena's bytes over the schedule.
	sweep := allBufs(len(a.bufs))
	slices.SortFunc(sweep, func(i, j int) int {
		return cmp.Or(cmp.Compare(bv.lo[i], bv.lo[j]), cmp.Compare(bv.hi[i], bv.hi[j]), cmp.Compare(i, j))
	})
	taken := map[int]*occupants{} // per device
	var prev []int32
	var pred, byLo []int
	for _, j := range sweep {
		y := a.bufs[j]
		dev := p.Buffers[y.idx].Device
		o := taken[dev]
		if o == nil {
			o = &occupants{}
			taken[dev] = o
		}
		prev = o.take(offs[j], offs[j]+y.size, int32(j), prev[:0])
		pred = pred[:0]
		for _, i := range prev {
			if timeBefore(a.bufs[i], y) {
				pred = append(pred, int(i))
			}
		}
		byLo = append(byLo[:0], pred...)
		slices.SortFunc(pred, func(p, q int) int { return cmp.Or(cmp.Compare(bv.hi[q], bv.hi[p]), cmp.Compare(p, q)) })
		slices.SortFunc(byLo, func(p, q int) int { return cmp.Or(cmp.Compare(bv.lo[q], bv.lo[p]), cmp.Compare(p, q)) })
		var later rangeSet
		next := 0
		for _, i := range pred {
			for next < len(byLo) && bv.lo[byLo[next]] >= bv.hi[i] {
				z := byLo[next]
				later.add(offs[z], offs[z]+a.bufs[z].size)
				next++
			}
			if !later.intersects(offs[i], offs[i]+a.bufs[i].size) {
				pairs = append(pairs, [2]int{a.bufs[i].idx, y.idx})
			}
		}
	}
	if len(pairs) == 0 {
		return nil, nil, swept
	}
	hint = make(map[int]int64, len(a.bufs))
	for i, b := range a.bufs {
		hint[b.idx] = offs[i]
	}
	return pairs, hint, swept
}

// timeSweep lays the arena buffers (a.bufs indices) out over their live
// ranges [lo, hi) in the ideal schedule (µs), in order of start, as the
// arena pass's sweep does over happens-before (best fit on its free list,
// here with every free block clean: a buffer dead by the time another
// starts may give it its bytes), each device's buffers above the previous
// device's (the arena is split by device after). Cost O(buffers ×
// (log buffers + sweepScan)). It returns the offsets (per a.bufs) and the
// arena size in bytes.
func (a *arenaInfo) timeSweep(lo, hi []float64, device func(i int) int) ([]int64, int64) {
	offs := make([]int64, len(a.bufs))
	byDevice := map[int][]int{}
	for i := range a.bufs {
		byDevice[device(i)] = append(byDevice[device(i)], i)
	}
	var base int64
	for _, d := range slices.Sorted(maps.Keys(byDevice)) {
		starts := byDevice[d]
		slices.SortStableFunc(starts, func(i, j int) int { return cmp.Or(cmp.Compare(lo[i], lo[j]), cmp.Compare(hi[i], hi[j])) })
		ends := slices.Clone(starts)
		slices.SortStableFunc(ends, func(i, j int) int { return cmp.Compare(hi[i], hi[j]) })
		placed := make([]bool, len(a.bufs))
		f := &freeList{byStart: map[int64]*freeBlock{}, byEnd: map[int64]*freeBlock{}}
		anyBlock := func(*freeBlock) bool { return true }
		var top int64
		e := 0
		for _, i := range starts {
			for ; e < len(ends) && hi[ends[e]] <= lo[i]; e++ {
				if z := ends[e]; placed[z] {
					f.release(f.block(freeBlock{off: offs[z] - base, size: a.bufs[z].size, clean: math.Inf(-1)}), lo[i])
				}
			}
			size := a.bufs[i].size
			if size == 0 {
				offs[i] = base
				continue
			}
			placed[i] = true
			if b := f.bestFit(size, anyBlock); b != nil {
				offs[i] = base + b.off
				f.take(b, size)
				continue
			}
			if b := f.byEnd[top]; b != nil {
				offs[i] = base + b.off // the top block, grown to fit if need be
				if b.size >= size {
					f.take(b, size)
				} else {
					f.remove(b)
					top = b.off + size
				}
				continue
			}
			offs[i] = base + top
			top += size
		}
		base += top
	}
	return offs, base
}

// occupants is, over byte addresses, the buffer that last took each byte:
// disjoint segments sorted by address.
type occupants struct{ seg []occupied }

type occupied struct {
	lo, hi int64 // bytes [lo, hi)
	buf    int32
}

// take gives bytes [lo, hi) to buf and appends to prev the buffers that
// held some of them (each once, in increasing order).
func (o *occupants) take(lo, hi int64, buf int32, prev []int32) []int32 {
	if lo >= hi {
		return prev
	}
	s := o.seg
	i := sort.Search(len(s), func(k int) bool { return s[k].hi > lo })
	j := i
	for j < len(s) && s[j].lo < hi {
		prev = append(prev, s[j].buf)
		j++
	}
	slices.Sort(prev)
	prev = slices.Compact(prev)
	var repl [3]occupied
	n := 0
	if i < j && s[i].lo < lo {
		repl[n] = occupied{s[i].lo, lo, s[i].buf}
		n++
	}
	repl[n] = occupied{lo, hi, buf}
	n++
	if i < j && s[j-1].hi > hi {
		repl[n] = occupied{hi, s[j-1].hi, s[j-1].buf}
		n++
	}
	o.seg = slices.Replace(s, i, j, repl[:n]...)
	return prev
}

// serializePairs picks the orders x<y of one serializing step, between
// buffers live together at the peak of the ideal schedule's live bytes
// (aligned sizes; with several devices, of the buffers of the device with
// the largest arena, the one over the budget of limit bytes), of those where no stage of y reaches a stage of x (so
// the edges make no cycle, and no path uses two of them): the one with the
// smallest critical-path increase, then the largest y, then names; and
// while the delayed buffers' bytes are short of the excess (the arena's
// bytes over limit), the next ones in that order, so that a budget far away
// takes fewer re-plans. It returns no pairs when there is none.
func (st *state) serializePairs(limit int64) (pairs [][2]int) {
	bv := st.view()
	a := bv.a
	if len(a.bufs) == 0 {
		return nil
	}
	p := st.plan
	excess := BudgetArena(p) - limit
	dev := -1 // with several devices: the one whose arena is the largest
	if per := p.Stats.ArenaBytesPerDevice; len(per) > 0 {
		dev = slices.Index(per, slices.Max(per))
	}
	onDev := func(k int) bool { return dev < 0 || p.Buffers[a.bufs[k].idx].Device == dev }
	// Peak instant: sweep starts and ends (ends first at equal times).
	type ev struct {
		t     float64
		delta int64
	}
	var evs []ev
	for k, b := range a.bufs {
		if bv.lo[k] < bv.hi[k] && onDev(k) {
			evs = append(evs, ev{bv.lo[k], b.size}, ev{bv.hi[k], -b.size})
		}
	}
	slices.SortFunc(evs, func(x, y ev) int { return cmp.Or(cmp.Compare(x.t, y.t), cmp.Compare(x.delta, y.delta)) })
	var live, peak int64
	var at float64
	for _, e := range evs {
		live += e.delta
		if live > peak {
			peak, at = live, e.t
		}
	}
	var alive []int
	for k := range a.bufs {
		if bv.lo[k] <= at && at < bv.hi[k] && onDev(k) {
			alive = append(alive, k)
		}
	}
	_, eft := st.asap()
	tail := st.tails()
	var cp float64
	for v := range eft {
		cp = max(cp, eft[v])
	}
	// reach[k]: the stages some stage of alive buffer k reaches (itself
	// included), so that x<y makes no cycle iff no stage of x is in reach[y].
	reach := make(map[int][]bool, len(alive))
	for _, k := range alive {
		seen := make([]bool, st.n)
		stack := slices.Clone(bv.stages[k])
		for _, v := range stack {
			seen[v] = true
		}
		for len(stack) > 0 {
			u := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, w := range st.g.Succ(int(u)) {
				if !seen[w] {
					seen[w] = true
					stack = append(stack, w)
				}
			}
		}
		reach[k] = seen
	}
	acyclic := func(x, y int) bool {
		for _, u := range bv.stages[x] {
			if reach[y][u] {
				return false
			}
		}
		return true
	}
	type cand struct {
		x, y int
		cost float64
	}
	var cands []cand
	for _, x := range alive {
		for _, y := range alive {
			if x == y || !acyclic(x, y) {
				continue
			}
			var longest float64
			for _, u := range bv.stages[x] {
				for _, v := range bv.stages[y] {
					longest = max(longest, eft[u]+tail[v])
				}
			}
			cands = append(cands, cand{x, y, max(longest-cp, 0)})
		}
	}
	slices.SortFunc(cands, func(c, d cand) int {
		if math.Abs(c.cost-d.cost) > 1e-9 {
			return cmp.Compare(c.cost, d.cost)
		}
		cx, cy, dx, dy := a.bufs[c.x], a.bufs[c.y], a.bufs[d.x], a.bufs[d.y]
		return cmp.Or(cmp.Compare(dy.size, cy.size), cmp.Compare(cx.idx, dx.idx), cmp.Compare(cy.idx, dy.idx))
	})
	// The batch: the cheapest pair, then further pairs of buffers not yet
	// in it while the delayed buffers' bytes are short of excess, each kept
	// only if the batch's edges still make no cycle (a topological sort of
	// the hazard graph with them).
	used := make(map[int]bool)
	var extra [][2]int32
	var freed int64
	for i, c := range cands {
		if len(pairs) >= budgetMaxBatch || len(pairs) > 0 && (freed >= excess || i >= 4*budgetMaxBatch) {
			break
		}
		if used[c.x] || used[c.y] {
			continue
		}
		n := len(extra)
		for _, u := range bv.stages[c.x] {
			for _, v := range bv.stages[c.y] {
				extra = append(extra, [2]int32{u, v})
			}
		}
		if (len(pairs) > 0 || st.coll != nil) && !st.acyclicWith(extra) {
			extra = extra[:n]
			continue
		}
		used[c.x], used[c.y] = true, true
		freed += a.bufs[c.y].size
		pairs = append(pairs, [2]int{a.bufs[c.x].idx, a.bufs[c.y].idx})
	}
	return pairs
}

// budgetMaxBatch bounds the pairs of one serializing step.
const budgetMaxBatch = 64

// acyclicWith reports whether the hazard graph with the extra edges (u → v)
// has no cycle, each collective's ranks taken as one node (st.units: an
// edge between two ranks of one collective is a cycle): Kahn's algorithm,
// O(stages + edges).
func (st *state) acyclicWith(extra [][2]int32) bool {
	unit := st.units()
	indeg := make([]int32, st.n)
	out := make([][]int32, st.n)
	members := make([][]int32, st.n)
	nodes := 0
	for v := range st.n {
		members[unit[v]] = append(members[unit[v]], int32(v))
		if unit[v] == int32(v) {
			nodes++
		}
		for _, u := range st.g.Pred(v) {
			if unit[u] != unit[v] {
				indeg[unit[v]]++
			}
		}
	}
	for _, e := range extra {
		u, v := unit[e[0]], unit[e[1]]
		if u == v {
			if e[0] != e[1] {
				return false
			}
			continue
		}
		indeg[v]++
		out[u] = append(out[u], v)
	}
	var ready []int32
	for v := range st.n {
		if unit[v] == int32(v) && indeg[v] == 0 {
			ready = append(ready, int32(v))
		}
	}
	seen := 0
	for len(ready) > 0 {
		u := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		seen++
		dec := func(w int32) {
			if indeg[w]--; indeg[w] == 0 {
				ready = append(ready, w)
			}
		}
		for _, m := range members[u] {
			for _, w := range st.g.Succ(int(m)) {
				if unit[w] != u {
					dec(unit[w])
				}
			}
		}
		for _, w := range out[u] {
			dec(w)
		}
	}
	return seen == nodes
}

// tails returns, per stage, the longest path from its start to the end of
// the graph (its own duration included), µs.
func (st *state) tails() []float64 {
	tail := make([]float64, st.n)
	for i := len(st.topo) - 1; i >= 0; i-- {
		v := st.topo[i]
		var t float64
		for _, w := range st.g.Succ(int(v)) {
			t = max(t, tail[w])
		}
		tail[v] = t + st.dur[v]
	}
	return tail
}

// allBufs is 0..n-1, every arena buffer as layout's members.
func allBufs(n int) []int {
	m := make([]int, n)
	for i := range m {
		m[i] = i
	}
	return m
}
