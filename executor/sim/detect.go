package sim

import (
	"slices"
	"sort"
	"sync"

	"github.com/dagrun/dagrun/executor"
)

// access is one stage's access at an epoch: clock is the value of the
// stream's own vector-clock component (index vc) at the launch.
type access struct {
	stream int // stream number, for reports
	vc     int
	clock  uint64
	stage  int
	name   string
	write  bool
}

// before reports whether a happens-before the point whose vector clock is c.
func (a access) before(c []uint64) bool {
	return a.vc < len(c) && a.clock <= c[a.vc]
}

// seg is the shadow state of bytes [lo, hi) of a buffer: the last write (if
// hasW) and the reads since it that no later read of the set follows. The
// reads slice is never modified in place (pieces of a split share it).
type seg struct {
	lo, hi int64
	hasW   bool
	w      access
	reads  []access
}

func (a *seg) sameState(b *seg) bool {
	return a.hasW == b.hasW && (!a.hasW || a.w == b.w) && slices.Equal(a.reads, b.reads)
}

// shadow is a buffer's shadow state: sorted disjoint segments; bytes in no
// segment were not accessed since the last reset.
type shadow struct {
	mu   sync.Mutex
	segs []seg
}

func (sh *shadow) reset() {
	sh.mu.Lock()
	sh.segs = nil
	sh.mu.Unlock()
}

// found is a conflicting earlier access over bytes [lo, hi).
type found struct {
	prev   access
	lo, hi int64
}

// apply checks access cur of bytes [lo, hi), made at vector clock c, against
// the shadow state, records it, and returns the unordered conflicting earlier
// accesses (one entry per earlier stage and kind, over the hull of the bytes).
func (sh *shadow) apply(lo, hi int64, cur access, c []uint64) []found {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	segs := sh.segs
	i := sort.Search(len(segs), func(k int) bool { return segs[k].hi > lo })
	var left, right []seg
	mid := make([]seg, 0, 4)
	pos, j := lo, i
	for ; j < len(segs) && segs[j].lo < hi; j++ {
		sg := segs[j]
		if sg.lo < lo {
			l := sg
			l.hi = lo
			left = append(left, l)
			sg.lo = lo
		}
		if sg.hi > hi {
			r := sg
			r.lo = hi
			right = append(right, r)
			sg.hi = hi
		}
		if pos < sg.lo {
			mid = append(mid, seg{lo: pos, hi: sg.lo})
		}
		mid = append(mid, sg)
		pos = sg.hi
	}
	if pos < hi {
		mid = append(mid, seg{lo: pos, hi: hi})
	}

	var out []found
	note := func(p access, sg *seg) {
		for k := range out {
			if q := out[k].prev; q.stage == p.stage && q.write == p.write && q.stream == p.stream {
				out[k].lo, out[k].hi = min(out[k].lo, sg.lo), max(out[k].hi, sg.hi)
				return
			}
		}
		out = append(out, found{p, sg.lo, sg.hi})
	}
	for k := range mid {
		sg := &mid[k]
		if sg.hasW && !sg.w.before(c) {
			note(sg.w, sg)
		}
		if cur.write {
			for _, r := range sg.reads {
				if !r.before(c) {
					note(r, sg)
				}
			}
			sg.hasW, sg.w, sg.reads = true, cur, nil
			continue
		}
		reads := make([]access, 0, len(sg.reads)+1)
		for _, r := range sg.reads {
			if !r.before(c) {
				reads = append(reads, r)
			}
		}
		sg.reads = append(reads, cur)
	}

	// Splice the new pieces over segs[i:j] in place, coalescing equal
	// neighbours (the segments beside the range included): the cost is the
	// range's and the tail's move, not a copy of every segment.
	start, end := i, j
	pieces := make([]seg, 0, len(left)+len(mid)+len(right)+2)
	if start > 0 {
		start--
		pieces = append(pieces, segs[start])
	}
	pieces = append(append(append(pieces, left...), mid...), right...)
	if end < len(segs) {
		pieces = append(pieces, segs[end])
		end++
	}
	kept := pieces[:0]
	for _, sg := range pieces {
		if n := len(kept); n > 0 && kept[n-1].hi == sg.lo && kept[n-1].sameState(&sg) {
			kept[n-1].hi = sg.hi
			continue
		}
		kept = append(kept, sg)
	}
	sh.segs = slices.Replace(segs, start, end, kept...)
	return out
}

// raceKey identifies a race for de-duplication: the buffer and the two
// accesses, in a canonical order.
type raceKey struct {
	buffer string
	a, b   raceSide
}

type raceSide struct {
	stage, stream int
	write         bool
}

func (s raceSide) less(t raceSide) bool {
	if s.stage != t.stage {
		return s.stage < t.stage
	}
	if s.stream != t.stream {
		return s.stream < t.stream
	}
	return !s.write && t.write
}

// report records a race found by cur's stage on buffer name.
func (b *Backend) report(buffer string, f found, cur access) {
	x := raceSide{f.prev.stage, f.prev.stream, f.prev.write}
	y := raceSide{cur.stage, cur.stream, cur.write}
	if y.less(x) {
		x, y = y, x
	}
	k := raceKey{buffer, x, y}
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.races[k]; ok {
		r.Count++
		return
	}
	if len(b.raceOrder) >= b.opt.MaxRaces {
		b.dropped++
		return
	}
	side := func(a access) executor.RaceAccess {
		return executor.RaceAccess{Stage: a.name, StageIndex: a.stage, Stream: a.stream, Write: a.write}
	}
	first, second := side(f.prev), side(cur)
	if second.StageIndex < first.StageIndex {
		first, second = second, first
	}
	b.races[k] = &executor.Race{Buffer: buffer, Offset: f.lo, Bytes: f.hi - f.lo, First: first, Second: second, Count: 1}
	b.raceOrder = append(b.raceOrder, k)
}
