package planner

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/dag"
)

// ArenaAlign is the alignment of every arena offset and the unit arena
// sizes are rounded up to, in bytes (cudaMalloc's own alignment).
const ArenaAlign = 256

// arena places temp buffers in one device arena. Two buffers may share
// bytes only when every access of the first happens-before the first access
// of the second in the plan's happens-before (stream order plus
// record→wait in issue order, Verify's notion): never because of host issue
// order or because the allocating stream is done. Offsets: greedy by size,
// best fit (Pisarchyk and Lee, "Efficient Memory Management for Deep Neural
// Net Inference", 2020, §4.3), 256-byte aligned; the budget loop's layout
// (Build) replaces them when it is smaller and valid. It also names each
// eligible temp's first stage (Lifetime.First) for --alloc dynamic.
func arena(st *state) error {
	mode := cmp.Or(st.opts.Arena, st.spec.Options.Arena, dag.ArenaPlanned)
	switch mode {
	case dag.ArenaPlanned, dag.ArenaOff, dag.ArenaStreamOrder:
	default:
		return fmt.Errorf("unknown arena mode %q (want planned, off or stream-order)", mode)
	}
	p := st.plan
	n := arenaCandidates(p)
	large := n > MaxArenaBuffers
	if large && mode != dag.ArenaOff && !denseClocksFit(p) {
		// Past both bounds the layout's happens-before tests cost too much.
		for i := range p.Buffers {
			p.Buffers[i].ArenaOffset = nil
		}
		p.Stats.ArenaBytes = 0
		st.note("no arena: above %s device temps (this plan has %s) the arena pass lays temps out in issue order only when its vector clocks fit in %s entries (this plan needs %s), so each temp keeps its own allocation (%s bytes in all, where a shared arena could reuse bytes between temps whose lifetimes are ordered)",
			thousands(MaxArenaBuffers), thousands(n), thousands(launchHBMax), thousands(launchHBSize(p)), thousands(int(tempBytes(p))))
		return nil
	}
	a := newArenaInfo(p)
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
	before := a.before
	if mode == dag.ArenaStreamOrder {
		before = a.beforeStreamOrder
	}
	var offs []int64
	var size int64
	if large {
		offs, size = a.layoutIssue(before)
	} else {
		offs, size = a.layout(before)
	}
	for k, b := range a.bufs {
		off := offs[k]
		p.Buffers[b.idx].ArenaOffset = &off
	}
	p.Stats.ArenaBytes = size
	if st.layoutHint != nil && mode == dag.ArenaPlanned && !large {
		a.applyLayout(st.layoutHint)
	}
	if large && mode == dag.ArenaPlanned {
		st.note("arena in issue order: above %s device temps (this plan has %s) the arena pass places each temp when its first use is issued, in the freed bytes of a temp whose every use happens-before it (best fit among the %d latest freed; freed blocks are not merged), instead of comparing every pair of temps by size: %s bytes, against %s bytes live at most in the ideal schedule (planner.LiveBound)",
			thousands(MaxArenaBuffers), thousands(len(a.bufs)), arenaScan, thousands(int(size)), thousands(int(LiveBound(p))))
	}
	return nil
}

// arenaScan bounds the freed blocks layoutIssue tries for each temp.
const arenaScan = 256

// layoutIssue assigns offsets online, in issue order, for plans with more
// temps than MaxArenaBuffers: at a temp's first launch, the temps whose
// last launch was issued before are free, and it takes the best-fitting of
// the arenaScan latest freed blocks whose last owner it may follow
// (before), the rest of a larger block staying free; else it goes on top.
// Bytes are shared only along before, as in layout, and by transitivity
// with every earlier owner. Cost: O(temps × arenaScan) before tests.
func (a *arenaInfo) layoutIssue(before func(x, y *arenaBuf) bool) ([]int64, int64) {
	n := len(a.bufs)
	offs := make([]int64, n)
	starts, ends := make([]int, n), make([]int, n)
	for i := range starts {
		starts[i], ends[i] = i, i
	}
	slices.SortStableFunc(starts, func(i, j int) int { return cmp.Compare(a.bufs[i].firstIssue, a.bufs[j].firstIssue) })
	slices.SortStableFunc(ends, func(i, j int) int { return cmp.Compare(a.bufs[i].lastIssue, a.bufs[j].lastIssue) })
	type block struct {
		off, size int64
		owner     int // index into a.bufs of the temp that used these bytes last
	}
	var free []block
	var top int64
	e := 0
	for _, i := range starts {
		x := a.bufs[i]
		for ; e < n && a.bufs[ends[e]].lastIssue < x.firstIssue; e++ {
			y := ends[e]
			free = append(free, block{offs[y], a.bufs[y].size, y})
		}
		best := -1
		for k := len(free) - 1; k >= 0 && k >= len(free)-arenaScan; k-- {
			b := free[k]
			if b.size < x.size || best >= 0 && b.size >= free[best].size || !before(a.bufs[b.owner], x) {
				continue
			}
			if best = k; b.size == x.size {
				break // an exact fit
			}
		}
		if best < 0 {
			offs[i] = top
			top += x.size
			continue
		}
		b := free[best]
		offs[i] = b.off
		if b.size > x.size {
			free[best] = block{b.off + x.size, b.size - x.size, b.owner}
		} else {
			free = slices.Delete(free, best, best+1)
		}
	}
	return offs, top
}

// applyLayout replaces the arena's offsets by hint (per Plan.Buffers
// index; the budget loop's layout over the ideal schedule) when hint is
// smaller and valid: every two buffers sharing bytes are ordered by the
// plan's happens-before.
func (a *arenaInfo) applyLayout(hint map[int]int64) {
	p := a.p
	var size int64
	for _, b := range a.bufs {
		off, ok := hint[b.idx]
		if !ok || p.Buffers[b.idx].ArenaOffset == nil {
			return
		}
		size = max(size, off+b.size)
	}
	if size >= p.Stats.ArenaBytes {
		return
	}
	for i, x := range a.bufs {
		for _, y := range a.bufs[i+1:] {
			ox, oy := hint[x.idx], hint[y.idx]
			if ox < oy+y.size && oy < ox+x.size && !a.before(x, y) && !a.before(y, x) {
				return
			}
		}
	}
	for _, b := range a.bufs {
		off := hint[b.idx]
		p.Buffers[b.idx].ArenaOffset = &off
	}
	p.Stats.ArenaBytes = size
}

// MaxArenaBuffers bounds the temps the arena pass lays out by size: its
// best-fit placement compares every pair of buffers, so a plan with more
// device temps than this is laid out in issue order (layoutIssue), which
// Plan.Notes says with its cost. The eight model graphs have at most 1,266
// temps.
const MaxArenaBuffers = 2048

// tempBytes is the bytes of p's device temps, each rounded up to ArenaAlign.
func tempBytes(p *Plan) int64 {
	var n int64
	for _, b := range p.Buffers {
		if b.Role == dag.RoleTemp && b.Where == dag.WhereDevice {
			n += alignUp(b.Bytes)
		}
	}
	return n
}

// arenaCandidates counts the device temps, an upper bound on the buffers the
// arena could share.
func arenaCandidates(p *Plan) int {
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
	p     *Plan
	hb    stageOrder
	issue []int32 // per stage: position of its launch in IssueOrder
	bufs  []*arenaBuf
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

// launchHBMax bounds the clock entries (streams × rows) of launchHB that
// newArenaInfo builds; beyond it the arena asks the happens-before graph.
const launchHBMax = 1 << 24

// launchHBSize is the clock entries launchHB needs for p: streams × (waits+1).
func launchHBSize(p *Plan) int {
	waits := 0
	for _, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == OpWait {
				waits++
			}
		}
	}
	return len(p.Streams) * (waits + 1)
}

func denseClocksFit(p *Plan) bool { return launchHBSize(p) <= launchHBMax }

// arenaBuf is one arena-eligible buffer.
type arenaBuf struct {
	idx        int   // index in Plan.Buffers
	size       int64 // bytes rounded up to ArenaAlign
	firstIssue int   // issue position of its first and last launch
	lastIssue  int
	// first and last launch (stage) on each stream touching it, by stream.
	streams     []int32
	first, last []int32
}

// newArenaInfo finds the eligible buffers of p: device temps with one copy,
// touched by at least one stage, whose initial contents are never read
// (every byte a stage really reads was really written by an earlier-declared
// stage; see touched), so that their bytes may hold another buffer's data
// before their first use.
func newArenaInfo(p *Plan) *arenaInfo {
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
				if o.Kind == OpLaunch {
					g.launch[o.Stage] = h.opBase[s] + int32(j)
					a.issue[o.Stage] = h.opIssue[g.launch[o.Stage]]
				}
			}
		}
		a.hb = g
	}
	idx := make(map[string]int, len(p.Buffers))
	ok := make([]bool, len(p.Buffers))
	for i, b := range p.Buffers {
		idx[b.Name] = i
		ok[i] = b.Role == dag.RoleTemp && cmp.Or(b.Where, dag.WhereDevice) == dag.WhereDevice && b.Copies <= 1
	}
	// Written byte ranges per buffer, swept in declaration order.
	written := make([]rangeSet, len(p.Buffers))
	used := make([]bool, len(p.Buffers))
	for v := range p.Stages {
		rs, ws := touched(&p.Stages[v])
		for _, r := range rs {
			if i, found := idx[r.Buffer]; found && ok[i] && !written[i].covers(r.Offset, r.Offset+r.Bytes) {
				ok[i] = false
			}
		}
		for _, list := range [2][]Access{p.Stages[v].Reads, p.Stages[v].Writes} {
			for _, x := range list {
				if i, found := idx[x.Buffer]; found {
					used[i] = true
				}
			}
		}
		for _, w := range ws {
			if i, found := idx[w.Buffer]; found && ok[i] {
				written[i].add(w.Offset, w.Offset+w.Bytes)
			}
		}
	}
	byIdx := make([]*arenaBuf, len(p.Buffers))
	for i, b := range p.Buffers {
		if ok[i] && used[i] {
			ab := &arenaBuf{idx: i, size: alignUp(b.Bytes), firstIssue: math.MaxInt, lastIssue: -1}
			byIdx[i] = ab
			a.bufs = append(a.bufs, ab)
		}
	}
	for k, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		if o.Kind != OpLaunch {
			continue
		}
		v := o.Stage
		s := int32(so[0])
		for _, list := range [2][]Access{p.Stages[v].Reads, p.Stages[v].Writes} {
			for _, x := range list {
				ab := byIdx[idx[x.Buffer]]
				if ab == nil {
					continue
				}
				ab.firstIssue, ab.lastIssue = min(ab.firstIssue, k), max(ab.lastIssue, k)
				j := slices.Index(ab.streams, s)
				if j < 0 {
					ab.streams = append(ab.streams, s)
					ab.first = append(ab.first, int32(v))
					ab.last = append(ab.last, int32(v))
				} else {
					ab.last[j] = int32(v)
				}
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
	for _, v := range b.first {
		if f < 0 || a.issue[v] < a.issue[f] {
			f = int(v)
		}
	}
	for _, v := range b.first {
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
	if x.lastIssue >= y.firstIssue {
		return false
	}
	for _, u := range x.last {
		for _, v := range y.first {
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
	return x.lastIssue < y.firstIssue && a.allocStream(x) == a.allocStream(y)
}

func (a *arenaInfo) allocStream(b *arenaBuf) int32 {
	best := 0
	for j, v := range b.first {
		if a.issue[v] < a.issue[b.first[best]] {
			best = j
		}
	}
	return b.streams[best]
}

// layout assigns offsets, greedy by size with best fit: buffers in order of
// decreasing size (then first issue), each at the start of the smallest gap
// between the already placed buffers it conflicts with (those not ordered
// with it by before, either way) that holds it, else above them all. It
// returns the offsets (per a.bufs) and the arena size in bytes.
func (a *arenaInfo) layout(before func(x, y *arenaBuf) bool, start ...[]float64) ([]int64, int64) {
	n := len(a.bufs)
	var bestOffs []int64
	bestSize := int64(math.MaxInt64)
	keys := []func(i, j int) int{
		func(i, j int) int { return cmp.Compare(a.bufs[j].size, a.bufs[i].size) },
		func(i, j int) int { return cmp.Compare(a.bufs[i].firstIssue, a.bufs[j].firstIssue) },
		func(i, j int) int {
			si := a.bufs[i].size * int64(a.bufs[i].lastIssue-a.bufs[i].firstIssue+1)
			sj := a.bufs[j].size * int64(a.bufs[j].lastIssue-a.bufs[j].firstIssue+1)
			return cmp.Compare(sj, si)
		},
	}
	if len(start) > 0 {
		lo := start[0]
		keys = append(keys, func(i, j int) int { return cmp.Compare(lo[i], lo[j]) })
	}
	for _, key := range keys {
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(i, j int) int {
			return cmp.Or(key(i, j), cmp.Compare(a.bufs[j].size, a.bufs[i].size), cmp.Compare(a.bufs[i].firstIssue, a.bufs[j].firstIssue))
		})
		offs, size := a.place(order, before)
		if size < bestSize {
			bestOffs, bestSize = offs, size
		}
	}
	if n == 0 {
		return nil, 0
	}
	return bestOffs, bestSize
}

func (a *arenaInfo) place(order []int, before func(x, y *arenaBuf) bool) ([]int64, int64) {
	n := len(a.bufs)
	offs := make([]int64, n)
	// done holds the placed buffers sorted by offset, so the conflicting
	// ones come out in offset order without a sort per placement.
	done := make([]int, 0, n)
	var size int64
	for _, i := range order {
		x := a.bufs[i]
		best, bestGap := int64(-1), int64(math.MaxInt64)
		var top int64
		for _, j := range done {
			y := a.bufs[j]
			if before(x, y) || before(y, x) {
				continue // ordered lifetimes may share bytes
			}
			if gap := offs[j] - top; gap >= x.size && gap < bestGap {
				best, bestGap = top, gap
			}
			top = max(top, offs[j]+y.size)
		}
		if best < 0 {
			best = top
		}
		offs[i] = best
		size = max(size, best+x.size)
		k, _ := slices.BinarySearchFunc(done, best, func(j int, off int64) int { return cmp.Compare(offs[j], off) })
		done = slices.Insert(done, k, i)
	}
	return offs, size
}

func alignUp(n int64) int64 { return (n + ArenaAlign - 1) / ArenaAlign * ArenaAlign }

// touched returns the byte ranges a stage really reads and writes, per the
// built-ins' contract (package contract): spin touches nothing, checksum
// writes its first 8 bytes, mix writes only words below max_words of each
// write and reads word i mod n of each read for those words only. Other
// built-ins and user kernels touch what they declare.
func touched(sg *Stage) (reads, writes []Access) {
	switch sg.Kernel {
	case dag.BuiltinSpin:
		return nil, nil
	case dag.BuiltinChecksum:
		ws := slices.Clone(sg.Writes)
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
		ws := slices.Clone(sg.Writes)
		for i := range ws {
			w := min((ws[i].Bytes+3)/4, maxWords)
			ws[i].Bytes = min(ws[i].Bytes, 4*w)
			words = max(words, w)
		}
		rs := slices.Clone(sg.Reads)
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
	S      int
	stream []int32 // per stage
	index  []int32 // per stage: op index of its launch on its stream
	issue  []int32 // per stage: position of its launch in IssueOrder
	row    []int32 // per stage: clock row of its launch
	vecs   []int32 // rows of S entries: ops of each stream (a prefix) that happen-before
}

func newLaunchHB(p *Plan) *launchHB {
	S := len(p.Streams)
	h := &launchHB{S: S, stream: make([]int32, len(p.Stages)), index: make([]int32, len(p.Stages)),
		issue: make([]int32, len(p.Stages)), row: make([]int32, len(p.Stages)), vecs: make([]int32, S)}
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
		case OpRecord:
			last[o.Event] = rec{int32(s), int32(so[1]), cur[s]}
		case OpWait:
			if r := last[o.Event]; o.Lag == 0 && r.stream >= 0 && int(r.stream) != s {
				join(s, r.row, int(r.stream), r.index+1)
			}
		case OpLaunch:
			v := o.Stage
			h.stream[v], h.index[v], h.issue[v], h.row[v] = int32(s), int32(so[1]), int32(k), cur[s]
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
	su, sv := h.stream[u], h.stream[v]
	if su == sv {
		return h.index[u] < h.index[v]
	}
	return h.vecs[int(h.row[v])*h.S+int(su)] > h.index[u]
}

// NoReuseBytes is the arena p would need without any reuse: the sum of its
// arena buffers' sizes, each rounded up to ArenaAlign, in bytes.
func NoReuseBytes(p *Plan) int64 {
	var n int64
	for _, b := range p.Buffers {
		if b.ArenaOffset != nil {
			n += alignUp(b.Bytes)
		}
	}
	return n
}

// LiveBound is the lower bound on p's arena under p's own schedule: the most
// bytes of arena buffers live at any instant of p's ideal schedule (each
// stage's duration_us, 0 counted as 1 µs, no launch cost, unlimited
// hardware, as Stats.IdealMakespanUS). A buffer is live from the start of
// its first launch to the end of its last. Buffers that share arena bytes
// are ordered by happens-before, so their live ranges in any schedule that
// respects it are disjoint, and every arena of p is at least this large.
// Sizes are the buffers' own bytes (not rounded).
func LiveBound(p *Plan) int64 {
	start, end := IdealSchedule(p)
	type ev struct {
		t     float64
		delta int64
	}
	idx := make(map[string]int, len(p.Buffers))
	for i, b := range p.Buffers {
		if b.ArenaOffset != nil {
			idx[b.Name] = i
		}
	}
	lo := make([]float64, len(p.Buffers))
	hi := make([]float64, len(p.Buffers))
	for i := range lo {
		lo[i], hi[i] = math.Inf(1), math.Inf(-1)
	}
	for v, sg := range p.Stages {
		for _, list := range [2][]Access{sg.Reads, sg.Writes} {
			for _, a := range list {
				if i, ok := idx[a.Buffer]; ok {
					lo[i], hi[i] = min(lo[i], start[v]), max(hi[i], end[v])
				}
			}
		}
	}
	var evs []ev
	for i, b := range p.Buffers {
		if _, ok := idx[b.Name]; ok && lo[i] < hi[i] {
			evs = append(evs, ev{lo[i], b.Bytes}, ev{hi[i], -b.Bytes})
		}
	}
	// Ends before starts at the same instant: live ranges are half-open.
	slices.SortFunc(evs, func(a, b ev) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.delta, b.delta)) })
	var live, peak int64
	for _, e := range evs {
		live += e.delta
		peak = max(peak, live)
	}
	return peak
}

// writeArena writes the table's arena lines: the arena's size, each arena
// buffer at its offset (in offset order), and the budget loop's steps.
func (p *Plan) writeArena(w io.Writer) {
	type at struct {
		name string
		off  int64
	}
	var bufs []at
	for _, b := range p.Buffers {
		if b.ArenaOffset != nil {
			bufs = append(bufs, at{b.Name, *b.ArenaOffset})
		}
	}
	if len(bufs) > 0 {
		slices.SortStableFunc(bufs, func(x, y at) int { return cmp.Compare(x.off, y.off) })
		var b strings.Builder
		for _, x := range bufs {
			fmt.Fprintf(&b, " %s@%d", x.name, x.off)
		}
		fmt.Fprintf(w, "arena: %d bytes (%d without reuse):%s\n", p.Stats.ArenaBytes, NoReuseBytes(p), b.String())
	}
	for i, s := range p.Budget {
		fmt.Fprintf(w, "budget step %d: %s\n", i+1, s)
	}
}
