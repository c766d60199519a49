package sim

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// byteShadow is the shadow state without segments: each byte holds its
// last write and the reads since it that no later read follows, updated
// by the rule shadow.apply uses per segment. It is the oracle of
// TestShadowMatchesBytes.
type byteShadow []seg

func (bs byteShadow) apply(lo, hi int64, cur access, c []uint64) map[access][2]int64 {
	out := map[access][2]int64{}
	note := func(p access, b int64) {
		if r, ok := out[p]; ok {
			out[p] = [2]int64{min(r[0], b), max(r[1], b+1)}
			return
		}
		out[p] = [2]int64{b, b + 1}
	}
	for b := lo; b < hi; b++ {
		sg := &bs[b]
		if sg.hasW && !sg.w.before(c) {
			note(sg.w, b)
		}
		if cur.write {
			for _, r := range sg.reads {
				if !r.before(c) {
					note(r, b)
				}
			}
			sg.hasW, sg.w, sg.reads = true, cur, nil
			continue
		}
		var reads []access
		for _, r := range sg.reads {
			if !r.before(c) {
				reads = append(reads, r)
			}
		}
		sg.reads = append(reads, cur)
	}
	return out
}

// TestShadowMatchesBytes: on random accesses by three streams whose vector
// clocks join at random, the segmented shadow reports the same conflicts
// (each earlier access over the same hull of bytes) as the byte-by-byte
// oracle and ends in the same state byte for byte, with no two equal
// neighbouring segments.
func TestShadowMatchesBytes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const size, streams = 48, 3
		var sh shadow
		oracle := make(byteShadow, size)
		clocks := make([][]uint64, streams)
		for s := range clocks {
			clocks[s] = make([]uint64, streams)
		}
		n := rapid.IntRange(1, 40).Draw(t, "accesses")
		for k := range n {
			s := rapid.IntRange(0, streams-1).Draw(t, "stream")
			if rapid.Bool().Draw(t, "join") { // a wait: s learns another stream's clock
				o := rapid.IntRange(0, streams-1).Draw(t, "from")
				for i := range clocks[s] {
					clocks[s][i] = max(clocks[s][i], clocks[o][i])
				}
			}
			clocks[s][s]++
			lo := int64(rapid.IntRange(0, size-1).Draw(t, "lo"))
			hi := int64(rapid.IntRange(int(lo)+1, size).Draw(t, "hi"))
			cur := access{stream: s, vc: s, clock: clocks[s][s], stage: k, write: rapid.Bool().Draw(t, "write")}
			c := slices.Clone(clocks[s])
			got := map[access][2]int64{}
			for _, f := range sh.apply(lo, hi, cur, c) {
				got[f.prev] = [2]int64{f.lo, f.hi}
			}
			want := oracle.apply(lo, hi, cur, c)
			if len(got) != len(want) {
				t.Fatalf("access %d [%d,%d): conflicts %v, oracle %v", k, lo, hi, got, want)
			}
			for p, r := range want {
				if got[p] != r {
					t.Fatalf("access %d [%d,%d): conflict with %+v over %v, oracle %v", k, lo, hi, p, got[p], r)
				}
			}
			for i, sg := range sh.segs {
				if i > 0 && sh.segs[i-1].hi == sg.lo && sh.segs[i-1].sameState(&sg) {
					t.Fatalf("access %d: equal neighbouring segments %d and %d", k, i-1, i)
				}
				if i > 0 && sh.segs[i-1].hi > sg.lo {
					t.Fatalf("access %d: segments %d and %d overlap", k, i-1, i)
				}
			}
			for b := int64(0); b < size; b++ {
				var at *seg
				for i := range sh.segs {
					if sh.segs[i].lo <= b && b < sh.segs[i].hi {
						at = &sh.segs[i]
					}
				}
				o := &oracle[b]
				if at == nil {
					if o.hasW || len(o.reads) > 0 {
						t.Fatalf("access %d: byte %d in no segment, oracle has state", k, b)
					}
					continue
				}
				if at.hasW != o.hasW || at.hasW && at.w != o.w || !slices.Equal(at.reads, o.reads) {
					t.Fatalf("access %d: byte %d state differs from the oracle", k, b)
				}
			}
		}
	})
}
