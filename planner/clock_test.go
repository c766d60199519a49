package planner

import (
	"slices"
	"testing"
)

// TestDenseClocksJoin checks the copy on write and the known-already test
// of denseClocks.join: a shared clock is never written, an unshared one is
// written in place, and a clock that knows the entry already is left as it is.
func TestDenseClocksJoin(t *testing.T) {
	d := newDenseClocks(3)
	if got := d.at(0); !slices.Equal(got, []int32{0, 0, 0}) {
		t.Fatalf("clock 0 = %v, want zeros", got)
	}
	src := d.alloc()
	copy(d.at(src), []int32{0, 4, 2})
	h, shared := int32(0), true
	if !d.join(&h, &shared, src, 1, 5) {
		t.Fatal("join into an empty clock merged nothing")
	}
	if h == 0 || shared {
		t.Fatalf("join of shared clock 0: clock %d, shared %v; want a new unshared clock", h, shared)
	}
	if got := d.at(0); !slices.Equal(got, []int32{0, 0, 0}) {
		t.Fatalf("shared clock 0 written: %v", got)
	}
	if got := d.at(h); !slices.Equal(got, []int32{0, 5, 2}) {
		t.Fatalf("joined clock = %v, want [0 5 2]", got)
	}
	// Known already: entry 1 is 5; v = 5 is known (both sides of the test).
	if d.join(&h, &shared, src, 1, 5) {
		t.Fatal("join of an entry the clock knows merged")
	}
	before := h
	if !d.join(&h, &shared, src, 1, 6) {
		t.Fatal("join of an entry one past the clock's merged nothing")
	}
	if h != before {
		t.Fatalf("join of an unshared clock moved it from %d to %d, want in place", before, h)
	}
	if got := d.at(h); !slices.Equal(got, []int32{0, 6, 2}) {
		t.Fatalf("joined clock = %v, want [0 6 2]", got)
	}
	// Many clocks: past one chunk, earlier clocks keep their entries.
	for range 3 << d.bits {
		x := d.alloc()
		copy(d.at(x), []int32{1, 1, 1})
	}
	if got := d.at(h); !slices.Equal(got, []int32{0, 6, 2}) {
		t.Fatalf("clock %d after more chunks = %v, want [0 6 2]", h, got)
	}
	// reset keeps the first clocks and clock 0's zeros.
	d.reset(h + 1)
	if d.n != h+1 || !slices.Equal(d.at(0), []int32{0, 0, 0}) || !slices.Equal(d.at(h), []int32{0, 6, 2}) {
		t.Fatalf("after reset(%d): n %d, clock 0 %v, clock %d %v", h+1, d.n, d.at(0), h, d.at(h))
	}
}
