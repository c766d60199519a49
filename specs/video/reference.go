package video

import "math"

// RefOutput is the float64 reference's result for one frame.
type RefOutput struct {
	Logits [Classes]float64
	Probs  [Classes]float64
	Argmax int
}

// Reference runs the whole network on one w×h RGBA8 frame in float64,
// written independently of the float32 kernels: the resize as a separable
// interpolation of whole rows, each conv layer as a full-resolution
// convolution into a zero-padded plane followed by separate ReLU and pooling
// passes, the FC layer as one plain dot product per output, and the softmax
// with the log-sum-exp shift. The weights (float32 values) are the only data
// it shares with the kernels. It is the yardstick of the tests (max relative
// error of the probabilities < 1e-4).
func Reference(frame []byte, w, h int, wt *Weights) RefOutput {
	// Resize: half-pixel centres, edge clamped; the source coordinate and
	// the two taps per output row or column.
	type tap struct {
		i0, i1 int
		f      float64
	}
	taps := func(src int) []tap {
		t := make([]tap, Size)
		for o := range t {
			s := (float64(o)+0.5)*float64(src)/Size - 0.5
			s = math.Max(s, 0)
			i0 := int(math.Floor(s))
			if i0 > src-1 {
				i0 = src - 1
			}
			t[o] = tap{i0, min(i0+1, src-1), s - float64(i0)}
		}
		return t
	}
	tx, ty := taps(w), taps(h)
	mean := [3]float64{0.485, 0.456, 0.406}
	std := [3]float64{0.229, 0.224, 0.225}
	x := make([][]float64, InC) // [c][y*Size+x]
	for c := range x {
		x[c] = make([]float64, Size*Size)
		// Horizontal pass over every source row, then vertical.
		rows := make([][]float64, h)
		for y := range rows {
			rows[y] = make([]float64, Size)
			for o, t := range tx {
				a := float64(frame[(y*w+t.i0)*4+c])
				b := float64(frame[(y*w+t.i1)*4+c])
				rows[y][o] = a + t.f*(b-a)
			}
		}
		for oy, t := range ty {
			for ox := 0; ox < Size; ox++ {
				a, b := rows[t.i0][ox], rows[t.i1][ox]
				v := a + t.f*(b-a)
				x[c][oy*Size+ox] = (v/255 - mean[c]) / std[c]
			}
		}
	}
	a1 := refConvLayer(x, wt.Conv1, C1, Size)
	a2 := refConvLayer(a1, wt.Conv2, C2, Size/2)

	var out RefOutput
	flat := make([]float64, 0, FCIn)
	for _, p := range a2 {
		flat = append(flat, p...)
	}
	for o := 0; o < Classes; o++ {
		var s float64
		for i, v := range flat {
			s += float64(wt.FC[o*FCIn+i]) * v
		}
		out.Logits[o] = s + float64(wt.FC[Classes*FCIn+o])
	}
	m := out.Logits[0]
	for i, v := range out.Logits {
		if v > m {
			m, out.Argmax = v, i
		}
	}
	var z float64
	for _, v := range out.Logits {
		z += math.Exp(v - m)
	}
	lse := m + math.Log(z)
	for i, v := range out.Logits {
		out.Probs[i] = math.Exp(v - lse)
	}
	return out
}

// refConvLayer: 3×3 convolution with zero padding 1 at full resolution,
// ReLU, then 2×2 max pooling, in float64. in is [cin][size*size]; wb holds
// w[cout][cin][3][3] then b[cout].
func refConvLayer(in [][]float64, wb []float32, cout, size int) [][]float64 {
	cin := len(in)
	p := size + 2
	padded := make([][]float64, cin)
	for c := range padded {
		padded[c] = make([]float64, p*p)
		for y := 0; y < size; y++ {
			copy(padded[c][(y+1)*p+1:], in[c][y*size:(y+1)*size])
		}
	}
	half := size / 2
	out := make([][]float64, cout)
	conv := make([]float64, size*size)
	for co := range out {
		for y := 0; y < size; y++ {
			for x := 0; x < size; x++ {
				s := float64(wb[cout*cin*9+co])
				for ci := 0; ci < cin; ci++ {
					for k := 0; k < 9; k++ {
						s += float64(wb[(co*cin+ci)*9+k]) * padded[ci][(y+k/3)*p+x+k%3]
					}
				}
				conv[y*size+x] = math.Max(s, 0)
			}
		}
		out[co] = make([]float64, half*half)
		for y := 0; y < half; y++ {
			for x := 0; x < half; x++ {
				out[co][y*half+x] = math.Max(
					math.Max(conv[2*y*size+2*x], conv[2*y*size+2*x+1]),
					math.Max(conv[(2*y+1)*size+2*x], conv[(2*y+1)*size+2*x+1]))
			}
		}
	}
	return out
}
