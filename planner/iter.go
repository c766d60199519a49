package planner

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/plan"
)

// iterMaxPrune bounds the cross waits that the iterate pass tries to drop
// one by one after placing them, and iterMaxPruneWork the work of those
// tries (the ops their walks visit and the clock entries they read, in
// all; a try that fails stops at the first order it misses): past either,
// the waits not tried stay (correct, possibly not minimal), and a note
// says so. (The bounds of this file are variables so that tests can lower
// them.)
var (
	iterMaxPrune     = 512
	iterMaxPruneWork = 200_000_000
)

// iterMaxClock bounds the walk of the iterate pass: it keeps a snapshot
// per stage for the last few unrolled iterations, and a dense vector clock
// per physical stream, which a join that teaches the stream something new
// reads and may copy (a join that does not costs O(1)), so its time and
// memory grow as iterations × such joins × physical streams. A plan whose
// iterations × waits × physical streams exceed it, or whose walk passes it,
// gets the barrier form (WithIteration) and a note.
var iterMaxClock = 100_000_000 // clock entries read by one walk, 4 bytes each

// iterReq is one cross-iteration order the reference semantics needs: stage
// a of iteration i−d happens-before stage b of iteration i, for every i ≥ d.
type iterReq struct {
	a, d int32
}

// iterate plans the iterations (Iteration): stream sets, the cross-
// iteration hazards and the waits they need, and event slots.
//
// Hazards: two accesses of stages a and b conflict across iterations when
// they overlap on a buffer with K copies and one writes; then a in
// iteration i−K must happen-before b in iteration i (and b before a). Longer
// distances (2K, …) follow by induction through the writer's own WAW at
// distance K, so distance K is all that is needed.
//
// Waits: like sync, but with vector clocks carried across iterations
// (Lamport 1978; Fidge 1988, Mattern 1989). The pass walks enough unrolled
// iterations in issue order, physical stream by physical stream, and before
// each launch adds a cross wait for every needed order that stream order
// and the waits so far do not give, trying producers latest first. It then
// drops, one at a time, each cross wait without which the walk still meets
// every order. Each producer of a cross wait records an event right after
// its launch (sync's event when it has one); slots follow from the lags.
//
// Manual specs (their waits are the user's) and plans beyond the walk's
// bound (iterMaxClock) get the barrier form instead
// (WithIteration): correct for any race-free iteration, iterations not
// overlapping; a note states the cost.
//
// Errors: negative stream sets.
func iterate(st *state) error {
	p := st.plan
	n, S := len(p.Stages), len(p.Streams)
	copies := make([]int, len(p.Buffers)) // per Plan.Buffers index
	kmax := 1
	for i, b := range p.Buffers {
		copies[i] = max(b.Copies, 1)
		kmax = max(kmax, b.Copies)
	}
	R := st.opts.StreamSets
	switch {
	case R < 0:
		return fmt.Errorf("stream sets %d: want ≥ 0 (0: the largest copies, 1: no extra streams)", R)
	case st.manual && p.Iteration != nil:
		return nil // the spec's own waits across iterations ({stage: X, lag: N})
	case st.manual:
		if S > 1 || kmax > 1 {
			st.barrier("the spec's waits order one iteration only (waits: [{stage: X, lag: N}] order iterations)")
		} else {
			st.withIteration()
		}
		return nil
	case R != 1 && hasDefaultStream(p): // implicit.go
		if R > 1 || kmax > 1 {
			st.note("one stream set: stream %s is a default stream, of which CUDA has one (per context, or per thread), so iterations do not get streams of their own", defaultStreamName(p))
		}
		R = 1
	case R == 0 && st.strategy == StrategySingle:
		R = 1
	case R == 0:
		R = kmax
	}
	if R > 1 {
		device := 0
		for _, s := range p.Streams {
			if !s.Host {
				device++
			}
		}
		if most := min(plan.MaxStreamSetStreams/max(device, 1), plan.MaxLag); R > most {
			return fmt.Errorf("stream sets %d: %d copies of this plan's %d device streams would be more than %d physical streams (a GPU runs at most a few hundred at once): use --stream-sets %d or fewer (PlanOptions.StreamSets), or 0 for the largest copies of any buffer", R, R, device, plan.MaxStreamSetStreams, most)
		}
	}
	// The walks below unroll at most 64 iterations of the period: a
	// least common multiple saturating past that never overflows (ring
	// sizes of distinct primes pass 2^63 in a few dozen buffers).
	period := plan.LCM(64, R, copies)
	p.Iteration = &plan.Iteration{StreamSets: R} // provisional: the walk maps streams through it
	_, P := p.PhysicalStreams()
	// Each wait of an iteration may join a clock of P entries: the walk's
	// work is at most about U0·waits·P (U0 iterations) plus its cross
	// waits', and plans with that many streams cost the verifier as much.
	if U0 := min(period, 64) + 4; U0*p.Stats.Waits*P > iterMaxClock {
		p.Iteration = nil
		st.barrier(fmt.Sprintf("the iterate pass is bounded at %s vector-clock entries read (this plan could need %s: %d iterations × %s waits × %s physical streams)",
			plan.Thousands(iterMaxClock), plan.Thousands(U0*p.Stats.Waits*P), U0, plan.Thousands(p.Stats.Waits), plan.Thousands(P)))
		return nil
	}
	reqs, inflight := iterHazards(p, copies, st.accesses())
	// Latest producer first: smaller distance, then later in issue order.
	pos := launchPositions(p)
	for b := range n {
		slices.SortFunc(reqs.row(b), func(x, y iterReq) int {
			return cmp.Or(cmp.Compare(x.d, y.d), cmp.Compare(pos[y.a], pos[x.a]))
		})
	}
	dmax := 1
	for _, r := range reqs.r {
		dmax = max(dmax, int(r.d))
	}
	U := min(period, 64) + 2*dmax + 2
	w := &iterWalk{p: p, S: S, R: R, n: n, U: U, window: dmax + 1, reqs: reqs, cross: make([][]iterReq, n), limit: iterMaxClock}
	if !w.run(true) {
		p.Iteration = nil
		st.barrier(fmt.Sprintf("the iterate pass is bounded at %s vector-clock entries read, and its walk over %d iterations of %s physical streams passed that in iteration %d (cross-iteration orders to meet: %s)",
			plan.Thousands(iterMaxClock), U, plan.Thousands(P), w.stopped+1, plan.Thousands(len(reqs.r))))
		return nil
	}
	// Drop cross waits that others make redundant, latest added first.
	total := len(w.added)
	if total > iterMaxPrune {
		st.note("cross-iteration waits are not minimized: the iterate pass drops redundant ones only up to %d waits (this plan has %d), so some of its %d cross-iteration waits may be redundant",
			iterMaxPrune, total, total)
	} else if total > 0 {
		w.limit = 0
		spent, tried := 0, 0
		for i := len(w.added) - 1; i >= 0; i-- {
			b, r := w.added[i][0], iterReq{w.added[i][1], w.added[i][2]}
			k := slices.Index(w.cross[b], r)
			w.cross[b] = slices.Delete(w.cross[b], k, k+1)
			w.budget = iterMaxPruneWork - spent
			ok := w.budget > 0 && w.run(false)
			spent += w.steps
			if !ok {
				w.cross[b] = slices.Insert(w.cross[b], k, r)
			}
			if w.budget <= 0 || w.exhausted {
				break
			}
			tried++
		}
		w.budget, w.exhausted = 0, false
		if tried < total {
			st.note("cross-iteration waits are not minimized: the iterate pass spends at most %s steps (ops walked and clock entries read) dropping redundant ones, and tried %d of this plan's %d before that, so some of the other %d may be redundant",
				plan.Thousands(iterMaxPruneWork), tried, total, total-tried)
		}
	}
	if st.opts.Check {
		// The walks above resume after iteration 0; one from the start
		// must agree with them.
		w.limit = 0
		resumed, work := w.run(false), w.work
		w.first = nil
		if fresh := w.run(false); !resumed || !fresh || work != w.work {
			return fmt.Errorf("the walk resumed after iteration 0 disagrees with the walk from the start: orders met %v and %v, clock entries read %d and %d", resumed, fresh, work, w.work)
		}
	}
	for b := range w.cross {
		slices.SortFunc(w.cross[b], func(x, y iterReq) int {
			return cmp.Or(cmp.Compare(pos[x.a], pos[y.a]), cmp.Compare(x.d, y.d))
		})
	}
	emitCross(p, w.cross, R)
	removed, added, _ := isolateCaptures(p) // capture.go: cross waits the captures take, on their first stages
	replays, left := orderReplays(p)        // capture_replay.go: a joined stream's work across iterations ordered through the capture's stream
	if len(left) > 0 {
		return st.replayOrderError(p, left)
	}
	if removed+added+replays > 0 {
		p.Stats.Waits, p.Iteration.CrossWaits = waitCounts(p)
		p.Iteration.Slots = crossSlots(p)
	}
	p.Iteration.InFlight = inflight
	p.Stats.Events = p.Events
	return nil
}

// barrier gives the plan the barrier form of iteration info
// (WithIteration), with a note giving why (a clause) and what it costs.
func (st *state) barrier(why string) {
	st.withIteration()
	p := st.plan
	S := len(p.Streams)
	cost := "cross-iteration waits would let consecutive iterations overlap as far as their hazards allow"
	if k := iterInFlight(p); k > 1 {
		cost += fmt.Sprintf(", up to %d at once", k)
	}
	how := fmt.Sprintf("a barrier separates them (%s waits and %s records per iteration)", plan.Thousands(2*(S-1)), plan.Thousands(S))
	if S <= 1 {
		how = "they run one after another on the plan's one stream"
	}
	if threads := planThreads(p); len(threads) > 1 {
		// The barrier's waits on another thread's records are not handed
		// over by a host event: they order nothing.
		st.note("iterations are not separated across host threads: %s, and the barrier between iterations (%s waits and %s records per iteration) waits on records of streams that other threads (%s) issue, which orders nothing without a host event handing each record over; iterations of different threads may overlap, and check unrolls them",
			why, plan.Thousands(2*(S-1)), plan.Thousands(S), strings.Join(threads, ", "))
		return
	}
	st.note("iterations do not overlap: %s, so %s; %s", why, how, cost)
}

// planThreads is the host threads that issue p's streams, in order of
// their first stream ("main" for the main thread).
func planThreads(p *plan.Plan) []string {
	var out []string
	for _, s := range p.Streams {
		if t := plan.ThreadLabel(s.Thread); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// iterInFlight is the in-flight bound of p's iterations with cross-iteration
// waits (Iteration.InFlight): the smallest copies of a written buffer, all
// of the arena counting as one copy (every write conflicts with itself
// across iterations), or the largest copies when nothing is written.
func iterInFlight(p *plan.Plan) int {
	copies := make(map[string]int, len(p.Buffers))
	kmax := 1
	for _, b := range p.Buffers {
		k := max(b.Copies, 1)
		if b.ArenaOffset != nil {
			k = 1
		}
		copies[b.Name] = k
		kmax = max(kmax, k)
	}
	k := 0
	for _, sg := range p.Stages {
		for _, w := range sg.Writes {
			if c := max(copies[w.Buffer], 1); k == 0 || c < k {
				k = c
			}
		}
	}
	if k == 0 {
		return kmax
	}
	return k
}

// iterHazards returns, per stage b, the cross-iteration orders (a, d) it
// needs, deduplicated, and the in-flight bound (smallest K over conflicting
// buffers; the largest K if none conflicts).
//
// Per elementary byte segment of each address space (a buffer, or the
// arena's buffers together), the accesses of one iteration in issue
// order are: reads before the segment's first write (head), the first and
// the last write, reads after the last write (tail). The plan orders every
// conflicting pair of one iteration (Verify), so everything up to the last
// write happens-before it and everything from the first write on
// happens-after that; every cross-iteration hazard on the segment then
// follows from three kinds of order, K iterations apart (K the ring's
// copies): last write → first write, each tail read → first write, last
// write → each head read. That is O(accesses × segments they cover) orders,
// where every pair of conflicting accesses would be quadratic.
// copies is each buffer's (per Plan.Buffers index).
func iterHazards(p *plan.Plan, copies []int, ab *planAccesses) (iterOrders, int) {
	// Address spaces: the arena's buffers together (one copy, at their
	// arena offsets), else each buffer on its own; per buffer its
	// space and base, spaces numbered in first-use order.
	type place struct {
		space int32 // index of the space + 1, 0 = not used yet
		base  int64
		arena bool
	}
	where := make([]place, len(p.Buffers)) // per Plan.Buffers index
	arenaPlace := &place{}
	for i := range p.Buffers {
		if b := &p.Buffers[i]; b.ArenaOffset != nil {
			where[i] = place{base: b.ArenaAt(), arena: true}
		}
	}
	// Per space: its accesses, the least and the greatest of their
	// bounds, and its copies (the arena's: one).
	type space struct {
		count, fill int32
		lo, hi      int64
		copies      int32
		at          int32 // its first access in the flat lists
	}
	var spaces []space
	// Stages in issue order: it extends happens-before (every record is
	// issued before its waits), so it orders the conflicting accesses of an
	// address space as the plan does. Declaration order would not: temps
	// that share arena bytes are ordered by the schedule, not by a hazard.
	pos := launchPositions(p)
	order := stableOrder(len(p.Stages), func(v int) int { return pos[v] })
	// Two walks: count each space's accesses and their bounds' range,
	// then fill them in, each space's lists cut from one array: per access
	// its stage and whether it writes (stage<<1 | write), and the sort
	// keys of its two bounds (below).
	var acc []int32
	var keys []uint64
	wide := map[int32][]keyed{} // the keys of spaces whose bounds do not pack into 64 bits
	for walk := range 2 {
		for _, v := range order {
			sg := &p.Stages[v]
			for k, list := range [2][]plan.Access{sg.Reads, sg.Writes} {
				bufs := ab.reads(p, v)
				if k == 1 {
					bufs = ab.writes(p, v)
				}
				for j, a := range list {
					i := bufs[j]
					if i < 0 {
						continue // not declared: Validate reports it
					}
					w := &where[i]
					sp := w
					if w.arena {
						sp = arenaPlace
					}
					lo, hi := w.base+a.Offset, w.base+a.Offset+a.Bytes
					if sp.space == 0 {
						c := int32(1)
						if !w.arena {
							c = int32(max(copies[i], 1))
						}
						spaces = append(spaces, space{lo: lo, hi: hi, copies: c})
						sp.space = int32(len(spaces))
					}
					g := sp.space - 1
					s := &spaces[g]
					if walk == 0 {
						s.count++
						s.lo, s.hi = min(s.lo, lo), max(s.hi, hi)
						continue
					}
					x := s.fill
					s.fill++
					acc[s.at+x] = int32(v)<<1 | int32(k)
					if shift, ok := packShift(s.count, s.lo, s.hi); ok {
						keys[2*(s.at+x)] = (uint64(lo)-uint64(s.lo))<<shift | uint64(2*x)
						keys[2*(s.at+x)+1] = (uint64(hi)-uint64(s.lo))<<shift | uint64(2*x+1)
					} else {
						wide[g] = append(wide[g], keyed{uint64(lo) ^ 1<<63, int64(2 * x)}, keyed{uint64(hi) ^ 1<<63, int64(2*x + 1)})
					}
				}
			}
		}
		if walk == 0 {
			total := int32(0)
			for g := range spaces {
				spaces[g].at = total
				total += spaces[g].count
			}
			acc = make([]int32, total)
			keys = make([]uint64, 2*total)
		}
	}
	type segment struct {
		first, last int32 // first and last write, -1: none
		head, tail  []int32
	}
	// The orders found, (a, k) for stage d, in chunks of a list (it grows
	// without copies); then by stage, cut from one array.
	type found struct {
		d int32
		r iterReq
	}
	var all [][]found
	nfound := 0
	add := func(a, d, k int32) { // deduplicated below
		if len(all) == 0 || len(all[len(all)-1]) == cap(all[len(all)-1]) {
			all = append(all, make([]found, 0, min(max(1<<10, nfound), 1<<16)))
		}
		last := &all[len(all)-1]
		*last = append(*last, found{d, iterReq{a, k}})
		nfound++
	}
	inflight := 0
	// The segments of a space lie between its accesses' distinct bounds:
	// one radix sort of the bounds (radixSort, sortKeyed) gives each
	// access the segments it covers, edge[2i] up to edge[2i+1] for access i.
	var tmp []uint64
	var edge []int32
	var segs []segment
	for g := range spaces {
		s := &spaces[g]
		list := acc[s.at : s.at+s.count]
		edge = slices.Grow(edge[:0], 2*len(list))[:2*len(list)]
		bounds := 0
		if shift, ok := packShift(s.count, s.lo, s.hi); ok {
			ks := keys[2*s.at : 2*(s.at+s.count)]
			tmp = radixSort(ks, tmp, shift)
			mask := uint64(1)<<shift - 1
			for j, e := range ks {
				if j == 0 || e>>shift != ks[j-1]>>shift {
					bounds++
				}
				edge[e&mask] = int32(bounds - 1)
			}
		} else {
			ks := wide[int32(g)]
			sortKeyed(ks)
			for j, e := range ks {
				if j == 0 || e.key != ks[j-1].key {
					bounds++
				}
				edge[e.val] = int32(bounds - 1)
			}
			delete(wide, int32(g))
		}
		segs = slices.Grow(segs[:0], bounds)[:bounds-1]
		for g := range segs {
			segs[g] = segment{first: -1, last: -1}
		}
		for i, x := range list { // in issue order, each stage's reads first
			lo, hi := edge[2*i], edge[2*i+1]
			stage, write := x>>1, x&1 == 1
			for g := lo; g < hi; g++ {
				sg := &segs[g]
				switch {
				case write:
					if sg.first < 0 {
						sg.first = stage
					}
					sg.last, sg.tail = stage, sg.tail[:0]
				case sg.first < 0:
					sg.head = append(sg.head, stage)
				default:
					sg.tail = append(sg.tail, stage)
				}
			}
		}
		k := s.copies
		for g := range segs {
			sg := &segs[g]
			if sg.first < 0 {
				continue // only reads: no hazard
			}
			if inflight == 0 || int(k) < inflight {
				inflight = int(k)
			}
			add(sg.last, sg.first, k)
			for _, r := range sg.tail {
				add(r, sg.first, k)
			}
			for _, r := range sg.head {
				add(sg.last, r, k)
			}
		}
	}
	if inflight == 0 {
		inflight = 1
		for _, k := range copies {
			inflight = max(inflight, k)
		}
	}
	off := make([]int32, len(p.Stages)+1)
	for _, c := range all {
		for _, f := range c {
			off[f.d+1]++
		}
	}
	for d := range len(p.Stages) {
		off[d+1] += off[d]
	}
	flat := make([]iterReq, nfound)
	at := slices.Clone(off[:len(p.Stages)])
	for _, c := range all {
		for _, f := range c {
			flat[at[f.d]] = f.r
			at[f.d]++
		}
	}
	all = nil
	// Each stage's orders sorted and deduplicated, the rows packed down.
	n := int32(0)
	for d := range len(p.Stages) {
		rs := flat[off[d]:off[d+1]]
		slices.SortFunc(rs, func(x, y iterReq) int { return cmp.Or(cmp.Compare(x.a, y.a), cmp.Compare(x.d, y.d)) })
		rs = slices.Compact(rs)
		off[d] = n
		n += int32(copy(flat[n:], rs))
	}
	off[len(p.Stages)] = n
	return iterOrders{off: off, r: flat[:n:n]}, inflight
}

// iterOrders are the cross-iteration orders (a, d) each stage b needs
// (iterHazards), in compressed rows: row(b).
type iterOrders struct {
	off []int32
	r   []iterReq
}

func (o iterOrders) row(b int) []iterReq { return o.r[o.off[b]:o.off[b+1]] }

// packShift says whether the sort keys of a space of count accesses with
// bounds in [lo, hi] pack into 64 bits, each bound as (bound − lo) << shift
// | its index among the space's 2·count bounds, and the shift.
func packShift(count int32, lo, hi int64) (uint, bool) {
	shift := uint(bits.Len32(uint32(2 * count)))
	return shift, uint64(hi)-uint64(lo) < 1<<(64-shift)
}

// launchPositions returns each stage's launch position in IssueOrder.
func launchPositions(p *plan.Plan) []int {
	pos := make([]int, len(p.Stages))
	for k, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpLaunch {
			pos[o.Stage] = k
		}
	}
	return pos
}

// iterWalk simulates U iterations of a plan in issue order with vector
// clocks over physical streams, placing or checking cross waits.
type iterWalk struct {
	p          *plan.Plan
	S, R, n, U int
	window     int // iterations of snapshots kept: the longest distance + 1
	reqs       iterOrders
	cross      [][]iterReq // per stage: its cross waits (the plan being built)
	limit      int         // clock entries a walk may read (0: no limit)
	work       int         // clock entries the last walk read
	stopped    int         // the iteration in which a walk passed limit
	added      [][3]int32  // cross waits in the order they were added: b, a, d
	// first is the walk's state after iteration 0, the same in every walk
	// (a cross wait or order reaches at least one iteration back, so none
	// applies in iteration 0): later walks start from it.
	first *iterState
	// snaps0 are iteration 0's snapshots, which every walk shares (first),
	// snaps the later iterations', reused from walk to walk.
	snaps0, snaps []iterSnap
	// recSnap and hasRec, per event, the snapshot of the launch its record
	// follows in the current iteration, reused likewise.
	recSnap []iterSnap
	hasRec  []bool
	// chunks hold the walks' clocks, P entries each, 1<<clockBits clocks
	// a chunk, numbered in order (a snapshot holds a clock's number, not a
	// slice); the first clocks numbers are in use, and a walk reuses the
	// rest from the walk before.
	chunks    [][]int32
	clockBits uint
	clocks    int32
	// budget bounds the steps (ops visited and clock entries read) of a
	// walk (0: none); past it the walk stops, returns false and sets
	// exhausted. steps is the last walk's.
	budget, steps int
	exhausted     bool
}

// iterState is the iterWalk's state between two iterations.
type iterState struct {
	clock  []int32 // per physical stream, its clock's number (shared with snapshots: never written)
	cnt    []int32
	work   int
	clocks int32 // iterWalk.clocks
}

// iterSnap is a launch's place: its physical stream, its 1-based index
// among that stream's launches, and the number of the stream's clock just
// before it (shared, immutable).
type iterSnap struct {
	ps, idx, clock int32
}

// run walks the iterations. With place, it adds a cross wait for every
// order not met and returns true; without, it returns whether every order
// is met by the current cross waits. Past w.limit clock entries read it
// stops and returns false (w.stopped is the iteration).
func (w *iterWalk) run(place bool) bool {
	p, S, n := w.p, w.S, w.n
	phys, P := p.PhysicalStreams()
	// Clocks are cut from chunks: one allocation per chunk, not per join,
	// and none for the clocks of an earlier walk reused.
	if w.chunks == nil {
		for (2<<w.clockBits)*max(P, 1) <= 1<<14 {
			w.clockBits++
		}
	}
	clockOf := func(h int32) []int32 {
		c, i := w.chunks[h>>w.clockBits], int(h&(1<<w.clockBits-1))*P
		return c[i : i+P : i+P]
	}
	newClock := func() int32 {
		h := w.clocks
		if int(h>>w.clockBits) == len(w.chunks) {
			w.chunks = append(w.chunks, make([]int32, P<<w.clockBits))
		}
		w.clocks++
		return h
	}
	w.clocks = 0
	if w.first != nil {
		w.clocks = w.first.clocks
	}
	// Per physical stream: its clock (the launches of each stream known
	// complete) and the clock's number.
	clock, num := make([][]int32, P), make([]int32, P)
	shared := make([]bool, P) // clock[ps] is referenced by a snapshot: copy on join
	zero := newClock()
	clear(clockOf(zero))
	for i := range clock {
		clock[i], num[i], shared[i] = clockOf(zero), zero, true
	}
	cnt := make([]int32, P)
	// snaps0[v]: stage v of iteration 0, the same in every walk;
	// snaps[((i−1) mod window)·n + v]: stage v of iteration i ≥ 1. Older
	// iterations are never asked about again.
	if w.snaps == nil {
		w.snaps0, w.snaps = make([]iterSnap, n), make([]iterSnap, n*w.window)
	}
	snaps0, snaps := w.snaps0, w.snaps
	at := func(i, v int) *iterSnap {
		if i == 0 {
			return &snaps0[v]
		}
		return &snaps[((i-1)%w.window)*n+v]
	}
	// recSnap[e]: the snapshot of the launch each record of e follows in
	// the current iteration (sync records right after launches).
	if len(w.recSnap) != p.Events {
		w.recSnap, w.hasRec = make([]iterSnap, p.Events), make([]bool, p.Events)
	}
	recSnap, hasRec := w.recSnap, w.hasRec
	lastLaunch := make([]int32, S) // per logical stream: last stage launched in this iteration
	w.work = 0
	over := false
	join := func(ps int, s iterSnap) {
		c := clock[ps]
		if s.ps == int32(ps) {
			return
		}
		// Knowing s's launch means knowing all it knew: clocks only grow
		// along a stream, and a launch's knowledge reaches others only
		// through its stream's later records. So a join costs O(1) unless
		// it merges, and O(P) then.
		if c[s.ps] >= s.idx {
			return
		}
		w.work += P
		over = over || (w.limit > 0 && w.work > w.limit)
		nc := c
		if shared[ps] {
			num[ps] = newClock()
			nc = clockOf(num[ps])
			copy(nc, c)
			shared[ps] = false
		}
		for q, v := range clockOf(s.clock) {
			nc[q] = max(nc[q], v)
		}
		nc[s.ps] = max(nc[s.ps], s.idx)
		clock[ps] = nc
	}
	hb := func(a iterSnap, ps int, idx int32) bool {
		if a.ps == int32(ps) {
			return a.idx < idx
		}
		return clock[ps][a.ps] >= a.idx
	}
	j0 := 0
	w.exhausted = false
	if f := w.first; f != nil {
		j0, w.work = 1, f.work
		copy(num, f.clock)
		for i, h := range num {
			clock[i] = clockOf(h)
		}
		copy(cnt, f.cnt)
	}
	ops, work0 := 0, w.work
	defer func() { w.steps = ops + w.work - work0 }()
	for j := j0; j < w.U; j++ {
		if j == 1 && w.first == nil {
			f := &iterState{clock: slices.Clone(num), cnt: slices.Clone(cnt), work: w.work, clocks: w.clocks}
			for i := range shared {
				shared[i] = true
			}
			w.first = f
		}
		set := phys[j%len(phys)]
		clear(hasRec)
		for i := range lastLaunch {
			lastLaunch[i] = -1
		}
		for _, so := range p.IssueOrder {
			s := so[0]
			ps := set[s]
			switch o := p.Streams[s].Ops[so[1]]; o.Kind {
			case plan.OpRecord:
				if v := lastLaunch[s]; v >= 0 {
					recSnap[o.Event], hasRec[o.Event] = *at(j, int(v)), true
				}
			case plan.OpWait:
				if o.Lag == 0 && hasRec[o.Event] {
					join(ps, recSnap[o.Event])
				}
			case plan.OpLaunch:
				b := o.Stage
				for _, r := range w.cross[b] {
					if i := j - int(r.d); i >= 0 {
						join(ps, *at(i, int(r.a)))
					}
				}
				idx := cnt[ps] + 1
				for _, r := range w.reqs.row(b) {
					i := j - int(r.d)
					if i < 0 {
						continue
					}
					a := *at(i, int(r.a))
					if hb(a, ps, idx) {
						continue
					}
					if !place {
						return false
					}
					w.cross[b] = append(w.cross[b], r)
					w.added = append(w.added, [3]int32{int32(b), r.a, r.d})
					join(ps, a)
				}
				cnt[ps] = idx
				*at(j, b) = iterSnap{ps: int32(ps), idx: idx, clock: num[ps]}
				shared[ps] = true
				lastLaunch[s] = int32(b)
			}
			if over {
				w.stopped = j
				return false
			}
			if ops++; w.budget > 0 && ops+w.work-work0 > w.budget {
				w.exhausted = true
				return false
			}
		}
	}
	return true
}

// emitCross writes the cross waits into p: for each producer a record right
// after its launch (reusing the one there), for each consumer its cross
// waits right before its launch, in stream order and issue order; then the
// event slots and p.Iteration.
func emitCross(p *plan.Plan, cross [][]iterReq, R int) {
	n := len(p.Stages)
	event := make([]int, n) // producer → its event (-1: none yet)
	for i := range event {
		event[i] = -1
	}
	need := make([]bool, n)
	waits := 0
	for _, c := range cross {
		for _, r := range c {
			need[r.a] = true
			waits++
		}
	}
	// Reuse a record right after the producer's launch.
	for _, str := range p.Streams {
		for j, o := range str.Ops {
			if o.Kind == plan.OpLaunch && need[o.Stage] && j+1 < len(str.Ops) && str.Ops[j+1].Kind == plan.OpRecord {
				event[o.Stage] = str.Ops[j+1].Event
			}
		}
	}
	// New events in issue order of their producers.
	for _, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpLaunch && need[o.Stage] && event[o.Stage] < 0 {
			event[o.Stage] = p.Events
			p.Events++
		}
	}
	newRec := make([]bool, n) // a record must be inserted after this launch
	for _, str := range p.Streams {
		for j, o := range str.Ops {
			if o.Kind == plan.OpLaunch && need[o.Stage] && !(j+1 < len(str.Ops) && str.Ops[j+1].Kind == plan.OpRecord) {
				newRec[o.Stage] = true
			}
		}
	}
	ops := make([][]plan.Op, len(p.Streams))
	for s, str := range p.Streams {
		c := len(str.Ops) // and the cross waits and records it gets
		for _, o := range str.Ops {
			if o.Kind == plan.OpLaunch {
				c += len(cross[o.Stage])
				if newRec[o.Stage] {
					c++
				}
			}
		}
		ops[s] = make([]plan.Op, 0, c)
	}
	order := make([][2]int, 0, len(p.IssueOrder)+waits)
	emit := func(s int, o plan.Op) {
		order = append(order, [2]int{s, len(ops[s])})
		ops[s] = append(ops[s], o)
	}
	// A collective's ranks are launched consecutively, as one group
	// (syncStreams): every rank's cross waits go before the group's first
	// launch and the records after its last, as sync places its own, so
	// that nothing is issued between the ranks. (A wait moved earlier on
	// its stream, or a record later, past ops of other streams only,
	// orders the same.)
	ranks := false // the plan has a collective
	for v := range p.Stages {
		ranks = ranks || p.Stages[v].Collective != nil
	}
	rankOf := func(so [2]int) *plan.Collective {
		if !ranks {
			return nil
		}
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpLaunch {
			return p.Stages[o.Stage].Collective
		}
		return nil
	}
	crossWaits := func(s, stage int) {
		for _, r := range cross[stage] {
			emit(s, plan.Op{Kind: plan.OpWait, Event: event[r.a], Lag: int(r.d)})
		}
	}
	var deferred [][2]int // (stream, stage): records after the group's last rank
	for k, so := range p.IssueOrder {
		s := so[0]
		o := p.Streams[s].Ops[so[1]]
		c := rankOf(so)
		first := c != nil && (k == 0 || rankOf(p.IssueOrder[k-1]) == nil || rankOf(p.IssueOrder[k-1]).Group != c.Group)
		last := c != nil && (k+1 == len(p.IssueOrder) || rankOf(p.IssueOrder[k+1]) == nil || rankOf(p.IssueOrder[k+1]).Group != c.Group)
		switch {
		case first:
			for q := k; q < len(p.IssueOrder); q++ {
				if rc := rankOf(p.IssueOrder[q]); rc == nil || rc.Group != c.Group {
					break
				}
				crossWaits(p.IssueOrder[q][0], p.Streams[p.IssueOrder[q][0]].Ops[p.IssueOrder[q][1]].Stage)
			}
		case c == nil && o.Kind == plan.OpLaunch:
			crossWaits(s, o.Stage)
		}
		emit(s, o)
		if o.Kind == plan.OpLaunch && newRec[o.Stage] {
			deferred = append(deferred, [2]int{s, o.Stage})
		}
		if c == nil || last {
			for _, d := range deferred {
				emit(d[0], plan.Op{Kind: plan.OpRecord, Event: event[d[1]]})
			}
			deferred = deferred[:0]
		}
	}
	for s := range p.Streams {
		p.Streams[s].Ops = ops[s]
	}
	p.IssueOrder = order
	p.Iteration = &plan.Iteration{StreamSets: R, Slots: crossSlots(p), CrossWaits: waits}
}

// waitCounts returns p's waits with lag 0 and with a lag.
func waitCounts(p *plan.Plan) (waits, cross int) {
	for _, str := range p.Streams {
		for _, o := range str.Ops {
			switch {
			case o.Kind == plan.OpWait && o.Lag > 0:
				cross++
			case o.Kind == plan.OpWait:
				waits++
			}
		}
	}
	return waits, cross
}

// crossSlots returns the event slots p's cross waits need: the next
// record of the slot a lag-d wait reads is d' = slots iterations later; it
// must come after the wait in issue order, so an event needs d slots for a
// lag-d wait issued before its record in an iteration, d+1 for one issued
// after it, and 1 with no cross wait.
func crossSlots(p *plan.Plan) []int {
	recPos := make([]int, p.Events) // issue position of each event's latest record in an iteration
	waitPos := map[[2]int]int{}     // (event, lag) → latest issue position of such a wait
	for k, so := range p.IssueOrder {
		switch o := p.Streams[so[0]].Ops[so[1]]; {
		case o.Kind == plan.OpRecord:
			recPos[o.Event] = k
		case o.Kind == plan.OpWait && o.Lag > 0:
			waitPos[[2]int{o.Event, o.Lag}] = k
		}
	}
	slots := make([]int, p.Events)
	for e := range slots {
		slots[e] = 1
	}
	for k, wp := range waitPos {
		e, d := k[0], k[1]
		need := d
		if recPos[e] < wp {
			need = d + 1
		}
		slots[e] = max(slots[e], need)
	}
	return slots
}
