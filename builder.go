package dagrun

import (
	"fmt"
	"maps"

	"github.com/dagrun/dagrun/dag"
)

// SpecBuilder writes a spec in Go, stage by stage, as a YAML spec lists
// them (in the order one stream would run them), in the style of
// Taskflow's and CUDASTF's task graphs: declare the buffers, then each
// stage with the buffers it reads and writes; dagrun derives the order
// (RAW, WAR, WAW) and plans the streams and waits. The fields of a buffer
// and of a stage are set by methods that chain:
//
//	b := dagrun.NewSpec("pipeline")
//	x := b.Buffer("x", 4096).Input().Random(1)
//	y := b.Buffer("y", 4096).Output()
//	b.Stage("scale", "scale").Reads(x).Writes(y).Arg("a", 2.0)
//	plan, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
//
// The builder checks nothing itself: Plan validates the spec it builds as
// Load validates a file, every mistake at once, each named by its path in
// the spec (stages[1].reads: …) with a hint in the builder's terms.
type SpecBuilder struct {
	s dag.Spec
}

// NewSpec starts a spec named name (automatically synchronized: the
// planner places streams, events and waits).
func NewSpec(name string) *SpecBuilder {
	return &SpecBuilder{s: dag.Spec{Version: dag.SpecVersion, Name: name, Sync: dag.SyncAuto}}
}

// Buf is a buffer declared with SpecBuilder.Buffer or Tensor, or a byte
// range of one (Range): what Reads and Writes take. Its other methods set
// a field of the declared buffer (the whole buffer, also when called on a
// range) and return the Buf, so that they chain. They panic on a Buf that
// no SpecBuilder declared.
type Buf struct {
	b          *SpecBuilder
	i          int // index in b.s.Buffers
	name       string
	start, end int64
	ranged     bool
}

// Name is the buffer's name.
func (x Buf) Name() string { return x.name }

// Range is bytes [start, end) of the buffer, as YAML's x[start:end]
// (offsets in bytes). On a range it is relative to that range, as Go's
// slicing of a slice is: x.Range(16, 48).Range(4, 8) is x[20:24]. Plan
// reports a range past the buffer's end; Range panics, as Go's slicing
// does, on a start below 0, an end not after start, or, on a range, an
// end past the range's end.
func (x Buf) Range(start, end int64) Buf {
	if start < 0 || end <= start || x.ranged && end > x.end-x.start {
		want := "0 ≤ start < end"
		if x.ranged {
			want = fmt.Sprintf("0 ≤ start < end ≤ %d, the length of %s[%d:%d]", x.end-x.start, x.name, x.start, x.end)
		}
		panic(fmt.Sprintf("dagrun: %s.Range(%d, %d): want %s (bytes [start, end), as YAML's %s[%d:%d])", x.name, start, end, want, x.name, start+x.start, end+x.start))
	}
	x.start, x.end, x.ranged = x.start+start, x.start+end, true
	return x
}

// set applies f to the declared buffer and returns x.
func (x Buf) set(method string, f func(*dag.BufferSpec)) Buf {
	if x.b == nil {
		panic("dagrun: Buf." + method + " on a Buf that SpecBuilder.Buffer or Tensor did not return")
	}
	f(&x.b.s.Buffers[x.i])
	return x
}

// Input marks the buffer role: input (written by the host before the run;
// stages only read it).
func (x Buf) Input() Buf {
	return x.set("Input", func(b *dag.BufferSpec) { b.Role = dag.RoleInput })
}

// Output marks the buffer role: output (read back and checksummed after
// the run; `dagrun run --out` writes it).
func (x Buf) Output() Buf {
	return x.set("Output", func(b *dag.BufferSpec) { b.Role = dag.RoleOutput })
}

// HostPinned places the buffer in page-locked host memory (where:
// host_pinned): the buffers a stream of frames goes through.
func (x Buf) HostPinned() Buf {
	return x.set("HostPinned", func(b *dag.BufferSpec) { b.Where = dag.WhereHostPinned })
}

// Copies makes the buffer a ring of k copies across iterations (copies: k).
// It panics on a k below 1 (a ring has a copy; Plan could not tell
// Copies(0) from no Copies at all); Plan reports a k past the limit.
func (x Buf) Copies(k int) Buf {
	if k < 1 {
		panic(fmt.Sprintf("dagrun: %s.Copies(%d): want k ≥ 1", x.name, k))
	}
	return x.set("Copies", func(b *dag.BufferSpec) { b.Copies = k })
}

// Fill sets every float32 element's initial value (init: {fill: v}).
func (x Buf) Fill(v float64) Buf {
	return x.set("Fill", func(b *dag.BufferSpec) { b.Init = dag.Init{Kind: dag.InitFill, Value: v} })
}

// Random sets the initial bytes from a PRNG with seed (init: {random: seed}).
func (x Buf) Random(seed int64) Buf {
	return x.set("Random", func(b *dag.BufferSpec) { b.Init = dag.Init{Kind: dag.InitRandom, Seed: seed} })
}

// InDevice puts a device buffer in GPU d's memory (device: d, 0-based;
// docs/spec.md, "Several devices"). Without it a buffer is on device 0,
// or with Placement "balance" placed by the planner. It panics on a d
// below 0, as an index would; Plan reports one past the last device.
func (x Buf) InDevice(d int) Buf {
	mustDevice(x.name+".InDevice", d)
	return x.set("InDevice", func(b *dag.BufferSpec) { b.Device = d })
}

// mustDevice panics on a negative device d given to method (a Go spec
// marks "no device given" with dag.AnyDevice, which is negative, so Plan
// could not tell InDevice(-1) from no InDevice at all).
func mustDevice(method string, d int) {
	if d < 0 {
		panic(fmt.Sprintf("dagrun: %s(%d): want a device ≥ 0 (0-based GPU index)", method, d))
	}
}

// Buffer declares a buffer of n bytes and returns it for Reads and Writes.
func (b *SpecBuilder) Buffer(name string, n int64) Buf {
	return b.add(dag.BufferSpec{Name: name, Bytes: n})
}

// Tensor declares a buffer by element type (f32, f16, bf16, i32, u32, i8,
// u8, f64, i64) and shape in elements; its size is computed as in YAML
// (dtype: …, shape: […]).
func (b *SpecBuilder) Tensor(name, dtype string, shape []int64) Buf {
	return b.add(dag.BufferSpec{Name: name, DType: dtype, Shape: append([]int64(nil), shape...)})
}

func (b *SpecBuilder) add(bs dag.BufferSpec) Buf {
	bs.Device = dag.AnyDevice // no device: given, as a YAML buffer without one
	b.s.Buffers = append(b.s.Buffers, bs)
	return Buf{b: b, i: len(b.s.Buffers) - 1, name: bs.Name}
}

// StageBuilder is a stage declared with SpecBuilder.Stage. Its methods set
// the stage's fields and return it, so that they chain.
type StageBuilder struct {
	b *SpecBuilder
	i int // index in b.s.Stages
}

// Stage appends a stage running kernel (a built-in such as copy, fill,
// scale, mix or spin, or with GoFunc a Go function's name) and returns it
// for its fields.
func (b *SpecBuilder) Stage(name, kernel string) *StageBuilder {
	b.s.Stages = append(b.s.Stages, dag.StageSpec{Name: name, Kernel: kernel, Device: dag.AnyDevice}) // no device: given
	return &StageBuilder{b: b, i: len(b.s.Stages) - 1}
}

// spec is the declared stage.
func (st *StageBuilder) spec() *dag.StageSpec { return &st.b.s.Stages[st.i] }

// Reads adds the buffers (or byte ranges) the stage reads.
func (st *StageBuilder) Reads(bufs ...Buf) *StageBuilder {
	st.spec().Reads = append(st.spec().Reads, accesses(bufs)...)
	return st
}

// Writes adds the buffers (or byte ranges) the stage writes.
func (st *StageBuilder) Writes(bufs ...Buf) *StageBuilder {
	st.spec().Writes = append(st.spec().Writes, accesses(bufs)...)
	return st
}

// Arg sets a kernel argument: a number, or a buffer name for a ptr
// parameter of a user kernel.
func (st *StageBuilder) Arg(name string, v any) *StageBuilder {
	if st.spec().Args == nil {
		st.spec().Args = map[string]any{}
	}
	st.spec().Args[name] = v
	return st
}

// Duration sets the stage's cost estimate in µs (duration_us), which the
// planner's critical path and caps use.
func (st *StageBuilder) Duration(us float64) *StageBuilder {
	st.spec().DurationUS = us
	return st
}

// After orders the named earlier stages before this one (after: […]),
// beyond what the buffers imply.
func (st *StageBuilder) After(stages ...string) *StageBuilder {
	st.spec().After = append(st.spec().After, stages...)
	return st
}

// OnStream pins the stage to the named stream ("host": the host thread).
func (st *StageBuilder) OnStream(name string) *StageBuilder {
	st.spec().Stream = name
	return st
}

// OnDevice runs the stage on GPU d (device: d, 0-based). Without it a
// stage runs on its stream's device, else on the device of the device
// buffers it touches (a copy: its destination's), else on device 0; with
// Placement "balance" the planner places it. It panics on a d below 0,
// as an index would; Plan reports one past the last device.
func (st *StageBuilder) OnDevice(d int) *StageBuilder {
	mustDevice(st.spec().Name+".OnDevice", d)
	st.spec().Device = d
	return st
}

// GoFunc makes the stage's kernel the Go function bound under its kernel
// name at run time (RunOptions.Funcs; in YAML `kernel: {go: name}`).
func (st *StageBuilder) GoFunc() *StageBuilder {
	st.spec().Go = true
	return st
}

// Devices sets how many GPUs the spec runs on (devices: n); by default one
// more than the largest device InDevice and OnDevice name.
func (b *SpecBuilder) Devices(n int) *SpecBuilder {
	b.s.Devices = n
	return b
}

// Placement sets options.placement: PlacementSpec (the default: the
// devices InDevice and OnDevice name) or PlacementBalance (the planner
// places the stages and buffers that name none and adds the peer copies;
// docs/spec.md, "Placement").
func (b *SpecBuilder) Placement(mode string) *SpecBuilder {
	b.s.Options.Placement = mode
	return b
}

// Spec returns the spec built so far (a copy of its lists: later calls do
// not change it). Plan validates it.
func (b *SpecBuilder) Spec() *Spec {
	s := b.s
	s.Buffers = append([]dag.BufferSpec(nil), b.s.Buffers...)
	s.Stages = append([]dag.StageSpec(nil), b.s.Stages...)
	for i := range s.Stages {
		s.Stages[i].Args = maps.Clone(s.Stages[i].Args)
	}
	return &s
}

// accesses turns Bufs into accesses: a whole buffer has Bytes 0, which
// Plan resolves to the buffer's size as the loader does for a bare name;
// a range [start, end) has Offset start and Bytes end − start.
func accesses(bufs []Buf) []dag.Access {
	out := make([]dag.Access, 0, len(bufs))
	for _, x := range bufs {
		a := dag.Access{Buffer: x.name}
		if x.ranged {
			a.Offset, a.Bytes = x.start, x.end-x.start
		}
		out = append(out, a)
	}
	return out
}
