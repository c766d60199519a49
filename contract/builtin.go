package contract

import (
	"encoding/binary"
	"fmt"
)

// Built-in kernels. Their semantics are the contract every backend implements
// bit-exactly (the simulator in Go, the CUDA backend in PTX). Elements are
// 4-byte little-endian words; every access of a built-in must be a multiple
// of 4 bytes long and 4-byte aligned (WordBytes).
//
//	fill      writes: 1.  args: value (float, written as float32) or bits (uint32).
//	          Every word of the write range becomes the value.
//	copy      reads: 1, writes: 1, same Bytes. Byte copy; buffers may be device
//	          or host_pinned (device↔device, host↔device, device↔host).
//	scale     reads: x, writes: y, same Bytes. y[i] = float32(a × x[i]). args: a.
//	axpy      reads: x, y; writes: y (the same range as the read of y), same Bytes.
//	          y[i] = float32(float32(a × x[i]) + y[i]), never fused (no FMA). args: a.
//	mix       reads: 0..n, writes: 1..m. Each written word becomes a fixed integer
//	          hash of the stage's index in its spec and the words read (see MixSeed, Mix32):
//	            h = Mix32(MixSeed(stage, w) ^ i)
//	            for each read k in order: h = Mix32(h ^ in_k[i mod n_k])
//	            out_w[i] = h
//	          where w is the write's index, i the word index in the write range and
//	          n_k the number of words of read k. A read that overlaps a write of the
//	          same stage must be the identical range (in-place). args: spin_us
//	          (optional, float): also stay busy that long, as spin; max_words
//	          (optional, int > 0): only words i < max_words of each write range
//	          are written (the rest keep their contents), so a stage that stands
//	          for a large tensor costs little more than its spin.
//	spin      busy for args.us µs, or the stage's duration_us if us is absent.
//	          Reads and writes are allowed and only order the stage.
//	all_reduce reads: one per device, writes: as many, write i on the
//	          device of read i, every access the same size. args: op (sum).
//	          A spec's stage has two or more (the loader checks it); each
//	          rank the planner makes of it has one of each.
//	          A collective (NCCL's ncclAllReduce with ncclFloat32 and
//	          ncclSum): every write's word i becomes the float32 sum of word
//	          i of every read, added in rank order (rank 0 first). The
//	          planner lowers it to one rank stage per device
//	          (plan.Collective), numbered in device order whatever the
//	          order of the reads (rank 0 on the lowest device), so the sum
//	          is added in device order; each rank reads its read and writes
//	          its write.
//	checksum  reads: 1, writes: 1 of ≥ 8 bytes, not overlapping the read.
//	          out word 0 = wrapping sum of the words read; out word 1 = XOR over i
//	          of Mix32(word_i ^ (i × 0x9E3779B9)) (see Checksum). Other words of
//	          the write range are left unchanged.
//
// Copy, scale, axpy and mix work in place: a read that overlaps a write of
// the same launch must be the identical range.
const (
	BuiltinFill     = "fill"
	BuiltinCopy     = "copy"
	BuiltinScale    = "scale"
	BuiltinAxpy     = "axpy"
	BuiltinMix      = "mix"
	BuiltinSpin     = "spin"
	BuiltinChecksum = "checksum"
	// BuiltinAllReduce is the all-reduce collective (docs/spec.md,
	// "Collectives").
	BuiltinAllReduce = "all_reduce"
)

// Reductions of a collective (the all_reduce built-in's op argument).
const ReduceSum = "sum"

// WordBytes is the size of a built-in's element in bytes: every access of a
// built-in starts at a multiple of it and is a multiple of it long.
const WordBytes = 4

// Builtin is the contract of one built-in kernel: everything a launch of it
// must satisfy, as data. Builtin.Check enforces it.
type Builtin struct {
	Name   string
	Reads  Arity // how many reads it takes
	Writes Arity // how many writes it takes
	// Rules are the rules between its accesses, checked once Reads and
	// Writes allow the launch's counts.
	Rules []AccessRule
	// Args is its argument schema; any other argument is an error.
	Args []ArgSpec
	// OneOf, when set, names arguments of Args of which a launch gives
	// exactly one.
	OneOf []string
	// Host reports whether a host stage (stream: host) may run it on the CPU.
	Host  bool
	Usage string // an example in spec syntax, for hints
	Doc   string // what it computes, in one line
}

// Arity bounds a number of reads or writes.
type Arity struct {
	Min int
	Max int // -1: no upper bound
}

// Allows reports whether n is within a.
func (a Arity) Allows(n int) bool { return n >= a.Min && (a.Max < 0 || n <= a.Max) }

// Text says a in words for noun ("read", "write"): "exactly 1 read",
// "at least 1 write", "0 to 2 reads".
func (a Arity) Text(noun string) string {
	plural := func(n int) string {
		if n == 1 {
			return "1 " + noun
		}
		return fmt.Sprintf("%d %ss", n, noun)
	}
	switch {
	case a.Min == a.Max:
		return "exactly " + plural(a.Min)
	case a.Max < 0:
		return "at least " + plural(a.Min)
	}
	return fmt.Sprintf("%d to %d %ss", a.Min, a.Max, noun)
}

// Field is a part of a launch that a rule is about.
type Field string

// Fields of a launch.
const (
	FieldKernel Field = "kernel"
	FieldReads  Field = "reads"
	FieldWrites Field = "writes"
	FieldArgs   Field = "args"
)

// Ref names one access of a launch: read or write number Index, called
// Name (x, y) in the kernel's documentation.
type Ref struct {
	Field Field // FieldReads or FieldWrites
	Index int
	Name  string
}

// Read returns a Ref to read i, called name.
func Read(i int, name string) Ref { return Ref{Field: FieldReads, Index: i, Name: name} }

// Write returns a Ref to write i, called name.
func Write(i int, name string) Ref { return Ref{Field: FieldWrites, Index: i, Name: name} }

// Rule is one kind of rule of the contract; a Violation says which one a
// launch breaks.
type Rule string

// Rules of the contract.
const (
	RuleKernel     Rule = "kernel"      // the kernel is a built-in
	RuleArity      Rule = "arity"       // the number of reads and writes
	RuleAlign      Rule = "align"       // every access is WordBytes-aligned, a positive multiple of WordBytes long
	RuleSameSize   Rule = "same-size"   // two accesses have the same length
	RuleSameRange  Rule = "same-range"  // two accesses are the same byte range (axpy's y)
	RuleInPlace    Rule = "in-place"    // a read that overlaps a write is the identical range
	RuleDisjoint   Rule = "disjoint"    // no read overlaps a write
	RuleMinBytes   Rule = "min-bytes"   // an access is at least Bytes long
	RuleArgUnknown Rule = "arg-unknown" // every argument is one of the schema's
	RuleArgMissing Rule = "arg-missing" // every required argument is given
	RuleArgOneOf   Rule = "arg-one-of"  // exactly one of Builtin.OneOf is given
	RuleArgValue   Rule = "arg-value"   // each argument has its kind and bounds
)

// AccessRule is one rule between the accesses of a launch.
type AccessRule struct {
	// Rule is RuleSameSize or RuleSameRange (between A and B), RuleMinBytes
	// (A at least Bytes long), RuleInPlace or RuleDisjoint (every read
	// against every write).
	Rule  Rule
	A, B  Ref
	Bytes int64  // RuleMinBytes: the least length of A, in bytes
	Hint  string // what to do when the rule is broken
}

const inPlaceHint = "in place means the identical range; otherwise make the ranges disjoint"

// table is the contract of every built-in, in the order Builtins lists them.
var table = []Builtin{
	{
		Name:   BuiltinFill,
		Writes: Arity{1, 1},
		Args: []ArgSpec{
			{Name: "value", Kind: KindFloat32, Example: "1.5", Doc: "the value of every word, rounded to float32"},
			{Name: "bits", Kind: KindUint32, Example: "0x3fc00000", Doc: "the bit pattern of every word",
				Hint: "bits is the uint32 bit pattern of every word, e.g. 0x3fc00000"},
		},
		OneOf: []string{"value", "bits"},
		Host:  true,
		Usage: "fill: writes: [y], args: {value: 1.5} (or {bits: 0x3fc00000})",
		Doc:   "every word of the write becomes the value",
	},
	{
		Name:   BuiltinCopy,
		Reads:  Arity{1, 1},
		Writes: Arity{1, 1},
		Rules: []AccessRule{
			{Rule: RuleSameSize, A: Read(0, "x"), B: Write(0, "y"), Hint: "read and write the same number of bytes"},
			{Rule: RuleInPlace, Hint: inPlaceHint},
		},
		Host:  true,
		Usage: "copy: reads: [x], writes: [y], same size",
		Doc:   "byte copy; device or host_pinned on either side",
	},
	{
		Name:   BuiltinScale,
		Reads:  Arity{1, 1},
		Writes: Arity{1, 1},
		Rules: []AccessRule{
			{Rule: RuleSameSize, A: Read(0, "x"), B: Write(0, "y"), Hint: "read and write the same number of bytes"},
			{Rule: RuleInPlace, Hint: inPlaceHint},
		},
		Args:  []ArgSpec{argA},
		Host:  true,
		Usage: "scale: reads: [x], writes: [y], args: {a: 2.0}, same size",
		Doc:   "y[i] = float32(a × x[i])",
	},
	{
		Name:   BuiltinAxpy,
		Reads:  Arity{2, 2},
		Writes: Arity{1, 1},
		Rules: []AccessRule{
			{Rule: RuleSameSize, A: Read(0, "x"), B: Read(1, "y"), Hint: "x and y must be the same size"},
			{Rule: RuleSameRange, A: Read(1, "y"), B: Write(0, "y"), Hint: "axpy updates y in place: write exactly the range of the second read"},
			{Rule: RuleInPlace, Hint: inPlaceHint},
		},
		Args:  []ArgSpec{argA},
		Usage: "axpy: reads: [x, y], writes: [y], args: {a: 2.0}, same size",
		Doc:   "y[i] = float32(float32(a × x[i]) + y[i]), never fused",
	},
	{
		Name:   BuiltinMix,
		Reads:  Arity{0, -1},
		Writes: Arity{1, -1},
		Rules:  []AccessRule{{Rule: RuleInPlace, Hint: inPlaceHint}},
		Args: []ArgSpec{
			{Name: "spin_us", Kind: KindFloat, Min: 0, Max: MaxSpinUS, Unit: "µs", Example: "3", Doc: "also stay busy that long"},
			{Name: "max_words", Kind: KindInt, Min: 1, Unit: "words", Example: "64", Doc: "write only the first max_words words of each write range",
				Hint: "max_words is a word count ≥ 1; leave it out to write whole ranges"},
		},
		Usage: "mix: reads: [any...], writes: [at least one]",
		Doc:   "each written word becomes a hash of the stage's index and the words read",
	},
	{
		Name:   BuiltinSpin,
		Reads:  Arity{0, -1},
		Writes: Arity{0, -1},
		Args: []ArgSpec{
			{Name: "us", Kind: KindFloat, Min: 0, Max: MaxSpinUS, Unit: "µs", Example: "10", Doc: "how long to stay busy; the stage's duration_us when absent"},
		},
		Host:  true,
		Usage: "spin: args: {us: 10} or duration_us: 10",
		Doc:   "busy for us µs; its reads and writes only order it",
	},
	{
		Name:   BuiltinChecksum,
		Reads:  Arity{1, 1},
		Writes: Arity{1, 1},
		Rules: []AccessRule{
			{Rule: RuleMinBytes, A: Write(0, "sum"), Bytes: 8, Hint: "the checksum is two 4-byte words: write at least 8 bytes"},
			{Rule: RuleDisjoint, Hint: "write the checksum to bytes that are not read"},
		},
		Host:  true,
		Usage: "checksum: reads: [x], writes: [sum] with sum ≥ 8 bytes",
		Doc:   "word 0 = wrapping sum of the words read, word 1 = a position-dependent hash",
	},
	{
		Name:   BuiltinAllReduce,
		Reads:  Arity{1, -1},
		Writes: Arity{1, -1},
		Rules:  []AccessRule{{Rule: RuleInPlace, Hint: inPlaceHint}},
		Args: []ArgSpec{{Name: "op", Kind: KindEnum, Enum: []string{ReduceSum}, Required: true, Example: "sum",
			Doc: "the reduction"}},
		Usage: "all_reduce: reads: [g0, g1], writes: [g0, g1], args: {op: sum}: one float32 buffer per device",
		Doc:   "every write becomes the float32 sum of the reads (a collective over the reads' devices)",
	},
}

// argA is the factor of scale and axpy.
var argA = ArgSpec{Name: "a", Kind: KindFloat32, Required: true, Example: "2.0", Doc: "the factor, rounded to float32"}

// Builtins returns the contract of every built-in kernel, in the order
// fill, copy, scale, axpy, mix, spin, checksum, all_reduce. The entries are shared:
// callers must not modify them.
func Builtins() []*Builtin {
	out := make([]*Builtin, len(table))
	for i := range table {
		out[i] = &table[i]
	}
	return out
}

// Lookup returns the contract of the built-in kernel name, or nil when name
// is not a built-in. The entry is shared: callers must not modify it.
func Lookup(name string) *Builtin {
	for i := range table {
		if table[i].Name == name {
			return &table[i]
		}
	}
	return nil
}

// IsBuiltin reports whether name is a built-in kernel.
func IsBuiltin(name string) bool { return Lookup(name) != nil }

// BuiltinNames returns the built-in kernel names in table order.
func BuiltinNames() []string {
	out := make([]string, len(table))
	for i := range table {
		out[i] = table[i].Name
	}
	return out
}

// HostKernels returns the names of the built-ins a host stage may run
// (Builtin.Host), in table order.
func HostKernels() []string {
	var out []string
	for i := range table {
		if table[i].Host {
			out = append(out, table[i].Name)
		}
	}
	return out
}

// Arg returns the schema of b's argument name, or nil when b takes no such
// argument.
func (b *Builtin) Arg(name string) *ArgSpec {
	for i := range b.Args {
		if b.Args[i].Name == name {
			return &b.Args[i]
		}
	}
	return nil
}

// Mix32 is the 32-bit finalizer of MurmurHash3 (Appleby, fmix32): a bijection
// on uint32 with full avalanche. It is the mixing step of the mix built-in.
func Mix32(x uint32) uint32 {
	x ^= x >> 16
	x *= 0x85ebca6b
	x ^= x >> 13
	x *= 0xc2b2ae35
	x ^= x >> 16
	return x
}

// MixSeed is the per-(stage, write) seed of the mix built-in. stage is the
// stage's index in declaration order in the spec the user wrote (the
// stages the planner adds, placement's peer copies and a collective's
// ranks, do not shift it: plan.Plan.SeedIndex); write is the index of
// the write access.
func MixSeed(stage, write int) uint32 {
	return Mix32(uint32(stage)*0x9E3779B9 ^ 0x7F4A7C15 + uint32(write)*0x632BE5AB)
}

// Checksum returns the two words the checksum built-in writes for the
// bytes data (a whole number of little-endian words; a trailing partial
// word is ignored): the wrapping sum of the words and the XOR over i of
// Mix32(word_i ^ (i × 0x9E3779B9)).
func Checksum(data []byte) (sum, hash uint32) {
	for i := 0; i+WordBytes <= len(data); i += WordBytes {
		w := binary.LittleEndian.Uint32(data[i:])
		sum += w
		hash ^= Mix32(w ^ (uint32(i/WordBytes) * 0x9E3779B9))
	}
	return sum, hash
}
