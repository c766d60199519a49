package verify

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/plan"
)

// launchAliases returns an error for the first stage that reads or writes
// two different buffers sharing bytes of the arena, at least one of them
// written: a copy from t1 into t2 whose arena offsets overlap, say. No
// order between launches can separate a launch from itself, so this is a
// fault of the arena layout, not a race a wait would fix; the verifier's
// other checks order accesses of different launches only. (Accesses of
// one buffer within a launch follow the kernel's in-place rules, which
// the contract checks.) The error is a *PlanError naming the stage's
// access. Cost: O(a log a) for the a arena accesses of each stage.
func launchAliases(p *plan.Plan) error {
	off := make([]int64, len(p.Buffers)) // per buffer: its arena address, or -1
	used := false
	for i := range p.Buffers {
		off[i] = -1
		if p.Buffers[i].ArenaOffset != nil {
			off[i], used = p.Buffers[i].ArenaAt(), true
		}
	}
	if !used {
		return nil
	}
	ids := plan.AccessBuffers(p)
	at := 0 // index in ids of the stage's first access
	type span struct {
		lo, hi int64
		buf    string
		bi     int32 // index in p.Buffers
		write  bool
		j      int // index in Reads or Writes
		a      plan.Access
	}
	var spans []span
	for i := range p.Stages {
		st := &p.Stages[i]
		spans = spans[:0]
		for k, list := range [2][]plan.Access{st.Reads, st.Writes} {
			for j, a := range list {
				b := ids[at]
				at++
				if b < 0 || off[b] < 0 {
					continue
				}
				base := off[b]
				lo := base + a.Offset // both ≤ MaxBufferBytes (ValidateShape): no overflow
				spans = append(spans, span{lo, lo + a.Bytes, a.Buffer, b, k == 1, j, a})
			}
		}
		if len(spans) < 2 {
			continue
		}
		slices.SortStableFunc(spans, func(x, y span) int { return cmp.Compare(x.lo, y.lo) })
		// Per kind (any access, writes only), the two earlier spans reaching
		// farthest whose buffers differ: an overlap with a third buffer is
		// seen through one of them.
		var reach [2][2]int // indices into spans, −1: none
		for k := range reach {
			reach[k] = [2]int{-1, -1}
		}
		note := func(r *[2]int, x int) { // r: distinct buffers, farthest first
			hi := func(y int) int64 {
				if y < 0 {
					return -1
				}
				return spans[y].hi
			}
			switch s := spans[x]; {
			case r[0] >= 0 && spans[r[0]].buf == s.buf:
				if s.hi > hi(r[0]) {
					r[0] = x
				}
			case r[1] >= 0 && spans[r[1]].buf == s.buf:
				if s.hi > hi(r[1]) {
					r[1] = x
				}
				if hi(r[1]) > hi(r[0]) {
					r[0], r[1] = r[1], r[0]
				}
			case s.hi > hi(r[0]):
				r[0], r[1] = x, r[0]
			case s.hi > hi(r[1]):
				r[1] = x
			}
		}
		for x, s := range spans {
			against := reach[1] // a read conflicts with earlier writes
			if s.write {
				against = reach[0] // a write with any earlier access
			}
			for _, y := range against {
				if y >= 0 && spans[y].buf != s.buf && spans[y].hi > s.lo {
					o := spans[y]
					path := fmt.Sprintf("stages[%d].%s[%d]", i, verb(s.write), s.j)
					return plan.ErrorAt(path, "stage %s %s %s[%d:%d] and %s %s[%d:%d], which share arena bytes [%d:%d] (arena offsets %d and %d): one launch cannot be ordered with itself, so the buffers must not share bytes (re-plan the spec)",
						st.Name, verb(s.write), s.buf, s.a.Offset, s.a.Offset+s.a.Bytes, verb(o.write), o.buf, o.a.Offset, o.a.Offset+o.a.Bytes,
						max(s.lo, o.lo), min(s.hi, o.hi), off[s.bi], off[o.bi])
				}
			}
			note(&reach[0], x)
			if s.write {
				note(&reach[1], x)
			}
		}
	}
	return nil
}

func verb(write bool) string {
	if write {
		return "writes"
	}
	return "reads"
}
