package contract

import "testing"

// Overlaps, Covers and Intersect on both sides of each boundary.
func TestRange(t *testing.T) {
	x := Range{Buffer: "x", Offset: 8, Bytes: 8} // x[8:16]
	for _, c := range []struct {
		o                Range
		overlaps, covers bool
		in               string
	}{
		{Range{"x", 0, 8}, false, false, ""},      // ends where x starts
		{Range{"x", 0, 9}, true, false, "x[8:9]"}, // one byte in
		{Range{"x", 16, 4}, false, false, ""},     // starts at x's end
		{Range{"x", 15, 4}, true, false, "x[15:16]"},
		{Range{"x", 8, 8}, true, true, "x[8:16]"},
		{Range{"x", 9, 7}, true, true, "x[9:16]"},
		{Range{"x", 8, 9}, true, false, "x[8:16]"},
		{Range{"x", 7, 9}, true, false, "x[8:16]"},
		{Range{"y", 8, 8}, false, false, ""}, // another buffer
	} {
		if got := x.Overlaps(c.o); got != c.overlaps {
			t.Errorf("%s.Overlaps(%s) = %v", x, c.o, got)
		}
		if got := c.o.Overlaps(x); got != c.overlaps {
			t.Errorf("%s.Overlaps(%s) = %v", c.o, x, got)
		}
		if got := x.Covers(c.o); got != c.covers {
			t.Errorf("%s.Covers(%s) = %v", x, c.o, got)
		}
		if c.overlaps {
			if got := x.Intersect(c.o).String(); got != c.in {
				t.Errorf("%s.Intersect(%s) = %s, want %s", x, c.o, got, c.in)
			}
		}
	}
}
