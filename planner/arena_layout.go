package planner

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

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
