package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/num"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
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
// refused at the captured stage. docs/design/arena.md has the design.
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
			num.Thousands(launchHBSize(p)), num.Thousands(launchHBMax), num.Thousands(graphOrderMaxTemps), num.Thousands(n), num.Thousands(int(tempBytes(p))))
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
			num.Thousands(skipped), num.Thousands(segments), num.Thousands(temps), num.Thousands(len(a.bufs)), num.Thousands(greedyMaxPairs), overLive(size, lb, "this plan's ideal schedule"))
	}
	return nil
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

// newArenaInfo finds the eligible buffers of p: device temps with one copy
// that neither their producer (plan.AllocProducer) nor each stream
// (plan.AllocLazy, a per-stream workspace) allocates, touched by at least
// one stage, whose initial contents are never read
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
		o := verify.NewOrder(p)
		a.issue = make([]int32, len(p.Stages))
		for v, g := range o.LaunchOp {
			a.issue[v] = o.OpIssue[g]
		}
		a.hb = graphOrder{o}
	}
	a.stream = make([]int32, len(p.Stages))
	for v := range p.Stages {
		a.stream[v] = int32(p.Stages[v].Stream)
	}
	ok := make([]bool, len(p.Buffers))
	for i, b := range p.Buffers {
		ok[i] = b.Role == dag.RoleTemp && cmp.Or(b.Where, dag.WhereDevice) == dag.WhereDevice && b.Copies <= 1 && b.Alloc == ""
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

// arenaBoundEarly is the number of arena temps from which the arena pass
// works out the live bound beside the layout rather than after it, only
// when its note needs it.
const arenaBoundEarly = 5000

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
