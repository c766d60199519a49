package executor

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/internal/safefile"
	"github.com/dagrun/dagrun/plan"
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
	out := make([]byte, n)
	randomInto(seed, out)
	return out
}

// randomInto fills out with RandomBytes(seed, len(out)).
func randomInto(seed int64, out []byte) {
	g := rand.NewPCG(uint64(seed), randomStream)
	n := len(out)
	i := 0
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(out[i:], g.Uint64())
	}
	if i < n {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], g.Uint64())
		copy(out[i:], w[:])
	}
}

// Checksum is the checksum printed for an output buffer: 64-bit FNV-1a
// (Fowler, Noll, Vo) over the bytes, as 16 lower-case hex digits.
func Checksum(data []byte) string {
	h := fnv.New64a()
	h.Write(data)
	return fmt.Sprintf("%016x", h.Sum64())
}

// InitialContents returns the bytes buffer b starts with, per its init kind
// (string(contract.InitZeros), InitFill, InitFile, InitRandom; "" means zeros). A file
// path is resolved against dir unless absolute. It returns an error for an
// unknown kind, an unreadable file, or a file whose size is not b.Bytes.
func InitialContents(dir string, b plan.Buffer) ([]byte, error) {
	if b.Bytes < 0 {
		return nil, fmt.Errorf("buffer %s: %d bytes", b.Name, b.Bytes)
	}
	out := make([]byte, b.Bytes)
	if err := initInto(dir, b, out); err != nil {
		return nil, err
	}
	return out, nil
}

// initInto writes b's initial contents into out (len(out) == b.Bytes), so
// Run can reuse one scratch slice for every buffer.
func initInto(dir string, b plan.Buffer, out []byte) error {
	switch b.Init {
	case "", string(contract.InitZeros):
		clear(out)
		return nil
	case string(contract.InitFill):
		var w [4]byte
		binary.LittleEndian.PutUint32(w[:], math.Float32bits(float32(b.InitValue)))
		copy(out, w[:])
		for n := 4; n < len(out); n *= 2 {
			copy(out[n:], out[:n])
		}
		return nil
	case string(contract.InitFile):
		path := b.InitPath
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		f, size, err := safefile.Open(path, -1, "init file")
		if err != nil {
			return fmt.Errorf("buffer %s: init file: %w", b.Name, err)
		}
		defer f.Close()
		if size != b.Bytes {
			return fmt.Errorf("buffer %s: init file %s has %d bytes, the buffer has %d: resize the file or the buffer", b.Name, path, size, b.Bytes)
		}
		if _, err := io.ReadFull(f, out); err != nil {
			return fmt.Errorf("buffer %s: init file %s: %w", b.Name, path, err)
		}
		return nil
	case string(contract.InitRandom):
		randomInto(b.InitSeed, out)
		return nil
	}
	return fmt.Errorf("buffer %s: unknown init kind %q (want zeros, fill, file or random)", b.Name, b.Init)
}
