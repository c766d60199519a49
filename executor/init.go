package executor

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// randomStream is the PCG stream constant of RandomBytes (the increment
// selector of PCG's second seed word). It is part of the contract.
const randomStream = 0x64616772756e // "dagrun"

// RandomBytes returns n deterministic pseudo-random bytes for seed: the
// initial contents of a buffer with init kind "random". The algorithm is the
// contract, so every backend and tool gets the same bytes: a PCG generator
// (math/rand/v2 NewPCG(uint64(seed), 0x64616772756e), O'Neill 2014, PCG-DXSM
// output), whose successive Uint64 values are written little-endian; the last
// value is truncated when n is not a multiple of 8. n ≤ 0 gives an empty slice.
func RandomBytes(seed int64, n int64) []byte {
	if n <= 0 {
		return []byte{}
	}
	g := rand.NewPCG(uint64(seed), randomStream)
	out := make([]byte, n)
	var w [8]byte
	for i := int64(0); i < n; i += 8 {
		binary.LittleEndian.PutUint64(w[:], g.Uint64())
		copy(out[i:], w[:])
	}
	return out
}

// Checksum is the checksum printed for an output buffer: 64-bit FNV-1a
// (Fowler, Noll, Vo) over the bytes, as 16 lower-case hex digits.
func Checksum(data []byte) string {
	h := fnv.New64a()
	h.Write(data)
	return fmt.Sprintf("%016x", h.Sum64())
}

// InitialContents returns the bytes buffer b starts with, per its init kind
// (dag.InitZeros, InitFill, InitFile, InitRandom; "" means zeros). A file
// path is resolved against dir unless absolute. It returns an error for an
// unknown kind, an unreadable file, or a file whose size is not b.Bytes.
func InitialContents(dir string, b planner.Buffer) ([]byte, error) {
	switch b.Init {
	case "", dag.InitZeros:
		return make([]byte, b.Bytes), nil
	case dag.InitFill:
		out := make([]byte, b.Bytes)
		var w [4]byte
		binary.LittleEndian.PutUint32(w[:], math.Float32bits(float32(b.InitValue)))
		for i := int64(0); i < b.Bytes; i += 4 {
			copy(out[i:], w[:])
		}
		return out, nil
	case dag.InitFile:
		path := b.InitPath
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("buffer %s: init file: %w", b.Name, err)
		}
		if int64(len(data)) != b.Bytes {
			return nil, fmt.Errorf("buffer %s: init file %s has %d bytes, the buffer has %d: resize the file or the buffer", b.Name, path, len(data), b.Bytes)
		}
		return data, nil
	case dag.InitRandom:
		return RandomBytes(b.InitSeed, b.Bytes), nil
	}
	return nil, fmt.Errorf("buffer %s: unknown init kind %q (want zeros, fill, file or random)", b.Name, b.Init)
}
