// Package synth makes specs of any size for benchmarks: the synthetic
// shapes that stress a planner in different ways (many short streams, many
// streams live at once, one buffer read by everyone) and chains of copies
// of a real model graph. Every stage writes its own buffer and reads its
// producers' buffers, so the dependences are RAW hazards that the spec's
// own hazard analysis finds.
package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/dag"
)

// Shapes lists the synthetic shapes by name, as Shape takes them.
var Shapes = []string{"layered", "wavefront", "shared-read", "series-parallel", "fan-chains"}

// Shape returns the synthetic spec of the named shape with n stages (n ≥ 2):
//
//   - layered: layers of 64 stages, each reading 2 random stages of the
//     layer before and, one time in 8, one of the 2–4 layers before that;
//   - wavefront: a square grid (⌈√n⌉ wide), row-major; (i, j) reads
//     (i−1, j) and (i, j−1);
//   - shared-read: one stage writes a buffer that every other stage but
//     the last reads, each writing its slice of one output buffer; the
//     last (a reducer) reads that buffer;
//   - series-parallel: random series and parallel compositions;
//   - fan-chains: blocks of one source fanning out to 64 chains of 16
//     stages that join again.
//
// Errors: an unknown shape, n < 2, n > dag.MaxStages.
func Shape(name string, n int) (*dag.Spec, error) {
	if n < 2 {
		return nil, fmt.Errorf("synth: %d stages: want at least 2", n)
	}
	if n > dag.MaxStages {
		return nil, fmt.Errorf("synth: %d stages: a spec has at most %d (dag.MaxStages)", n, dag.MaxStages)
	}
	switch name {
	case "layered":
		return Layered(n), nil
	case "wavefront":
		return Wavefront(n, 0), nil
	case "shared-read":
		return SharedRead(n), nil
	case "series-parallel":
		return SeriesParallel(n), nil
	case "fan-chains":
		return FanChains(n), nil
	}
	return nil, fmt.Errorf("synth: unknown shape %q, want one of %s", name, strings.Join(Shapes, ", "))
}

// builder appends stages that each write a 256-byte buffer of their own.
type builder struct{ s *dag.Spec }

func newBuilder(name string, n int) *builder {
	return &builder{s: &dag.Spec{Version: 1, Name: name, Sync: dag.SyncAuto, Stages: make([]dag.StageSpec, 0, n), Buffers: make([]dag.BufferSpec, 0, n)}}
}

const bufBytes = 256

// add appends a stage of dur µs reading the outputs of the given stages;
// it returns its index.
func (y *builder) add(dur float64, from ...int) int {
	i := len(y.s.Stages)
	out := "t" + strconv.Itoa(i)
	y.s.Buffers = append(y.s.Buffers, dag.BufferSpec{Name: out, Bytes: bufBytes, Where: dag.WhereDevice, Role: dag.RoleTemp})
	st := dag.StageSpec{Name: "n" + strconv.Itoa(i), Kernel: dag.BuiltinMix, DurationUS: dur,
		Launch: dag.Launch{Grid: [3]int{1, 1, 1}}, Writes: []dag.Access{{Buffer: out, Bytes: bufBytes}}}
	st.Reads = make([]dag.Access, 0, len(from))
	for _, f := range from {
		st.Reads = append(st.Reads, dag.Access{Buffer: "t" + strconv.Itoa(f), Bytes: bufBytes})
	}
	y.s.Stages = append(y.s.Stages, st)
	return i
}

// Layered is the layered shape of Shape.
func Layered(n int) *dag.Spec {
	const W = 64
	rng := rand.New(rand.NewPCG(1, 1))
	y := newBuilder("layered", n)
	for i := 0; i < n; i++ {
		l := i / W
		var from []int
		if l > 0 {
			from = append(from, (l-1)*W+rng.IntN(W), (l-1)*W+rng.IntN(W))
			if l > 4 && rng.IntN(8) == 0 {
				from = append(from, (l-2-rng.IntN(3))*W+rng.IntN(W))
			}
		}
		y.add(float64(1+rng.IntN(20)), from...)
	}
	return y.s
}

// Wavefront is a grid w wide (⌈√n⌉ when w ≤ 0), row-major: stage (i, j)
// reads (i−1, j) and (i, j−1).
func Wavefront(n, w int) *dag.Spec {
	if w <= 0 {
		w = int(math.Ceil(math.Sqrt(float64(n))))
	}
	y := newBuilder("wavefront", n)
	for k := 0; k < n; k++ {
		i, j := k/w, k%w
		var from []int
		if i > 0 {
			from = append(from, k-w)
		}
		if j > 0 {
			from = append(from, k-1)
		}
		y.add(5, from...)
	}
	return y.s
}

// SharedRead is the shared-read shape of Shape: stage 0 writes t0, stages
// 1…n−2 read it and each write their own 256-byte slice of one buffer out,
// and stage n−1 reads out whole (one access, however many writers).
func SharedRead(n int) *dag.Spec {
	y := newBuilder("shared-read", n)
	y.add(5)
	k := int64(max(n-2, 1))
	y.s.Buffers = append(y.s.Buffers, dag.BufferSpec{Name: "out", Bytes: k * bufBytes, Where: dag.WhereDevice, Role: dag.RoleTemp})
	for i := 1; i < n-1; i++ {
		y.s.Stages = append(y.s.Stages, dag.StageSpec{Name: "n" + strconv.Itoa(i), Kernel: dag.BuiltinMix, DurationUS: float64(1 + i%7),
			Launch: dag.Launch{Grid: [3]int{1, 1, 1}},
			Reads:  []dag.Access{{Buffer: "t0", Bytes: bufBytes}},
			Writes: []dag.Access{{Buffer: "out", Offset: int64(i-1) * bufBytes, Bytes: bufBytes}}})
	}
	y.s.Stages = append(y.s.Stages, dag.StageSpec{Name: "n" + strconv.Itoa(n-1), Kernel: dag.BuiltinMix, DurationUS: 5,
		Launch: dag.Launch{Grid: [3]int{1, 1, 1}}, Reads: []dag.Access{{Buffer: "out", Bytes: k * bufBytes}},
		Writes: []dag.Access{{Buffer: "sum", Bytes: bufBytes}}})
	y.s.Buffers = append(y.s.Buffers, dag.BufferSpec{Name: "sum", Bytes: bufBytes, Where: dag.WhereDevice, Role: dag.RoleOutput})
	return y.s
}

// SeriesParallel is random series and parallel (2–3 branches, joined by
// one stage) compositions, n stages in all.
func SeriesParallel(n int) *dag.Spec {
	rng := rand.New(rand.NewPCG(2, 2))
	y := newBuilder("series-parallel", n)
	var gen func(in []int, size int) int
	gen = func(in []int, size int) int {
		switch {
		case size <= 2:
			last := y.add(float64(1+rng.IntN(10)), in...)
			if size == 2 {
				last = y.add(float64(1+rng.IntN(10)), last)
			}
			return last
		case rng.IntN(2) == 0 || size < 8: // series
			k := 1 + rng.IntN(size-1)
			mid := gen(in, k)
			return gen([]int{mid}, size-k)
		default: // parallel
			b := 2 + rng.IntN(2)
			rest := size - 1
			var outs []int
			for i := 0; i < b; i++ {
				part := rest / (b - i)
				if i < b-1 {
					part = max(1, part/2+rng.IntN(part+1))
					part = min(part, rest-(b-1-i))
				}
				outs = append(outs, gen(in, part))
				rest -= part
			}
			return y.add(1, outs...)
		}
	}
	gen(nil, n)
	return y.s
}

// FanChains is blocks of one source fanning out to 64 chains of 16 stages
// that fan back into one join, the join being the next block's source.
func FanChains(n int) *dag.Spec {
	const F, L = 64, 16
	rng := rand.New(rand.NewPCG(3, 3))
	y := newBuilder("fan-chains", n)
	src := y.add(1)
	for len(y.s.Stages) < n {
		var tails []int
		for f := 0; f < F && len(y.s.Stages) < n-1; f++ {
			prev := src
			for k := 0; k < L && len(y.s.Stages) < n-1; k++ {
				prev = y.add(float64(1+rng.IntN(10)), prev)
			}
			tails = append(tails, prev)
		}
		src = y.add(1, tails...)
	}
	return y.s
}

// Chain returns k copies of model (a spec of one model graph, as
// dag.ImportGraph makes it) run one after the other: copy c's stages and
// buffers are named "cC_NAME", its weights (inputs without initial
// contents) are shared by every copy, and copy c+1's inputs are written by
// a stage "cC+1_in" that reads copy c's outputs, so that every temp of copy
// c is dead before copy c+1 starts. Copy 0 keeps the model's inputs; the
// last copy's outputs are the chain's. k = 1 gives model renamed.
//
// Errors: k < 1, more than dag.MaxStages stages, a model with no input or
// no output.
func Chain(model *dag.Spec, k int) (*dag.Spec, error) {
	if k < 1 {
		return nil, fmt.Errorf("synth: %d copies: want at least 1", k)
	}
	if n := int64(k)*int64(len(model.Stages)+1) - 1; n > dag.MaxStages {
		return nil, fmt.Errorf("synth: %d copies of %s (%d stages each) make %d stages: a spec has at most %d (dag.MaxStages)", k, model.Name, len(model.Stages), n, dag.MaxStages)
	}
	weight := func(b *dag.BufferSpec) bool { return b.Role == dag.RoleInput && b.Init.Kind == "" }
	var inputs, outputs []dag.BufferSpec
	for _, b := range model.Buffers {
		switch {
		case weight(&b):
		case b.Role == dag.RoleInput:
			inputs = append(inputs, b)
		case b.Role == dag.RoleOutput:
			outputs = append(outputs, b)
		}
	}
	if len(inputs) == 0 || len(outputs) == 0 {
		return nil, fmt.Errorf("synth: model %s has %d inputs and %d outputs: want at least one of each", model.Name, len(inputs), len(outputs))
	}
	s := &dag.Spec{Version: 1, Name: fmt.Sprintf("%s-x%d", model.Name, k), Sync: dag.SyncAuto, Options: model.Options,
		Stages:  make([]dag.StageSpec, 0, k*(len(model.Stages)+1)),
		Buffers: make([]dag.BufferSpec, 0, k*len(model.Buffers))}
	shared := map[string]bool{}
	for _, b := range model.Buffers {
		if weight(&b) {
			shared[b.Name] = true
			s.Buffers = append(s.Buffers, b)
		}
	}
	rename := func(c int, list []dag.Access) []dag.Access {
		out := slices.Clone(list)
		for i := range out {
			if !shared[out[i].Buffer] {
				out[i].Buffer = fmt.Sprintf("c%d_%s", c, out[i].Buffer)
			}
		}
		return out
	}
	for c := range k {
		for _, b := range model.Buffers {
			if shared[b.Name] {
				continue
			}
			b.Name = fmt.Sprintf("c%d_%s", c, b.Name)
			switch {
			case c > 0 && b.Role == dag.RoleInput:
				b.Role, b.Init = dag.RoleTemp, dag.Init{}
			case c < k-1 && b.Role == dag.RoleOutput:
				b.Role = dag.RoleTemp
			}
			s.Buffers = append(s.Buffers, b)
		}
		if c > 0 {
			in := dag.StageSpec{Name: fmt.Sprintf("c%d_in", c), Kernel: dag.BuiltinMix, DurationUS: 1, Launch: dag.Launch{Grid: [3]int{1, 1, 1}}}
			for _, b := range outputs {
				in.Reads = append(in.Reads, dag.Access{Buffer: fmt.Sprintf("c%d_%s", c-1, b.Name), Bytes: b.Bytes})
			}
			for _, b := range inputs {
				in.Writes = append(in.Writes, dag.Access{Buffer: fmt.Sprintf("c%d_%s", c, b.Name), Bytes: b.Bytes})
			}
			s.Stages = append(s.Stages, in)
		}
		for _, st := range model.Stages {
			st.Name = fmt.Sprintf("c%d_%s", c, st.Name)
			st.Reads, st.Writes = rename(c, st.Reads), rename(c, st.Writes)
			st.Pos = dag.Pos{}
			s.Stages = append(s.Stages, st)
		}
	}
	return s, nil
}
