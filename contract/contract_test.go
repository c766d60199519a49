package contract

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestTable checks the table's own consistency: unique names, references
// to accesses every allowed launch has, argument names, hints and usages.
func TestTable(t *testing.T) {
	want := []string{BuiltinFill, BuiltinCopy, BuiltinScale, BuiltinAxpy, BuiltinMix, BuiltinSpin, BuiltinChecksum, BuiltinAllReduce}
	if got := BuiltinNames(); !slices.Equal(got, want) {
		t.Fatalf("BuiltinNames() = %v, want %v", got, want)
	}
	for _, b := range Builtins() {
		if Lookup(b.Name) != b || !IsBuiltin(b.Name) {
			t.Errorf("Lookup(%s) is not its table entry", b.Name)
		}
		if b.Usage == "" || b.Doc == "" {
			t.Errorf("%s: no usage or doc", b.Name)
		}
		if b.Reads.Min < 0 || b.Writes.Min < 0 || (b.Reads.Max >= 0 && b.Reads.Max < b.Reads.Min) || (b.Writes.Max >= 0 && b.Writes.Max < b.Writes.Min) {
			t.Errorf("%s: bad arity %v %v", b.Name, b.Reads, b.Writes)
		}
		for _, r := range b.Rules {
			if r.Hint == "" {
				t.Errorf("%s: rule %s has no hint", b.Name, r.Rule)
			}
			switch r.Rule {
			case RuleSameSize, RuleSameRange:
				checkRef(t, b, r.A)
				checkRef(t, b, r.B)
			case RuleMinBytes:
				checkRef(t, b, r.A)
				if r.Bytes <= 0 {
					t.Errorf("%s: min-bytes rule of %d bytes", b.Name, r.Bytes)
				}
			case RuleInPlace, RuleDisjoint:
			default:
				t.Errorf("%s: rule %q is not an access rule", b.Name, r.Rule)
			}
		}
		seen := map[string]bool{}
		for _, a := range b.Args {
			if seen[a.Name] || a.Name == "" {
				t.Errorf("%s: argument %q empty or listed twice", b.Name, a.Name)
			}
			seen[a.Name] = true
			switch a.Kind {
			case KindFloat32, KindFloat, KindInt, KindUint32:
			case KindEnum:
				if len(a.Enum) == 0 {
					t.Errorf("%s: enum argument %s lists no values", b.Name, a.Name)
				}
			default:
				t.Errorf("%s: argument %s has kind %q", b.Name, a.Name, a.Kind)
			}
			if a.Example == "" || a.Doc == "" {
				t.Errorf("%s: argument %s has no example or doc", b.Name, a.Name)
			}
		}
		for _, name := range b.OneOf {
			if b.Arg(name) == nil {
				t.Errorf("%s: OneOf names %s, which is not an argument", b.Name, name)
			}
		}
	}
	if got := HostKernels(); !slices.Equal(got, []string{BuiltinFill, BuiltinCopy, BuiltinScale, BuiltinSpin, BuiltinChecksum}) {
		t.Errorf("HostKernels() = %v", got)
	}
}

// checkRef checks that r names an access every launch b allows has.
func checkRef(t *testing.T, b *Builtin, r Ref) {
	t.Helper()
	min := b.Reads.Min
	if r.Field == FieldWrites {
		min = b.Writes.Min
	} else if r.Field != FieldReads {
		t.Errorf("%s: reference to %s", b.Name, r.Field)
	}
	if r.Index < 0 || r.Index >= min || r.Name == "" {
		t.Errorf("%s: reference %+v is not an access of every launch", b.Name, r)
	}
}

func rg(buf string, off, n int64) Range { return Range{Buffer: buf, Offset: off, Bytes: n} }

// TestViolations checks the rule, location and text of each kind of
// violation, including the ones only a launch built in Go can have.
func TestViolations(t *testing.T) {
	cases := []struct {
		name          string
		kernel        string
		args          map[string]any
		reads, writes []Range
		rule          Rule
		field         Field
		index         int
		msg           string
	}{
		{"unknown kernel", "gemm", nil, nil, nil, RuleKernel, FieldKernel, -1, `kernel "gemm" is not a built-in`},
		{"arity", BuiltinCopy, nil, nil, []Range{rg("y", 0, 8)}, RuleArity, FieldReads, -1, "built-in copy takes exactly 1 read, got 0"},
		{"arity at least", BuiltinMix, nil, nil, nil, RuleArity, FieldWrites, -1, "built-in mix takes at least 1 write, got 0"},
		{"negative offset", BuiltinMix, nil, nil, []Range{rg("y", -4, 8)}, RuleAlign, FieldWrites, 0, "needs accesses of at least 4 bytes at offsets ≥ 0; y[-4:4] is not"},
		{"empty access", BuiltinSpin, nil, []Range{rg("x", 0, 0)}, nil, RuleAlign, FieldReads, 0, "x[0:0] is not"},
		{"unaligned", BuiltinMix, nil, nil, []Range{rg("y", 0, 8), rg("y", 10, 4)}, RuleAlign, FieldWrites, 1, "4-byte aligned accesses, a multiple of 4 bytes long; y[10:14] is not"},
		{"same size", BuiltinCopy, nil, []Range{rg("x", 0, 8)}, []Range{rg("y", 0, 16)}, RuleSameSize, FieldWrites, 0, "built-in copy reads 8 bytes (x[0:8]) but writes 16 (y[0:16])"},
		{"same size reads", BuiltinAxpy, map[string]any{"a": 1}, []Range{rg("x", 0, 8), rg("y", 0, 16)}, []Range{rg("y", 0, 16)}, RuleSameSize, FieldReads, 1,
			"built-in axpy reads x x[0:8] (8 bytes) and y y[0:16] (16 bytes) of different sizes"},
		{"same range", BuiltinAxpy, map[string]any{"a": 1}, []Range{rg("x", 0, 8), rg("y", 0, 8)}, []Range{rg("y", 8, 8)}, RuleSameRange, FieldWrites, 0,
			"built-in axpy writes y[8:16], not the range y[0:8] it reads as y"},
		{"in place", BuiltinMix, nil, []Range{rg("x", 0, 8), rg("y", 0, 16)}, []Range{rg("y", 8, 8)}, RuleInPlace, FieldReads, 1,
			"built-in mix reads y[0:16], which overlaps its write y[8:16] without being the same range"},
		{"in place, same offset, shorter read", BuiltinMix, nil, []Range{rg("y", 0, 8)}, []Range{rg("y", 0, 16)}, RuleInPlace, FieldReads, 0,
			"built-in mix reads y[0:8], which overlaps its write y[0:16] without being the same range"},
		{"in place, same offset, longer read", BuiltinMix, nil, []Range{rg("y", 0, 16)}, []Range{rg("y", 0, 8)}, RuleInPlace, FieldReads, 0,
			"built-in mix reads y[0:16], which overlaps its write y[0:8] without being the same range"},
		{"disjoint", BuiltinChecksum, nil, []Range{rg("x", 0, 64)}, []Range{rg("x", 56, 8)}, RuleDisjoint, FieldWrites, 0,
			"built-in checksum writes x[56:64], which overlaps its read x[0:64]"},
		{"min bytes", BuiltinChecksum, nil, []Range{rg("x", 0, 64)}, []Range{rg("s", 0, 4)}, RuleMinBytes, FieldWrites, 0,
			"built-in checksum writes 4 bytes (s[0:4]); it needs at least 8"},
		{"unknown arg", BuiltinCopy, map[string]any{"a": 1}, []Range{rg("x", 0, 8)}, []Range{rg("y", 0, 8)}, RuleArgUnknown, FieldArgs, -1, `unknown argument "a" for built-in copy`},
		{"missing arg", BuiltinScale, nil, []Range{rg("x", 0, 8)}, []Range{rg("y", 0, 8)}, RuleArgMissing, FieldArgs, -1, "built-in scale needs the argument a"},
		{"one of", BuiltinFill, map[string]any{"value": 1, "bits": 1}, nil, []Range{rg("y", 0, 8)}, RuleArgOneOf, FieldArgs, -1, "built-in fill needs exactly one of the arguments value, bits"},
		{"uint32", BuiltinFill, map[string]any{"bits": uint64(1 << 40)}, nil, []Range{rg("y", 0, 8)}, RuleArgValue, FieldArgs, -1, "argument bits must be an integer in [0, 4294967295], got 1099511627776"},
		{"int type", BuiltinMix, map[string]any{"max_words": []int{1}}, nil, []Range{rg("y", 0, 8)}, RuleArgValue, FieldArgs, -1, "argument max_words must be a positive integer, got a []int"},
		{"uint64 past int64", BuiltinMix, map[string]any{"max_words": uint64(math.MaxUint64)}, nil, []Range{rg("y", 0, 8)}, RuleArgValue, FieldArgs, -1, "max_words must be a positive integer"},
		{"float32", BuiltinScale, map[string]any{"a": float64(math.MaxFloat64)}, []Range{rg("x", 0, 8)}, []Range{rg("y", 0, 8)}, RuleArgValue, FieldArgs, -1, "argument a = 1.7976931348623157e+308 overflows float32"},
		{"not finite", BuiltinSpin, map[string]any{"us": math.Inf(1)}, nil, nil, RuleArgValue, FieldArgs, -1, "argument us must be a finite number, got +Inf"},
		{"NaN", BuiltinMix, map[string]any{"spin_us": math.NaN()}, nil, []Range{rg("y", 0, 8)}, RuleArgValue, FieldArgs, -1, "argument spin_us must be a finite number, got NaN"},
		{"min", BuiltinMix, map[string]any{"spin_us": -0.5}, nil, []Range{rg("y", 0, 8)}, RuleArgValue, FieldArgs, -1, "argument spin_us must be ≥ 0, got -0.5"},
		{"bool", BuiltinSpin, map[string]any{"us": true}, nil, nil, RuleArgValue, FieldArgs, -1, "argument us must be a number, got the boolean true"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckBuiltin(c.kernel, c.args, c.reads, c.writes)
			var v *Violation
			if !errors.As(err, &v) {
				t.Fatalf("CheckBuiltin = %v, want a *Violation", err)
			}
			if v.Rule != c.rule || v.Field != c.field || v.Index != c.index || v.Kernel != c.kernel {
				t.Errorf("violation %+v, want rule %s at %s %d", v, c.rule, c.field, c.index)
			}
			if !strings.Contains(v.Msg, c.msg) || v.Error() != v.Msg {
				t.Errorf("message %q does not contain %q", v.Msg, c.msg)
			}
			if v.Hint == "" {
				t.Errorf("no hint: %+v", v)
			}
		})
	}
}

// TestCheckAll checks that Check reports every broken rule, arity first,
// and skips the rules between accesses when the arity is wrong.
func TestCheckAll(t *testing.T) {
	b := Lookup(BuiltinAxpy)
	vs := b.Check(map[string]any{"b": 1}, []Range{rg("x", 2, 8)}, []Range{rg("y", 0, 12)})
	var rules []Rule
	for _, v := range vs {
		rules = append(rules, v.Rule)
	}
	if want := []Rule{RuleArity, RuleAlign, RuleArgUnknown, RuleArgMissing}; !slices.Equal(rules, want) {
		t.Errorf("rules %v, want %v", rules, want)
	}
	if err := CheckBuiltin(BuiltinFill, map[string]any{"bits": 2.0}, nil, []Range{rg("y", 0, 4)}); err != nil {
		t.Errorf("fill with integral float bits: %v", err)
	}
	if err := CheckBuiltin(BuiltinAxpy, map[string]any{"a": 2.5}, []Range{rg("x", 0, 8), rg("y", 4, 8)}, []Range{rg("y", 4, 8)}); err != nil {
		t.Errorf("valid axpy: %v", err)
	}
}

func TestAccessors(t *testing.T) {
	if w, err := FillWord(map[string]any{"bits": 0xdeadbeef}); err != nil || w != 0xdeadbeef {
		t.Errorf("FillWord(bits) = %#x, %v", w, err)
	}
	if w, err := FillWord(map[string]any{"bits": float64(0xdeadbeef), "value": 1.0}); err != nil || w != 0xdeadbeef {
		t.Errorf("FillWord(bits and value) = %#x, %v; want bits", w, err)
	}
	if w, err := FillWord(map[string]any{"value": json.Number("1.5")}); err != nil || w != math.Float32bits(1.5) {
		t.Errorf("FillWord(value) = %#x, %v", w, err)
	}
	var v *Violation
	if _, err := FillWord(nil); !errors.As(err, &v) || v.Rule != RuleArgOneOf {
		t.Errorf("FillWord(nil) = %v, want a one-of violation", err)
	}
	if _, err := FillWord(map[string]any{"bits": -1}); !errors.As(err, &v) || v.Rule != RuleArgValue || v.Arg != "bits" {
		t.Errorf("FillWord(bits -1) = %v", err)
	}
	if a, err := ScaleFactor(map[string]any{"a": 0.1}); err != nil || a != float32(0.1) {
		t.Errorf("ScaleFactor = %v, %v", a, err)
	}
	if _, err := ScaleFactor(nil); !errors.As(err, &v) || v.Rule != RuleArgMissing || !strings.Contains(v.Msg, "scale or axpy") {
		t.Errorf("ScaleFactor(nil) = %v", err)
	}
	if n, err := MixMaxWords(nil); err != nil || n != math.MaxInt64 {
		t.Errorf("MixMaxWords(nil) = %d, %v", n, err)
	}
	if n, err := MixMaxWords(map[string]any{"max_words": 5.0}); err != nil || n != 5 {
		t.Errorf("MixMaxWords(5.0) = %d, %v", n, err)
	}
	if _, err := MixMaxWords(map[string]any{"max_words": 0}); err == nil {
		t.Errorf("MixMaxWords(0) passes")
	}
	for _, c := range []struct {
		kernel   string
		args     map[string]any
		duration float64
		want     float64
	}{
		{BuiltinSpin, map[string]any{"us": 7}, 3, 7},
		{BuiltinSpin, nil, 3, 3},
		{BuiltinSpin, nil, -3, 0},
		{BuiltinMix, map[string]any{"spin_us": 2.5}, 9, 2.5},
		{BuiltinMix, nil, 9, 0},
		{BuiltinCopy, map[string]any{"us": 7}, 9, 0},
	} {
		if got, err := SpinUS(c.kernel, c.args, c.duration); err != nil || got != c.want {
			t.Errorf("SpinUS(%s, %v, %v) = %v, %v; want %v", c.kernel, c.args, c.duration, got, err, c.want)
		}
	}
	if _, err := SpinUS(BuiltinSpin, map[string]any{"us": -1}, 0); err == nil {
		t.Errorf("SpinUS(us -1) passes")
	}
	if f, ok, err := ArgFloat(map[string]any{"n": uint32(7)}, "n"); f != 7 || !ok || err != nil {
		t.Errorf("ArgFloat = %v %v %v", f, ok, err)
	}
	if _, ok, err := ArgFloat(map[string]any{"n": "x"}, "n"); !ok || err == nil {
		t.Errorf("ArgFloat(string) = %v, %v", ok, err)
	}
	if _, ok, err := ArgFloat(nil, "n"); ok || err != nil {
		t.Errorf("ArgFloat(absent) = %v, %v", ok, err)
	}
}

func TestChecksum(t *testing.T) {
	data := make([]byte, 4*5+3)
	for i := range data {
		data[i] = byte(i*37 + 1)
	}
	var sum, hash uint32
	for i := range 5 {
		w := binary.LittleEndian.Uint32(data[4*i:])
		sum += w
		hash ^= Mix32(w ^ uint32(i)*0x9E3779B9)
	}
	if s, h := Checksum(data); s != sum || h != hash {
		t.Errorf("Checksum = %#x %#x, want %#x %#x", s, h, sum, hash)
	}
	if Mix32(0) != 0 || Mix32(1) == 1 || MixSeed(0, 0) == MixSeed(0, 1) {
		t.Errorf("Mix32/MixSeed lost their mixing")
	}
}

func TestVocabulary(t *testing.T) {
	for _, w := range Wheres {
		if got, err := ParseWhere(string(w)); got != w || err != nil || !w.Valid() {
			t.Errorf("ParseWhere(%s) = %v, %v", w, got, err)
		}
	}
	if _, err := ParseWhere("host"); err == nil || !strings.Contains(err.Error(), `where "host", want device, host_pinned or host_pageable`) {
		t.Errorf("ParseWhere(host) = %v", err)
	}
	for _, r := range Roles {
		if !r.Valid() {
			t.Errorf("%s not valid", r)
		}
	}
	for _, k := range InitKinds {
		if !k.Valid() {
			t.Errorf("%s not valid", k)
		}
	}
	for _, m := range AllocModes {
		if !m.Valid() {
			t.Errorf("%s not valid", m)
		}
	}
	if Role("").Valid() || InitKind("").Valid() || AllocMode("").Valid() || Where("").Valid() {
		t.Errorf("the empty string is valid")
	}
}

// TestParamBitsExact: 64-bit integer parameters keep every bit from every
// form a plan or spec gives them in, and values a float64 cannot hold
// exactly, or outside the type, are refused.
func TestParamBitsExact(t *testing.T) {
	for _, c := range []struct {
		typ  string
		v    any
		want uint64
	}{
		{"i64", json.Number("9007199254740993"), 9007199254740993},
		{"i64", json.Number("9223372036854775807"), math.MaxInt64},
		{"i64", json.Number("-9223372036854775808"), 1 << 63},
		{"i64", int64(math.MaxInt64), math.MaxInt64},
		{"i64", int(-1), math.MaxUint64},
		{"u64", json.Number("18446744073709551615"), math.MaxUint64},
		{"u64", uint64(math.MaxUint64), math.MaxUint64},
		{"u64", 9007199254740992.0, 1 << 53},
		{"u32", json.Number("4294967295"), math.MaxUint32},
		{"i32", -1, math.MaxUint32},
		{"f32", 1.5, uint64(math.Float32bits(1.5))},
		{"f64", json.Number("0.1"), math.Float64bits(0.1)},
	} {
		got, err := ParamBits(map[string]any{"n": c.v}, "n", c.typ)
		if err != nil || got != c.want {
			t.Errorf("ParamBits(%T %v, %s) = %#x, %v; want %#x", c.v, c.v, c.typ, got, err, c.want)
		}
	}
	for _, c := range []struct {
		typ string
		v   any
	}{
		{"i64", 9007199254740994.0},                 // integral, but beyond 2^53: maybe not what was written
		{"i64", float64(math.MaxInt64)},             // 2^63 as a float: INT64_MAX would wrap to INT64_MIN
		{"i64", json.Number("9223372036854775808")}, // 2^63
		{"u64", -1},
		{"u64", json.Number("18446744073709551616")},
		{"u32", json.Number("4294967296")},
		{"i32", 2147483648},
		{"i64", 1.5},
		{"i64", "7"},
		{"f32", 1e39},
		{"q8", 1},
	} {
		if got, err := ParamBits(map[string]any{"n": c.v}, "n", c.typ); err == nil {
			t.Errorf("ParamBits(%T %v, %s) = %#x, want an error", c.v, c.v, c.typ, got)
		}
	}
	if _, err := ParamBits(nil, "n", "i64"); err == nil {
		t.Errorf("ParamBits of a missing argument passes")
	}
}

// TestSpinBounded: spins longer than MaxSpinUS are refused, as arguments
// and as a spin's duration.
func TestSpinBounded(t *testing.T) {
	if _, err := SpinUS(BuiltinSpin, map[string]any{"us": 1e20}, 0); err == nil {
		t.Errorf("spin us 1e20 passes")
	}
	if _, err := SpinUS(BuiltinMix, map[string]any{"spin_us": MaxSpinUS + 1}, 0); err == nil {
		t.Errorf("mix spin_us above the limit passes")
	}
	if _, err := SpinUS(BuiltinSpin, nil, 1e20); err == nil {
		t.Errorf("spin for duration_us 1e20 passes")
	}
	if us, err := SpinUS(BuiltinSpin, map[string]any{"us": MaxSpinUS}, 0); err != nil || us != MaxSpinUS {
		t.Errorf("spin at the limit: %v, %v", us, err)
	}
}

// TestInBounds: both sides of each bound of [offset, offset+bytes) in a
// buffer of size bytes: a range ending exactly at the end is inside, one
// byte further is outside; the same at the start, for empty ranges and
// buffers, and for ends that would wrap int64.
func TestInBounds(t *testing.T) {
	const max = math.MaxInt64
	for _, c := range []struct {
		offset, bytes, size int64
		want                bool
	}{
		{0, 64, 64, true},   // the whole buffer
		{0, 65, 64, false},  // one byte past the end
		{16, 48, 64, true},  // ends exactly at the end
		{16, 49, 64, false}, // one byte past the end
		{17, 48, 64, false}, // shifted by one: one byte past
		{63, 1, 64, true},   // the last byte
		{63, 2, 64, false},
		{64, 0, 64, true}, // empty, at the end
		{64, 1, 64, false},
		{65, 0, 64, false}, // starts past the end
		{0, 0, 0, true},    // empty buffer, empty range
		{0, 1, 0, false},
		{-1, 1, 64, false}, // before the start
		{0, -1, 64, false},
		{0, 1, -1, false},
		{1, max, max, false}, // the end would wrap
		{max, 1, max, false},
		{max - 1, 1, max, true},
		{max, 0, max, true},
	} {
		if got := InBounds(c.offset, c.bytes, c.size); got != c.want {
			t.Errorf("InBounds(%d, %d, %d) = %v, want %v", c.offset, c.bytes, c.size, got, c.want)
		}
	}
}

// TestInPlaceSameOffset: the in-place rule's pairwise predicate at its
// same-offset boundary: the identical range is in place, a range at the
// same offset one word shorter or longer is a different range that
// overlaps, on either side; and a launch of each passes or breaks the
// rule accordingly, through the pairwise check (few accesses) and the
// range index (many).
func TestInPlaceSameOffset(t *testing.T) {
	for _, c := range []struct {
		q, r Range
		want bool
	}{
		{rg("y", 0, 16), rg("y", 0, 16), false},
		{rg("y", 0, 16), rg("y", 0, 12), true},
		{rg("y", 0, 16), rg("y", 0, 20), true},
		{rg("y", 4, 16), rg("y", 4, 12), true},
		{rg("y", 0, 16), rg("z", 0, 12), false},
		{rg("y", 0, 16), rg("y", 16, 4), false}, // adjacent
		{rg("y", 0, 16), rg("y", 12, 4), true},  // the last word
	} {
		for _, qr := range [2][2]Range{{c.q, c.r}, {c.r, c.q}} {
			if got := differentOverlap(qr[0], qr[1]); got != c.want {
				t.Errorf("differentOverlap(%v, %v) = %v, want %v", qr[0], qr[1], got, c.want)
			}
		}
	}
	mix := Lookup(BuiltinMix)
	for _, many := range []bool{false, true} {
		for _, c := range []struct {
			read, write Range
			ok          bool
		}{
			{rg("y", 0, 16), rg("y", 0, 16), true},
			{rg("y", 0, 12), rg("y", 0, 16), false},
			{rg("y", 0, 20), rg("y", 0, 16), false},
		} {
			reads, writes := []Range{c.read}, []Range{c.write}
			if many { // past smallPairs: the range index answers
				for i := range smallPairs {
					reads = append(reads, rg("r", int64(8*i), 4))
					writes = append(writes, rg("w", int64(8*i), 4))
				}
			}
			vs := mix.CheckAccesses(reads, writes)
			if got := len(vs) == 0; got != c.ok {
				t.Errorf("mix reads %v, writes %v (%d accesses): violations %v, want ok=%v", c.read, c.write, len(reads)+len(writes), vs, c.ok)
			}
		}
	}
}
