package contract

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Violation is a rule of the contract that a launch breaks.
type Violation struct {
	Kernel string
	Rule   Rule
	// Field and Index locate it: the access Index of Field (FieldReads,
	// FieldWrites), or with Index -1 the whole field (FieldReads or
	// FieldWrites for RuleArity, FieldArgs for RuleArgMissing and
	// RuleArgOneOf, FieldKernel for RuleKernel).
	Field Field
	Index int
	Arg   string // RuleArgUnknown, RuleArgMissing, RuleArgValue: the argument
	Msg   string // what is wrong, naming the kernel and the ranges or argument
	Hint  string // what to do about it
}

func (v *Violation) Error() string { return v.Msg }

// CheckBuiltin checks a launch of the built-in kernel with the arguments
// args, reading reads and writing writes, against the contract. It returns
// nil, or a *Violation: the first rule the launch breaks (RuleKernel when
// kernel is not a built-in).
func CheckBuiltin(kernel string, args map[string]any, reads, writes []Range) error {
	b := Lookup(kernel)
	if b == nil {
		return &Violation{Kernel: kernel, Rule: RuleKernel, Field: FieldKernel, Index: -1,
			Msg:  fmt.Sprintf("kernel %q is not a built-in", kernel),
			Hint: "use a built-in (" + strings.Join(BuiltinNames(), ", ") + ") or a declared kernel"}
	}
	if vs := b.Check(args, reads, writes); len(vs) > 0 {
		return vs[0]
	}
	return nil
}

// Check returns every rule of b that a launch with the arguments args,
// reading reads and writing writes, breaks: CheckAccesses, then CheckArgs.
func (b *Builtin) Check(args map[string]any, reads, writes []Range) []*Violation {
	return append(b.CheckAccesses(reads, writes), b.CheckArgs(args)...)
}

// CheckAccesses returns every rule of b about accesses that a launch
// reading reads and writing writes breaks: the arity of each list, the
// alignment of each access, then (only when the arity is right) b.Rules in
// order.
func (b *Builtin) CheckAccesses(reads, writes []Range) []*Violation {
	var vs []*Violation
	add := func(rule Rule, f Field, i int, hint, format string, a ...any) {
		vs = append(vs, &Violation{Kernel: b.Name, Rule: rule, Field: f, Index: i, Msg: fmt.Sprintf(format, a...), Hint: hint})
	}
	lists := [2]struct {
		field Field
		noun  string
		rs    []Range
		arity Arity
	}{{FieldReads, "read", reads, b.Reads}, {FieldWrites, "write", writes, b.Writes}}
	arityOK := true
	for _, l := range lists {
		if !l.arity.Allows(len(l.rs)) {
			add(RuleArity, l.field, -1, b.Usage, "built-in %s takes %s, got %d", b.Name, l.arity.Text(l.noun), len(l.rs))
			arityOK = false
		}
	}
	for _, l := range lists {
		for i, r := range l.rs {
			switch {
			case r.Offset < 0 || r.Bytes <= 0:
				add(RuleAlign, l.field, i, "give every access an offset ≥ 0 and a length ≥ 4 bytes",
					"built-in %s needs accesses of at least %d bytes at offsets ≥ 0; %s is not", b.Name, WordBytes, r)
			case r.Offset%WordBytes != 0 || r.Bytes%WordBytes != 0:
				add(RuleAlign, l.field, i, "built-ins work on 4-byte words: make the offset and length multiples of 4",
					"built-in %s needs 4-byte aligned accesses, a multiple of 4 bytes long; %s is not", b.Name, r)
			}
		}
	}
	if !arityOK {
		return vs
	}
	ref := func(r Ref) Range {
		if r.Field == FieldReads {
			return reads[r.Index]
		}
		return writes[r.Index]
	}
	for _, rule := range b.Rules {
		switch rule.Rule {
		case RuleSameSize:
			x, y := ref(rule.A), ref(rule.B)
			if x.Bytes == y.Bytes {
				continue
			}
			if rule.A.Field == FieldReads && rule.B.Field == FieldWrites {
				add(rule.Rule, rule.B.Field, rule.B.Index, rule.Hint, "built-in %s reads %d bytes (%s) but writes %d (%s)", b.Name, x.Bytes, x, y.Bytes, y)
			} else {
				add(rule.Rule, rule.B.Field, rule.B.Index, rule.Hint, "built-in %s %s %s %s (%d bytes) and %s %s (%d bytes) of different sizes",
					b.Name, rule.A.Field, rule.A.Name, x, x.Bytes, rule.B.Name, y, y.Bytes)
			}
		case RuleSameRange:
			x, y := ref(rule.A), ref(rule.B)
			if x != y {
				add(rule.Rule, rule.B.Field, rule.B.Index, rule.Hint, "built-in %s %s %s, not the range %s it %s as %s",
					b.Name, rule.B.Field, y, x, rule.A.Field, rule.A.Name)
			}
		case RuleMinBytes:
			if x := ref(rule.A); x.Bytes < rule.Bytes {
				add(rule.Rule, rule.A.Field, rule.A.Index, rule.Hint, "built-in %s %s %d bytes (%s); it needs at least %d",
					b.Name, rule.A.Field, x.Bytes, x, rule.Bytes)
			}
		case RuleInPlace:
			if len(reads)*len(writes) <= smallPairs && !anyPair(reads, writes, differentOverlap) {
				continue
			}
			ws := newRangeIndex(writes)
			for i, r := range reads {
				if j := ws.differentOverlap(r); j >= 0 {
					add(rule.Rule, FieldReads, i, rule.Hint, "built-in %s reads %s, which overlaps its write %s without being the same range", b.Name, r, writes[j])
				}
			}
		case RuleDisjoint:
			if len(reads)*len(writes) <= smallPairs && !anyPair(writes, reads, Range.Overlaps) {
				continue
			}
			rs := newRangeIndex(reads)
			for j, w := range writes {
				if i := rs.overlap(w); i >= 0 {
					add(rule.Rule, FieldWrites, j, rule.Hint, "built-in %s writes %s, which overlaps its read %s", b.Name, w, reads[i])
				}
			}
		}
	}
	return vs
}

// smallPairs is the most access pairs CheckAccesses compares one by one
// before it builds a rangeIndex: most launches have a few accesses, and
// pass; a rule found broken is reported through the index, as for larger
// launches.
const smallPairs = 64

// anyPair reports whether rel(q, r) holds for some q of qs and r of rs.
func anyPair(qs, rs []Range, rel func(q, r Range) bool) bool {
	for _, q := range qs {
		for _, r := range rs {
			if rel(q, r) {
				return true
			}
		}
	}
	return false
}

// differentOverlap reports whether r overlaps q without being the same
// range (rangeIndex.differentOverlap's test).
func differentOverlap(q, r Range) bool {
	if q.Buffer != r.Buffer {
		return false
	}
	switch {
	case r.Offset < q.Offset:
		return r.End() > q.Offset
	case r.Offset == q.Offset:
		return r.Bytes != q.Bytes && r.Bytes > 0 && q.Bytes > 0
	}
	return r.Offset < q.End()
}

// rangeIndex answers overlap queries on a set of ranges in O(log n) each
// (so that a launch's reads against its writes cost O((r+w) log w), not
// r×w): the ranges sorted by buffer, offset and length, with the running
// maximum end within each buffer (a sweep over interval starts, as in
// de Berg et al., Computational Geometry, section 10.1).
type rangeIndex struct {
	rs     []Range
	order  []int   // indices of rs, sorted
	maxEnd []int64 // maxEnd[k]: the largest End of order[g..k], g the start of k's buffer
	argMax []int   // the index in rs of that range
}

func newRangeIndex(rs []Range) *rangeIndex {
	x := &rangeIndex{rs: rs, order: make([]int, len(rs)), maxEnd: make([]int64, len(rs)), argMax: make([]int, len(rs))}
	for i := range x.order {
		x.order[i] = i
	}
	slices.SortFunc(x.order, func(a, b int) int {
		ra, rb := rs[a], rs[b]
		if c := strings.Compare(ra.Buffer, rb.Buffer); c != 0 {
			return c
		}
		if ra.Offset != rb.Offset {
			return cmpInt(ra.Offset, rb.Offset)
		}
		return cmpInt(ra.Bytes, rb.Bytes)
	})
	for k, i := range x.order {
		x.maxEnd[k], x.argMax[k] = rs[i].End(), i
		if k > 0 && rs[x.order[k-1]].Buffer == rs[i].Buffer && x.maxEnd[k-1] > x.maxEnd[k] {
			x.maxEnd[k], x.argMax[k] = x.maxEnd[k-1], x.argMax[k-1]
		}
	}
	return x
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// search returns the first position whose range is in a buffer after
// buf, or in buf starting at or after off (at > off when after).
func (x *rangeIndex) search(buf string, off int64, after bool) int {
	lo, hi := 0, len(x.order)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		r := x.rs[x.order[m]]
		c := strings.Compare(r.Buffer, buf)
		if c > 0 || c == 0 && (r.Offset > off || !after && r.Offset == off) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// before returns the index of a range of q's buffer starting before off
// that ends after q.Offset, or -1.
func (x *rangeIndex) before(q Range, off int64) int {
	g := x.search(q.Buffer, math.MinInt64, false) // the buffer's first position
	k := x.search(q.Buffer, off, false)
	if k > g && x.maxEnd[k-1] > q.Offset {
		return x.argMax[k-1]
	}
	return -1
}

// overlap returns the index of a range that overlaps q, or -1.
func (x *rangeIndex) overlap(q Range) int {
	return x.before(q, q.End())
}

// differentOverlap returns the index of a range that overlaps q without
// being the same range, or -1.
func (x *rangeIndex) differentOverlap(q Range) int {
	if i := x.before(q, q.Offset); i >= 0 {
		return i // starts before q and reaches into it
	}
	p := x.search(q.Buffer, q.Offset, false)
	e := x.search(q.Buffer, q.Offset, true) // ranges starting at q.Offset are [p, e)
	if e > p {
		for _, k := range [2]int{p, e - 1} {
			if r := x.rs[x.order[k]]; r.Bytes != q.Bytes && r.Bytes > 0 && q.Bytes > 0 {
				return x.order[k]
			}
		}
	}
	if e < len(x.order) {
		if r := x.rs[x.order[e]]; r.Buffer == q.Buffer && r.Offset < q.End() {
			return x.order[e] // starts inside q
		}
	}
	return -1
}

// CheckArgs returns every rule of b about arguments that args breaks:
// unknown names and bad values (in name order), then required arguments
// absent, then b.OneOf. A name present in args counts as given whatever
// its value.
func (b *Builtin) CheckArgs(args map[string]any) []*Violation {
	var vs []*Violation
	var buf [4]string
	names := buf[:0]
	for name := range args {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := b.Arg(name)
		if s == nil {
			hint := "built-in " + b.Name + " takes no arguments"
			if len(b.Args) > 0 {
				names := make([]string, len(b.Args))
				for i, a := range b.Args {
					names[i] = a.Name
				}
				hint = "built-in " + b.Name + " takes: " + strings.Join(names, ", ")
			}
			vs = append(vs, &Violation{Kernel: b.Name, Rule: RuleArgUnknown, Field: FieldArgs, Index: -1, Arg: name,
				Msg: fmt.Sprintf("unknown argument %q for built-in %s", name, b.Name), Hint: hint})
			continue
		}
		if v := s.check(b.Name, args[name]); v != nil {
			vs = append(vs, v)
		}
	}
	for i := range b.Args {
		if s := &b.Args[i]; s.Required {
			if _, ok := args[s.Name]; !ok {
				vs = append(vs, missingViolation(b.Name, s))
			}
		}
	}
	if len(b.OneOf) > 0 {
		n := 0
		for _, name := range b.OneOf {
			if _, ok := args[name]; ok {
				n++
			}
		}
		if n != 1 {
			vs = append(vs, b.oneOfViolation())
		}
	}
	return vs
}

func missingViolation(kernel string, s *ArgSpec) *Violation {
	return &Violation{Kernel: kernel, Rule: RuleArgMissing, Field: FieldArgs, Index: -1, Arg: s.Name,
		Msg:  fmt.Sprintf("built-in %s needs the argument %s", kernel, s.Name),
		Hint: fmt.Sprintf("give it: args: {%s: %s}", s.Name, s.Example)}
}

func (b *Builtin) oneOfViolation() *Violation {
	alts := make([]string, len(b.OneOf))
	for i, name := range b.OneOf {
		alts[i] = "args: " + b.exampleArgs(name)
	}
	return &Violation{Kernel: b.Name, Rule: RuleArgOneOf, Field: FieldArgs, Index: -1,
		Msg:  fmt.Sprintf("built-in %s needs exactly one of the arguments %s", b.Name, strings.Join(b.OneOf, ", ")),
		Hint: "give " + strings.Join(alts, " or ")}
}

// InBounds reports whether the byte range [offset, offset+bytes) lies in a
// buffer of size bytes: offset ≥ 0, bytes ≥ 0 and offset+bytes ≤ size,
// computed without overflow (offset ≤ size and bytes ≤ size−offset), so a
// range whose end would wrap int64 is outside. Every bounds check of an
// access (the plan file's validation, the executor, the simulator, the
// CUDA backend) goes through it.
func InBounds(offset, bytes, size int64) bool {
	return offset >= 0 && bytes >= 0 && size >= 0 && offset <= size && bytes <= size-offset
}
