package verify

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/internal/radix"
	"github.com/dagrun/dagrun/plan"
)

// arenaEntry is what Verify keeps of one stream's accesses to one arena
// piece (arenaPiece): the first and last launch (stage) of the stream that
// touches the piece, and the first and last that writes it (-1: none),
// indexed by arenaFirstAny … arenaLastWrite.
type arenaEntry struct {
	stream int32
	at     [4]int32
}

const (
	arenaFirstAny = iota
	arenaLastAny
	arenaFirstWrite
	arenaLastWrite
)

// arenaPiece is a byte range of one arena buffer that every access of
// that buffer covers wholly or not at all (the buffer's own elementary
// segments, between the ends of its accesses), with what its accesses do:
// per stream, an arenaEntry (arenaSweep.entriesOf).
type arenaPiece struct {
	lo, hi int64 // arena bytes [lo, hi); segment indices once compressed
	buf    int32 // index into p.Buffers
	first  int32 // issue position of the first launch touching it
	e0     int32 // its entries begin there and end at the next piece's
	writes bool
}

// arenaLifetimes checks the arena: accesses to different buffers that
// share arena bytes conflict (one writes), and every such pair must be
// ordered by happens-before in the same direction for the whole lifetime of
// each buffer on those bytes: everything one buffer does to them before
// the other buffer's first access (declaration order does not matter
// between different buffers). Per arena byte, the buffers touching it are
// taken in order of their first launch there in issue order
// (happens-before implies issue order, so that is the only order that can
// hold; of buffers that one launch touches first, and so only reads, those
// not written there come first); each buffer that writes the byte must
// come after the previous writer entirely (its last access on each stream
// happens-before this one's first write on each stream, and the previous
// one's last write before this one's first access), and each buffer that
// only reads it must come after the previous writer's writes and before
// the next writer's first write. Happens-before is transitive, so these
// neighbours suffice. It returns each violation as a Race whose Shared
// names the other buffer, and whose fix names the lowest arena byte where
// the two conflict. Both halves only read the verifier's state: Verify
// runs arenaPieces after the clocks, and check beside the sweep (before it
// for the check across iterations).
//
// Algorithm: an interval sweep. Each buffer's accesses are cut into pieces
// (arenaPiece) that they cover wholly or not at all, so that what a buffer
// does is the same on every byte of a piece. The pieces are swept in order
// of first launch, keeping the arena's bytes as runs of equal state (the
// last writer, the readers since: runs over the arena's elementary
// segments, whose starts are a bit set, arenaRuns); a piece is compared
// only with the occupants of the runs it overlaps, then a write replaces
// them by one run and a read joins each run's readers (a list shared by
// runs split from one, so a split copies no list). This is the classic
// sweep over interval endpoints (Bentley and Ottmann, "Algorithms for
// reporting and counting geometric intersections", IEEE Trans. Computers
// C-28(9), 1979, §2) with the occupant map of an online allocator's
// address space. Cost: O(A log A) for the A arena accesses (the sorts;
// radix and counting sorts but for each buffer's own access ends), plus,
// per piece, the runs it overlaps and O(streams²) happens-before queries
// per distinct occupant of them; a piece that only reads adds a list cell
// per run it overlaps. The elementary segments a piece spans are never
// walked one by one (a write removes the run starts inside it).
func (v *verifier) arenaLifetimes() []Race { return v.arenaPieces().check() }

// arenaPieces is arenaLifetimes' first half, which needs the accesses and
// the clocks' op tables (each stage's launch op, its issue position and
// stream), not the plan's ops: it cuts the pieces and orders them for the
// sweep, or returns nil when p has no arena.
func (v *verifier) arenaPieces() *arenaSweep {
	p := v.p
	nb := bufferCount(p)
	inArena := make([]bool, nb)
	used := false
	for i := range nb {
		if planBuffer(p, i).ArenaOffset != nil {
			inArena[i], used = true, true
		}
	}
	if !used {
		return nil
	}
	// The arena accesses grouped by buffer, each buffer's in issue order
	// (a counting sort by buffer: count, then fill).
	start := make([]int32, nb+1)
	for k := range v.acc {
		if b := v.acc[k].buf(); int(b) < nb && inArena[b] {
			start[b+1]++
		}
	}
	for i := range nb {
		start[i+1] += start[i]
	}
	// Stage by stage (verifier.accesses: reads, then writes; buffer
	// indices below nb are p's buffers), then each buffer's in
	// issue order where stage order is not; byBuf holds indices into
	// v.acc.
	byBuf := make([]int32, start[nb])
	fill := slices.Clone(start[:nb])
	for i := range v.acc {
		if b := v.acc[i].buf(); int(b) < nb && inArena[b] {
			byBuf[fill[b]] = int32(i)
			fill[b]++
		}
	}
	fill = nil
	// Per stage, its launch's issue position and stream.
	ns := len(v.accStart) - 1
	stageIssue := make([]int32, 2*ns)
	stageIssue, stageStream := stageIssue[:ns], stageIssue[ns:]
	for st, g := range v.launchOp {
		stageIssue[st], stageStream[st] = v.opIssue[g], v.opStream[g]
	}
	issue := func(x, y int32) int {
		return cmp.Compare(stageIssue[v.acc[x].stage], stageIssue[v.acc[y].stage])
	}
	for b := range nb {
		if as := byBuf[start[b]:start[b+1]]; !slices.IsSortedFunc(as, issue) {
			slices.SortStableFunc(as, issue)
		}
	}
	pieces, entries := v.cutArenaPieces(nb, start, byBuf, stageIssue, stageStream)
	bounds, byFirst := arenaSweepOrder(pieces)
	return &arenaSweep{v: v, pieces: pieces, entries: entries, bounds: bounds, byFirst: byFirst, seen: map[[4]int32]int{}}
}

// arenaAccess is one arena access as cutArenaPieces cuts it: its stage's
// issue position, stream and index, whether it writes, and its bytes of
// the buffer [lo, hi).
type arenaAccess struct {
	k, s, stage int32
	write       bool
	lo, hi      int64
}

// cutArenaPieces cuts each arena buffer's accesses into its pieces (the
// ranges between its accesses' ends that an access covers) and their
// entries: one piece when every access covers the same bytes (the usual
// case). Buffer b's accesses are byBuf[start[b]:start[b+1]] (indices into
// v.acc) in issue order; stageIssue and stageStream are each stage's
// launch issue position and stream.
func (v *verifier) cutArenaPieces(nb int, start, byBuf, stageIssue, stageStream []int32) ([]arenaPiece, []arenaEntry) {
	p := v.p
	get := func(i int32) arenaAccess { // expands access i
		a := &v.acc[i]
		lo, hi := v.accBytes(a)
		return arenaAccess{stageIssue[a.stage], stageStream[a.stage], a.stage, a.write(), lo, hi}
	}
	withAccess := 0 // buffers in the arena with accesses
	for b := range nb {
		if start[b+1] > start[b] {
			withAccess++
		}
	}
	pieces := make([]arenaPiece, 0, withAccess)
	// About a writing and a reading stream per buffer.
	entries := make([]arenaEntry, 0, min(len(byBuf), 2*withAccess))
	slot := make([]int32, len(p.Streams)) // per stream: its entry in the piece of slotOf
	slotOf := make([]int32, len(p.Streams))
	for i := range slotOf {
		slotOf[i] = -1
	}
	var ends []int64
	var as []arenaAccess // the buffer's accesses
	var head, next, first []int32
	var local []arenaEntry
	for b := range nb {
		ix := byBuf[start[b]:start[b+1]]
		if len(ix) == 0 {
			continue
		}
		off := planBuffer(p, b).ArenaAt()
		as = as[:0]
		for _, k := range ix {
			as = append(as, get(k))
		}
		one := true // every access covers the same bytes: one piece (the usual case)
		for _, a := range as[1:] {
			if a.lo != as[0].lo || a.hi != as[0].hi {
				one = false
				break
			}
		}
		if one {
			pc := arenaPiece{lo: off + as[0].lo, hi: off + as[0].hi, buf: int32(b), first: as[0].k, e0: int32(len(entries))}
			for _, a := range as {
				if slotOf[a.s] != int32(b) {
					slotOf[a.s], slot[a.s] = int32(b), int32(len(entries))
					entries = append(entries, arenaEntry{stream: a.s, at: [4]int32{a.stage, -1, -1, -1}})
				}
				u := &entries[slot[a.s]]
				u.at[arenaLastAny] = a.stage
				if a.write {
					pc.writes = true
					if u.at[arenaFirstWrite] < 0 {
						u.at[arenaFirstWrite] = a.stage
					}
					u.at[arenaLastWrite] = a.stage
				}
			}
			pieces = append(pieces, pc)
			continue
		}
		ends = ends[:0]
		for _, a := range as {
			ends = append(ends, a.lo, a.hi)
		}
		slices.Sort(ends)
		ends = slices.Compact(ends)
		np := len(ends) - 1
		// In issue order: per piece its entries as a list (head, next;
		// newest first), one per stream touching it (few: a list is
		// searched for the stream), and its first launch.
		head = slices.Grow(head[:0], np)[:np]
		first = slices.Grow(first[:0], np)[:np]
		for i := range head {
			head[i], first[i] = -1, -1
		}
		local, next = local[:0], next[:0]
		for _, a := range as {
			lo, _ := slices.BinarySearch(ends, a.lo)
			hi, _ := slices.BinarySearch(ends, a.hi)
			for x := lo; x < hi; x++ {
				e := head[x]
				for e >= 0 && local[e].stream != a.s {
					e = next[e]
				}
				if e < 0 {
					e = int32(len(local))
					local = append(local, arenaEntry{stream: a.s, at: [4]int32{a.stage, -1, -1, -1}})
					next = append(next, head[x])
					head[x] = e
				}
				u := &local[e]
				u.at[arenaLastAny] = a.stage
				if a.write {
					if u.at[arenaFirstWrite] < 0 {
						u.at[arenaFirstWrite] = a.stage
					}
					u.at[arenaLastWrite] = a.stage
				}
				if first[x] < 0 {
					first[x] = a.k
				}
			}
		}
		// The pieces an access covers, their entries in order of the
		// streams' first touch.
		for x := range np {
			if head[x] < 0 {
				continue // between accesses
			}
			pc := arenaPiece{lo: off + ends[x], hi: off + ends[x+1], buf: int32(b), first: first[x], e0: int32(len(entries))}
			for e := head[x]; e >= 0; e = next[e] {
				pc.writes = pc.writes || local[e].at[arenaFirstWrite] >= 0
				entries = append(entries, local[e])
			}
			slices.Reverse(entries[pc.e0:])
			pieces = append(pieces, pc)
		}
	}
	return pieces, entries
}

// arenaSweepOrder turns the pieces' bytes into indices of the arena's
// elementary segments (bounds: segment k is bytes [bounds[k],
// bounds[k+1])) and orders the pieces for the sweep (byFirst).
func arenaSweepOrder(pieces []arenaPiece) (bounds []int64, byFirst []int32) {
	bounds = make([]int64, 0, 2*len(pieces))
	for _, pc := range pieces {
		bounds = append(bounds, pc.lo, pc.hi)
	}
	scratch := radix.Sort(bounds, nil, 0)
	bounds = slices.Compact(bounds)
	for k := range pieces {
		lo, _ := slices.BinarySearch(bounds, pieces[k].lo)
		hi, _ := slices.BinarySearch(bounds, pieces[k].hi)
		pieces[k].lo, pieces[k].hi = int64(lo), int64(hi)
	}
	// The pieces by first launch; of pieces a launch touches first, those
	// that only read come first (the order that can hold: a write after
	// that launch must follow it); then by buffer and offset, as made: a
	// radix sort of arenaKey<<32 | index on the key's digits, stable.
	keys := slices.Grow(scratch[:0], 2*len(pieces))[:2*len(pieces)]
	keys, scratch = keys[:len(pieces)], keys[len(pieces):]
	for k := range pieces {
		keys[k] = int64(arenaKey(&pieces[k]))<<32 | int64(k)
	}
	radix.Sort(keys, scratch, 32)
	byFirst = make([]int32, len(pieces))
	for k, x := range keys {
		byFirst[k] = int32(x)
	}
	return bounds, byFirst
}

// check is arenaLifetimes' second half: the sweep, with happens-before
// queries (the clocks); nil for a nil a.
func (a *arenaSweep) check() []Race {
	if a == nil {
		return nil
	}
	a.run(a.byFirst)
	arenaPairsLast.Store(a.pairs)
	out := make([]Race, len(a.races))
	if a.v.p.Derived {
		return out // a derived plan's races are only counted (verifyWith)
	}
	for k, r := range a.races {
		out[k] = r.race(a.v)
	}
	return out
}

// arenaKey orders pieces for the sweep: by first launch, then read-only
// before writing.
func arenaKey(x *arenaPiece) int {
	k := 2 * int(x.first)
	if x.writes {
		k++
	}
	return k
}

// arenaRace is an arena race found by arenaSweep: stages u (of buffer x)
// and w (of buffer y) not ordered u-then-w, at the lowest arena byte at
// where they were found to conflict.
type arenaRace struct {
	u, w, x, y int32
	at         int64
}

// arenaSweep is arenaLifetimes' sweep state: runs of the arena's
// elementary segments (their starts in starts; per start, the run's last
// writer piece in wr, -1 for none, and its readers since as a list in
// cells from rd, -1 for none).
type arenaSweep struct {
	v       *verifier
	pieces  []arenaPiece
	entries []arenaEntry
	bounds  []int64 // segment k is arena bytes [bounds[k], bounds[k+1])
	byFirst []int32 // the pieces in sweep order
	starts  arenaRuns
	wr, rd  []int32
	cells   []arenaCell
	checked []int32 // per piece: the piece it was last compared with
	seen    map[[4]int32]int
	races   []arenaRace
	// pairs counts the happens-before queries order was asked for; over
	// is set when they would pass verifyMaxArenaPairs (run stops).
	pairs int64
	over  bool
}

type arenaCell struct{ piece, next int32 }

// arenaPairsLast is the queries the last arena check counted (for tests).
var arenaPairsLast atomic.Int64

func (a *arenaSweep) run(sweep []int32) {
	n := max(len(a.bounds)-1, 1)
	a.starts = newArenaRuns(n)
	a.wr, a.rd = make([]int32, n), make([]int32, n)
	a.checked = make([]int32, len(a.pieces))
	for i := range a.checked {
		a.checked[i] = -1
	}
	a.starts.set(0)
	a.wr[0], a.rd[0] = -1, -1
	for _, y := range sweep {
		pc := &a.pieces[y]
		lo, hi := int(pc.lo), int(pc.hi)
		// Compare with the occupants of each run overlapping [lo, hi).
		for x := a.starts.prev(lo); x >= 0 && x < hi; x = a.starts.next(x + 1) {
			if a.over {
				return
			}
			from := a.bounds[max(x, lo)]
			if w := a.wr[x]; w >= 0 && a.checked[w] != y {
				a.checked[w] = y
				if pc.writes {
					a.order(w, y, arenaLastAny, arenaFirstWrite, from)
				}
				a.order(w, y, arenaLastWrite, arenaFirstAny, from)
			}
			if pc.writes {
				for c := a.rd[x]; c >= 0; c = a.cells[c].next {
					if r := a.cells[c].piece; a.checked[r] != y {
						a.checked[r] = y
						a.order(r, y, arenaLastAny, arenaFirstWrite, from)
					}
				}
			}
		}
		a.split(lo)
		a.split(hi)
		if pc.writes {
			for x := a.starts.next(lo + 1); x >= 0 && x < hi; x = a.starts.next(x + 1) {
				a.starts.clear(x)
			}
			a.wr[lo], a.rd[lo] = y, -1
			continue
		}
		for x := lo; x >= 0 && x < hi; x = a.starts.next(x + 1) {
			a.cells = append(a.cells, arenaCell{piece: y, next: a.rd[x]})
			a.rd[x] = int32(len(a.cells) - 1)
		}
	}
}

// split makes segment x the start of a run (of the state of the run it
// was in); x at the end of the arena is left alone.
func (a *arenaSweep) split(x int) {
	if x >= len(a.wr) || a.starts.has(x) {
		return
	}
	r := a.starts.prev(x)
	a.starts.set(x)
	a.wr[x], a.rd[x] = a.wr[r], a.rd[r]
}

// order records each pair of launches (u from piece x's entries' field
// fu, w from piece y's field fw; -1 entries are no launch) that sharing
// arena bytes from byte at are not ordered u-then-w.
func (a *arenaSweep) order(x, y int32, fu, fw int, at int64) {
	if a.pairs += int64(len(a.entriesOf(x))) * int64(len(a.entriesOf(y))); a.pairs > verifyMaxArenaPairs {
		a.over = true
	}
	if a.over {
		return
	}
	px, py := &a.pieces[x], &a.pieces[y]
	for _, eu := range a.entriesOf(x) {
		u := eu.at[fu]
		if u < 0 {
			continue
		}
		for _, ew := range a.entriesOf(y) {
			w := ew.at[fw]
			if w < 0 || a.v.stageHB(u, w) {
				continue
			}
			key := [4]int32{px.buf, py.buf, u, w}
			if k, ok := a.seen[key]; ok {
				a.races[k].at = min(a.races[k].at, at)
				continue
			}
			a.seen[key] = len(a.races)
			a.races = append(a.races, arenaRace{u: u, w: w, x: px.buf, y: py.buf, at: at})
		}
	}
}

// entriesOf returns piece x's entries.
func (a *arenaSweep) entriesOf(x int32) []arenaEntry {
	end := int32(len(a.entries))
	if int(x)+1 < len(a.pieces) {
		end = a.pieces[x+1].e0
	}
	return a.entries[a.pieces[x].e0:end]
}

// race is r as a Race, with the fix that orders it.
func (r arenaRace) race(v *verifier) Race {
	p := v.p
	u, w := r.u, r.w
	i, j := u, w
	bi, bj := r.x, r.y
	if j < i {
		i, j, bi, bj = j, i, bj, bi
	}
	wi, wj := v.writes(i, bi), v.writes(j, bj)
	kind := plan.RaceWAR
	switch {
	case wi && wj:
		kind = plan.RaceWAW
	case wi:
		kind = plan.RaceRAW
	}
	bx, by := p.Buffers[r.x], p.Buffers[r.y]
	base := *p.Buffers[bi].ArenaOffset
	// The arena bytes both buffers take (their device's arena).
	in := arenaRange(bx).Intersect(arenaRange(by))
	lo, hi := in.Offset, in.End()
	stream := func(v int32) string { s := p.Stages[v].Stream; return streamLabel(p.Streams[s].Name, s) }
	return Race{
		First: int(i), Second: int(j),
		FirstName: p.Stages[i].Name, SecondName: p.Stages[j].Name,
		FirstStream: p.Stages[i].Stream, SecondStream: p.Stages[j].Stream,
		FirstStreamName: p.Streams[p.Stages[i].Stream].Name, SecondStreamName: p.Streams[p.Stages[j].Stream].Name,
		Buffer: p.Buffers[bi].Name, Offset: lo - base, Bytes: hi - lo,
		Shared: p.Buffers[bj].Name, Kind: kind,
		Fix: fmt.Sprintf("%s and %s share arena bytes (from %s) but their lifetimes overlap: record an event after %s on stream %s and wait on it before %s on stream %s (every use of %s before the first use of %s), or give them disjoint arena bytes",
			bx.Name, by.Name, arenaPlace(bx.Device, r.at), stageAt(p, u), stream(u), stageAt(p, w), stream(w), bx.Name, by.Name),
	}
}

// arenaPlace names the arena offset at (ArenaAt's address space, where
// device d's arena starts at d × DeviceArenaStride) as the offset within
// device d's arena.
func arenaPlace(d int, at int64) string {
	if d == 0 {
		return fmt.Sprintf("arena offset %d", at)
	}
	return fmt.Sprintf("offset %d of device %d's arena", at-int64(d)*plan.DeviceArenaStride, d)
}

// stageAt names stage v in a fix: its name, with its position in its spec
// (file:line:col) where the plan has one.
func stageAt(p *plan.Plan, v int32) string {
	if src := p.Stages[v].Source; src != "" {
		return p.Stages[v].Name + " (" + src + ")"
	}
	return p.Stages[v].Name
}

// arenaRuns is a set of segment indices below n (the starts of the arena's
// runs) with successor and predecessor queries: a bit set with a summary
// bit set per level, 64 ways a level (a van Emde Boas layout flattened to
// a fixed depth: van Emde Boas, "Preserving order in a forest in less than
// logarithmic time", FOCS 1975, §2, with 64-bit words as the clusters).
// Each operation costs O(log₆₄ n) word operations.
type arenaRuns struct {
	lv [][]uint64 // lv[0]: the set; bit i of lv[l+1] is set iff word i of lv[l] is not 0
}

func newArenaRuns(n int) arenaRuns {
	var r arenaRuns
	for {
		w := (n + 63) / 64
		r.lv = append(r.lv, make([]uint64, w))
		if w <= 1 {
			return r
		}
		n = w
	}
}

func (r *arenaRuns) has(i int) bool { return r.lv[0][i>>6]&(1<<(i&63)) != 0 }

func (r *arenaRuns) set(i int) {
	for l := range r.lv {
		w := &r.lv[l][i>>6]
		was := *w
		*w |= 1 << (i & 63)
		if was != 0 {
			return
		}
		i >>= 6
	}
}

func (r *arenaRuns) clear(i int) {
	for l := range r.lv {
		w := &r.lv[l][i>>6]
		*w &^= 1 << (i & 63)
		if *w != 0 {
			return
		}
		i >>= 6
	}
}

// next returns the least member ≥ i, or -1.
func (r *arenaRuns) next(i int) int {
	l := 0
	for {
		if l == len(r.lv) {
			return -1
		}
		ws := r.lv[l]
		if i>>6 >= len(ws) {
			return -1
		}
		if w := ws[i>>6] >> (i & 63); w != 0 {
			i += bits.TrailingZeros64(w)
			break
		}
		// Nothing at or after i in its word: from the next word, a level up.
		i = i>>6 + 1
		l++
	}
	for ; l > 0; l-- {
		i = i<<6 + bits.TrailingZeros64(r.lv[l-1][i])
	}
	return i
}

// prev returns the greatest member ≤ i, or -1.
func (r *arenaRuns) prev(i int) int {
	l := 0
	for {
		if l == len(r.lv) || i < 0 {
			return -1
		}
		if w := r.lv[l][i>>6] << (63 - i&63); w != 0 {
			i -= bits.LeadingZeros64(w)
			break
		}
		i = i>>6 - 1
		l++
	}
	for ; l > 0; l-- {
		i = i<<6 + 63 - bits.LeadingZeros64(r.lv[l-1][i])
	}
	return i
}

// writes reports whether stage v writes buffer b.
func (v *verifier) writes(st int32, b int32) bool {
	name := v.p.Buffers[b].Name
	return slices.ContainsFunc(v.p.Stages[st].Writes, func(a plan.Access) bool { return a.Buffer == name })
}

// arenaFix returns the fix arenaRace.race wrote for an arena race.
func (v *verifier) arenaFix(r *Race) string { return r.Fix }

// readsDone reports whether read access a is done before access d's launch
// is issued: a synchronous copy from pageable memory has staged its source
// when it returns (implicit.go).
func (v *verifier) readsDone(a, d int32) bool {
	sa := int(v.acc[a].stage)
	return v.hb.im.readsDoneBefore(v.p, sa, v.launchOp[sa], v.launchOp[v.acc[d].stage], v.opStream, v.opIssue)
}

// arenaRange is the bytes of buffer b in its device's arena (b has an
// arena offset).
func arenaRange(b plan.Buffer) contract.Range {
	return contract.Range{Offset: *b.ArenaOffset, Bytes: b.Bytes}
}
