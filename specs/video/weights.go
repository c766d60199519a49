package video

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// Shapes of the network. The input frame is FrameW×FrameH RGBA8; any other
// size works with the kernels (the preprocess resize takes w and h), but the
// spec and the committed frames use these.
const (
	FrameW = 128 // input frame width in pixels
	FrameH = 128 // input frame height in pixels

	Size    = 64 // preprocess output: 3×Size×Size float32
	InC     = 3  // input channels (RGB)
	C1      = 8  // conv1 output channels; Size/2 × Size/2 after pooling
	C2      = 16 // conv2 output channels; Size/4 × Size/4 after pooling
	Classes = 10 // logits

	FCIn     = C2 * (Size / 4) * (Size / 4) // 4096 inputs of the FC layer
	OutWords = Classes + 1                  // Classes probabilities, then the argmax as a uint32

	FrameBytes = FrameW * FrameH * 4
)

// Sizes in float32 words of the weight buffers (weights, then biases).
const (
	Conv1Words = C1*InC*9 + C1
	Conv2Words = C2*C1*9 + C2
	FCWords    = Classes*FCIn + Classes
)

// Weight file names, relative to the package (spec) directory.
const (
	Conv1File = "weights/conv1.bin"
	Conv2File = "weights/conv2.bin"
	FCFile    = "weights/fc.bin"
)

// Weights are the network's parameters, each layer's weights followed by its
// biases (see the package doc for the layout).
type Weights struct {
	Conv1 []float32 // Conv1Words: w[C1][InC][3][3], b[C1]
	Conv2 []float32 // Conv2Words: w[C2][C1][3][3], b[C2]
	FC    []float32 // FCWords: w[Classes][FCIn], b[Classes]
}

// Seeds of the weight generator, one per layer.
const (
	seedConv1 = 1
	seedConv2 = 2
	seedFC    = 3
)

// GenerateWeights returns the demo's fixed weights. Layer l's value i is
// float32((2u−1)·bound) with u = (splitmix64(seed_l<<32 | i) >> 40) / 2²⁴
// (splitmix64: Steele, Lea, Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014; the output function of Vigna's reference code),
// seeds 1, 2, 3 for conv1, conv2, fc. bound is √(6/fan_in) for weights (He et
// al., "Delving deep into rectifiers", ICCV 2015, §2.2, uniform form) and
// 0.05 for biases. The algorithm is the contract: weights/*.bin are its
// output (`go generate`), and a test checks that they still agree.
func GenerateWeights() *Weights {
	return &Weights{
		Conv1: layer(seedConv1, C1*InC*9, C1, InC*9),
		Conv2: layer(seedConv2, C2*C1*9, C2, C1*9),
		FC:    layer(seedFC, Classes*FCIn, Classes, FCIn),
	}
}

// layer returns nw weights and nb biases from seed.
func layer(seed uint64, nw, nb, fanIn int) []float32 {
	out := make([]float32, nw+nb)
	wb := math.Sqrt(6 / float64(fanIn))
	for i := range out {
		bound := wb
		if i >= nw {
			bound = 0.05
		}
		u := float64(splitmix64(seed<<32|uint64(i))>>40) / (1 << 24)
		out[i] = float32((2*u - 1) * bound)
	}
	return out
}

// splitmix64 is one step of SplitMix64 from state x: the golden-ratio
// increment, then the finalizer.
func splitmix64(x uint64) uint64 {
	z := x + 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// LoadWeights reads the three weight files from dir (the spec's directory).
// It returns an error naming the file when one is missing or has the wrong
// size.
func LoadWeights(dir string) (*Weights, error) {
	var w Weights
	for _, f := range []struct {
		path  string
		words int
		dst   *[]float32
	}{{Conv1File, Conv1Words, &w.Conv1}, {Conv2File, Conv2Words, &w.Conv2}, {FCFile, FCWords, &w.FC}} {
		path := filepath.Join(dir, f.path)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("video: weights: %w", err)
		}
		if len(b) != 4*f.words {
			return nil, fmt.Errorf("video: weights: %s has %d bytes, want %d (run go generate in specs/video)", path, len(b), 4*f.words)
		}
		*f.dst = Floats(b)
	}
	return &w, nil
}

// Floats decodes little-endian float32 words; a trailing partial word is
// ignored.
func Floats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// Bytes encodes float32 values as little-endian words.
func Bytes(f []float32) []byte {
	out := make([]byte, 4*len(f))
	putFloats(out, f)
	return out
}

// putFloats writes f into b as little-endian words; len(b) ≥ 4·len(f).
func putFloats(b []byte, f []float32) {
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
}
