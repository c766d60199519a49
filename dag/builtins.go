package dag

// Built-in kernels. Their semantics are the contract every backend implements
// bit-exactly (the simulator in Go, the CUDA backend in PTX). Elements are
// 4-byte little-endian words; every access of a built-in must be a multiple
// of 4 bytes long and 4-byte aligned.
//
//	fill      writes: 1.  args: value (float, written as float32) or bits (uint32).
//	          Every word of the write range becomes the value.
//	copy      reads: 1, writes: 1, same Bytes. Byte copy; buffers may be device
//	          or host_pinned (device↔device, host↔device, device↔host).
//	scale     reads: x, writes: y, same Bytes. y[i] = float32(a × x[i]). args: a.
//	axpy      reads: x, y; writes: y (the same range as the read of y), same Bytes.
//	          y[i] = float32(float32(a × x[i]) + y[i]), never fused (no FMA). args: a.
//	mix       reads: 0..n, writes: 1..m. Each written word becomes a fixed integer
//	          hash of the stage's index and the words read (see MixSeed, Mix32):
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
//	checksum  reads: 1, writes: 1 of ≥ 8 bytes. out word 0 = wrapping sum of the
//	          words read; out word 1 = XOR over i of Mix32(word_i ^ (i × 0x9E3779B9)).
//	          Other words of the write range are left unchanged.
const (
	BuiltinFill     = "fill"
	BuiltinCopy     = "copy"
	BuiltinScale    = "scale"
	BuiltinAxpy     = "axpy"
	BuiltinMix      = "mix"
	BuiltinSpin     = "spin"
	BuiltinChecksum = "checksum"
)

// Builtins lists the built-in kernel names.
var Builtins = []string{BuiltinFill, BuiltinCopy, BuiltinScale, BuiltinAxpy, BuiltinMix, BuiltinSpin, BuiltinChecksum}

// IsBuiltin reports whether name is a built-in kernel.
func IsBuiltin(name string) bool {
	for _, b := range Builtins {
		if b == name {
			return true
		}
	}
	return false
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
// stage's index in declaration order; write is the index of the write access.
func MixSeed(stage, write int) uint32 {
	return Mix32(uint32(stage)*0x9E3779B9 ^ 0x7F4A7C15 + uint32(write)*0x632BE5AB)
}
