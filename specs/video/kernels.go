package video

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/dagrun/dagrun/executor"
)

// PTX entry names of kernels/video.cu; the CPU bodies are registered under
// them (executor.RegisterCPUKernel) when the package is initialised.
const (
	EntryPreprocess = "video_preprocess"
	EntryConv       = "video_conv_relu_pool"
	EntryFC         = "video_fc"
	EntrySoftmax    = "video_softmax_argmax"
)

// FCLanes is the number of partial sums per FC output; it fixes the
// summation order of FC and of video_fc.
const FCLanes = 256

// Normalization constants of Preprocess (ImageNet's), as float32.
var (
	normMean = [3]float32{0.485, 0.456, 0.406}
	normStd  = [3]float32{0.229, 0.224, 0.225}
)

// The functions below are the float32 kernels of kernels/video.cu, with the
// same operations in the same order. Go may fuse x*y + z into one rounding
// (Go spec, "Floating-point operators"); an explicit float32(x*y) forbids it,
// so every product is written that way, as the CUDA code uses __fmul_rn and
// is built with -fmad=false.

// Preprocess resizes the w×h RGBA8 frame to size×size (bilinear, half-pixel
// centres: sx = (x+0.5)·w/size − 0.5 clamped to [0, w−1]) and normalizes each
// RGB channel to (v/255 − mean_c)/std_c, writing 3×size×size values to out.
// len(frame) ≥ 4·w·h and len(out) ≥ 3·size·size; w, h, size ≥ 1.
func Preprocess(frame []byte, w, h, size int, out []float32) {
	n := size * size
	scx := float32(w) / float32(size)
	scy := float32(h) / float32(size)
	for i := 0; i < n; i++ {
		ox, oy := i%size, i/size
		sx := float32((float32(ox)+0.5)*scx) - 0.5
		sy := float32((float32(oy)+0.5)*scy) - 0.5
		sx, sy = max(sx, 0), max(sy, 0)
		x0, y0 := min(int(sx), w-1), min(int(sy), h-1)
		x1, y1 := min(x0+1, w-1), min(y0+1, h-1)
		fx, fy := sx-float32(x0), sy-float32(y0)
		gx, gy := 1-fx, 1-fy
		r0, r1 := frame[y0*w*4:], frame[y1*w*4:]
		for c := 0; c < 3; c++ {
			p00, p01 := float32(r0[x0*4+c]), float32(r0[x1*4+c])
			p10, p11 := float32(r1[x0*4+c]), float32(r1[x1*4+c])
			top := float32(gx*p00) + float32(fx*p01)
			bot := float32(gx*p10) + float32(fx*p11)
			v := float32(gy*top) + float32(fy*bot)
			v = v / 255
			v = (v - normMean[c]) / normStd[c]
			out[c*n+i] = v
		}
	}
}

// ConvReluPool is a 3×3 convolution (stride 1, zero padding 1) of the
// cin×size×size input with cout filters, plus bias, ReLU and 2×2 max pooling
// (stride 2), into cout×(size/2)×(size/2) values of out. wb holds
// w[cout][cin][3][3] then b[cout]. Each pre-activation is
// bias + Σ_{ci, ky, kx} w·x in that order, skipping the padding.
func ConvReluPool(in, wb []float32, cin, cout, size int, out []float32) {
	half := size / 2
	plane := half * half
	bias := wb[cout*cin*9:]
	for i := 0; i < cout*plane; i++ {
		co, px, py := i/plane, i%plane%half, i%plane/half
		wc := wb[co*cin*9:]
		var best float32 // ReLU: the max of 0 and the four pre-activations
		for dy := 0; dy < 2; dy++ {
			for dx := 0; dx < 2; dx++ {
				y, x := 2*py+dy, 2*px+dx
				acc := bias[co]
				for ci := 0; ci < cin; ci++ {
					xin := in[ci*size*size:]
					for ky := 0; ky < 3; ky++ {
						iy := y + ky - 1
						if iy < 0 || iy >= size {
							continue
						}
						for kx := 0; kx < 3; kx++ {
							ix := x + kx - 1
							if ix < 0 || ix >= size {
								continue
							}
							acc += float32(wc[(ci*3+ky)*3+kx] * xin[iy*size+ix])
						}
					}
				}
				if acc > best {
					best = acc
				}
			}
		}
		out[i] = best
	}
}

// FC is a fully connected layer: out[o] = Σ_i w[o][i]·in[i] + b[o] for
// o < nout, with wb holding w[nout][nin] then b[nout]. The sum runs over
// FCLanes lanes (lane t adds i = t, t+FCLanes, … in order), then the lanes
// pairwise (lane t += lane t+s for s = FCLanes/2, …, 1), then the bias.
func FC(in, wb []float32, nin, nout int, out []float32) {
	var part [FCLanes]float32
	bias := wb[nout*nin:]
	for o := 0; o < nout; o++ {
		wo := wb[o*nin:]
		for t := range part {
			var acc float32
			for i := t; i < nin; i += FCLanes {
				acc += float32(wo[i] * in[i])
			}
			part[t] = acc
		}
		for s := FCLanes / 2; s > 0; s >>= 1 {
			for t := 0; t < s; t++ {
				part[t] += part[t+s]
			}
		}
		out[o] = part[0] + bias[o]
	}
}

// SoftmaxArgmax writes the softmax of logits to probs (same length) and
// returns the index of the first largest logit: m = max, e_i =
// exp32(logit_i − m), the sum in index order, p_i = e_i / sum.
func SoftmaxArgmax(logits, probs []float32) int {
	if len(logits) == 0 {
		return 0
	}
	m, arg := logits[0], 0
	for i, v := range logits[1:] {
		if v > m {
			m, arg = v, i+1
		}
	}
	var sum float32
	for i, v := range logits {
		e := exp32(v - m)
		probs[i] = e
		sum += e
	}
	for i := range logits {
		probs[i] /= sum
	}
	return arg
}

// exp32 is e^d for d ≤ 0 in float32, bit-identical to video_exp in
// kernels/video.cu (see there): Cody–Waite reduction by ln 2, a degree-7
// Taylor polynomial in Horner form, scaling by 2^k through the exponent bits.
// Max relative error 1.02e-7 over [−87, 0]; d < −87 gives 0.
func exp32(d float32) float32 {
	if d < -87 {
		return 0
	}
	kf := float32(math.Floor(float64(float32(d*0x1.715476p+0) + 0.5)))
	r := (d - float32(kf*0x1.62e4p-1)) - float32(kf*0x1.7f7d1cp-20)
	p := float32(0x1.a01a02p-13)      // 1/7!
	p = 0x1.6c16c2p-10 + float32(r*p) // 1/6!
	p = 0x1.111112p-7 + float32(r*p)  // 1/5!
	p = 0x1.555556p-5 + float32(r*p)  // 1/4!
	p = 0x1.555556p-3 + float32(r*p)  // 1/3!
	p = 0.5 + float32(r*p)
	p = 1 + float32(r*p)
	p = 1 + float32(r*p)
	return float32(p * math.Float32frombits(uint32(int32(kf)+127)<<23))
}

// Output is one frame's result.
type Output struct {
	Probs  [Classes]float32
	Argmax int
}

// DecodeOutput decodes an output buffer (OutWords words: the probabilities,
// then the argmax as a uint32). It returns an error when b is shorter.
func DecodeOutput(b []byte) (Output, error) {
	var o Output
	if len(b) < 4*OutWords {
		return o, fmt.Errorf("video: output of %d bytes, want %d", len(b), 4*OutWords)
	}
	copy(o.Probs[:], Floats(b[:4*Classes]))
	o.Argmax = int(binary.LittleEndian.Uint32(b[4*Classes:]))
	return o, nil
}

// Infer runs the float32 kernels on one RGBA frame of w×h pixels: the CPU
// twin of one camera's stages from preprocess to softmax.
func Infer(frame []byte, w, h int, wt *Weights) Output {
	x0 := make([]float32, InC*Size*Size)
	a1 := make([]float32, C1*(Size/2)*(Size/2))
	a2 := make([]float32, FCIn)
	logits := make([]float32, Classes)
	Preprocess(frame, w, h, Size, x0)
	ConvReluPool(x0, wt.Conv1, InC, C1, Size, a1)
	ConvReluPool(a1, wt.Conv2, C1, C2, Size/2, a2)
	FC(a2, wt.FC, FCIn, Classes, logits)
	var o Output
	o.Argmax = SoftmaxArgmax(logits, o.Probs[:])
	return o
}

func init() {
	executor.RegisterCPUKernel(EntryPreprocess, cpuPreprocess)
	executor.RegisterCPUKernel(EntryConv, cpuConv)
	executor.RegisterCPUKernel(EntryFC, cpuFC)
	executor.RegisterCPUKernel(EntrySoftmax, cpuSoftmax)
}

// launch resolves a CPU kernel's arguments as the CUDA backend does: a ptr
// argument names a buffer, whose access among the stage's writes (searched
// first) or reads is the parameter's memory.
type launch struct {
	l             *executor.LaunchDesc
	reads, writes [][]byte
	err           error
}

// buf returns the bytes of the ptr argument name, at least n bytes long.
func (k *launch) buf(name string, n int) []byte {
	if k.err != nil {
		return nil
	}
	bn, ok := k.l.Args[name].(string)
	if !ok {
		k.err = fmt.Errorf("arg %s: want a buffer name, got %T", name, k.l.Args[name])
		return nil
	}
	var b []byte
	found := false
	for i, a := range k.l.Writes {
		if a.Name == bn {
			b, found = k.writes[i], true
			break
		}
	}
	for i, a := range k.l.Reads {
		if !found && a.Name == bn {
			b, found = k.reads[i], true
		}
	}
	switch {
	case !found:
		k.err = fmt.Errorf("arg %s names buffer %s, which the stage neither reads nor writes", name, bn)
	case len(b) < n:
		k.err = fmt.Errorf("arg %s: buffer %s gives %d bytes, the kernel needs %d", name, bn, len(b), n)
	}
	return b
}

// uint returns the integer argument name, which must lie in [1, 1<<24].
func (k *launch) uint(name string) int {
	if k.err != nil {
		return 0
	}
	v, ok, err := executor.ArgFloat(k.l.Args, name)
	switch {
	case err != nil:
		k.err = err
	case !ok:
		k.err = fmt.Errorf("missing arg %s", name)
	case v != math.Trunc(v) || v < 1 || v > 1<<24:
		k.err = fmt.Errorf("arg %s = %v, want an integer in [1, 16777216]", name, v)
	}
	return int(v)
}

func (k *launch) done(entry string) error {
	if k.err != nil {
		return fmt.Errorf("%s (CPU body): %w", entry, k.err)
	}
	return nil
}

// cpuPreprocess: video_preprocess(frame, out, w, h, size).
func cpuPreprocess(l *executor.LaunchDesc, reads, writes [][]byte) error {
	k := &launch{l: l, reads: reads, writes: writes}
	w, h, size := k.uint("w"), k.uint("h"), k.uint("size")
	frame := k.buf("frame", 4*w*h)
	out := k.buf("out", 4*3*size*size)
	if k.err != nil {
		return k.done(EntryPreprocess)
	}
	x := make([]float32, 3*size*size)
	Preprocess(frame, w, h, size, x)
	putFloats(out, x)
	return nil
}

// cpuConv: video_conv_relu_pool(in, wb, out, cin, cout, size).
func cpuConv(l *executor.LaunchDesc, reads, writes [][]byte) error {
	k := &launch{l: l, reads: reads, writes: writes}
	cin, cout, size := k.uint("cin"), k.uint("cout"), k.uint("size")
	in := k.buf("in", 4*cin*size*size)
	wb := k.buf("wb", 4*(cout*cin*9+cout))
	out := k.buf("out", 4*cout*(size/2)*(size/2))
	if k.err != nil {
		return k.done(EntryConv)
	}
	y := make([]float32, cout*(size/2)*(size/2))
	ConvReluPool(Floats(in[:4*cin*size*size]), Floats(wb[:4*(cout*cin*9+cout)]), cin, cout, size, y)
	putFloats(out, y)
	return nil
}

// cpuFC: video_fc(in, wb, out, nin, nout).
func cpuFC(l *executor.LaunchDesc, reads, writes [][]byte) error {
	k := &launch{l: l, reads: reads, writes: writes}
	nin, nout := k.uint("nin"), k.uint("nout")
	in := k.buf("in", 4*nin)
	wb := k.buf("wb", 4*(nout*nin+nout))
	out := k.buf("out", 4*nout)
	if k.err != nil {
		return k.done(EntryFC)
	}
	y := make([]float32, nout)
	FC(Floats(in[:4*nin]), Floats(wb[:4*(nout*nin+nout)]), nin, nout, y)
	putFloats(out, y)
	return nil
}

// cpuSoftmax: video_softmax_argmax(in, out, n).
func cpuSoftmax(l *executor.LaunchDesc, reads, writes [][]byte) error {
	k := &launch{l: l, reads: reads, writes: writes}
	n := k.uint("n")
	in := k.buf("in", 4*n)
	out := k.buf("out", 4*(n+1))
	if k.err != nil {
		return k.done(EntrySoftmax)
	}
	p := make([]float32, n)
	arg := SoftmaxArgmax(Floats(in[:4*n]), p)
	putFloats(out, p)
	binary.LittleEndian.PutUint32(out[4*n:], uint32(arg))
	return nil
}
