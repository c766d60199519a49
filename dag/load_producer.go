package dag

// The check of alloc: producer buffers' reads (part of the check phase,
// load_check.go).

import (
	"fmt"
	"slices"
	"sort"
)

// checkProducerReads reports, for each alloc: producer buffer, the first
// read (in declaration order, the order one stream runs the stages) of
// bytes that no earlier-declared stage writes: the buffer's contents before
// its first write are undefined (its first writer allocates it). A stage
// that reads and writes the same bytes reads them first. Accesses that did
// not resolve are reported where they are and skipped here. It costs
// O(a log a) for a accesses of producer buffers (unionRanges.add).
func (c *checker) checkProducerReads() {
	var written map[int]*unionRanges // producer buffer → bytes written so far
	for i := range c.s.Buffers {
		if b := &c.s.Buffers[i]; b.Alloc == AllocProducer && c.firstBuffer(i) {
			if written == nil {
				written = map[int]*unionRanges{}
			}
			written[i] = new(unionRanges)
		}
	}
	if written == nil {
		return
	}
	reported := map[int]bool{}
	for v := range c.s.Stages {
		st := &c.s.Stages[v]
		src := c.stageSrc.at(v)
		for j := range st.Reads {
			a := &st.Reads[j]
			if j >= len(src.reads) || src.reads[j].buf == 0 || a.Bytes <= 0 {
				continue
			}
			bi := int(src.reads[j].buf) - 1
			w := written[bi]
			if w == nil || reported[bi] || w.covers(a.Offset, a.End()) {
				continue
			}
			reported[bi] = true
			gap := "it"
			if lo, hi := w.firstGap(a.Offset, a.End()); lo > a.Offset || hi < a.End() {
				gap = fmt.Sprintf("bytes [%d:%d] of it", lo, hi)
			}
			c.errAt(a.Pos, "write those bytes in a stage declared before this one, or drop alloc: producer from the buffer (its bytes then start as its init, zeros by default)",
				"stage %s reads %s before any stage writes %s: buffer %s has alloc producer (its first writer allocates it), so its contents before that write are undefined", st.Name, a, gap, c.s.Buffers[bi].Name)
		}
		for j := range st.Writes {
			a := &st.Writes[j]
			if j >= len(src.writes) || src.writes[j].buf == 0 || a.Bytes <= 0 {
				continue
			}
			if w := written[int(src.writes[j].buf)-1]; w != nil {
				w.add(a.Offset, a.End())
			}
		}
	}
}

// unionRanges is a union of byte ranges [lo, hi): disjoint, not touching,
// sorted by lo.
type unionRanges [][2]int64

// add adds [lo, hi), merging the ranges it meets or touches: O(log n)
// to find them, O(n) to move the rest.
func (u *unionRanges) add(lo, hi int64) {
	r := *u
	i := sort.Search(len(r), func(k int) bool { return r[k][1] >= lo })
	j := i
	for j < len(r) && r[j][0] <= hi {
		lo, hi = min(lo, r[j][0]), max(hi, r[j][1])
		j++
	}
	*u = slices.Replace(r, i, j, [2]int64{lo, hi})
}

// covers reports whether [lo, hi) lies within one range of u.
func (u unionRanges) covers(lo, hi int64) bool {
	i := sort.Search(len(u), func(k int) bool { return u[k][1] > lo })
	return i < len(u) && u[i][0] <= lo && hi <= u[i][1]
}

// firstGap is the first range of bytes in [lo, hi) that u lacks (u does not
// cover [lo, hi)).
func (u unionRanges) firstGap(lo, hi int64) (int64, int64) {
	i := sort.Search(len(u), func(k int) bool { return u[k][1] > lo })
	if i < len(u) && u[i][0] <= lo {
		lo = u[i][1]
		i++
	}
	if i < len(u) && u[i][0] < hi {
		hi = u[i][0]
	}
	return lo, hi
}
