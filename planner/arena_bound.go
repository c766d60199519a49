package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/dagrun/dagrun/internal/num"
	"github.com/dagrun/dagrun/plan"
)

// overLive says how an arena of size bytes compares with lb, the bytes
// live at once in schedule, which no layout goes below, and what memory
// that may lose.
func overLive(size, lb int64, schedule string) string {
	if size <= lb {
		return fmt.Sprintf("%s bytes, the %s bytes live at once in %s, which no layout goes below: no memory is lost", num.Thousands(int(size)), num.Thousands(int(lb)), schedule)
	}
	return fmt.Sprintf("%s bytes, %s bytes (%.1f%%) over the %s bytes live at once in %s, which no layout goes below: at most that much memory is lost",
		num.Thousands(int(size)), num.Thousands(int(size-lb)), 100*float64(size-lb)/float64(max(lb, 1)), num.Thousands(int(lb)), schedule)
}

// LiveBound is the lower bound on p's arena under p's own schedule: the most
// bytes of arena buffers live at any instant of p's ideal schedule (each
// stage's duration_us, 0 counted as 1 µs, no launch cost, unlimited
// hardware, as Stats.IdealMakespanUS). A buffer is live from the start of
// its first launch to the end of its last. Buffers that share arena bytes
// are ordered by happens-before, so their live ranges in any schedule that
// respects it are disjoint, and every arena of p is at least this large.
// Sizes are the buffers' own bytes (not rounded). With several devices
// each device has an arena of its own, at least that device's bound
// (DeviceLiveBound), so LiveBound is the sum of the devices' bounds, the
// bound of Stats.ArenaBytes (the sum of the devices' arenas); the most
// bytes live at once over all devices together may be less, as devices
// peak at different instants.
func LiveBound(p *plan.Plan) int64 { return liveBoundAll(p, nil, nil) }

// liveBoundAll is LiveBound with acc as p's planAccesses (nil: made here).
func liveBoundAll(p *plan.Plan, acc *planAccesses, arena []bool) int64 {
	if p.DeviceCount() == 1 {
		return liveBound(p, acc, -1, arena)
	}
	if acc == nil {
		acc = newPlanAccesses(p)
	}
	var sum int64
	for d := range p.DeviceCount() {
		sum += liveBound(p, acc, d, arena)
	}
	return sum
}

// DeviceLiveBound is LiveBound of device dev's arena buffers alone: the
// lower bound on dev's arena under p's own schedule.
func DeviceLiveBound(p *plan.Plan, dev int) int64 { return liveBound(p, nil, dev, nil) }

// liveBound is LiveBound over the buffers of device dev (dev < 0: all)
// that are in the arena (arena[i] per Plan.Buffers index; nil: those with
// an arena offset), with acc as p's planAccesses (nil: made here). The live
// ranges' ends and starts are sorted by one radix sort of their instants
// (sortKeyed), ends first at the same instant.
func liveBound(p *plan.Plan, acc *planAccesses, dev int, arena []bool) int64 {
	if acc == nil {
		acc = newPlanAccesses(p)
	}
	start, end := plan.IdealSchedule(p)
	in := make([]bool, len(p.Buffers))
	n := 0
	for i, b := range p.Buffers {
		inArena := b.ArenaOffset != nil
		if arena != nil {
			inArena = arena[i]
		}
		if inArena && (dev < 0 || b.Device == dev) {
			in[i] = true
			n++
		}
	}
	lo := make([]float64, len(p.Buffers))
	hi := make([]float64, len(p.Buffers))
	for i := range lo {
		lo[i], hi[i] = math.Inf(1), math.Inf(-1)
	}
	for v := range p.Stages {
		for _, i := range acc.buf[acc.off[v]:acc.off[v+1]] {
			if i >= 0 && in[i] {
				lo[i], hi[i] = min(lo[i], start[v]), max(hi[i], end[v])
			}
		}
	}
	evs := make([]keyed, 0, 2*n)
	for i, b := range p.Buffers {
		if in[i] && lo[i] < hi[i] {
			evs = append(evs, keyed{eventKey(lo[i], true), b.Bytes}, keyed{eventKey(hi[i], false), -b.Bytes})
		}
	}
	sortKeyed(evs)
	var live, peak int64
	for _, e := range evs {
		live += e.val
		peak = max(peak, live)
	}
	return peak
}

// keyed is a sort key with a value that goes with it (sortKeyed): for
// the live bound, an instant (eventKey) and a live range's start (its
// bytes) or end (minus its bytes).
type keyed struct {
	key uint64
	val int64
}

// eventKey orders instants t ≥ 0 (µs) as their float64 bits do, an end
// before a start at the same instant: live ranges are half-open, and the
// peak is the same whatever the order among ends (or starts) of one instant.
func eventKey(t float64, start bool) uint64 {
	k := math.Float64bits(t) << 1 // t ≥ 0: the sign bit is 0
	if start {
		k |= 1
	}
	return k
}

// sortKeyed sorts evs by key, the order among equal keys unspecified: a
// least significant digit first radix sort by 16-bit digits (Knuth, The
// Art of Computer Programming, vol. 3, §5.2.5), skipping the passes whose
// digit is the same for every key; slices.SortFunc for short slices.
// Cost: O(n) a pass, at most four passes.
func sortKeyed(evs []keyed) {
	if len(evs) < 1<<10 {
		slices.SortFunc(evs, func(a, b keyed) int { return cmp.Compare(a.key, b.key) })
		return
	}
	var diff uint64 // the bits in which some key differs from the first
	for _, e := range evs {
		diff |= e.key ^ evs[0].key
	}
	var count [1 << 16]int32
	src, dst := evs, make([]keyed, len(evs))
	for shift := uint(0); shift < 64; shift += 16 {
		if diff>>shift&0xffff == 0 {
			continue // one digit: the pass would not move anything
		}
		clear(count[:])
		for _, e := range src {
			count[e.key>>shift&0xffff]++
		}
		sum := int32(0)
		for d, c := range count {
			count[d], sum = sum, sum+c
		}
		for _, e := range src {
			d := e.key >> shift & 0xffff
			dst[count[d]] = e
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &evs[0] {
		copy(evs, src)
	}
}
