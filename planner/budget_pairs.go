package planner

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/dagrun/dagrun/internal/num"
	"github.com/dagrun/dagrun/plan"
)

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
			num.Thousands(greedyMaxPairs), num.Thousands(live), overLive(size, lb, "the ideal schedule"))
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
