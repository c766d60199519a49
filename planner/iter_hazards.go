package planner

import (
	"cmp"
	"math/bits"
	"slices"

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
