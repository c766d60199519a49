package executor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/contract"
)

// ArgFloat returns args[name] as a float64; ok is false when it is absent.
// Numbers may be any Go integer or float type or a json.Number; anything else
// is an error (contract.ArgFloat).
func ArgFloat(args map[string]any, name string) (v float64, ok bool, err error) {
	return contract.ArgFloat(args, name)
}

// FillWord returns the 32-bit word a fill launch writes: args.bits (a uint32)
// if present, else the float32 bits of args.value (contract.FillWord). It
// returns a *contract.Violation when neither is present or the one read is
// out of its range.
func FillWord(args map[string]any) (uint32, error) { return contract.FillWord(args) }

// ScaleFactor returns args.a of scale and axpy as the float32 the kernel
// multiplies by, the number rounded to float32 (contract.ScaleFactor). It
// returns a *contract.Violation when a is absent or not a float32.
func ScaleFactor(args map[string]any) (float32, error) { return contract.ScaleFactor(args) }

// MixMaxWords returns the mix built-in's max_words argument: how many words
// of each write range are written (math.MaxInt64 when absent;
// contract.MixMaxWords). It returns a *contract.Violation unless the
// argument is an integer ≥ 1.
func MixMaxWords(args map[string]any) (int64, error) { return contract.MixMaxWords(args) }

// SpinUS returns how long, in µs, a launch stays busy on top of its work:
// for spin, args.us or else the stage's DurationUS; for mix, args.spin_us
// (0 when absent); 0 for other kernels (contract.SpinUS). It returns a
// *contract.Violation when the argument is not a duration ≥ 0.
func SpinUS(l *LaunchDesc) (float64, error) {
	return contract.SpinUS(l.Kernel, l.Args, l.DurationUS)
}

// CheckLaunch checks a launch of a built-in against the built-in contract
// (contract.CheckBuiltin): access counts, 4-byte alignment, sizes, in-place
// and overlap rules, and arguments. It returns nil or the first rule broken,
// a *contract.Violation (RuleKernel when Kernel is no built-in). A launch of
// a user kernel (UserKernel set) has each parameter it gives checked instead: a ptr
// names a buffer the stage reads or writes, a number is exact for its type
// (contract.ParamBits: 64-bit integers keep every bit). Run calls it once
// per stage, before issuing anything, so backends may assume it.
func CheckLaunch(l *LaunchDesc) error {
	if c := l.Collective; c != nil {
		return checkRank(l)
	}
	if k := l.UserKernel; k != nil {
		for _, ps := range k.Params {
			name, typ, ok := strings.Cut(ps, ":")
			if !ok {
				return fmt.Errorf("kernel %s: param %q, want name:type", k.Name, ps)
			}
			if _, given := l.Args[name]; !given {
				continue // the CUDA backend needs it; the simulator runs the kernel opaquely without
			}
			if typ != "ptr" {
				if _, err := contract.ParamBits(l.Args, name, typ); err != nil {
					return fmt.Errorf("kernel %s: %w", k.Name, err)
				}
				continue
			}
			buf, _ := l.Args[name].(string)
			if !slices.ContainsFunc(l.Reads, func(a Arg) bool { return a.Name == buf }) && !slices.ContainsFunc(l.Writes, func(a Arg) bool { return a.Name == buf }) {
				return fmt.Errorf("kernel %s: argument %s (ptr) must name a buffer the stage reads or writes, got %v", k.Name, name, l.Args[name])
			}
		}
		return nil
	}
	var rb, wb [4]contract.Range
	return contract.CheckBuiltin(l.Kernel, l.Args, ranges(rb[:0], l.Reads), ranges(wb[:0], l.Writes))
}

// ranges appends the byte ranges of args, by buffer name, to out for the
// checks of package contract.
func ranges(out []contract.Range, args []Arg) []contract.Range {
	for _, a := range args {
		out = append(out, contract.Range{Buffer: a.Name, Offset: a.Offset, Bytes: a.Bytes})
	}
	return out
}

// checkRank checks a collective's rank stage: the collective's built-in,
// one send range and one receive range of the same size, a multiple of
// the word (the rank form of the all_reduce contract).
func checkRank(l *LaunchDesc) error {
	c := l.Collective
	switch {
	case l.Kernel != contract.BuiltinAllReduce || c.Op != l.Kernel:
		return fmt.Errorf("collective rank: kernel %s, op %s: want %s for both", l.Kernel, c.Op, contract.BuiltinAllReduce)
	case len(l.Reads) != 1 || len(l.Writes) != 1:
		return fmt.Errorf("collective rank %d of %d: reads %d ranges and writes %d; a rank reads its send range and writes its receive range", c.Rank, c.Ranks, len(l.Reads), len(l.Writes))
	case l.Reads[0].Bytes != l.Writes[0].Bytes || l.Reads[0].Bytes%contract.WordBytes != 0:
		return fmt.Errorf("collective rank %d of %d: sends %d bytes and receives %d: want the same multiple of %d bytes", c.Rank, c.Ranks, l.Reads[0].Bytes, l.Writes[0].Bytes, contract.WordBytes)
	}
	return nil
}
