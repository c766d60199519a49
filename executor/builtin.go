package executor

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/dagrun/dagrun/dag"
)

// ArgFloat returns args[name] as a float64; ok is false when it is absent.
// Numbers may be any Go integer or float type or a json.Number; anything else
// is an error.
func ArgFloat(args map[string]any, name string) (v float64, ok bool, err error) {
	x, ok := args[name]
	if !ok {
		return 0, false, nil
	}
	switch x := x.(type) {
	case float64:
		return x, true, nil
	case float32:
		return float64(x), true, nil
	case int:
		return float64(x), true, nil
	case int32:
		return float64(x), true, nil
	case int64:
		return float64(x), true, nil
	case uint32:
		return float64(x), true, nil
	case uint64:
		return float64(x), true, nil
	case uint:
		return float64(x), true, nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return 0, true, fmt.Errorf("arg %s: %w", name, err)
		}
		return f, true, nil
	}
	return 0, true, fmt.Errorf("arg %s: want a number, got %T", name, x)
}

// FillWord returns the 32-bit word a fill launch writes: args.bits (a uint32)
// if present, else the float32 bits of args.value. It returns an error when
// neither is present or bits is not an integer in [0, 2³²).
func FillWord(args map[string]any) (uint32, error) {
	if b, ok, err := ArgFloat(args, "bits"); err != nil {
		return 0, err
	} else if ok {
		if b < 0 || b > math.MaxUint32 || b != math.Trunc(b) {
			return 0, fmt.Errorf("arg bits: %v is not a uint32", b)
		}
		return uint32(b), nil
	}
	v, ok, err := ArgFloat(args, "value")
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("fill needs arg value (float) or bits (uint32)")
	}
	return math.Float32bits(float32(v)), nil
}

// ScaleFactor returns args.a of scale and axpy as the float32 the kernel
// multiplies by (the float64 argument is rounded to float32 first).
func ScaleFactor(args map[string]any) (float32, error) {
	a, ok, err := ArgFloat(args, "a")
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("needs arg a (float)")
	}
	return float32(a), nil
}

// MixMaxWords returns the mix built-in's max_words argument: how many words
// of each write range are written (math.MaxInt64 when absent). It returns an
// error unless the argument is an integer ≥ 1.
func MixMaxWords(args map[string]any) (int64, error) {
	mw, ok, err := ArgFloat(args, "max_words")
	if err != nil || !ok {
		return math.MaxInt64, err
	}
	if mw < 1 || mw != math.Trunc(mw) || mw > math.MaxInt64/2 {
		return 0, fmt.Errorf("arg max_words: %v, want an integer ≥ 1", mw)
	}
	return int64(mw), nil
}

// SpinUS returns how long, in µs, a launch stays busy on top of its work:
// for spin, args.us or else the stage's DurationUS; for mix, args.spin_us
// (0 when absent); 0 for other kernels.
func SpinUS(l *LaunchDesc) (float64, error) {
	switch l.Kernel {
	case dag.BuiltinSpin:
		us, ok, err := ArgFloat(l.Args, "us")
		if err != nil {
			return 0, err
		}
		if !ok {
			us = l.DurationUS
		}
		return max(us, 0), nil
	case dag.BuiltinMix:
		us, _, err := ArgFloat(l.Args, "spin_us")
		return max(us, 0), err
	}
	return 0, nil
}

// CheckLaunch checks a launch against the built-in contract of
// dag/builtins.go: access counts, sizes, 4-byte alignment, in-place rules and
// required arguments. A launch of a user kernel (UserKernel set) passes. Run
// calls it once per stage, before issuing anything, so backends may assume it.
func CheckLaunch(l *LaunchDesc) error {
	if l.UserKernel != nil {
		return nil
	}
	if !dag.IsBuiltin(l.Kernel) {
		return fmt.Errorf("unknown kernel %q: not a built-in and not a declared kernel", l.Kernel)
	}
	for _, set := range [2][]Arg{l.Reads, l.Writes} {
		for _, a := range set {
			if a.Offset%4 != 0 || a.Bytes%4 != 0 || a.Bytes <= 0 || a.Offset < 0 {
				return fmt.Errorf("%s: access %s[%d:%d] must be 4-byte aligned, a positive multiple of 4 bytes long", l.Kernel, a.Name, a.Offset, a.Offset+a.Bytes)
			}
		}
	}
	if l.Kernel != dag.BuiltinSpin {
		for _, r := range l.Reads {
			for _, w := range l.Writes {
				if overlaps(r, w) && (r.Offset != w.Offset || r.Bytes != w.Bytes) {
					return fmt.Errorf("%s: read %s[%d:%d] overlaps write %s[%d:%d] without being the identical range (in-place)", l.Kernel, r.Name, r.Offset, r.Offset+r.Bytes, w.Name, w.Offset, w.Offset+w.Bytes)
				}
			}
		}
	}
	counts := func(reads, writes int) error {
		if len(l.Reads) != reads || len(l.Writes) != writes {
			return fmt.Errorf("%s: needs %d read(s) and %d write(s), has %d and %d", l.Kernel, reads, writes, len(l.Reads), len(l.Writes))
		}
		return nil
	}
	sameBytes := func() error {
		for _, a := range l.Reads {
			if a.Bytes != l.Writes[0].Bytes {
				return fmt.Errorf("%s: read %s is %d bytes, write %s is %d: they must be the same size", l.Kernel, a.Name, a.Bytes, l.Writes[0].Name, l.Writes[0].Bytes)
			}
		}
		return nil
	}
	switch l.Kernel {
	case dag.BuiltinFill:
		if err := counts(0, 1); err != nil {
			return err
		}
		_, err := FillWord(l.Args)
		return err
	case dag.BuiltinCopy:
		if err := counts(1, 1); err != nil {
			return err
		}
		return sameBytes()
	case dag.BuiltinScale:
		if err := counts(1, 1); err != nil {
			return err
		}
		if err := sameBytes(); err != nil {
			return err
		}
		_, err := ScaleFactor(l.Args)
		return err
	case dag.BuiltinAxpy:
		if err := counts(2, 1); err != nil {
			return err
		}
		if err := sameBytes(); err != nil {
			return err
		}
		if y, w := l.Reads[1], l.Writes[0]; y.Name != w.Name || y.Offset != w.Offset {
			return fmt.Errorf("axpy: read y %s[%d:%d] must be the range it writes, %s[%d:%d]", y.Name, y.Offset, y.Offset+y.Bytes, w.Name, w.Offset, w.Offset+w.Bytes)
		}
		_, err := ScaleFactor(l.Args)
		return err
	case dag.BuiltinMix:
		if len(l.Writes) == 0 {
			return fmt.Errorf("mix: needs at least one write")
		}
		if _, err := MixMaxWords(l.Args); err != nil {
			return err
		}
		_, err := SpinUS(l)
		return err
	case dag.BuiltinSpin:
		_, err := SpinUS(l)
		return err
	case dag.BuiltinChecksum:
		if err := counts(1, 1); err != nil {
			return err
		}
		if l.Writes[0].Bytes < 8 {
			return fmt.Errorf("checksum: write %s is %d bytes, needs at least 8", l.Writes[0].Name, l.Writes[0].Bytes)
		}
	}
	return nil
}

func overlaps(a, b Arg) bool {
	return a.Name == b.Name && a.Offset < b.Offset+b.Bytes && b.Offset < a.Offset+a.Bytes
}
