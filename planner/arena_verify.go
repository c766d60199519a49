package planner

import (
	"cmp"
	"fmt"
	"slices"
)

// arenaAddress maps a buffer to its address space for cross-iteration
// hazards (iterHazards): buffers in the arena (arena: their offsets) share
// one space at their arena offsets; every other buffer is its own space.
func arenaAddress(arena map[string]int64, buffer string) (key string, base int64) {
	if off, ok := arena[buffer]; ok {
		return arenaSpace, off
	}
	return buffer, 0
}

// arenaSpace is the arena's space key: no buffer name, never empty, is it.
const arenaSpace = ""

// arenaOffsets returns the arena offset of each buffer in p's arena, or nil.
func arenaOffsets(p *Plan) map[string]int64 {
	var m map[string]int64
	for _, b := range p.Buffers {
		if b.ArenaOffset != nil {
			if m == nil {
				m = map[string]int64{}
			}
			m[b.Name] = b.arenaAt()
		}
	}
	return m
}

// arenaUse is what Verify keeps of one arena buffer's accesses to one
// elementary segment of the arena: per stream touching it, the first and
// last launch that touches the segment, and the first and last that writes
// it (-1: none).
type arenaUse struct {
	buf        int32 // index into p.Buffers
	firstIssue int32 // issue position of its first launch touching the segment
	writes     bool
	streams    []int32
	firstAny   []int32 // per entry of streams: stage
	lastAny    []int32
	firstWrite []int32
	lastWrite  []int32
}

// arenaLifetimes checks the arena: accesses to different buffers that
// share arena bytes conflict (one writes), and every such pair must be
// ordered by happens-before in the same direction for the whole lifetime of
// each buffer on those bytes: everything one buffer does to them before
// the other buffer's first access (declaration order does not matter
// between different buffers). Per elementary segment of the arena, the
// buffers touching it are sorted by their first launch there in issue
// order (happens-before implies issue order, so that is the only order
// that can hold); each buffer that writes the segment must come after the
// previous writer entirely (its last access on each stream happens-before
// this one's first write on each stream, and the previous one's last write
// before this one's first access), and each buffer that only reads it must
// come after the previous writer's writes and before the next writer's
// first write. Happens-before is transitive, so these neighbours suffice.
// Each violation is a Race whose Shared names the other buffer. Cost:
// O(accesses × segments each covers + segments × buffers per segment ×
// streams²).
func (v *verifier) arenaLifetimes() {
	p := v.p
	off := make([]int64, len(p.Buffers))
	inArena := make([]bool, len(p.Buffers))
	used := false
	for i, b := range p.Buffers {
		if b.ArenaOffset != nil {
			off[i], inArena[i], used = b.arenaAt(), true, true
		}
	}
	if !used {
		return
	}
	type access struct {
		k, s, stage, buf int32
		lo, hi           int64
		write            bool
	}
	accs := make([]access, 0, len(v.acc))
	bounds := make([]int64, 0, 2*len(v.acc))
	for k, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		if o.Kind != OpLaunch {
			continue
		}
		// The stage's accesses (verifier.accesses: reads, then writes;
		// buffer indices below len(p.Buffers) are p.Buffers').
		for _, a := range v.acc[v.accStart[o.Stage]:v.accStart[o.Stage+1]] {
			if int(a.buf) < len(p.Buffers) && inArena[a.buf] {
				lo, hi := off[a.buf]+a.lo-v.bufBase[a.buf], off[a.buf]+a.hi-v.bufBase[a.buf]
				accs = append(accs, access{int32(k), int32(so[0]), a.stage, a.buf, lo, hi, a.write})
				bounds = append(bounds, lo, hi)
			}
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	segs := make([][]*arenaUse, max(len(bounds)-1, 0))
	// Per buffer, its uses by segment, over the segments its accesses span
	// (useOf[buf][g-segLo[buf]]), carved from one array.
	segLo, segHi := make([]int32, len(p.Buffers)), make([]int32, len(p.Buffers))
	for i := range segLo {
		segLo[i] = -1
	}
	for k := range accs {
		a := &accs[k]
		lo, _ := slices.BinarySearch(bounds, a.lo)
		hi, _ := slices.BinarySearch(bounds, a.hi)
		a.lo, a.hi = int64(lo), int64(hi) // segment indices from here on
		if segLo[a.buf] < 0 || int32(lo) < segLo[a.buf] {
			segLo[a.buf] = int32(lo)
		}
		segHi[a.buf] = max(segHi[a.buf], int32(hi))
	}
	n := 0
	for i := range segLo {
		if segLo[i] >= 0 {
			n += int(segHi[i] - segLo[i])
		}
	}
	useOf := make([][]*arenaUse, len(p.Buffers))
	all := make([]*arenaUse, n)
	for i := range segLo {
		if segLo[i] >= 0 {
			useOf[i], all = all[:segHi[i]-segLo[i]], all[segHi[i]-segLo[i]:]
		}
	}
	var slab []arenaUse
	for _, a := range accs {
		for g := a.lo; g < a.hi; g++ {
			u := useOf[a.buf][int32(g)-segLo[a.buf]]
			if u == nil {
				if len(slab) == 0 {
					slab = make([]arenaUse, 1024)
				}
				u, slab = &slab[0], slab[1:]
				*u = arenaUse{buf: a.buf, firstIssue: a.k}
				segs[g] = append(segs[g], u)
				useOf[a.buf][int32(g)-segLo[a.buf]] = u
			}
			j := slices.Index(u.streams, a.s)
			if j < 0 {
				j = len(u.streams)
				u.streams = append(u.streams, a.s)
				u.firstAny = append(u.firstAny, a.stage)
				u.lastAny = append(u.lastAny, -1)
				u.firstWrite = append(u.firstWrite, -1)
				u.lastWrite = append(u.lastWrite, -1)
			}
			u.lastAny[j] = a.stage
			if a.write {
				u.writes = true
				if u.firstWrite[j] < 0 {
					u.firstWrite[j] = a.stage
				}
				u.lastWrite[j] = a.stage
			}
		}
	}
	seen := map[[4]int32]bool{} // (buffer, buffer, stage, stage) reported
	for g, uses := range segs {
		if len(uses) < 2 {
			continue
		}
		slices.SortFunc(uses, func(a, b *arenaUse) int { return cmp.Compare(a.firstIssue, b.firstIssue) })
		var prev *arenaUse // the last writer
		var readers []*arenaUse
		for _, u := range uses {
			if !u.writes {
				if prev != nil {
					v.arenaOrder(prev, u, prev.lastWrite, u.firstAny, bounds[g], seen)
				}
				readers = append(readers, u)
				continue
			}
			if prev != nil {
				v.arenaOrder(prev, u, prev.lastAny, u.firstWrite, bounds[g], seen)
				v.arenaOrder(prev, u, prev.lastWrite, u.firstAny, bounds[g], seen)
			}
			for _, r := range readers {
				v.arenaOrder(r, u, r.lastAny, u.firstWrite, bounds[g], seen)
			}
			prev, readers = u, readers[:0]
		}
	}
}

// arenaOrder reports each pair of launches (a from x's list, b from y's)
// sharing arena bytes at byte at that are not ordered a-then-b (-1 entries
// are no launch): one race per pair of stages and buffers, with the fix
// that orders them.
func (v *verifier) arenaOrder(x, y *arenaUse, as, bs []int32, at int64, seen map[[4]int32]bool) {
	p := v.p
	for _, u := range as {
		for _, w := range bs {
			if u < 0 || w < 0 || v.stageHB(u, w) {
				continue
			}
			key := [4]int32{x.buf, y.buf, u, w}
			if seen[key] {
				continue
			}
			seen[key] = true
			i, j := u, w
			bi, bj := x.buf, y.buf
			if j < i {
				i, j, bi, bj = j, i, bj, bi
			}
			wi, wj := v.writes(i, bi), v.writes(j, bj)
			kind := RaceWAR
			switch {
			case wi && wj:
				kind = RaceWAW
			case wi:
				kind = RaceRAW
			}
			bx, by := p.Buffers[x.buf], p.Buffers[y.buf]
			base := *p.Buffers[bi].ArenaOffset
			lo := max(*bx.ArenaOffset, *by.ArenaOffset)
			hi := min(*bx.ArenaOffset+bx.Bytes, *by.ArenaOffset+by.Bytes)
			v.races = append(v.races, Race{
				First: int(i), Second: int(j),
				FirstName: p.Stages[i].Name, SecondName: p.Stages[j].Name,
				FirstStream: p.Stages[i].Stream, SecondStream: p.Stages[j].Stream,
				Buffer: p.Buffers[bi].Name, Offset: lo - base, Bytes: hi - lo,
				Shared: p.Buffers[bj].Name, Kind: kind,
				Fix: fmt.Sprintf("%s and %s share arena bytes (from %d) but their lifetimes overlap: record an event after %s on stream %d and wait on it before %s on stream %d (every use of %s before the first use of %s), or give them disjoint arena bytes",
					bx.Name, by.Name, at, p.Stages[u].Name, p.Stages[u].Stream, p.Stages[w].Name, p.Stages[w].Stream, bx.Name, by.Name),
			})
		}
	}
}

// writes reports whether stage v writes buffer b.
func (v *verifier) writes(st int32, b int32) bool {
	name := v.p.Buffers[b].Name
	return slices.ContainsFunc(v.p.Stages[st].Writes, func(a Access) bool { return a.Buffer == name })
}

// arenaFix returns the fix arenaPair wrote for an arena race.
func (v *verifier) arenaFix(r *Race) string { return r.Fix }
