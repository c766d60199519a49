package contract

import (
	"math/rand"
	"testing"
)

// The range index answers as the all-pairs loops it replaces.
func TestRangeIndexMatchesAllPairs(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	gen := func(n int) []Range {
		rs := make([]Range, n)
		for i := range rs {
			rs[i] = Range{Buffer: string(rune('a' + rng.Intn(2))), Offset: int64(rng.Intn(16)), Bytes: int64(rng.Intn(6))}
		}
		return rs
	}
	for trial := 0; trial < 20000; trial++ {
		reads, writes := gen(rng.Intn(6)), gen(rng.Intn(6))
		ws, rs := newRangeIndex(writes), newRangeIndex(reads)
		for _, r := range reads {
			want := false
			for _, w := range writes {
				want = want || r.Overlaps(w) && (r.Offset != w.Offset || r.Bytes != w.Bytes)
			}
			j := ws.differentOverlap(r)
			if got := j >= 0; got != want || got && !(r.Overlaps(writes[j]) && writes[j] != r) {
				t.Fatalf("differentOverlap(%v) in %v = %d, want %v", r, writes, j, want)
			}
		}
		for _, w := range writes {
			want := false
			for _, r := range reads {
				want = want || r.Overlaps(w)
			}
			i := rs.overlap(w)
			if got := i >= 0; got != want || got && !reads[i].Overlaps(w) {
				t.Fatalf("overlap(%v) in %v = %d, want %v", w, reads, i, want)
			}
		}
	}
}
