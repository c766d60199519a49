package contract

import "fmt"

// Range is the byte range [Offset, Offset+Bytes) of the buffer named
// Buffer: one read or write of a stage or a launch. It is the one byte-range
// type of dagrun: the spec's accesses (dag.Access, which adds a source
// position), the plan's accesses (plan.Access), the hazards between
// stages and the backends' launch arguments (executor.Arg.Range) all test
// overlap with Range.Overlaps. Its JSON is the plan file's access object
// ({"buffer", "offset", "bytes"}).
type Range struct {
	Buffer string `json:"buffer"`
	Offset int64  `json:"offset"` // bytes
	Bytes  int64  `json:"bytes"`  // bytes
}

// End is the first byte past r.
func (r Range) End() int64 { return r.Offset + r.Bytes }

// Overlaps reports whether r and o share at least one byte of the same
// buffer: same Buffer, r.Offset < o.End() and o.Offset < r.End().
func (r Range) Overlaps(o Range) bool {
	return r.Buffer == o.Buffer && r.Offset < o.End() && o.Offset < r.End()
}

// Covers reports whether r includes every byte of o (same buffer).
func (r Range) Covers(o Range) bool {
	return r.Buffer == o.Buffer && r.Offset <= o.Offset && o.End() <= r.End()
}

// Intersect is the bytes of r's buffer that r and o both cover:
// [max(r.Offset, o.Offset), min(r.End(), o.End())). It is meaningful only
// when r.Overlaps(o) (otherwise Bytes ≤ 0).
func (r Range) Intersect(o Range) Range {
	lo, hi := max(r.Offset, o.Offset), min(r.End(), o.End())
	return Range{Buffer: r.Buffer, Offset: lo, Bytes: hi - lo}
}

// String is "buffer[offset:end]", YAML's slice notation.
func (r Range) String() string { return fmt.Sprintf("%s[%d:%d]", r.Buffer, r.Offset, r.End()) }
