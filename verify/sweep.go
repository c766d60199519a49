package verify

import (
	"fmt"

	"github.com/dagrun/dagrun/plan"
)

// clocks builds the plan's happens-before clocks (hbEdges) and each
// stage's launch op.
func (v *verifier) clocks() {
	p := v.p
	h := buildHB(p, hbAuto, v.maxSteps)
	v.hb = h
	if h.over {
		return
	}
	v.opBase, v.opStream, v.opIssue, v.opCaptured = h.opBase, h.opStream, h.opIssue, h.opCaptured
	v.launchOp = make([]int32, stageCount(p))
	if c := p.Ops; c != nil {
		for g, k := range c.Kind {
			if k == plan.OpLaunch {
				v.launchOp[c.Arg[g]] = int32(g)
			}
		}
		return
	}
	for s := range p.Streams {
		for j, o := range p.Streams[s].Ops {
			if o.Kind == plan.OpLaunch {
				v.launchOp[o.Stage] = h.opBase[s] + int32(j)
			}
		}
	}
}

// opIndex returns op g's index in its stream's ops.
func (v *verifier) opIndex(g int32) int32 { return g - v.opBase[v.opStream[g]] }

// stageHB reports whether stage i's launch happens-before stage j's launch
// (true for i == j).
func (v *verifier) stageHB(i, j int32) bool {
	return v.opHB(v.launchOp[i], v.launchOp[j])
}

// opHB reports whether op a happens-before op b, or is b: everything up to
// and including a on its stream completes before b starts.
func (v *verifier) opHB(a, b int32) bool { return v.hb.reach(a, b) }

func (v *verifier) accHB(a, d int32) bool {
	if !v.acc[d].write() {
		// A pageable source read when the host issues the copy.
		if after, ok := v.readAfter(v.launchOp[v.acc[a].stage], int(v.acc[d].stage)); ok {
			return after
		}
	}
	return v.stageHB(v.acc[a].stage, v.acc[d].stage) || !v.acc[a].write() && v.readsDone(a, d)
}

// sweep runs every access, in declaration order, against the frontier of
// the segments it touches.
func (v *verifier) sweep() {
	v.frontiers()
	for d := range v.acc {
		ad := &v.acc[d]
		x := v.space(ad)
		sp := v.spaces[x]
		states := v.states[sp.at-x : sp.at-x+sp.n-1]
		lo, hi := int(ad.lo), int(ad.hi)
		for k := lo; k < hi; {
			// A run of segments with the same frontier takes one step; a
			// frontier no other segment holds is updated in place.
			st := states[k]
			end := k + 1
			for end < hi && states[end] == st {
				end++
			}
			own := st != nil && int(st.refs) == end-k
			next := v.step(st, int32(d), own)
			if next != st {
				if st != nil {
					if st.refs -= int32(end - k); st.refs == 0 {
						v.free = append(v.free, st)
					}
				}
				next.refs += int32(end - k)
				for ; k < end; k++ {
					states[k] = next
				}
			}
			k = end
		}
		if sp.last == int32(d) {
			// No later access touches the space: its frontiers go to
			// the free list, for the spaces accessed later.
			for k, st := range states {
				if st != nil {
					if st.refs--; st.refs == 0 {
						v.free = append(v.free, st)
					}
					states[k] = nil
				}
			}
		}
		if len(v.races) >= verifyMaxRaces || v.racy {
			v.truncated = d < len(v.acc)-1
			return
		}
	}
}

// step checks access d against one segment's frontier st and returns the
// segment's frontier after d: st itself, changed, when own is set (no
// other segment holds st).
func (v *verifier) step(st *verifyState, d int32, own bool) *verifyState {
	ad := &v.acc[d]
	if st != nil {
		for _, a := range st.w {
			v.check(a, d)
		}
		if ad.write() {
			for _, a := range st.r {
				v.check(a, d)
			}
		}
	}
	if ad.write() {
		w, r := append(v.tmpW[:0], d), v.tmpR[:0]
		if st != nil {
			for _, a := range st.w {
				if v.accHB(a, d) {
					v.supersede(d, a)
				} else {
					w = append(w, a)
				}
			}
			for _, a := range st.r {
				if v.accHB(a, d) {
					v.supersede(d, a)
				} else {
					r = append(r, a)
				}
			}
		}
		v.tmpW, v.tmpR = w, r
		if own {
			st.w, st.r, st.byStream = append(st.w[:0], w...), append(st.r[:0], r...), nil
			return st
		}
		return v.state(w, r)
	}
	var w, r []int32
	if st != nil {
		w, r = st.w, st.r
	}
	ld := v.launchOp[ad.stage]
	sd := v.opStream[ld]
	k := v.readOf(st, sd)
	if k < 0 {
		if own {
			st.r = append(st.r, d)
			if st.byStream != nil {
				st.byStream[sd] = int32(len(st.r) - 1)
			}
			return st
		}
		nr := append(append(v.tmpR[:0], r...), d)
		v.tmpR = nr
		return v.state(w, nr)
	}
	a := r[k]
	if v.launchOp[v.acc[a].stage] >= ld { // d is before a (or of a's stage) on their stream (numbered in its order)
		if !v.noShadows && v.joined[a] != d {
			v.joined[a] = d
			v.link(a, d)
		}
		return st
	}
	v.supersede(d, a)
	if own {
		st.r[k] = d
		return st
	}
	nr := append(v.tmpR[:0], r...)
	nr[k] = d
	v.tmpR = nr
	return v.state(w, nr)
}

// readOf returns the position in st.r of the read on stream s, or -1. A
// frontier of many reads keeps an index by stream.
func (v *verifier) readOf(st *verifyState, s int32) int {
	if st == nil {
		return -1
	}
	stream := func(a int32) int32 { return v.opStream[v.launchOp[v.acc[a].stage]] }
	if len(st.r) < 16 {
		for k, a := range st.r {
			if stream(a) == s {
				return k
			}
		}
		return -1
	}
	if st.byStream == nil {
		st.byStream = make(map[int32]int32, len(st.r))
		for k, a := range st.r {
			st.byStream[stream(a)] = int32(k)
		}
	}
	if k, ok := st.byStream[s]; ok {
		return int(k)
	}
	return -1
}

// state returns a new frontier holding copies of w and r (w is shared as
// is when it is the pool's already).
func (v *verifier) state(w, r []int32) *verifyState {
	if k := len(v.free) - 1; k >= 0 {
		// A frontier's lists are its own (ints copies): reused as they are.
		st := v.free[k]
		v.free = v.free[:k]
		st.w, st.r, st.byStream = append(st.w[:0], w...), append(st.r[:0], r...), nil
		return st
	}
	if len(v.slab) == 0 {
		v.slab = make([]verifyState, 1024)
	}
	st := &v.slab[0]
	v.slab = v.slab[1:]
	st.w, st.r = v.ints(w), v.ints(r)
	return st
}

// ints copies x into the pool.
func (v *verifier) ints(x []int32) []int32 {
	if len(x) == 0 {
		return nil
	}
	if len(v.pool) < len(x) {
		v.pool = make([]int32, max(1<<14, len(x)))
	}
	out := v.pool[:len(x):len(x)]
	v.pool = v.pool[len(x):]
	copy(out, x)
	return out
}

// link adds b to a's shadow.
func (v *verifier) link(a, b int32) {
	v.links = append(v.links, verifyLink{acc: b, next: v.shadow[a]})
	v.shadow[a] = int32(len(v.links) - 1)
}

// supersede moves a, which happens-before d, into d's shadow.
func (v *verifier) supersede(d, a int32) {
	if v.noShadows || v.shadowed[a] == d {
		return
	}
	v.shadowed[a] = d
	v.link(d, a)
}

// check tests frontier access a against d (a conflicting pair of different
// stages unless a == d's stage) and, if they race, searches a's shadow.
func (v *verifier) check(a, d int32) {
	if v.checked[a] == d {
		return
	}
	v.checked[a] = d
	if v.acc[a].stage == v.acc[d].stage || v.accHB(a, d) {
		return
	}
	v.report(a, d)
	if v.noShadows {
		return // a derived plan: the verdict is known
	}
	stack := []int32{a}
	dw := v.acc[d].write()
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for l := v.shadow[x]; l >= 0; l = v.links[l].next {
			b := v.links[l].acc
			if v.checked[b] == d {
				continue
			}
			v.checked[b] = d
			ab := &v.acc[b]
			if ab.stage == v.acc[d].stage || !v.overlap(b, d) || v.accHB(b, d) {
				continue
			}
			if !ab.write() && !dw {
				continue // reads' shadows hold only reads
			}
			v.report(b, d)
			stack = append(stack, b)
		}
	}
}

func (v *verifier) overlap(a, b int32) bool {
	x, y := &v.acc[a], &v.acc[b]
	return v.space(x) == v.space(y) && x.lo < y.hi && y.lo < x.hi
}

// report records the race between earlier access a and access d.
func (v *verifier) report(a, d int32) {
	if v.p.Derived {
		v.racy = true // the caller verifies the plan with names to report
		return
	}
	x, y := &v.acc[a], &v.acc[d]
	kind := plan.RaceWAR
	switch {
	case x.write() && y.write():
		kind = plan.RaceWAW
	case x.write():
		kind = plan.RaceRAW
	}
	// x and y are of one space: its bounds are in order.
	s := v.spaces[v.space(x)]
	lo, hi := v.bounds[s.at+max(x.lo, y.lo)], v.bounds[s.at+min(x.hi, y.hi)]
	key := [3]int32{x.stage, y.stage, v.space(x)}
	if k, ok := v.raceIdx[key]; ok {
		r := &v.races[k]
		if verifyKindRank(kind) > verifyKindRank(r.Kind) {
			r.Kind = kind
		}
		end := max(r.Offset+r.Bytes, hi)
		r.Offset = min(r.Offset, lo)
		r.Bytes = end - r.Offset
		return
	}
	p := v.p
	i, j := int(x.stage), int(y.stage)
	v.raceIdx[key] = len(v.races)
	v.races = append(v.races, Race{
		First: i, Second: j,
		FirstName: p.Stages[i].Name, SecondName: p.Stages[j].Name,
		FirstStream: p.Stages[i].Stream, SecondStream: p.Stages[j].Stream,
		FirstStreamName: p.Streams[p.Stages[i].Stream].Name, SecondStreamName: p.Streams[p.Stages[j].Stream].Name,
		Buffer: v.bufName[x.buf()], Offset: lo, Bytes: hi - lo,
		Kind:     kind,
		Reversed: v.stageHB(y.stage, x.stage),
	})
}

// fix says how to order race r. With detail, it looks for the usual
// mistakes first: a wait issued before the record it needs, a wait placed
// after the launch it should guard, a wait that orders the pair backwards.
func (v *verifier) fix(r *Race, detail bool) string {
	if r.Shared != "" {
		return v.arenaFix(r) // arena_verify.go
	}
	p := v.p
	li, lj := v.launchOp[r.First], v.launchOp[r.Second]
	a, b := r.FirstStream, r.SecondStream
	sa, sb := streamLabel(r.FirstStreamName, a), streamLabel(r.SecondStreamName, b)
	generic := fmt.Sprintf("record an event on stream %s after %s and wait on it on stream %s before %s", sa, r.FirstName, sb, r.SecondName)
	if a == b {
		return fmt.Sprintf("launch %s before %s on stream %s (declaration order)", r.FirstName, r.SecondName, sa)
	}
	if !detail {
		if r.Reversed {
			return "remove what orders " + r.SecondName + " before " + r.FirstName + ", then " + generic
		}
		return generic
	}
	ops := p.Streams
	if r.Reversed {
		// The first wait on a before First whose clock covers Second.
		for g := v.opBase[a]; g < li; g++ {
			o := ops[a].Ops[v.opIndex(g)]
			if o.Kind == plan.OpWait && v.opHB(lj, g) {
				return fmt.Sprintf("stream %s waits on e%d before %s, which orders it after %s; remove that ordering, then %s",
					sa, o.Event, r.FirstName, r.SecondName, generic)
			}
		}
		return "remove what orders " + r.SecondName + " before " + r.FirstName + ", then " + generic
	}
	// A wait before Second on its stream whose event is recorded after
	// First, but issued only after the wait (the wait-before-record trap).
	for g := v.opBase[b]; g < lj; g++ {
		o := ops[b].Ops[v.opIndex(g)]
		if o.Kind != plan.OpWait {
			continue
		}
		for _, h := range v.records[o.Event] {
			if v.opIssue[h] > v.opIssue[g] && v.opHB(li, h) && !v.opHB(lj, h) {
				return fmt.Sprintf("the wait on e%d (stream %s) is issued before its record (stream %s, after %s): move the record earlier in the issue order, before the wait",
					o.Event, sb, streamLabel(p.Streams[v.opStream[h]].Name, int(v.opStream[h])), r.FirstName)
			}
		}
	}
	// A wait after Second that would have ordered it.
	for g := lj + 1; g < v.opBase[b+1]; g++ {
		o := ops[b].Ops[v.opIndex(g)]
		if o.Kind == plan.OpWait && v.opCaptured[g] >= 0 && v.opHB(li, v.opCaptured[g]) {
			return fmt.Sprintf("the wait on e%d on stream %s comes after %s: move it before %s's launch", o.Event, sb, r.SecondName, r.SecondName)
		}
	}
	return generic
}
