package verify

import (
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/plan"
)

// verifyAccess is one read or write of a stage, in the segments of its
// buffer's address space (the buffer's bytes: accesses to different
// buffers that share arena bytes are arenaLifetimes' to check), 16 bytes.
type verifyAccess struct {
	// lo, hi: its segments [lo, hi) of its space (verifier.bufSpace of
	// its buffer), whose bytes are [bounds[lo], bounds[hi]) of the
	// space's bounds (verifier.accBytes).
	lo, hi int32
	stage  int32
	// bw is its buffer's index (< len(p.Buffers): p.Buffers'; then the
	// undeclared ones, verifier.bufName), times two, plus one for a write.
	bw int32
}

// buf is a's buffer index.
func (a *verifyAccess) buf() int32 { return a.bw >> 1 }

// write reports whether a writes.
func (a *verifyAccess) write() bool { return a.bw&1 != 0 }

// space is access a's address space.
func (v *verifier) space(a *verifyAccess) int32 { return v.bufSpace[a.bw>>1] }

// accBytes returns access a's bytes [lo, hi) in its space.
func (v *verifier) accBytes(a *verifyAccess) (lo, hi int64) {
	s := v.spaces[v.space(a)]
	return v.bounds[s.at+a.lo], v.bounds[s.at+a.hi]
}

// planBytes returns access k's bytes [lo, hi) in its space, as the plan
// gives them (its stage's reads, then writes).
func (v *verifier) planBytes(k int32) (lo, hi int64) {
	a := &v.acc[k]
	st := planStage(v.p, int(a.stage))
	j := int(k - v.accStart[a.stage])
	x := st.Writes
	if j < len(st.Reads) {
		x = st.Reads
	} else {
		j -= len(st.Reads)
	}
	return x[j].Offset, x[j].Offset + x[j].Bytes
}

type verifyLink struct{ acc, next int32 }

// verifySpace is one address space and its frontier, per elementary segment
// [bounds[k], bounds[k+1]).
// Space k's bounds are verifier.bounds[at:at+n], its n-1 segments'
// frontiers verifier.states[at-k:at-k+n-1] (the spaces before it have
// one segment fewer than bounds each); last is its last access, after
// which the sweep frees its frontiers.
type verifySpace struct{ at, n, last int32 }

// verifyState is the frontier of one segment. Segments may share one; a
// step changes a frontier in place only when no other segment holds it.
type verifyState struct {
	w []int32 // writes not happening-before a later write of the segment
	r []int32 // reads since the last write that they happen-before; at most one per stream (the latest in stream order)
	// byStream indexes r by stream when r is long (readOf).
	byStream map[int32]int32
	refs     int32 // segments holding this frontier
}

// stageCount is how many stages p has: len(p.Stages), or for a derived
// plan without them (UnrollDerived), its stages.
func stageCount(p *plan.Plan) int {
	if p.Base != nil {
		return p.BaseStages
	}
	return len(p.Stages)
}

// stage returns stage i of p, or for a derived plan without stages the
// stage of its base whose reads and writes stage i has (only those are
// its: Verify reads no other field of it before a race is found).
func planStage(p *plan.Plan, i int) *plan.Stage {
	if p.Base != nil {
		return &p.Base.Stages[i%len(p.Base.Stages)]
	}
	return &p.Stages[i]
}

// bufferCount is how many buffers p has: len(p.Buffers), or for a
// derived plan without them (UnrollDerived), its copies of its base's.
func bufferCount(p *plan.Plan) int {
	if p.Base != nil {
		return len(p.BufOrig)
	}
	return len(p.Buffers)
}

// buffer returns buffer i of p, or for a derived plan without buffers the
// base's buffer it is a copy of (Copies aside: Verify reads its name,
// bytes and arena address).
func planBuffer(p *plan.Plan, i int) *plan.Buffer {
	if p.Base != nil {
		return &p.Base.Buffers[p.BufOrig[i]]
	}
	return &p.Buffers[i]
}

// accesses collects every access in declaration order (per stage: reads,
// then writes) and builds the address spaces' segments.
func (v *verifier) accesses() error {
	p := v.p
	n := 0
	for i := range stageCount(p) {
		st := planStage(p, i)
		n += len(st.Reads) + len(st.Writes)
	}
	// An unrolled plan names each access's buffer by index (Plan.AccBuf):
	// then only undeclared names go through the map.
	hint := len(p.AccBuf) == n && p.AccBuf != nil && p.AccOwn
	nb := bufferCount(p)
	bufOf := map[string]int32{}
	if !hint {
		bufOf = make(map[string]int32, max(nb, n/8))
	}
	// Names serve only to report races, which a derived plan does not.
	named := !p.Derived
	v.accessBuffers(bufOf, hint, named)
	v.acc = make([]verifyAccess, 0, n)
	v.accStart = make([]int32, stageCount(p)+1)
	// Per space: its first and last access (at, last) and its accesses'
	// ends (n, two an access); varied marks the spaces whose accesses do
	// not all cover the same bytes. first holds each space's first
	// access's ends: the bounds of every space that is not varied.
	v.spaces = make([]verifySpace, 0, nb)
	first := make([]int64, 0, 2*nb)
	var varied []bool
	nvaried := 0
	for i := range stageCount(p) {
		st := planStage(p, i)
		v.accStart[i] = int32(len(v.acc))
		for k, list := range [2][]plan.Access{st.Reads, st.Writes} {
			for _, a := range list {
				if a.Offset < 0 || a.Bytes <= 0 {
					verb := [2]string{"reads", "writes"}[k]
					return fmt.Errorf("plan: stage %s %s %s[%d:%d]: want offset ≥ 0 and bytes > 0", st.Name, verb, a.Buffer, a.Offset, a.Offset+a.Bytes)
				}
				var b int32
				ok := false
				if hint && p.AccBuf[len(v.acc)] >= 0 {
					b, ok = p.AccBuf[len(v.acc)], true
				} else {
					b, ok = bufOf[a.Buffer]
				}
				if !ok {
					b = int32(len(v.bufSpace))
					bufOf[a.Buffer] = b
					if named {
						v.bufName = append(v.bufName, a.Buffer)
					}
					v.bufSpace = append(v.bufSpace, -1)
				}
				d := int32(len(v.acc))
				lo := a.Offset
				if v.bufSpace[b] < 0 {
					// Its space, at its first access: a buffer is a space
					// of its own (buffers of one name in an unrolled plan
					// without names, unroll, are distinct copies; buffers
					// sharing arena bytes are arenaLifetimes' to check).
					v.bufSpace[b] = int32(len(v.spaces))
					v.spaces = append(v.spaces, verifySpace{at: d, last: d})
					varied = append(varied, false)
					first = append(first, lo, lo+a.Bytes)
				}
				sp := v.bufSpace[b]
				// Segments 0 to 1 of its space: the first access's bytes
				// (set by segmentBounds for the spaces whose accesses vary).
				v.acc = append(v.acc, verifyAccess{stage: int32(i), bw: b<<1 | int32(k), lo: 0, hi: 1})
				s := &v.spaces[sp]
				s.n += 2
				s.last = d
				if !varied[sp] && (first[2*sp] != lo || first[2*sp+1] != lo+a.Bytes) {
					varied[sp] = true
					nvaried++
				}
			}
		}
	}
	v.accStart[stageCount(p)] = int32(len(v.acc))
	v.segmentBounds(first, varied, nvaried)
	v.segments = len(v.bounds) - len(v.spaces) // a segment fewer than bounds a space
	return nil
}

// accessBuffers numbers p's buffers: p.Buffers' by their index (the last
// of a name, in bufOf unless hint), then the undeclared ones a stage names
// (accesses adds those); a buffer's space is set at its first access.
// With named it keeps their names (v.bufName).
func (v *verifier) accessBuffers(bufOf map[string]int32, hint, named bool) {
	p := v.p
	nb := bufferCount(p)
	if named {
		v.bufName = make([]string, nb)
	}
	v.bufSpace = make([]int32, nb)
	for i := range nb {
		v.bufSpace[i] = -1
		if !hint || named {
			b := planBuffer(p, i)
			if !hint {
				bufOf[b.Name] = int32(i)
			}
			if named {
				v.bufName[i] = b.Name
			}
		}
	}
}

// segmentBounds sets each space's segment bounds: the sorted distinct ends
// of its accesses; a space whose accesses all cover the same bytes (most:
// buffers accessed whole) has those two, its first access's (first). The
// accesses of the nvaried varied spaces get their segment indices.
func (v *verifier) segmentBounds(first []int64, varied []bool, nvaried int) {
	if nvaried == 0 {
		v.bounds = first
		for sp := range v.spaces {
			v.spaces[sp].at, v.spaces[sp].n = 2*int32(sp), 2
		}
		return
	}
	at := int32(0)
	for sp, s := range v.spaces {
		if varied[sp] {
			at += s.n
		} else {
			at += 2
		}
	}
	v.bounds = make([]int64, at)
	at = 0
	for sp := range v.spaces {
		s := &v.spaces[sp]
		if varied[sp] {
			s.at, at, s.n = at, at+s.n, 0 // filled below
			continue
		}
		s.at, s.n = at, 2
		v.bounds[at], v.bounds[at+1] = first[2*sp], first[2*sp+1]
		at += 2
	}
	first = nil
	for k := range v.acc {
		a := &v.acc[k]
		if sp := v.space(a); varied[sp] {
			s := &v.spaces[sp]
			lo, hi := v.planBytes(int32(k))
			v.bounds[s.at+s.n], v.bounds[s.at+s.n+1] = lo, hi
			s.n += 2
		}
	}
	// Each varied space's distinct bounds, moved down to the end of
	// the previous space's.
	at = 0
	for k := range v.spaces {
		s := &v.spaces[k]
		b := v.bounds[s.at : s.at+s.n]
		if varied[k] {
			slices.Sort(b)
			b = slices.Compact(b)
		}
		copy(v.bounds[at:], b)
		s.at, s.n = at, int32(len(b))
		at += s.n
	}
	if int(at) < len(v.bounds)*3/4 {
		v.bounds = slices.Clone(v.bounds[:at])
	}
	v.bounds = v.bounds[:at]
	// The varied spaces' accesses in segment indices.
	for k := range v.acc {
		a := &v.acc[k]
		if sp := v.space(a); varied[sp] {
			s := v.spaces[sp]
			b := v.bounds[s.at : s.at+s.n]
			lo, hi := v.planBytes(int32(k))
			l, _ := slices.BinarySearch(b, lo)
			h, _ := slices.BinarySearch(b, hi)
			a.lo, a.hi = int32(l), int32(h)
		}
	}
}

// frontiers makes the sweep's tables: a frontier slot per segment, and
// per access the marks of the checks (and its shadow), made as the sweep
// begins (after the arena check, for a derived plan, whose tables are
// gone by then).
func (v *verifier) frontiers() {
	p, n := v.p, len(v.acc)
	v.states = make([]*verifyState, v.segments)
	// A derived plan's verdict is all that is asked (report): it keeps
	// no shadows, which only serve to list every race.
	v.noShadows = p.Derived
	lists := 4
	if v.noShadows {
		lists = 1
	}
	v.checked = make([]int32, lists*n)
	for k := range v.checked {
		v.checked[k] = -1
	}
	if !v.noShadows {
		v.checked, v.shadowed, v.joined, v.shadow = v.checked[:n], v.checked[n:2*n], v.checked[2*n:3*n], v.checked[3*n:]
		v.links = make([]verifyLink, 0, n)
	}
	v.raceIdx = map[[3]int32]int{}
}
