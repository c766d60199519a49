package planner

import "slices"

// The builder's vector clocks (Lamport 1978; Fidge 1988, Mattern 1989):
// a clock maps each stream to how much of it is known complete, and a
// join takes the maximum per stream. Two representations, one per need
// (doc.go says which clocks of the project stay separate, and why):
//
//   - clock: sparse and immutable, for the sync pass: its clocks keep
//     only the streams still alive (a dead stream's entry drops out), so
//     a join costs O(live streams), where dense clocks would cost
//     O(waits × streams) time and O(streams²) memory;
//   - denseClocks: one entry per stream, numbered and copied on write,
//     for the arena pass and the iterate walk, whose happens-before test
//     is one read.

// clock is a sparse vector clock: (stream, launches of it known complete),
// sorted by stream. Clocks are immutable once built.
type clock []clockEntry

type clockEntry struct{ stream, val int32 }

func (c clock) get(t int32) int32 {
	i, ok := slices.BinarySearchFunc(c, t, func(e clockEntry, t int32) int { return int(e.stream) - int(t) })
	if !ok {
		return 0
	}
	return c[i].val
}

// join returns a ∪ b ∪ {(t, tv)} with the maximum per stream, leaving out
// stream self and dead streams.
func (ar *clockArena) join(a, b clock, t, tv, self int32, dead []bool) clock {
	out := ar.alloc(len(a) + len(b) + 1)
	add := func(e clockEntry) {
		if e.stream == self || dead[e.stream] {
			return
		}
		if l := len(out); l > 0 && out[l-1].stream == e.stream {
			out[l-1].val = max(out[l-1].val, e.val)
			return
		}
		out = append(out, e)
	}
	extra := clock{{t, tv}}
	i, j, x := 0, 0, 0
	for i < len(a) || j < len(b) || x < 1 {
		// Pick the smallest stream among the three heads.
		best := int32(1<<31 - 1)
		if i < len(a) {
			best = min(best, a[i].stream)
		}
		if j < len(b) {
			best = min(best, b[j].stream)
		}
		if x < 1 {
			best = min(best, extra[0].stream)
		}
		switch {
		case i < len(a) && a[i].stream == best:
			add(a[i])
			i++
		case j < len(b) && b[j].stream == best:
			add(b[j])
			j++
		default:
			add(extra[0])
			x++
		}
	}
	ar.trim(out)
	return out
}

// clockArena hands out clocks from large chunks: joins are frequent and
// small, and clocks are never freed one by one.
type clockArena struct{ buf []clockEntry }

// alloc returns an empty clock with capacity n.
func (ar *clockArena) alloc(n int) clock {
	if cap(ar.buf)-len(ar.buf) < n {
		ar.buf = make([]clockEntry, 0, max(1<<14, n))
	}
	l := len(ar.buf)
	ar.buf = ar.buf[:l+n]
	return clock(ar.buf[l : l : l+n])
}

// trim gives back the unused tail of c, the latest allocation.
func (ar *clockArena) trim(c clock) {
	ar.buf = ar.buf[:len(ar.buf)-(cap(c)-len(c))]
}

// denseClocks holds dense vector clocks of width entries (one per stream),
// cut from chunks of 1<<bits clocks and numbered in order of allocation: a
// snapshot holds a clock's number, not a slice. Clock 0 is all zeros. A
// clock that a snapshot holds is never written again: a join copies it
// first (join's shared).
type denseClocks struct {
	width  int
	bits   uint
	chunks [][]int32
	n      int32 // clocks in use
}

// newDenseClocks returns a store of clocks of width entries, with clock 0
// (nothing known) allocated.
func newDenseClocks(width int) *denseClocks {
	d := &denseClocks{width: width}
	for (2<<d.bits)*max(width, 1) <= 1<<14 {
		d.bits++
	}
	d.reset(0)
	return d
}

// at returns clock h.
func (d *denseClocks) at(h int32) []int32 {
	c, i := d.chunks[h>>d.bits], int(h&(1<<d.bits-1))*d.width
	return c[i : i+d.width : i+d.width]
}

// alloc returns the number of a new clock, its entries unspecified.
func (d *denseClocks) alloc() int32 {
	h := d.n
	if int(h>>d.bits) == len(d.chunks) {
		d.chunks = append(d.chunks, make([]int32, d.width<<d.bits))
	}
	d.n++
	return h
}

// reset keeps the first n clocks (at least clock 0) and lets later allocations reuse the rest.
func (d *denseClocks) reset(n int32) {
	d.n = max(n, 1)
	if len(d.chunks) == 0 {
		d.chunks = append(d.chunks, make([]int32, d.width<<d.bits))
	}
	clear(d.at(0))
}

// join sets clock *h to its join with clock src and the entry (t, v): the
// maximum per stream. A clock that knows v of stream t already knows all
// src knew, when src is the clock of stream t at its v-th step (clocks
// only grow along a stream, and a step's knowledge reaches other streams
// only through that stream's later steps): then join does nothing and
// returns false. Otherwise it writes the join in place, or, when *shared
// says a snapshot holds clock *h, into a new clock that *h then names and
// which is not shared; it returns true.
func (d *denseClocks) join(h *int32, shared *bool, src, t, v int32) bool {
	c := d.at(*h)
	if c[t] >= v {
		return false
	}
	if *shared {
		nh := d.alloc()
		nc := d.at(nh)
		copy(nc, c)
		c, *h, *shared = nc, nh, false
	}
	for k, x := range d.at(src) {
		c[k] = max(c[k], x)
	}
	c[t] = max(c[t], v)
	return true
}
