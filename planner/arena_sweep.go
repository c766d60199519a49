package planner

import (
	"math"
	"slices"
)

// sweepScan bounds the free blocks sweep tries for one temp (those that
// fit, smallest first) before it places the temp on top of the arena.
const sweepScan = 256

// sweep lays out the members (a.bufs indices; sp their spans, per member) in issue order with a free
// list, as an online allocator would (the "offset calculation" sweep of
// Sekiyama et al., "Profile-guided memory optimization for deep neural
// networks", 2018, §3, and Pisarchyk and Lee 2020, §4.3, with best fit):
// walking the members by first issue, a temp's bytes are freed once its
// last launch has been issued, adjacent free blocks are coalesced, and
// each temp takes the smallest free block that holds it whose every
// previous owner happens-before it (each owner's last launch per stream
// before each of the temp's first launches; a block keeps the latest
// owner per stream, so the test is O(streams)), else the free block at the
// top of the arena, grown, else new bytes on top. Free blocks are kept in a
// treap ordered by size and offset (freeList) and by offset at both ends
// for coalescing. Bytes are shared only along happens-before (by
// transitivity through every earlier owner). Cost: O(temps × (log temps +
// sweepScan × streams)) happens-before tests at most. It returns the
// offsets (per member) and the arena size in bytes.
func (a *arenaInfo) sweep(members []int, sp spans) ([]int64, int64) {
	m := len(members)
	offs := make([]int64, m)
	buf := func(i int) *arenaBuf { return a.bufs[members[i]] }
	// The members by first issue: layoutPlanned's come in that order (a
	// span starts at its temp's first issue), and are sorted only if not.
	var starts []int // nil: the members' own order
	for i := 1; i < m; i++ {
		if buf(i).firstIssue < buf(i-1).firstIssue {
			starts = stableOrder(m, func(i int) int { return buf(i).firstIssue })
			break
		}
	}
	ends := stableOrder(m, func(i int) int { return buf(i).lastIssue })
	f := &freeList{byStart: map[int64]*freeBlock{}, byEnd: map[int64]*freeBlock{}}
	var top int64
	e := 0
	for k := range m {
		i := k
		if starts != nil {
			i = starts[k]
		}
		x := buf(i)
		pos := sp.lo[i]
		for ; e < len(ends) && buf(ends[e]).lastIssue < x.firstIssue; e++ {
			y := buf(ends[e])
			f.release(f.block(freeBlock{off: offs[ends[e]], size: y.size, owners: y.lasts(), clean: sp.hi[ends[e]]}), pos)
		}
		f.clean(pos)
		ok := func(b *freeBlock) bool { return b.owners == nil || a.follows(b.owners, x) }
		if b := f.bestFit(x.size, ok); b != nil {
			offs[i] = b.off
			f.take(b, x.size)
			continue
		}
		if b := f.byEnd[top]; b != nil && ok(b) {
			offs[i] = b.off // the top block, grown to fit if need be
			if b.size >= x.size {
				f.take(b, x.size)
			} else {
				f.remove(b)
				top = b.off + x.size
			}
			continue
		}
		offs[i] = top
		top += x.size
	}
	return offs, top
}

// follows reports whether every launch in owners happens-before every
// first launch of x.
func (a *arenaInfo) follows(owners []int32, x *arenaBuf) bool {
	for _, u := range owners {
		for _, v := range x.firsts() {
			if !a.hb.before(u, v) {
				return false
			}
		}
	}
	return true
}

// freeBlock is a free range of the arena with the latest launch per stream
// of the temps that used its bytes (owners, by stream), until the sweep
// passes clean, the span end of those temps (issueSpans): every temp first
// used from there on happens-after them all, and owners is dropped.
type freeBlock struct {
	off, size int64
	owners    []int32 // nil once clean
	clean     float64
	age       int64 // 0 once clean, else the order of release
	free      bool
	heaped    bool   // in freeList.dirty
	prio      uint32 // treap priority
	l, r      *freeBlock
}

// freeList is sweep's free blocks: by offset at both ends (coalescing), in
// a treap ordered by (size, offset) (best fit), and by clean (a heap).
// Only clean blocks are coalesced: merging a block still owned into
// another would make the whole wait for its owners.
type freeList struct {
	byStart, byEnd map[int64]*freeBlock
	root           *freeBlock
	seed           uint32
	dirty          []*freeBlock // min-heap by clean of blocks with owners
	released       int64
	stack          []*freeBlock // bestFit's
	slab           []freeBlock  // block's: blocks are cut from it
	spare          []*freeBlock // blocks no longer referenced, for block to reuse
}

// block returns a new free block holding b: a spare one, else one cut
// from a slab of them (one allocation per slab, not per block).
func (f *freeList) block(b freeBlock) *freeBlock {
	var x *freeBlock
	if k := len(f.spare); k > 0 {
		x, f.spare = f.spare[k-1], f.spare[:k-1]
	} else {
		if len(f.slab) == 0 {
			f.slab = make([]freeBlock, 256)
		}
		x, f.slab = &f.slab[0], f.slab[1:]
	}
	*x = b
	return x
}

// retire makes b, out of the list and the dirty heap, a spare for block
// (its fields stay readable until the next call of block).
func (f *freeList) retire(b *freeBlock) {
	if !b.free && !b.heaped {
		f.spare = append(f.spare, b)
	}
}

func (f *freeList) add(b *freeBlock) {
	f.seed = f.seed*1664525 + 1013904223
	b.prio, b.l, b.r, b.free = f.seed, nil, nil, true
	f.byStart[b.off], f.byEnd[b.off+b.size] = b, b
	f.root = treapInsert(f.root, b)
	if b.owners != nil {
		b.heaped = true
		f.dirty = append(f.dirty, b)
		for i := len(f.dirty) - 1; i > 0; {
			up := (i - 1) / 2
			if f.dirty[up].clean <= f.dirty[i].clean {
				break
			}
			f.dirty[up], f.dirty[i] = f.dirty[i], f.dirty[up]
			i = up
		}
	}
}

func (f *freeList) remove(b *freeBlock) {
	delete(f.byStart, b.off)
	delete(f.byEnd, b.off+b.size)
	f.root = treapDelete(f.root, b)
	b.free = false
	f.retire(b)
}

// release frees b at sweep position pos, merging it with the clean free
// blocks next to it if it is clean itself.
func (f *freeList) release(b *freeBlock, pos float64) {
	if b.clean <= pos {
		b.owners = nil
	}
	if b.owners != nil && b.age == 0 {
		f.released++
		b.age = f.released
	}
	if b.owners == nil {
		if l := f.byEnd[b.off]; l != nil && l.owners == nil {
			f.remove(l)
			b.off, b.size = l.off, l.size+b.size
		}
		if r := f.byStart[b.off+b.size]; r != nil && r.owners == nil {
			f.remove(r)
			b.size += r.size
		}
	}
	f.add(b)
}

// clean drops the owners of the free blocks whose clean is at most pos,
// and coalesces them with their clean neighbours.
func (f *freeList) clean(pos float64) {
	for len(f.dirty) > 0 && f.dirty[0].clean <= pos {
		b := f.dirty[0]
		b.heaped = false
		last := len(f.dirty) - 1
		f.dirty[0] = f.dirty[last]
		f.dirty = f.dirty[:last]
		for i := 0; ; {
			c := 2*i + 1
			if c >= last {
				break
			}
			if c+1 < last && f.dirty[c+1].clean < f.dirty[c].clean {
				c++
			}
			if f.dirty[i].clean <= f.dirty[c].clean {
				break
			}
			f.dirty[i], f.dirty[c] = f.dirty[c], f.dirty[i]
			i = c
		}
		if b.free {
			f.remove(b)
			f.release(f.block(freeBlock{off: b.off, size: b.size}), pos)
		} else {
			f.retire(b)
		}
	}
}

// take uses the first size bytes of b; the rest stays free with b's owners.
func (f *freeList) take(b *freeBlock, size int64) {
	f.remove(b)
	if b.size > size {
		f.add(f.block(freeBlock{off: b.off + size, size: b.size - size, owners: b.owners, clean: b.clean, age: b.age}))
	}
}

// bestFit returns the smallest free block of at least size bytes (then
// by key) that ok accepts, among the sweepScan smallest that fit. It walks
// the treap in order from the first fit, with a stack of the nodes whose
// right subtrees are still to visit.
func (f *freeList) bestFit(size int64, ok func(*freeBlock) bool) *freeBlock {
	key := blockKey{size, -1, -1}
	stack := f.stack[:0]
	for t := f.root; t != nil; {
		if key.less(t.key()) {
			stack = append(stack, t)
			t = t.l
		} else {
			t = t.r
		}
	}
	defer func() { f.stack = stack[:0] }()
	for range sweepScan {
		if len(stack) == 0 {
			return nil
		}
		b := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if ok(b) {
			return b
		}
		for t := b.r; t != nil; t = t.l {
			stack = append(stack, t)
		}
	}
	return nil
}

// blockKey orders free blocks for best fit: by size, then clean blocks
// (age 0) by offset, then the others oldest released first (the likeliest
// to be after the temp being placed).
type blockKey struct{ size, age, off int64 }

func (b *freeBlock) key() blockKey { return blockKey{b.size, b.age, b.off} }

func (k blockKey) less(o blockKey) bool {
	return k.size < o.size || k.size == o.size && (k.age < o.age || k.age == o.age && k.off < o.off)
}

func treapInsert(t, b *freeBlock) *freeBlock {
	if t == nil {
		return b
	}
	if b.key().less(t.key()) {
		t.l = treapInsert(t.l, b)
		if t.l.prio > t.prio {
			l := t.l
			t.l, l.r = l.r, t
			return l
		}
	} else {
		t.r = treapInsert(t.r, b)
		if t.r.prio > t.prio {
			r := t.r
			t.r, r.l = r.l, t
			return r
		}
	}
	return t
}

func treapDelete(t, b *freeBlock) *freeBlock {
	if t == nil {
		return nil
	}
	if t == b {
		return treapMerge(t.l, t.r)
	}
	if b.key().less(t.key()) {
		t.l = treapDelete(t.l, b)
	} else {
		t.r = treapDelete(t.r, b)
	}
	return t
}

func treapMerge(l, r *freeBlock) *freeBlock {
	switch {
	case l == nil:
		return r
	case r == nil:
		return l
	case l.prio > r.prio:
		l.r = treapMerge(l.r, r)
		return l
	default:
		r.l = treapMerge(l, r.l)
		return r
	}
}

// stableOrder returns 0..n-1 sorted by key (in [0, 2³¹)), ties in index
// order, as slices.SortStableFunc would: by a counting sort when the keys
// span less than 4n (issue positions of temps, typically), else by one sort
// of packed keys; either is several times faster on a million temps, where
// the comparisons would chase a pointer each.
func stableOrder(n int, key func(i int) int) []int {
	keys := make([]uint32, n)
	top, low := 0, math.MaxInt
	for i := range keys {
		k := key(i)
		keys[i] = uint32(k)
		top, low = max(top, k), min(low, k)
	}
	if n > 0 && low > 0 {
		// Keys less their least: the same order, and a counting sort for
		// keys that are close together but not small (the issue positions
		// of one segment of the arena).
		for i := range keys {
			keys[i] -= uint32(low)
		}
		top -= low
	}
	out := make([]int, n)
	if top < 4*n {
		start := make([]int32, top+2)
		for _, k := range keys {
			start[k+1]++
		}
		for k := 1; k < len(start); k++ {
			start[k] += start[k-1]
		}
		for i, k := range keys {
			out[start[k]] = i
			start[k]++
		}
		return out
	}
	packed := make([]uint64, n)
	for i, k := range keys {
		packed[i] = uint64(k)<<32 | uint64(i)
	}
	slices.Sort(packed)
	for r, x := range packed {
		out[r] = int(uint32(x))
	}
	return out
}
