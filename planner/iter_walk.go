package planner

import (
	"slices"

	"github.com/dagrun/dagrun/plan"
)

// iterWalk simulates U iterations of a plan in issue order with vector
// clocks over physical streams, placing or checking cross waits.
type iterWalk struct {
	p          *plan.Plan
	S, R, n, U int
	window     int // iterations of snapshots kept: the longest distance + 1
	reqs       iterOrders
	cross      [][]iterReq // per stage: its cross waits (the plan being built)
	limit      int         // clock entries a walk may read (0: no limit)
	work       int         // clock entries the last walk read
	stopped    int         // the iteration in which a walk passed limit
	added      [][3]int32  // cross waits in the order they were added: b, a, d
	// first is the walk's state after iteration 0, the same in every walk
	// (a cross wait or order reaches at least one iteration back, so none
	// applies in iteration 0): later walks start from it.
	first *iterState
	// snaps0 are iteration 0's snapshots, which every walk shares (first),
	// snaps the later iterations', reused from walk to walk.
	snaps0, snaps []iterSnap
	// recSnap and hasRec, per event, the snapshot of the launch its record
	// follows in the current iteration, reused likewise.
	recSnap []iterSnap
	hasRec  []bool
	// clocks hold the walks' clocks, P entries each (a snapshot holds a
	// clock's number, not a slice); the first iterState.clocks of them
	// are iteration 0's, and a walk reuses the rest from the walk before.
	clocks *denseClocks
	// budget bounds the steps (ops visited and clock entries read) of a
	// walk (0: none); past it the walk stops, returns false and sets
	// exhausted. steps is the last walk's.
	budget, steps int
	exhausted     bool
}

// iterState is the iterWalk's state between two iterations.
type iterState struct {
	clock  []int32 // per physical stream, its clock's number (shared with snapshots: never written)
	cnt    []int32
	work   int
	clocks int32 // the clocks in use (denseClocks.n)
}

// iterSnap is a launch's place: its physical stream, its 1-based index
// among that stream's launches, and the number of the stream's clock just
// before it (shared, immutable).
type iterSnap struct {
	ps, idx, clock int32
}

// run walks the iterations. With place, it adds a cross wait for every
// order not met and returns true; without, it returns whether every order
// is met by the current cross waits. Past w.limit clock entries read it
// stops and returns false (w.stopped is the iteration).
func (w *iterWalk) run(place bool) bool {
	p, S, n := w.p, w.S, w.n
	phys, P := p.PhysicalStreams()
	// Clocks are cut from chunks (denseClocks): one allocation per chunk,
	// not per join, and none for the clocks of an earlier walk reused.
	if w.clocks == nil || w.clocks.width != P {
		w.clocks = newDenseClocks(P)
	}
	clocks := w.clocks
	if w.first != nil {
		clocks.reset(w.first.clocks)
	} else {
		clocks.reset(0)
	}
	// Per physical stream: its clock (the launches of each stream known
	// complete) and the clock's number; every stream starts on clock 0
	// (nothing known).
	clock, num := make([][]int32, P), make([]int32, P)
	shared := make([]bool, P) // clock[ps] is referenced by a snapshot: copy on join
	for i := range clock {
		clock[i], num[i], shared[i] = clocks.at(0), 0, true
	}
	cnt := make([]int32, P)
	// snaps0[v]: stage v of iteration 0, the same in every walk;
	// snaps[((i−1) mod window)·n + v]: stage v of iteration i ≥ 1. Older
	// iterations are never asked about again.
	if w.snaps == nil {
		w.snaps0, w.snaps = make([]iterSnap, n), make([]iterSnap, n*w.window)
	}
	snaps0, snaps := w.snaps0, w.snaps
	at := func(i, v int) *iterSnap {
		if i == 0 {
			return &snaps0[v]
		}
		return &snaps[((i-1)%w.window)*n+v]
	}
	// recSnap[e]: the snapshot of the launch each record of e follows in
	// the current iteration (sync records right after launches).
	if len(w.recSnap) != p.Events {
		w.recSnap, w.hasRec = make([]iterSnap, p.Events), make([]bool, p.Events)
	}
	recSnap, hasRec := w.recSnap, w.hasRec
	lastLaunch := make([]int32, S) // per logical stream: last stage launched in this iteration
	w.work = 0
	over := false
	join := func(ps int, s iterSnap) {
		// A join costs O(1) unless it merges, and O(P) then (denseClocks.join).
		if s.ps != int32(ps) && clocks.join(&num[ps], &shared[ps], s.clock, s.ps, s.idx) {
			w.work += P
			over = over || (w.limit > 0 && w.work > w.limit)
			clock[ps] = clocks.at(num[ps])
		}
	}
	hb := func(a iterSnap, ps int, idx int32) bool {
		if a.ps == int32(ps) {
			return a.idx < idx
		}
		return clock[ps][a.ps] >= a.idx
	}
	j0 := 0
	w.exhausted = false
	if f := w.first; f != nil {
		j0, w.work = 1, f.work
		copy(num, f.clock)
		for i, h := range num {
			clock[i] = clocks.at(h)
		}
		copy(cnt, f.cnt)
	}
	ops, work0 := 0, w.work
	defer func() { w.steps = ops + w.work - work0 }()
	for j := j0; j < w.U; j++ {
		if j == 1 && w.first == nil {
			f := &iterState{clock: slices.Clone(num), cnt: slices.Clone(cnt), work: w.work, clocks: clocks.n}
			for i := range shared {
				shared[i] = true
			}
			w.first = f
		}
		set := phys[j%len(phys)]
		clear(hasRec)
		for i := range lastLaunch {
			lastLaunch[i] = -1
		}
		for _, so := range p.IssueOrder {
			s := so[0]
			ps := set[s]
			switch o := p.Streams[s].Ops[so[1]]; o.Kind {
			case plan.OpRecord:
				if v := lastLaunch[s]; v >= 0 {
					recSnap[o.Event], hasRec[o.Event] = *at(j, int(v)), true
				}
			case plan.OpWait:
				if o.Lag == 0 && hasRec[o.Event] {
					join(ps, recSnap[o.Event])
				}
			case plan.OpLaunch:
				b := o.Stage
				for _, r := range w.cross[b] {
					if i := j - int(r.d); i >= 0 {
						join(ps, *at(i, int(r.a)))
					}
				}
				idx := cnt[ps] + 1
				for _, r := range w.reqs.row(b) {
					i := j - int(r.d)
					if i < 0 {
						continue
					}
					a := *at(i, int(r.a))
					if hb(a, ps, idx) {
						continue
					}
					if !place {
						return false
					}
					w.cross[b] = append(w.cross[b], r)
					w.added = append(w.added, [3]int32{int32(b), r.a, r.d})
					join(ps, a)
				}
				cnt[ps] = idx
				*at(j, b) = iterSnap{ps: int32(ps), idx: idx, clock: num[ps]}
				shared[ps] = true
				lastLaunch[s] = int32(b)
			}
			if over {
				w.stopped = j
				return false
			}
			if ops++; w.budget > 0 && ops+w.work-work0 > w.budget {
				w.exhausted = true
				return false
			}
		}
	}
	return true
}
