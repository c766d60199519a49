package contract

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ArgKind is the type of a built-in's argument.
type ArgKind string

// Argument kinds. Numbers may be given as any Go integer or float type or
// as a json.Number; an integer kind also accepts a float with an integral
// value.
const (
	KindFloat32 ArgKind = "float32" // a finite number within float32 range (±math.MaxFloat32); the kernel rounds it to float32
	KindFloat   ArgKind = "float"   // a finite number ≥ ArgSpec.Min
	KindInt     ArgKind = "int"     // an integer ≥ ArgSpec.Min that fits in int64
	KindUint32  ArgKind = "uint32"  // an integer in [0, 4294967295], a 32-bit pattern
	KindEnum    ArgKind = "enum"    // a string, one of ArgSpec.Enum
)

// ArgSpec is the schema of one argument of a built-in.
type ArgSpec struct {
	Name     string
	Kind     ArgKind
	Required bool    // a launch must give it
	Min      float64 // KindFloat, KindInt: the least value allowed (inclusive)
	Max      float64 // KindFloat: the largest value allowed (inclusive); 0: no bound but the kind's
	Unit     string  // the unit of the value ("µs", "words"), "" for none
	Example  string  // a value in spec syntax, for hints
	Doc      string
	Hint     string   // what to do about a bad value; "" for the kind's own hint
	Enum     []string // KindEnum: the values allowed
}

// number returns x as a float64 when it is a number.
func number(x any) (float64, bool) {
	switch x := x.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// integer returns x as an int64 when it is a number with an integral value
// that fits in int64. isNum reports whether x is a number at all.
func integer(x any) (v int64, ok, isNum bool) {
	switch x := x.(type) {
	case int:
		return int64(x), true, true
	case int8:
		return int64(x), true, true
	case int16:
		return int64(x), true, true
	case int32:
		return int64(x), true, true
	case int64:
		return x, true, true
	case uint:
		return int64(x), uint64(x) <= math.MaxInt64, true
	case uint8:
		return int64(x), true, true
	case uint16:
		return int64(x), true, true
	case uint32:
		return int64(x), true, true
	case uint64:
		return int64(x), x <= math.MaxInt64, true
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, true, true
		}
	}
	f, isNum := number(x)
	if !isNum || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
		return 0, false, isNum
	}
	return int64(f), true, true
}

// describe says what x is, for messages.
func describe(x any) string {
	switch x := x.(type) {
	case nil:
		return "no value"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case json.Number:
		return x.String()
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x)
	}
	if f, ok := number(x); ok {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return fmt.Sprintf("a %T", x)
}

// Want says what a value of s must be, for messages: "a positive
// integer", "an integer in [0, 4294967295]", "a number ≥ 0", "a number
// within float32 range".
func (s *ArgSpec) Want() string {
	switch {
	case s.Kind == KindUint32:
		return fmt.Sprintf("an integer in [0, %d]", uint32(math.MaxUint32))
	case s.Kind == KindInt && s.Min == 1:
		return "a positive integer"
	case s.Kind == KindInt:
		return fmt.Sprintf("an integer ≥ %v", s.Min)
	case s.Kind == KindFloat && s.Max > 0:
		return fmt.Sprintf("a number from %v to %v", s.Min, s.Max)
	case s.Kind == KindFloat:
		return fmt.Sprintf("a finite number ≥ %v", s.Min)
	case s.Kind == KindEnum:
		return "one of " + strings.Join(s.Enum, ", ")
	}
	return "a number within float32 range"
}

// Integer reports whether s takes an integer (KindInt, KindUint32).
func (s *ArgSpec) Integer() bool { return s.Kind == KindInt || s.Kind == KindUint32 }

// valueViolation returns the violation of argument s of kernel with msg,
// and hint unless s has its own.
func (s *ArgSpec) valueViolation(kernel, hint, format string, a ...any) *Violation {
	return &Violation{Kernel: kernel, Rule: RuleArgValue, Field: FieldArgs, Index: -1, Arg: s.Name,
		Msg: fmt.Sprintf(format, a...), Hint: cmp.Or(s.Hint, hint)}
}

// float returns x, the value of float argument s of kernel, checked
// against the schema.
func (s *ArgSpec) float(kernel string, x any) (float64, *Violation) {
	f, ok := number(x)
	switch {
	case !ok:
		return 0, s.valueViolation(kernel, "write a number", "argument %s must be a number, got %s", s.Name, describe(x))
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, s.valueViolation(kernel, "write a finite number", "argument %s must be a finite number, got %v", s.Name, f)
	case s.Kind == KindFloat32 && math.Abs(f) > math.MaxFloat32:
		return 0, s.valueViolation(kernel, "use a value within float32 range (±3.4e38)", "argument %s = %v overflows float32", s.Name, f)
	case s.Kind == KindFloat && f < s.Min:
		hint := fmt.Sprintf("use a value ≥ %v", s.Min)
		if s.Unit != "" {
			hint += " " + s.Unit
		}
		return 0, s.valueViolation(kernel, hint, "argument %s must be ≥ %v, got %v", s.Name, s.Min, f)
	case s.Kind == KindFloat && s.Max > 0 && f > s.Max:
		hint := fmt.Sprintf("use a value ≤ %v", s.Max)
		if s.Unit != "" {
			hint += " " + s.Unit
		}
		return 0, s.valueViolation(kernel, hint, "argument %s must be ≤ %v, got %v", s.Name, s.Max, f)
	}
	return f, nil
}

// int returns x, the value of integer argument s of kernel, checked against
// the schema.
func (s *ArgSpec) int(kernel string, x any) (int64, *Violation) {
	v, ok, isNum := integer(x)
	switch {
	case ok && s.Kind == KindUint32 && (v < 0 || v > math.MaxUint32):
		ok = false
	case ok && s.Kind == KindInt && float64(v) < s.Min:
		ok = false
	}
	if ok {
		return v, nil
	}
	hint := "write a whole number"
	if isNum {
		hint = "use " + s.Want()
	}
	return 0, s.valueViolation(kernel, hint, "argument %s must be %s, got %s", s.Name, s.Want(), describe(x))
}

// check checks x, the value of argument s of kernel.
func (s *ArgSpec) check(kernel string, x any) *Violation {
	var v *Violation
	switch s.Kind {
	case KindFloat32, KindFloat:
		_, v = s.float(kernel, x)
	case KindEnum:
		if str, ok := x.(string); !ok || !slices.Contains(s.Enum, str) {
			v = s.valueViolation(kernel, "use "+s.Want(), "argument %s must be %s, got %s", s.Name, s.Want(), describe(x))
		}
	default:
		_, v = s.int(kernel, x)
	}
	return v
}

// exampleArgs is "{name: example}" for the named arguments, for hints.
func (b *Builtin) exampleArgs(names ...string) string {
	var parts []string
	for _, n := range names {
		if a := b.Arg(n); a != nil {
			parts = append(parts, a.Name+": "+a.Example)
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// ArgFloat returns args[name] as a float64; ok is false when it is absent.
// Numbers may be any Go integer or float type or a json.Number; anything
// else is an error.
func ArgFloat(args map[string]any, name string) (v float64, ok bool, err error) {
	x, ok := args[name]
	if !ok {
		return 0, false, nil
	}
	if f, isNum := number(x); isNum {
		return f, true, nil
	}
	return 0, true, fmt.Errorf("argument %s must be a number, got %s", name, describe(x))
}

// Schemas of the arguments the accessors read.
var (
	fillValue   = Lookup(BuiltinFill).Arg("value")
	fillBits    = Lookup(BuiltinFill).Arg("bits")
	mixSpinUS   = Lookup(BuiltinMix).Arg("spin_us")
	mixMaxWords = Lookup(BuiltinMix).Arg("max_words")
	spinUS      = Lookup(BuiltinSpin).Arg("us")
)

// FillWord returns the 32-bit word a fill launch writes: args.bits if
// present, else the float32 bits of args.value. It returns a *Violation
// when neither is present or the one read breaks its schema.
func FillWord(args map[string]any) (uint32, error) {
	if x, ok := args[fillBits.Name]; ok {
		v, err := fillBits.int(BuiltinFill, x)
		if err != nil {
			return 0, err
		}
		return uint32(v), nil
	}
	if x, ok := args[fillValue.Name]; ok {
		f, err := fillValue.float(BuiltinFill, x)
		if err != nil {
			return 0, err
		}
		return math.Float32bits(float32(f)), nil
	}
	return 0, Lookup(BuiltinFill).oneOfViolation()
}

// ScaleFactor returns args.a of a scale or axpy launch as the float32 the
// kernel multiplies by (the number is rounded to float32). It returns a
// *Violation when a is absent or breaks its schema.
func ScaleFactor(args map[string]any) (float32, error) {
	const kernels = BuiltinScale + " or " + BuiltinAxpy
	x, ok := args[argA.Name]
	if !ok {
		return 0, missingViolation(kernels, &argA)
	}
	f, err := argA.float(kernels, x)
	if err != nil {
		return 0, err
	}
	return float32(f), nil
}

// MixMaxWords returns the mix built-in's max_words argument: how many words
// of each write range a launch writes (math.MaxInt64 when absent). It
// returns a *Violation unless the argument is an integer ≥ 1.
func MixMaxWords(args map[string]any) (int64, error) {
	x, ok := args[mixMaxWords.Name]
	if !ok {
		return math.MaxInt64, nil
	}
	v, err := mixMaxWords.int(BuiltinMix, x)
	if err != nil {
		return 0, err
	}
	return v, nil
}

// MaxSpinUS bounds how long one launch may spin, in µs (60 s): spin's us,
// mix's spin_us, and a stage's duration_us, which a spin without us spins
// for. A GPU kernel that runs longer is a mistake (and trips display
// watchdogs).
const MaxSpinUS = 60e6

// SpinUS returns how long, in µs, a launch of kernel stays busy on top of
// its work: for spin, args.us or else durationUS (the stage's cost
// estimate, in µs; below 0 counts as 0); for mix, args.spin_us (0 when
// absent); 0 for other kernels. It returns a *Violation when the argument
// breaks its schema, and an error when durationUS, spun for, exceeds
// MaxSpinUS.
func SpinUS(kernel string, args map[string]any, durationUS float64) (float64, error) {
	var s *ArgSpec
	switch kernel {
	case BuiltinSpin:
		s = spinUS
	case BuiltinMix:
		s, durationUS = mixSpinUS, 0
	default:
		return 0, nil
	}
	x, ok := args[s.Name]
	if !ok {
		if durationUS > MaxSpinUS || math.IsNaN(durationUS) {
			return 0, fmt.Errorf("%s spins for its duration_us %v, more than %v µs (60 s)", kernel, durationUS, float64(MaxSpinUS))
		}
		return max(durationUS, 0), nil
	}
	us, err := s.float(kernel, x)
	if err != nil {
		return 0, err
	}
	return us, nil
}

// ParamBits returns the value of args[name] for a user kernel parameter of
// type typ (u32, i32, u64, i64, f32, f64) as the bit pattern the kernel
// receives, in the low 32 bits for the 32-bit types. Integer parameters
// keep every bit: the value must be an integer in the type's range, given
// as a Go integer, a json.Number (plan files decode numbers as such) or a
// float64 that holds it exactly (|v| ≤ 2^53); 9007199254740993 as a float
// would be ...992, so it is refused. Floats take any number (f32: within
// float32 range). Errors name the argument and what it must be.
func ParamBits(args map[string]any, name, typ string) (uint64, error) {
	x, ok := args[name]
	if !ok {
		return 0, fmt.Errorf("argument %s (%s) is missing", name, typ)
	}
	switch typ {
	case "f32", "f64":
		f, isNum := number(x)
		switch {
		case !isNum:
			return 0, fmt.Errorf("argument %s (%s) must be a number, got %s", name, typ, describe(x))
		case typ == "f32" && math.Abs(f) > math.MaxFloat32 && !math.IsInf(f, 0):
			return 0, fmt.Errorf("argument %s (f32) = %v overflows float32", name, f)
		case typ == "f32":
			return uint64(math.Float32bits(float32(f))), nil
		}
		return math.Float64bits(f), nil
	}
	var lo, hi int64
	switch typ {
	case "u32":
		hi = math.MaxUint32
	case "i32":
		lo, hi = math.MinInt32, math.MaxInt32
	case "u64":
		hi = math.MaxInt64
	case "i64":
		lo, hi = math.MinInt64, math.MaxInt64
	default:
		return 0, fmt.Errorf("argument %s: parameter type %q, want u32, i32, u64, i64, f32 or f64", name, typ)
	}
	// u64 above 2^63−1: only as an unsigned Go integer or a json.Number.
	if typ == "u64" {
		switch u := x.(type) {
		case uint64:
			return u, nil
		case uint:
			return uint64(u), nil
		case json.Number:
			if v, err := strconv.ParseUint(string(u), 10, 64); err == nil {
				return v, nil
			}
		}
	}
	v, exact := exactInt(x)
	if !exact || v < lo || v > hi {
		return 0, fmt.Errorf("argument %s (%s) must be an integer in [%d, %d] given exactly, got %s", name, typ, lo, hi, describe(x))
	}
	if typ == "u32" || typ == "i32" {
		return uint64(uint32(v)), nil
	}
	return uint64(v), nil
}

// exactInt returns x as an int64 when it is an integer held exactly: a Go
// integer that fits, a json.Number integer literal, or a float64 with an
// integral value of magnitude ≤ 2^53 (beyond, a float64 has lost bits).
func exactInt(x any) (int64, bool) {
	switch x := x.(type) {
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false
		}
		return int64(x), true
	case float32:
		return exactInt(float64(x))
	case json.Number:
		v, err := strconv.ParseInt(string(x), 10, 64)
		return v, err == nil
	}
	v, ok, _ := integer(x)
	return v, ok
}
