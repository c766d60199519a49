package planner

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// arena places temp buffers in one device arena. Two buffers may share
// bytes only when every access of the first happens-before the first access
// of the second in the plan's happens-before (stream order plus
// record→wait in issue order, Verify's notion): never because of host issue
// order or because the allocating stream is done. Offsets: greedy by size,
// best fit (Pisarchyk and Lee, "Efficient Memory Management for Deep Neural
// Net Inference", 2020, §4.3), 256-byte aligned, over every temp of the
// plan; each temp is compared only with those whose conservative lifetimes
// in issue order overlap its own (issueSpans, spanIndex), so the pass is
// near-linear in temps for plans whose temps die soon after their last use
// (a chain of k copies of a model costs k times one copy, and gets one
// copy's arena). The budget loop's layout (Build) replaces the offsets when
// it is smaller and valid. It also names each eligible temp's first stage
// (Lifetime.First) for --alloc dynamic. In an automatically synchronized
// plan with capture regions, a replay's order gets the waits that keep
// the sharing race-free (orderReplays); where none can, the spec is
// refused at the captured stage.
func arena(st *state) error {
	mode := cmp.Or(st.opts.Arena, st.spec.Options.Arena, dag.ArenaPlanned)
	switch mode {
	case dag.ArenaPlanned, dag.ArenaOff, dag.ArenaStreamOrder:
	default:
		return fmt.Errorf("unknown arena mode %q (want planned, off or stream-order)", mode)
	}
	p := st.plan
	if n := arenaCandidates(p); n > graphOrderMaxTemps && mode != dag.ArenaOff && !denseClocksFit(p) {
		// Each happens-before test would be a search of the plan's graph.
		for i := range p.Buffers {
			p.Buffers[i].ArenaOffset = nil
		}
		p.Stats.ArenaBytes = 0
		st.note("no arena: the arena pass asks happens-before of vector clocks, which for this plan would need %s entries (over %s), and past %s device temps (this plan has %s) a search of the plan's graph per question costs too much, so each temp keeps its own allocation (%s bytes in all, where a shared arena could reuse bytes between temps whose lifetimes are ordered)",
			plan.Thousands(launchHBSize(p)), plan.Thousands(launchHBMax), plan.Thousands(graphOrderMaxTemps), plan.Thousands(n), plan.Thousands(int(tempBytes(p))))
		return nil
	}
	a := newArenaInfo(p, st.accesses())
	st.arenaInfo = a
	for i := range p.Buffers {
		p.Buffers[i].ArenaOffset = nil
	}
	p.Stats.ArenaBytes = 0
	for _, b := range a.bufs {
		if f := a.first(b); f >= 0 && p.Lifetimes != nil {
			p.Lifetimes[b.idx].First = p.Stages[f].Name
		}
	}
	if mode == dag.ArenaOff {
		return nil
	}
	var offs []int64
	var size int64
	var sp spans
	var skipped, temps, segments int
	lb := int64(-1) // the live bound, when worked out beside the layout
	if mode == dag.ArenaStreamOrder {
		offs, size = a.layoutStreamOrder()
	} else {
		// Past arenaBoundEarly temps the layout is mostly the sweep alone,
		// whose note gives the live bound: it is worked out beside the
		// layout (both only read the plan), from the arena's buffers.
		var early sync.WaitGroup
		if len(a.bufs) >= arenaBoundEarly {
			in := make([]bool, len(p.Buffers))
			for _, b := range a.bufs {
				in[b.idx] = true
			}
			acc := st.accesses()
			early.Go(func() { lb = liveBoundAll(p, acc, in) })
		}
		sp = a.issueSpans()
		offs, size, skipped, temps, segments = a.layoutPlanned(sp)
		early.Wait()
	}
	for k, b := range a.bufs {
		p.Buffers[b.idx].ArenaOffset = &offs[k] // one allocation for them all
	}
	p.Stats.ArenaBytes = size
	if st.layoutHint != nil && mode == dag.ArenaPlanned {
		a.applyLayout(st.layoutHint, sp)
	}
	splitArena(p) // devices.go: one arena per device
	if !st.manual && len(p.Captures) > 0 {
		// Temps share bytes by stream mode's happens-before; a replay's
		// order gets the waits that keep it (capture_replay.go).
		n, left := orderReplays(p)
		if len(left) > 0 {
			return st.replayOrderError(p, left)
		}
		p.Stats.Waits += n
	}
	if skipped > 0 {
		// What it may cost: the arena against the least any arena of this
		// schedule needs (LiveBound).
		if lb < 0 {
			lb = liveBoundAll(p, st.accesses(), nil)
		}
		size := p.Stats.ArenaBytes
		st.note("arena by issue-order sweep alone in %s of %s segments (%s of %s temps): the greedy layout by size, which may find a smaller arena (on the model graphs up to 1.2× smaller), is bounded at %s pairs of temps with overlapping lifetimes per plan; the arena is %s",
			plan.Thousands(skipped), plan.Thousands(segments), plan.Thousands(temps), plan.Thousands(len(a.bufs)), plan.Thousands(greedyMaxPairs), overLive(size, lb, "this plan's ideal schedule"))
	}
	return nil
}

// overLive says how an arena of size bytes compares with lb, the bytes
// live at once in schedule, which no layout goes below, and what memory
// that may lose.
func overLive(size, lb int64, schedule string) string {
	if size <= lb {
		return fmt.Sprintf("%s bytes, the %s bytes live at once in %s, which no layout goes below: no memory is lost", plan.Thousands(int(size)), plan.Thousands(int(lb)), schedule)
	}
	return fmt.Sprintf("%s bytes, %s bytes (%.1f%%) over the %s bytes live at once in %s, which no layout goes below: at most that much memory is lost",
		plan.Thousands(int(size)), plan.Thousands(int(size-lb)), 100*float64(size-lb)/float64(max(lb, 1)), plan.Thousands(int(lb)), schedule)
}

// applyLayout replaces the arena's offsets by hint (per Plan.Buffers
// index; the budget loop's layout over the ideal schedule) when hint is
// smaller and valid: every two buffers sharing bytes are ordered by the
// plan's happens-before. Only buffers whose spans (sp) overlap can be
// unordered, so it asks the span index for those rather than every pair.
func (a *arenaInfo) applyLayout(hint map[int]int64, sp spans) {
	p := a.p
	var size int64
	offs := make([]int64, len(a.bufs))
	for k, b := range a.bufs {
		off, ok := hint[b.idx]
		if !ok || p.Buffers[b.idx].ArenaOffset == nil {
			return
		}
		offs[k] = off
		size = max(size, off+b.size)
	}
	if size >= p.Stats.ArenaBytes {
		return
	}
	ix := newSpanIndex(sp)
	for k := range a.bufs {
		ix.add(k)
	}
	var cand []int32
	for i, x := range a.bufs {
		cand = ix.overlapping(cand[:0], sp, i)
		for _, j := range cand {
			y := a.bufs[j]
			if int(j) > i && offs[i] < offs[j]+y.size && offs[j] < offs[i]+x.size && !a.before(x, y) && !a.before(y, x) {
				return
			}
		}
	}
	for k, b := range a.bufs {
		p.Buffers[b.idx].ArenaOffset = &offs[k]
	}
	p.Stats.ArenaBytes = size
}

// tempBytes is the bytes of p's device temps, each rounded up to ArenaAlign.
func tempBytes(p *plan.Plan) int64 {
	var n int64
	for _, b := range p.Buffers {
		if b.Role == dag.RoleTemp && b.Where == dag.WhereDevice {
			n += plan.AlignUp(b.Bytes)
		}
	}
	return n
}

// arenaCandidates counts the device temps, an upper bound on the buffers the
// arena could share.
func arenaCandidates(p *plan.Plan) int {
	n := 0
	for _, b := range p.Buffers {
		if b.Role == dag.RoleTemp && b.Where == dag.WhereDevice {
			n++
		}
	}
	return n
}

// arenaInfo is what the arena pass knows about a plan: the eligible
// buffers, with their launches per stream, and launch happens-before.
type arenaInfo struct {
	p      *plan.Plan
	hb     stageOrder
	issue  []int32 // per stage: position of its launch in IssueOrder
	stream []int32 // per stage: its stream
	bufs   []*arenaBuf
}

// stageOrder answers "does stage u's launch happen-before stage v's"
// (false for u == v).
type stageOrder interface{ before(u, v int32) bool }

// graphOrder is stageOrder by a search of the plan's happens-before graph
// (hb.go), for plans whose dense clocks (launchHB) would be too large.
type graphOrder struct {
	h      *hbGraph
	launch []int32 // per stage: its launch op
}

func (g graphOrder) before(u, v int32) bool { return u != v && g.h.reach(g.launch[u], g.launch[v]) }

// graphOrderMaxTemps bounds the device temps the arena pass lays out when
// its vector clocks do not fit (launchHBMax) and each happens-before test
// is a search of the plan's graph (graphOrder): past it the plan has no
// arena, with a note. Plans with the default stream cap have dense clocks
// of streams × waits entries, which fit up to about 2,000,000 waits.
const graphOrderMaxTemps = 2048

// launchHBMax bounds the clock entries (streams × rows) of launchHB that
// newArenaInfo builds; beyond it the arena asks the happens-before graph.
const launchHBMax = 1 << 24

// launchHBSize is the clock entries launchHB needs for p: streams × (waits+1).
func launchHBSize(p *plan.Plan) int {
	waits := 0
	for _, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == plan.OpWait {
				waits++
			}
		}
	}
	return len(p.Streams) * (waits + 1)
}

func denseClocksFit(p *plan.Plan) bool { return launchHBSize(p) <= launchHBMax }

// arenaBuf is one arena-eligible buffer.
type arenaBuf struct {
	idx        int   // index in Plan.Buffers
	size       int64 // bytes rounded up to ArenaAlign
	firstIssue int   // issue position of its first and last launch
	lastIssue  int
	// lists holds, in three thirds of equal room, the streams touching it
	// and the first and the last launch (stage) on each, n of each
	// (streams, firsts, lasts): one slice, not three.
	lists []int32
	n     int
}

func (b *arenaBuf) room() int        { return len(b.lists) / 3 }
func (b *arenaBuf) streams() []int32 { return b.lists[:b.n:b.room()] }
func (b *arenaBuf) firsts() []int32  { c := b.room(); return b.lists[c : c+b.n : 2*c] }
func (b *arenaBuf) lasts() []int32   { c := b.room(); return b.lists[2*c : 2*c+b.n : 3*c] }

// newArenaInfo finds the eligible buffers of p: device temps with one copy,
// touched by at least one stage, whose initial contents are never read
// (every byte a stage really reads was really written by an earlier-declared
// stage; see touched), so that their bytes may hold another buffer's data
// before their first use. acc is p's planAccesses (nil: made here).
func newArenaInfo(p *plan.Plan, acc *planAccesses) *arenaInfo {
	if acc == nil {
		acc = newPlanAccesses(p)
	}
	a := &arenaInfo{p: p}
	if denseClocksFit(p) {
		h := newLaunchHB(p)
		a.hb, a.issue = h, h.issue
	} else {
		h := hbEdges(p)
		g := graphOrder{h: h, launch: make([]int32, len(p.Stages))}
		a.issue = make([]int32, len(p.Stages))
		for s := range p.Streams {
			for j, o := range p.Streams[s].Ops {
				if o.Kind == plan.OpLaunch {
					g.launch[o.Stage] = h.opBase[s] + int32(j)
					a.issue[o.Stage] = h.opIssue[g.launch[o.Stage]]
				}
			}
		}
		a.hb = g
	}
	a.stream = make([]int32, len(p.Stages))
	for v := range p.Stages {
		a.stream[v] = int32(p.Stages[v].Stream)
	}
	ok := make([]bool, len(p.Buffers))
	for i, b := range p.Buffers {
		ok[i] = b.Role == dag.RoleTemp && cmp.Or(b.Where, dag.WhereDevice) == dag.WhereDevice && b.Copies <= 1
	}
	// Written byte ranges per buffer, swept in declaration order.
	written := make([]rangeSet, len(p.Buffers))
	one := make([][2]int64, len(p.Buffers)) // each set's first range, without an allocation of its own
	for i := range written {
		written[i] = one[i : i : i+1]
	}
	launches := make([]int32, len(p.Buffers)) // per buffer: the accesses of it
	var rbuf, wbuf []plan.Access
	for v := range p.Stages {
		rs, ws := touchedIn(&p.Stages[v], rbuf, wbuf) // none, or one per read and write
		// Keep the scratch that grew for the next stage.
		switch p.Stages[v].Kernel {
		case dag.BuiltinMix:
			rbuf, wbuf = rs[:0], ws[:0]
		case dag.BuiltinChecksum:
			wbuf = ws[:0]
		}
		rb, wb := acc.reads(p, v), acc.writes(p, v)
		for k, r := range rs {
			if i := rb[k]; i >= 0 && ok[i] && !written[i].covers(r.Offset, r.Offset+r.Bytes) {
				ok[i] = false
			}
		}
		for _, i := range acc.buf[acc.off[v]:acc.off[v+1]] {
			if i >= 0 {
				launches[i]++
			}
		}
		for k, w := range ws {
			if i := wb[k]; i >= 0 && ok[i] {
				written[i].add(w.Offset, w.Offset+w.Bytes)
			}
		}
	}
	byIdx := make([]*arenaBuf, len(p.Buffers))
	// One allocation for the buffers, and one for their lists by stream,
	// each list as long as the buffer's accesses or the streams, whichever
	// is fewer.
	nb, room := 0, 0
	for i := range p.Buffers {
		if ok[i] && launches[i] > 0 {
			nb++
			room += min(int(launches[i]), len(p.Streams))
		}
	}
	store := make([]arenaBuf, nb)
	lists := make([]int32, 3*room)
	a.bufs = make([]*arenaBuf, 0, nb)
	for i, b := range p.Buffers {
		if ok[i] && launches[i] > 0 {
			ab := &store[len(a.bufs)]
			c := min(int(launches[i]), len(p.Streams))
			*ab = arenaBuf{idx: i, size: plan.AlignUp(b.Bytes), firstIssue: math.MaxInt, lastIssue: -1, lists: lists[: 3*c : 3*c]}
			lists = lists[3*c:]
			byIdx[i] = ab
			a.bufs = append(a.bufs, ab)
		}
	}
	for k, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		if o.Kind != plan.OpLaunch {
			continue
		}
		v := o.Stage
		s := int32(so[0])
		for _, i := range acc.buf[acc.off[v]:acc.off[v+1]] {
			if i < 0 || byIdx[i] == nil {
				continue
			}
			ab := byIdx[i]
			ab.firstIssue, ab.lastIssue = min(ab.firstIssue, k), max(ab.lastIssue, k)
			j := slices.Index(ab.streams(), s)
			if j < 0 {
				c := ab.room()
				ab.lists[ab.n], ab.lists[c+ab.n], ab.lists[2*c+ab.n] = s, int32(v), int32(v)
				ab.n++
			} else {
				ab.lasts()[j] = int32(v)
			}
		}
	}
	return a
}

// first returns the stage whose launch is b's first use and happens-before
// every other launch that touches b, or -1 if b's first uses on different
// streams are not ordered (e.g. two unordered writers of its halves).
func (a *arenaInfo) first(b *arenaBuf) int {
	f := -1
	for _, v := range b.firsts() {
		if f < 0 || a.issue[v] < a.issue[f] {
			f = int(v)
		}
	}
	for _, v := range b.firsts() {
		if int(v) != f && !a.hb.before(int32(f), v) {
			return -1
		}
	}
	return f
}

// before reports whether x's bytes may be reused by y in the planned arena:
// every launch touching x happens-before every launch touching y. It is
// enough that each stream's last launch of x happens-before each stream's
// first launch of y; happens-before implies issue order, which prunes.
func (a *arenaInfo) before(x, y *arenaBuf) bool {
	if x.lastIssue >= y.firstIssue || a.p.Buffers[x.idx].Device != a.p.Buffers[y.idx].Device {
		return false
	}
	for _, u := range x.lasts() {
		for _, v := range y.firsts() {
			if !a.hb.before(u, v) {
				return false
			}
		}
	}
	return true
}

// beforeStreamOrder is the caching allocator's rule without record_stream,
// the record_stream mistake: x's bytes go back to the pool of the stream
// that allocated it (that of its first launch) once its last use has been
// issued, and the next allocation on that stream takes them, as if "the
// allocating stream is done" meant every stream were. Its plans have races
// whenever another stream still uses x; it exists to show them.
func (a *arenaInfo) beforeStreamOrder(x, y *arenaBuf) bool {
	return x.lastIssue < y.firstIssue && a.allocStream(x) == a.allocStream(y) && a.p.Buffers[x.idx].Device == a.p.Buffers[y.idx].Device
}

func (a *arenaInfo) allocStream(b *arenaBuf) int32 {
	best := 0
	for j, v := range b.firsts() {
		if a.issue[v] < a.issue[b.firsts()[best]] {
			best = j
		}
	}
	return b.streams()[best]
}

// spans are conservative lifetimes of the arena buffers on one axis,
// half-open [lo[k], hi[k]) per a.bufs index: two buffers whose spans are
// disjoint are ordered (either way) by the relation the layout shares bytes
// along. The layout then compares a buffer only with the placed buffers
// whose spans overlap its own (spanIndex), so its cost is near-linear in
// temps when few spans overlap, as in a DNN's schedule.
type spans struct{ lo, hi []float64 }

// issueSpans are the spans of happens-before: buffer b spans from its first
// launch's issue position to the issue position, plus one, of the latest
// first use of a temp (on any stream) that b's last uses do not all
// happen-before. A temp first used after that is therefore after every use
// of b. Two bounds find that position without asking every stream:
//
//   - cuts: launches after which every op issued later happens-after them
//     (in the op graph of stream order and record→wait, every later op has
//     a predecessor issued at or after the cut: one suffix minimum over
//     issue order, linear). The first cut after b's last uses that they
//     happen-before bounds b's span; in a chain of models, each model's
//     last stage is one.
//   - per stream whose temps' first uses fall between b's last use and
//     that cut, a binary search for the first of them after b (first uses
//     are in stream order there, and happens-before is monotone along a
//     stream).
//
// Cost: O(temps × (streams live in the span + 1) × log d) happens-before
// tests, d the first uses on a stream within the span.
func (a *arenaInfo) issueSpans() spans { return a.issueSpansBy(true) }

// spanColumnsMax bounds the streams for which issueSpans keeps, per stream,
// the clock column of each stream over its temps' first launches (streams²
// × first launches / streams entries).
const spanColumnsMax = 64

// issueSpansBy is issueSpans, with columns: for plans of dense clocks
// (launchHB) and at most spanColumnsMax streams, the clock entries of each
// stream's first launches, in a column per stream (nondecreasing along the
// stream, as happens-before is monotone), give each last use its first
// later first launch on every stream by one merge per pair of streams
// (firstAfter), and a temp's search on a stream starts from the latest of
// its last uses' (O(streams) per last use), instead of a happens-before
// test per launch and last use; without, by the tests. The spans are the
// same.
func (a *arenaInfo) issueSpansBy(columns bool) spans {
	p := a.p
	S := len(p.Streams)
	// fl, per stream: temps' first launches on it, in issue order (each
	// once); fi: their issue positions. One walk of the issue order.
	isFirst := make([]bool, len(p.Stages))
	count := make([]int, S)
	for _, b := range a.bufs {
		for j, v := range b.firsts() {
			if !isFirst[v] {
				isFirst[v] = true
				count[b.streams()[j]]++
			}
		}
	}
	fl, fi := make([][]int32, S), make([][]int32, S)
	total := 0
	for _, c := range count {
		total += c
	}
	flat := make([]int32, 2*total)
	for s, c := range count {
		fl[s], fi[s], flat = flat[:0:c], flat[c:c:2*c], flat[2*c:]
	}
	for k, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpLaunch && isFirst[o.Stage] && a.issue[o.Stage] == int32(k) {
			s := so[0]
			fl[s], fi[s] = append(fl[s], int32(o.Stage)), append(fi[s], int32(k))
		}
	}
	// Streams as spans of their temps' first uses, for the query below.
	ss := spans{lo: make([]float64, S), hi: make([]float64, S)}
	for s := range fl {
		ss.lo[s], ss.hi[s] = math.Inf(1), math.Inf(1) // empty: never overlaps
		if l := len(fl[s]); l > 0 {
			ss.lo[s], ss.hi[s] = float64(fi[s][0]), float64(fi[s][l-1])+1
		}
	}
	streams := newSpanIndex(ss)
	for s := range S {
		streams.add(s)
	}
	// cols[t][σ·n+i], n = len(fl[t]): how many ops of stream σ happen-before
	// the launch fl[t][i] (of stream t itself: its op index), so that u on
	// σ happens-before it iff that is above u's op index.
	h, dense := a.hb.(*launchHB)
	var cols [][]int32
	var reach, slot, jt []int32 // firstAfter's, and per stream the search's start
	if columns && dense && S <= spanColumnsMax {
		cols = make([][]int32, S)
		for t, list := range fl {
			n := len(list)
			c := make([]int32, S*n)
			for i, v := range list {
				at := h.at[v]
				row := h.vecs[int(at.row)*S : int(at.row+1)*S]
				for q, x := range row {
					c[q*n+i] = x
				}
				c[t*n+i] = at.index
			}
			cols[t] = c
		}
		reach, slot = a.firstAfter(h, fl, cols)
		jt = make([]int32, S)
	}
	cuts := a.cuts()
	sp := spans{lo: make([]float64, len(a.bufs)), hi: make([]float64, len(a.bufs))}
	var live []int32
	// Temps by last use: the first first use after it moves forward on
	// every stream (cur), no search needed.
	byLast := stableOrder(len(a.bufs), func(k int) int { return a.bufs[k].lastIssue })
	cur := make([]int, S)
	for _, k := range byLast {
		b := a.bufs[k]
		after := func(v int32) bool {
			for _, u := range b.lasts() {
				if !a.hb.before(u, v) {
					return false
				}
			}
			return true
		}
		last := int32(b.lastIssue)
		limit := int32(len(p.IssueOrder)) // first uses at or after limit are after b
		c, _ := slices.BinarySearchFunc(cuts, last+1, func(v, at int32) int { return cmp.Compare(a.issue[v], at) })
		for tries := 0; c < len(cuts) && tries < 4; c, tries = c+1, tries+1 {
			if after(cuts[c]) {
				limit = a.issue[cuts[c]]
				break
			}
		}
		end := last
		live = streams.query(live[:0], float64(last)+1, float64(limit), -1)
		if cols != nil && len(live) > 0 {
			// jt[t]: the first of t's first launches that every last
			// use of b happens-before.
			clear(jt)
			for _, u := range b.lasts() {
				for t, x := range reach[int(slot[u])*S : int(slot[u]+1)*S] {
					jt[t] = max(jt[t], x)
				}
			}
		}
		for _, t := range live {
			list, iss := fl[t], fi[t]
			done := func(i int) bool { return iss[i] >= limit || after(list[i]) }
			i := cur[t]
			for i < len(iss) && iss[i] <= last {
				i++
			}
			cur[t] = i
			if cols != nil {
				// The first done from i: the first not before limit, or
				// the first that every last use of b happens-before.
				j := max(i, int(jt[t]))
				if j > i && iss[j-1] >= limit {
					j = firstAbove(iss, i, j, limit-1)
				}
				if j > i {
					end = max(end, iss[j-1]) // the last one not after b
				}
				continue
			}
			if i == len(list) || done(i) {
				continue
			}
			// Galloping search (Bentley and Yao 1976) for the first done
			// after i: temps die soon after their last use, so it is near.
			lo, hi := i, i+1 // lo is not done; the first done is past lo
			for step := 1; hi < len(list) && !done(hi); step *= 2 {
				lo, hi = hi, hi+step
			}
			hi = min(hi, len(list))
			j := lo + 1 + sort.Search(hi-lo-1, func(k int) bool { return done(lo + 1 + k) })
			end = max(end, iss[j-1]) // the last one not after b
		}
		sp.lo[k], sp.hi[k] = float64(b.firstIssue), float64(end)+1
	}
	return sp
}

// firstAfter returns, for each launch u that is a last use of a temp and
// each stream t, the first of t's first launches fl[t] that u
// happens-before (len(fl[t]) if none): reach[slot[u]·S + t]. Along a
// stream σ the launches' op indices grow and each column cols[t] of σ is
// nondecreasing, so one merge per (σ, t) finds them all: O(S × (first
// launches + last uses)).
func (a *arenaInfo) firstAfter(h *launchHB, fl [][]int32, cols [][]int32) (reach, slot []int32) {
	p := a.p
	S := len(p.Streams)
	slot = make([]int32, len(p.Stages))
	for v := range slot {
		slot[v] = -1
	}
	count := make([]int, S)
	lasts := 0
	for _, b := range a.bufs {
		for _, u := range b.lasts() {
			if slot[u] < 0 {
				slot[u] = 0 // numbered below, in stream order
				count[h.at[u].stream]++
				lasts++
			}
		}
	}
	order := make([]int32, 0, lasts) // per stream, its last uses in stream order
	for σ := range S {
		if count[σ] == 0 {
			continue
		}
		for _, o := range p.Streams[σ].Ops {
			if o.Kind == plan.OpLaunch && slot[o.Stage] == 0 && h.at[o.Stage].stream == int32(σ) {
				slot[o.Stage] = int32(len(order)) + 1 // 0 is "not numbered yet"
				order = append(order, int32(o.Stage))
			}
		}
	}
	reach = make([]int32, len(order)*S)
	index := make([]int32, len(order)) // per numbered launch: its op index
	for j, u := range order {
		index[j] = h.at[u].index
	}
	start := 0
	for σ := range S {
		ks := index[start : start+count[σ]] // σ's last uses, slots start+1…
		for t := range S {
			n := len(fl[t])
			col := cols[t][σ*n : (σ+1)*n]
			i := 0
			for j, k := range ks {
				for i < n && col[i] <= k {
					i++
				}
				reach[(start+j)*S+t] = int32(i)
			}
		}
		start += count[σ]
	}
	for v, x := range slot {
		if x > 0 {
			slot[v] = x - 1
		}
	}
	return reach, slot
}

// firstAbove returns the first index in [lo, hi) of the nondecreasing col
// whose value is above k, or hi: a galloping search from lo (Bentley and
// Yao 1976), O(log d) for an answer d places on.
func firstAbove(col []int32, lo, hi int, k int32) int {
	if lo >= hi || col[lo] > k {
		return lo
	}
	prev := lo // col[prev] ≤ k
	for step := 1; ; step *= 2 {
		next := prev + step
		if next >= hi {
			break
		}
		if col[next] > k {
			hi = next
			break
		}
		prev = next
	}
	lo = prev + 1 // col[lo-1] ≤ k; the answer is in [lo, hi]
	for lo < hi {
		if mid := int(uint(lo+hi) >> 1); col[mid] > k {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// cuts returns the stages whose launch is a cut of the plan, in issue
// order: every op issued after it happens-after it, by stream order and
// record→wait edges alone (CUDA's implicit orders add to happens-before,
// so leaving them out only misses cuts). An op issued at q has
// predecessors: the op before it on its stream, and for a wait with no
// lag, the latest record of its event issued before it on another stream.
// The launch at p is a cut iff every op issued after p has a predecessor
// issued at p or later (then, by induction in issue order, p reaches it).
func (a *arenaInfo) cuts() []int32 {
	p := a.p
	n := len(p.IssueOrder)
	maxPred := make([]int32, n)
	prev := make([]int32, len(p.Streams)) // per stream: issue position of its latest op
	for s := range prev {
		prev[s] = -1
	}
	rec := make([]int32, p.Events) // per event: issue position of its latest record
	recStream := make([]int32, p.Events)
	for e := range rec {
		rec[e] = -1
	}
	for q, so := range p.IssueOrder {
		s := so[0]
		o := p.Streams[s].Ops[so[1]]
		m := prev[s]
		switch o.Kind {
		case plan.OpRecord:
			rec[o.Event], recStream[o.Event] = int32(q), int32(s)
		case plan.OpWait:
			if r := rec[o.Event]; o.Lag == 0 && r >= 0 && int(recStream[o.Event]) != s {
				m = max(m, r)
			}
		}
		maxPred[q], prev[s] = m, int32(q)
	}
	var cuts []int32
	sufMin := int32(math.MaxInt32) // min of maxPred over the ops issued after q
	for q := n - 1; q >= 0; q-- {
		so := p.IssueOrder[q]
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpLaunch && sufMin >= int32(q) {
			cuts = append(cuts, int32(o.Stage))
		}
		sufMin = min(sufMin, maxPred[q])
	}
	slices.Reverse(cuts)
	return cuts
}

// spanIndex finds the placed buffers whose spans overlap a given one: a
// max-segment tree over the buffers in order of span start, holding each
// placed buffer's span end. A query reports the placed buffers that start
// before the given span ends and end after it starts, in O((k+1) log n)
// for k reported.
type spanIndex struct {
	byLo []int32   // a.bufs indices by span start
	los  []float64 // span starts in that order
	rank []int32   // per a.bufs index: its place in byLo
	size int       // leaves (a power of two)
	tree []float64 // max span end of placed buffers per node; -Inf if none
	hi   []float64 // span ends per a.bufs index
	// stack is query's, reused from query to query.
	stack []int
}

func newSpanIndex(sp spans) *spanIndex {
	n := len(sp.lo)
	ix := &spanIndex{byLo: make([]int32, n), los: make([]float64, n), rank: make([]int32, n), size: 1}
	for i := range ix.byLo {
		ix.byLo[i] = int32(i)
	}
	slices.SortStableFunc(ix.byLo, func(i, j int32) int { return cmp.Compare(sp.lo[i], sp.lo[j]) })
	for r, k := range ix.byLo {
		ix.rank[k], ix.los[r] = int32(r), sp.lo[k]
	}
	for ix.size < n {
		ix.size *= 2
	}
	ix.tree = make([]float64, 2*ix.size)
	ix.hi = sp.hi
	ix.reset()
	return ix
}

// reset marks every buffer unplaced.
func (ix *spanIndex) reset() {
	for i := range ix.tree {
		ix.tree[i] = math.Inf(-1)
	}
}

// add marks buffer k placed.
func (ix *spanIndex) add(k int) {
	i := ix.size + int(ix.rank[k])
	for h := ix.hi[k]; i >= 1 && ix.tree[i] < h; i /= 2 {
		ix.tree[i] = h
	}
}

// overlapping appends to out the placed buffers other than k whose spans
// overlap k's.
func (ix *spanIndex) overlapping(out []int32, sp spans, k int) []int32 {
	return ix.query(out, sp.lo[k], sp.hi[k], k)
}

// query appends to out the placed items other than skip whose spans
// overlap [lo, hi).
func (ix *spanIndex) query(out []int32, lo, hi float64, skip int) []int32 {
	r, _ := slices.BinarySearch(ix.los, hi) // ranks [0, r) start before hi
	// A depth-first walk, left subtree first, by a stack of nodes; a node
	// at depth d of the tree covers ranks [(node−2^d)·size/2^d, …).
	stack := append(ix.stack[:0], 1)
	for len(stack) > 0 {
		node := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		width := ix.size >> (bits.Len(uint(node)) - 1) // leaves under node
		if (node-ix.size/width)*width >= r || ix.tree[node] <= lo {
			continue
		}
		if node >= ix.size {
			if j := ix.byLo[node-ix.size]; int(j) != skip {
				out = append(out, j)
			}
			continue
		}
		stack = append(stack, 2*node+1, 2*node)
	}
	ix.stack = stack
	return out
}

// sub returns the spans of members (a.bufs indices), indexed 0..len(members)-1.
func (sp spans) sub(members []int) spans {
	out := spans{lo: make([]float64, len(members)), hi: make([]float64, len(members))}
	for i, k := range members {
		out.lo[i], out.hi[i] = sp.lo[k], sp.hi[k]
	}
	return out
}

// greedyMaxPairs bounds the work of the greedy layout by size over a
// whole plan: the pairs of temps whose spans overlap, summed over the
// segments it lays out (a pair costs up to two happens-before tests and a
// place in a sort, in each of layout's orders; the eight model graphs have
// at most about 10⁵). Segments past it keep the sweep's layout, which
// Plan.Notes says.
var greedyMaxPairs = 1_000_000

// layoutPlanned lays out the planned arena: the temps split into
// segments, runs of temps in order of span start that no span crosses
// (every temp of a segment happens-after every temp of the segments
// before it, so each segment is laid out from offset 0 on its own and the
// arena is the largest). Each segment gets the sweep's layout; then, from
// the segment of the largest sweep down, as long as their span-overlap
// pairs fit in greedyMaxPairs, the greedy layout by size where that is
// smaller. A segment whose sweep is no larger than that of the first
// segment past the bound cannot make the arena smaller and keeps its
// sweep (in a chain of copies of one model, past the bound, that is every
// segment). It returns the offsets (per a.bufs), the arena size in bytes,
// and the segments and temps left to the sweep alone for want of pairs.
func (a *arenaInfo) layoutPlanned(sp spans) (offs []int64, size int64, skipped, skippedTemps, segments int) {
	n := len(a.bufs)
	offs = make([]int64, n)
	byLo := stableOrder(n, func(i int) int { return int(sp.lo[i]) }) // issue positions
	type segment struct {
		members []int
		local   spans
		offs    []int64
		size    int64
	}
	var segs []segment
	for s := 0; s < n; {
		e, end := s+1, sp.hi[byLo[s]]
		for e < n && sp.lo[byLo[e]] < end {
			end = max(end, sp.hi[byLo[e]])
			e++
		}
		segs = append(segs, segment{members: byLo[s:e], local: sp.sub(byLo[s:e])})
		s = e
	}
	// The segments' sweeps are independent (each reads the plan's
	// happens-before and its own spans): one worker per CPU takes them in
	// turn.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(segs)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(segs); i = int(next.Add(1)) - 1 {
				g := &segs[i]
				g.offs, g.size = a.sweep(g.members, g.local)
			}
		})
	}
	wg.Wait()
	bySize := make([]int, len(segs))
	for i := range bySize {
		bySize[i] = i
	}
	slices.SortStableFunc(bySize, func(i, j int) int { return cmp.Compare(segs[j].size, segs[i].size) })
	budget, k := greedyMaxPairs, 0
	pairs := make([]int, len(segs))
	for ; k < len(bySize); k++ {
		g := &segs[bySize[k]]
		if pairs[k] = overlapPairs(g.local); pairs[k] > budget {
			break
		}
		budget -= pairs[k]
	}
	var floor int64 // the arena is at least the sweep of the first segment past the bound
	if k < len(bySize) {
		floor = segs[bySize[k]].size
		for _, i := range bySize[k:] {
			skipped++
			skippedTemps += len(segs[i].members)
		}
	}
	for j, i := range bySize[:k] {
		g := &segs[i]
		if g.size <= floor {
			for _, i := range bySize[j:k] { // the sweep alone too
				skipped++
				skippedTemps += len(segs[i].members)
			}
			break
		}
		if og, szg := a.layout(a.before, g.local, g.members); szg <= g.size {
			g.offs, g.size = og, szg
		}
	}
	for _, g := range segs {
		for i, m := range g.members {
			offs[m] = g.offs[i]
		}
		size = max(size, g.size)
	}
	return offs, size, skipped, skippedTemps, len(segs)
}

// arenaBoundEarly is the number of arena temps from which the arena pass
// works out the live bound beside the layout rather than after it, only
// when its note needs it.
const arenaBoundEarly = 5000

// overlapPairs counts the pairs of spans that overlap (spans sorted by
// lo), by a galloping search from each span (few spans overlap one).
func overlapPairs(sp spans) int {
	pairs := 0
	for i, h := range sp.hi {
		// The spans after i that start before h: [i+1, j).
		lo, hi := i+1, i+2 // sp.lo[lo-1] < h, if lo-1 > i
		for step := 1; hi <= len(sp.lo) && sp.lo[hi-1] < h; step *= 2 {
			lo, hi = hi, hi+step
		}
		hi = min(hi, len(sp.lo)+1) - 1 // the first start ≥ h is in [lo, hi]
		for lo < hi {
			if mid := int(uint(lo+hi) >> 1); sp.lo[mid] >= h {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		pairs += lo - (i + 1)
	}
	return pairs
}

// layout assigns offsets to members (a.bufs indices), greedy by size with
// best fit (Pisarchyk and Lee, "Efficient Memory Management for Deep Neural
// Net Inference", 2020, §4.3, "greedy by size for offset calculation"):
// buffers in order of decreasing size (then first issue), each at the
// start of the smallest gap between the already placed buffers it
// conflicts with (those not ordered with it by before, either way) that
// holds it, else above them all. It tries a few orders (by size, by first
// issue, by size × issue length, and by start if given, per member) and
// keeps the smallest arena. The placed buffers a buffer can conflict with
// are those whose spans overlap its own (spanIndex); sp, per member, must
// be spans of before. It returns the offsets (per member) and the arena
// size in bytes.
func (a *arenaInfo) layout(before func(x, y *arenaBuf) bool, sp spans, members []int, start ...[]float64) ([]int64, int64) {
	m := len(members)
	buf := func(i int) *arenaBuf { return a.bufs[members[i]] }
	var bestOffs []int64
	bestSize := int64(math.MaxInt64)
	keys := []func(i, j int) int{
		func(i, j int) int { return cmp.Compare(buf(j).size, buf(i).size) },
		func(i, j int) int { return cmp.Compare(buf(i).firstIssue, buf(j).firstIssue) },
		func(i, j int) int {
			si := buf(i).size * int64(buf(i).lastIssue-buf(i).firstIssue+1)
			sj := buf(j).size * int64(buf(j).lastIssue-buf(j).firstIssue+1)
			return cmp.Compare(sj, si)
		},
	}
	if len(start) > 0 {
		lo := start[0]
		keys = append(keys, func(i, j int) int { return cmp.Compare(lo[i], lo[j]) })
	}
	ix := newSpanIndex(sp)
	order := make([]int, m)
	for _, key := range keys {
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(i, j int) int {
			return cmp.Or(key(i, j), cmp.Compare(buf(j).size, buf(i).size), cmp.Compare(buf(i).firstIssue, buf(j).firstIssue))
		})
		ix.reset()
		offs, size := a.place(order, before, sp, members, ix)
		if size < bestSize {
			bestOffs, bestSize = offs, size
		}
	}
	if m == 0 {
		return nil, 0
	}
	return bestOffs, bestSize
}

func (a *arenaInfo) place(order []int, before func(x, y *arenaBuf) bool, sp spans, members []int, ix *spanIndex) ([]int64, int64) {
	offs := make([]int64, len(members))
	var size int64
	var cand []int32
	for _, i := range order {
		x := a.bufs[members[i]]
		cand = ix.overlapping(cand[:0], sp, i)
		w := 0
		for _, j := range cand {
			if y := a.bufs[members[j]]; !before(x, y) && !before(y, x) {
				cand[w] = j // a conflict: ordered lifetimes may share bytes
				w++
			}
		}
		cand = cand[:w]
		slices.SortFunc(cand, func(j, k int32) int { return cmp.Or(cmp.Compare(offs[j], offs[k]), cmp.Compare(j, k)) })
		best, bestGap := int64(-1), int64(math.MaxInt64)
		var top int64
		for _, j := range cand {
			if gap := offs[j] - top; gap >= x.size && gap < bestGap {
				best, bestGap = top, gap
			}
			top = max(top, offs[j]+a.bufs[members[j]].size)
		}
		if best < 0 {
			best = top
		}
		offs[i] = best
		size = max(size, best+x.size)
		ix.add(i)
	}
	return offs, size
}

// layoutStreamOrder is the stream-order arena (ArenaStreamOrder), as a
// caching allocator without record_stream keeps it: one pool per
// allocating stream (that of a buffer's first launch), in which a buffer's
// bytes are reused once its last use has been issued (beforeStreamOrder),
// whatever other streams still do with them. The pools are laid out by
// layout and stacked in stream order.
func (a *arenaInfo) layoutStreamOrder() ([]int64, int64) {
	pools := make([][]int, len(a.p.Streams))
	for k, b := range a.bufs {
		s := a.allocStream(b)
		pools[s] = append(pools[s], k)
	}
	offs := make([]int64, len(a.bufs))
	var base int64
	for _, pool := range pools {
		if len(pool) == 0 {
			continue
		}
		sp := spans{lo: make([]float64, len(pool)), hi: make([]float64, len(pool))}
		for i, k := range pool {
			sp.lo[i], sp.hi[i] = float64(a.bufs[k].firstIssue), float64(a.bufs[k].lastIssue)+1
		}
		o, size := a.layout(a.beforeStreamOrder, sp, pool)
		for i, k := range pool {
			offs[k] = base + o[i]
		}
		base += size
	}
	return offs, base
}

// touched returns the byte ranges a stage really reads and writes, per the
// built-ins' contract (package contract): spin touches nothing, checksum
// writes its first 8 bytes, mix writes only words below max_words of each
// write and reads word i mod n of each read for those words only. Other
// built-ins and user kernels touch what they declare.
func touched(sg *plan.Stage) (reads, writes []plan.Access) { return touchedIn(sg, nil, nil) }

// touchedIn is touched, with the ranges it must rewrite appended to rbuf[:0]
// and wbuf[:0] (scratch the caller reuses from stage to stage) rather than
// to new slices.
func touchedIn(sg *plan.Stage, rbuf, wbuf []plan.Access) (reads, writes []plan.Access) {
	switch sg.Kernel {
	case dag.BuiltinSpin:
		return nil, nil
	case dag.BuiltinChecksum:
		ws := append(wbuf[:0], sg.Writes...)
		for i := range ws {
			ws[i].Bytes = min(ws[i].Bytes, 8)
		}
		return sg.Reads, ws
	case dag.BuiltinMix:
		maxWords, err := contract.MixMaxWords(sg.Args)
		if err != nil {
			maxWords = math.MaxInt64 // rejected by executor.CheckLaunch
		}
		var words int64 // words i of the index range the kernel computes
		ws := append(wbuf[:0], sg.Writes...)
		for i := range ws {
			w := min((ws[i].Bytes+3)/4, maxWords)
			ws[i].Bytes = min(ws[i].Bytes, 4*w)
			words = max(words, w)
		}
		rs := append(rbuf[:0], sg.Reads...)
		for i := range rs {
			rs[i].Bytes = min(rs[i].Bytes, 4*words)
		}
		return rs, ws
	}
	return sg.Reads, sg.Writes
}

// rangeSet is a union of half-open byte ranges, kept sorted and disjoint.
type rangeSet [][2]int64

func (r *rangeSet) add(lo, hi int64) {
	s := *r
	i := sort.Search(len(s), func(k int) bool { return s[k][1] >= lo })
	j := i
	for j < len(s) && s[j][0] <= hi {
		lo, hi = min(lo, s[j][0]), max(hi, s[j][1])
		j++
	}
	*r = slices.Replace(s, i, j, [2]int64{lo, hi})
}

// intersects reports whether some byte of [lo, hi) is in r.
func (r rangeSet) intersects(lo, hi int64) bool {
	i := sort.Search(len(r), func(k int) bool { return r[k][1] > lo })
	return i < len(r) && r[i][0] < hi
}

func (r rangeSet) covers(lo, hi int64) bool {
	if lo >= hi {
		return true
	}
	i := sort.Search(len(r), func(k int) bool { return r[k][1] > lo })
	return i < len(r) && r[i][0] <= lo && r[i][1] >= hi
}

// launchHB answers "does launch u happen-before launch v" for a plan: vector
// clocks over streams walked in issue order (Lamport 1978; Fidge 1988,
// Mattern 1989), as in Verify but computed here on their own, so that Verify
// checks the arena independently. Rows are shared between the launches of a
// stream between two waits. A host stream's ops happen-before every op
// issued after them. It describes one iteration: a wait with a lag orders
// an earlier iteration's record, not this one's, and is left out.
type launchHB struct {
	S     int
	at    []launchAt // per stage: where its launch is
	issue []int32    // per stage: position of its launch in IssueOrder
	vecs  []int32    // rows of S entries: ops of each stream (a prefix) that happen-before
}

// launchAt is a launch's stream, its op index on that stream and its clock
// row, together so that a happens-before test reads one place per stage.
type launchAt struct{ stream, index, row int32 }

func newLaunchHB(p *plan.Plan) *launchHB {
	S := len(p.Streams)
	// Rows: the first, and at most one per wait (more only with host
	// streams), so that the rows are mostly allocated once.
	h := &launchHB{S: S, at: make([]launchAt, len(p.Stages)), issue: make([]int32, len(p.Stages)), vecs: make([]int32, S, launchHBSize(p))}
	cur := make([]int32, S) // every stream starts on row 0 (nothing)
	type rec struct{ stream, index, row int32 }
	last := make([]rec, p.Events)
	for e := range last {
		last[e].stream = -1
	}
	var hosts []int
	for s := range p.Streams {
		if p.Streams[s].Host {
			hosts = append(hosts, s)
		}
	}
	tmp := make([]int32, S)
	// join sets stream s's clock to its row joined with row r and entry
	// (t, upTo), copying the row only if something changes.
	join := func(s int, r int32, t int, upTo int32) {
		row := h.vecs[int(cur[s])*S : int(cur[s]+1)*S]
		other := h.vecs[int(r)*S : int(r+1)*S]
		changed := false
		for k := range S {
			x := max(row[k], other[k])
			if k == t {
				x = max(x, upTo)
			}
			tmp[k] = x
			changed = changed || (x != row[k] && k != s)
		}
		if changed {
			cur[s] = int32(len(h.vecs) / S)
			h.vecs = append(h.vecs, tmp...)
		}
	}
	hostOps := make([]int32, S) // per host stream: ops issued so far
	for k, so := range p.IssueOrder {
		s := so[0]
		o := p.Streams[s].Ops[so[1]]
		for _, hs := range hosts {
			if hs != s && hostOps[hs] > 0 {
				join(s, cur[hs], hs, hostOps[hs])
			}
		}
		switch o.Kind {
		case plan.OpRecord:
			last[o.Event] = rec{int32(s), int32(so[1]), cur[s]}
		case plan.OpWait:
			if r := last[o.Event]; o.Lag == 0 && r.stream >= 0 && int(r.stream) != s {
				join(s, r.row, int(r.stream), r.index+1)
			}
		case plan.OpLaunch:
			v := o.Stage
			h.at[v], h.issue[v] = launchAt{int32(s), int32(so[1]), cur[s]}, int32(k)
		}
		if p.Streams[s].Host {
			hostOps[s] = int32(so[1]) + 1
		}
	}
	return h
}

// before reports whether stage u's launch happens-before stage v's launch
// (false for u == v): u completes before v starts.
func (h *launchHB) before(u, v int32) bool {
	x, y := &h.at[u], &h.at[v]
	if x.stream == y.stream {
		return x.index < y.index
	}
	return h.vecs[int(y.row)*h.S+int(x.stream)] > x.index
}

// LiveBound is the lower bound on p's arena under p's own schedule: the most
// bytes of arena buffers live at any instant of p's ideal schedule (each
// stage's duration_us, 0 counted as 1 µs, no launch cost, unlimited
// hardware, as Stats.IdealMakespanUS). A buffer is live from the start of
// its first launch to the end of its last. Buffers that share arena bytes
// are ordered by happens-before, so their live ranges in any schedule that
// respects it are disjoint, and every arena of p is at least this large.
// Sizes are the buffers' own bytes (not rounded). With several devices
// each device has an arena of its own, at least that device's bound
// (DeviceLiveBound), so LiveBound is the sum of the devices' bounds, the
// bound of Stats.ArenaBytes (the sum of the devices' arenas); the most
// bytes live at once over all devices together may be less, as devices
// peak at different instants.
func LiveBound(p *plan.Plan) int64 { return liveBoundAll(p, nil, nil) }

// liveBoundAll is LiveBound with acc as p's planAccesses (nil: made here).
func liveBoundAll(p *plan.Plan, acc *planAccesses, arena []bool) int64 {
	if p.DeviceCount() == 1 {
		return liveBound(p, acc, -1, arena)
	}
	if acc == nil {
		acc = newPlanAccesses(p)
	}
	var sum int64
	for d := range p.DeviceCount() {
		sum += liveBound(p, acc, d, arena)
	}
	return sum
}

// DeviceLiveBound is LiveBound of device dev's arena buffers alone: the
// lower bound on dev's arena under p's own schedule.
func DeviceLiveBound(p *plan.Plan, dev int) int64 { return liveBound(p, nil, dev, nil) }

// liveBound is LiveBound over the buffers of device dev (dev < 0: all)
// that are in the arena (arena[i] per Plan.Buffers index; nil: those with
// an arena offset), with acc as p's planAccesses (nil: made here). The live
// ranges' ends and starts are sorted by one radix sort of their instants
// (sortKeyed), ends first at the same instant.
func liveBound(p *plan.Plan, acc *planAccesses, dev int, arena []bool) int64 {
	if acc == nil {
		acc = newPlanAccesses(p)
	}
	start, end := plan.IdealSchedule(p)
	in := make([]bool, len(p.Buffers))
	n := 0
	for i, b := range p.Buffers {
		inArena := b.ArenaOffset != nil
		if arena != nil {
			inArena = arena[i]
		}
		if inArena && (dev < 0 || b.Device == dev) {
			in[i] = true
			n++
		}
	}
	lo := make([]float64, len(p.Buffers))
	hi := make([]float64, len(p.Buffers))
	for i := range lo {
		lo[i], hi[i] = math.Inf(1), math.Inf(-1)
	}
	for v := range p.Stages {
		for _, i := range acc.buf[acc.off[v]:acc.off[v+1]] {
			if i >= 0 && in[i] {
				lo[i], hi[i] = min(lo[i], start[v]), max(hi[i], end[v])
			}
		}
	}
	evs := make([]keyed, 0, 2*n)
	for i, b := range p.Buffers {
		if in[i] && lo[i] < hi[i] {
			evs = append(evs, keyed{eventKey(lo[i], true), b.Bytes}, keyed{eventKey(hi[i], false), -b.Bytes})
		}
	}
	sortKeyed(evs)
	var live, peak int64
	for _, e := range evs {
		live += e.val
		peak = max(peak, live)
	}
	return peak
}

// keyed is a sort key with a value that goes with it (sortKeyed): for
// the live bound, an instant (eventKey) and a live range's start (its
// bytes) or end (minus its bytes).
type keyed struct {
	key uint64
	val int64
}

// eventKey orders instants t ≥ 0 (µs) as their float64 bits do, an end
// before a start at the same instant: live ranges are half-open, and the
// peak is the same whatever the order among ends (or starts) of one instant.
func eventKey(t float64, start bool) uint64 {
	k := math.Float64bits(t) << 1 // t ≥ 0: the sign bit is 0
	if start {
		k |= 1
	}
	return k
}

// sortKeyed sorts evs by key, the order among equal keys unspecified: a
// least significant digit first radix sort by 16-bit digits (Knuth, The
// Art of Computer Programming, vol. 3, §5.2.5), skipping the passes whose
// digit is the same for every key; slices.SortFunc for short slices.
// Cost: O(n) a pass, at most four passes.
func sortKeyed(evs []keyed) {
	if len(evs) < 1<<10 {
		slices.SortFunc(evs, func(a, b keyed) int { return cmp.Compare(a.key, b.key) })
		return
	}
	var diff uint64 // the bits in which some key differs from the first
	for _, e := range evs {
		diff |= e.key ^ evs[0].key
	}
	var count [1 << 16]int32
	src, dst := evs, make([]keyed, len(evs))
	for shift := uint(0); shift < 64; shift += 16 {
		if diff>>shift&0xffff == 0 {
			continue // one digit: the pass would not move anything
		}
		clear(count[:])
		for _, e := range src {
			count[e.key>>shift&0xffff]++
		}
		sum := int32(0)
		for d, c := range count {
			count[d], sum = sum, sum+c
		}
		for _, e := range src {
			d := e.key >> shift & 0xffff
			dst[count[d]] = e
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &evs[0] {
		copy(evs, src)
	}
}
