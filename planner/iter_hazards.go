package planner

import (
	"cmp"
	"math/bits"
	"slices"

	"github.com/dagrun/dagrun/internal/radix"
	"github.com/dagrun/dagrun/plan"
)

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
	sp := iterAccesses(p, copies, ab)
	var o orderList
	inflight := 0
	var seg segmentScratch
	for g := range sp.spaces {
		k := sp.spaces[g].copies
		if sp.segmentOrders(g, &seg, &o) && (inflight == 0 || int(k) < inflight) {
			inflight = int(k)
		}
	}
	if inflight == 0 {
		inflight = 1
		for _, k := range copies {
			inflight = max(inflight, k)
		}
	}
	return o.rows(len(p.Stages)), inflight
}

// iterSpace is one address space of iterAccesses: its accesses, the least
// and the greatest of their bounds, and its copies (the arena's: one).
type iterSpace struct {
	count, fill int32
	lo, hi      int64
	copies      int32
	at          int32 // its first access in the flat lists
}

// iterSpaces are one iteration's accesses by address space (iterAccesses),
// each space's lists cut from one array: per access its stage and whether
// it writes (stage<<1 | write), and the sort keys of its two bounds, packed
// into 64 bits (packShift) or, for spaces whose bounds do not pack, in
// wide.
type iterSpaces struct {
	spaces []iterSpace
	acc    []int32
	keys   []uint64
	wide   map[int32][]keyed
}

// iterAccesses gathers one iteration's accesses by address space: the
// arena's buffers together (one copy, at their arena offsets), else each
// buffer on its own, spaces numbered in first-use order; within a space
// in issue order. Issue order extends happens-before (every record is
// issued before its waits), so it orders the conflicting accesses of an
// address space as the plan does. Declaration order would not: temps that
// share arena bytes are ordered by the schedule, not by a hazard.
func iterAccesses(p *plan.Plan, copies []int, ab *planAccesses) *iterSpaces {
	// Per buffer its space and base.
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
	sp := &iterSpaces{wide: map[int32][]keyed{}}
	pos := plan.LaunchPositions(p)
	order := stableOrder(len(p.Stages), func(v int) int { return pos[v] })
	// Two walks: count each space's accesses and their bounds' range,
	// then fill them in.
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
					pl := w
					if w.arena {
						pl = arenaPlace
					}
					lo, hi := w.base+a.Offset, w.base+a.Offset+a.Bytes
					if pl.space == 0 {
						c := int32(1)
						if !w.arena {
							c = int32(max(copies[i], 1))
						}
						sp.spaces = append(sp.spaces, iterSpace{lo: lo, hi: hi, copies: c})
						pl.space = int32(len(sp.spaces))
					}
					g := pl.space - 1
					s := &sp.spaces[g]
					if walk == 0 {
						s.count++
						s.lo, s.hi = min(s.lo, lo), max(s.hi, hi)
						continue
					}
					x := s.fill
					s.fill++
					sp.acc[s.at+x] = int32(v)<<1 | int32(k)
					if shift, ok := packShift(s.count, s.lo, s.hi); ok {
						sp.keys[2*(s.at+x)] = (uint64(lo)-uint64(s.lo))<<shift | uint64(2*x)
						sp.keys[2*(s.at+x)+1] = (uint64(hi)-uint64(s.lo))<<shift | uint64(2*x+1)
					} else {
						sp.wide[g] = append(sp.wide[g], keyed{uint64(lo) ^ 1<<63, int64(2 * x)}, keyed{uint64(hi) ^ 1<<63, int64(2*x + 1)})
					}
				}
			}
		}
		if walk == 0 {
			total := int32(0)
			for g := range sp.spaces {
				sp.spaces[g].at = total
				total += sp.spaces[g].count
			}
			sp.acc = make([]int32, total)
			sp.keys = make([]uint64, 2*total)
		}
	}
	return sp
}

// iterSegment is what one iteration does to an elementary byte segment:
// its first and last write (-1: none), the reads before the first write
// (head) and those after the last (tail).
type iterSegment struct {
	first, last int32
	head, tail  []int32
}

// segmentScratch is segmentOrders' memory, reused from space to space.
type segmentScratch struct {
	tmp  []uint64
	edge []int32
	segs []iterSegment
}

// segmentOrders adds to o the orders across iterations of space g's
// elementary segments (iterHazards), K = the space's copies iterations
// apart, and reports whether some segment is written. The segments lie
// between the space's distinct access bounds: one radix sort of the
// bounds (radix.Sort, sortKeyed) gives each access the segments it covers,
// edge[2i] up to edge[2i+1] for access i.
func (sp *iterSpaces) segmentOrders(g int, sc *segmentScratch, o *orderList) (written bool) {
	s := &sp.spaces[g]
	list := sp.acc[s.at : s.at+s.count]
	edge := slices.Grow(sc.edge[:0], 2*len(list))[:2*len(list)]
	sc.edge = edge
	bounds := 0
	if shift, ok := packShift(s.count, s.lo, s.hi); ok {
		ks := sp.keys[2*s.at : 2*(s.at+s.count)]
		sc.tmp = radix.Sort(ks, sc.tmp, shift)
		mask := uint64(1)<<shift - 1
		for j, e := range ks {
			if j == 0 || e>>shift != ks[j-1]>>shift {
				bounds++
			}
			edge[e&mask] = int32(bounds - 1)
		}
	} else {
		ks := sp.wide[int32(g)]
		sortKeyed(ks)
		for j, e := range ks {
			if j == 0 || e.key != ks[j-1].key {
				bounds++
			}
			edge[e.val] = int32(bounds - 1)
		}
		delete(sp.wide, int32(g))
	}
	segs := slices.Grow(sc.segs[:0], bounds)[:bounds-1]
	sc.segs = segs
	for g := range segs {
		segs[g] = iterSegment{first: -1, last: -1}
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
		written = true
		o.add(sg.last, sg.first, k)
		for _, r := range sg.tail {
			o.add(r, sg.first, k)
		}
		for _, r := range sg.head {
			o.add(sg.last, r, k)
		}
	}
	return written
}

// orderList holds the orders found, (a, k) for stage d, in chunks of a
// list (it grows without copies), until rows puts them by stage.
type orderList struct {
	all [][]foundOrder
	n   int
}

type foundOrder struct {
	d int32
	r iterReq
}

// add adds the order: a of iteration i−k before d of iteration i
// (duplicates are dropped by rows).
func (o *orderList) add(a, d, k int32) {
	if len(o.all) == 0 || len(o.all[len(o.all)-1]) == cap(o.all[len(o.all)-1]) {
		o.all = append(o.all, make([]foundOrder, 0, min(max(1<<10, o.n), 1<<16)))
	}
	last := &o.all[len(o.all)-1]
	*last = append(*last, foundOrder{d, iterReq{a, k}})
	o.n++
}

// rows returns the orders by stage (of n stages), each stage's sorted and
// deduplicated, cut from one array; o is emptied.
func (o *orderList) rows(n int) iterOrders {
	off := make([]int32, n+1)
	for _, c := range o.all {
		for _, f := range c {
			off[f.d+1]++
		}
	}
	for d := range n {
		off[d+1] += off[d]
	}
	flat := make([]iterReq, o.n)
	at := slices.Clone(off[:n])
	for _, c := range o.all {
		for _, f := range c {
			flat[at[f.d]] = f.r
			at[f.d]++
		}
	}
	o.all, o.n = nil, 0
	// Each stage's orders sorted and deduplicated, the rows packed down.
	m := int32(0)
	for d := range n {
		rs := flat[off[d]:off[d+1]]
		slices.SortFunc(rs, func(x, y iterReq) int { return cmp.Or(cmp.Compare(x.a, y.a), cmp.Compare(x.d, y.d)) })
		rs = slices.Compact(rs)
		off[d] = m
		m += int32(copy(flat[m:], rs))
	}
	off[n] = m
	return iterOrders{off: off, r: flat[:m:m]}
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
