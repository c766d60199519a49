package sim

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/executor"
)

var le = binary.LittleEndian

// builtin computes a built-in kernel other than mix per its contract
// (contract.BuiltinFill and the others). in
// holds the reads (copies where in place), out the live write ranges;
// executor.CheckLaunch has been run.
func builtin(l *executor.LaunchDesc, in, out [][]byte) error {
	switch l.Kernel {
	case contract.BuiltinFill:
		w, err := contract.FillWord(l.Args)
		if err != nil {
			return err
		}
		o := out[0]
		le.PutUint32(o, w)
		for n := 4; n < len(o); n *= 2 {
			copy(o[n:], o[:n])
		}
	case contract.BuiltinCopy:
		copy(out[0], in[0])
	case contract.BuiltinScale:
		a, err := contract.ScaleFactor(l.Args)
		if err != nil {
			return err
		}
		x, y := in[0], out[0]
		for i := 0; i+4 <= len(y); i += 4 {
			v := float32(a * math.Float32frombits(le.Uint32(x[i:])))
			le.PutUint32(y[i:], math.Float32bits(v))
		}
	case contract.BuiltinAxpy:
		a, err := contract.ScaleFactor(l.Args)
		if err != nil {
			return err
		}
		x, y, o := in[0], in[1], out[0]
		for i := 0; i+4 <= len(o); i += 4 {
			// Explicit conversions round each step, so the compiler may not
			// fuse the multiply and add (Go spec, "Floating-point operators").
			ax := float32(a * math.Float32frombits(le.Uint32(x[i:])))
			v := float32(ax + math.Float32frombits(le.Uint32(y[i:])))
			le.PutUint32(o[i:], math.Float32bits(v))
		}
	case contract.BuiltinSpin:
	case contract.BuiltinChecksum:
		sum, x := contract.Checksum(in[0])
		le.PutUint32(out[0][0:], sum)
		le.PutUint32(out[0][4:], x)
	default:
		return fmt.Errorf("unknown built-in %q", l.Kernel)
	}
	return nil
}

// mix is the mix built-in (contract.BuiltinMix): out_w[i] = h with
// h = Mix32(MixSeed(stage, w) ^ i), then h = Mix32(h ^ in_k[i mod n_k]) for
// each read k, for the words i < maxWords of each write. n[k] is read k's
// length in words; in[k] may hold only the words used (a prefix). A trailing
// partial word (user kernels only) is read zero-padded and written truncated.
func mix(stage int, in [][]byte, n []int, out [][]byte, maxWords int64) {
	for w, o := range out {
		seed := contract.MixSeed(stage, w)
		words := int(min(int64(len(o)+3)/4, maxWords))
		for i := 0; i < words; i++ {
			h := contract.Mix32(seed ^ uint32(i))
			for k, r := range in {
				h = contract.Mix32(h ^ word(r, i%n[k]))
			}
			if 4*i+4 <= len(o) {
				le.PutUint32(o[4*i:], h)
			} else {
				var b [4]byte
				le.PutUint32(b[:], h)
				copy(o[4*i:], b[:])
			}
		}
	}
}

// word returns word i of b, zero-padded past the end.
func word(b []byte, i int) uint32 {
	if 4*i+4 <= len(b) {
		return le.Uint32(b[4*i:])
	}
	var w [4]byte
	copy(w[:], b[4*i:])
	return le.Uint32(w[:])
}
