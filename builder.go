package dagrun

import "github.com/dagrun/dagrun/dag"

// SpecBuilder writes a spec in Go, stage by stage, as a YAML spec lists
// them (in the order one stream would run them), in the style of
// Taskflow's and CUDASTF's task graphs: declare the buffers, then each
// stage with the buffers it reads and writes; dagrun derives the order
// (RAW, WAR, WAW) and plans the streams and waits.
//
//	b := dagrun.NewSpec("pipeline")
//	x := b.Buffer("x", 4096, dagrun.Input(), dagrun.Random(1))
//	y := b.Buffer("y", 4096, dagrun.Output())
//	b.Stage("scale", "scale", dagrun.Reads(x), dagrun.Writes(y), dagrun.Arg("a", 2.0))
//	plan, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
//
// The builder checks nothing itself: Plan validates the spec it builds as
// Load validates a file, every mistake at once, each named by its path in
// the spec (stages[1].reads: …).
type SpecBuilder struct {
	s dag.Spec
}

// Buf names a buffer, or a byte range of one, for Reads and Writes.
type Buf struct {
	name   string
	off, n int64
	ranged bool
}

// Name is the buffer's name.
func (x Buf) Name() string { return x.name }

// Range is bytes [off, off+n) of the buffer (offsets and sizes in bytes).
func (x Buf) Range(off, n int64) Buf { return Buf{name: x.name, off: off, n: n, ranged: true} }

// NewSpec starts a spec named name (automatically synchronized: the
// planner places streams, events and waits).
func NewSpec(name string) *SpecBuilder {
	return &SpecBuilder{s: dag.Spec{Version: dag.SpecVersion, Name: name, Sync: dag.SyncAuto}}
}

// BufferOption sets a field of a buffer declared with Buffer or Tensor.
type BufferOption func(*dag.BufferSpec)

// Input marks a buffer role: input (written by the host before the run;
// stages only read it).
func Input() BufferOption { return func(b *dag.BufferSpec) { b.Role = dag.RoleInput } }

// Output marks a buffer role: output (read back and checksummed after the
// run; `dagrun run --out` writes it).
func Output() BufferOption { return func(b *dag.BufferSpec) { b.Role = dag.RoleOutput } }

// HostPinned places a buffer in page-locked host memory (where: host_pinned):
// the buffers a stream of frames goes through.
func HostPinned() BufferOption { return func(b *dag.BufferSpec) { b.Where = dag.WhereHostPinned } }

// Copies makes a buffer a ring of k copies across iterations (copies: k).
func Copies(k int) BufferOption { return func(b *dag.BufferSpec) { b.Copies = k } }

// Fill sets every float32 element's initial value (init: {fill: v}).
func Fill(v float64) BufferOption {
	return func(b *dag.BufferSpec) { b.Init = dag.Init{Kind: dag.InitFill, Value: v} }
}

// Random sets the initial bytes from a PRNG with seed (init: {random: seed}).
func Random(seed int64) BufferOption {
	return func(b *dag.BufferSpec) { b.Init = dag.Init{Kind: dag.InitRandom, Seed: seed} }
}

// InDevice puts a device buffer in GPU d's memory (device: d, 0-based;
// docs/spec.md, "Several devices"). Without it a buffer is on device 0,
// or with Options.Placement "balance" placed by the planner.
func InDevice(d int) BufferOption { return func(b *dag.BufferSpec) { b.Device = d } }

// Buffer declares a buffer of n bytes and returns its name for Reads and
// Writes.
func (b *SpecBuilder) Buffer(name string, n int64, opts ...BufferOption) Buf {
	return b.add(dag.BufferSpec{Name: name, Bytes: n}, opts)
}

// Tensor declares a buffer by element type (f32, f16, bf16, i32, u32, i8,
// u8, f64, i64) and shape in elements; its size is computed as in YAML
// (dtype: …, shape: […]).
func (b *SpecBuilder) Tensor(name, dtype string, shape []int64, opts ...BufferOption) Buf {
	return b.add(dag.BufferSpec{Name: name, DType: dtype, Shape: append([]int64(nil), shape...)}, opts)
}

func (b *SpecBuilder) add(bs dag.BufferSpec, opts []BufferOption) Buf {
	bs.Device = dag.AnyDevice // no device: given, as a YAML buffer without one
	for _, o := range opts {
		o(&bs)
	}
	b.s.Buffers = append(b.s.Buffers, bs)
	return Buf{name: bs.Name}
}

// StageOption sets a field of a stage declared with Stage.
type StageOption func(*dag.StageSpec)

// Reads adds the buffers (or byte ranges) the stage reads.
func Reads(bufs ...Buf) StageOption {
	return func(st *dag.StageSpec) { st.Reads = append(st.Reads, accesses(bufs)...) }
}

// Writes adds the buffers (or byte ranges) the stage writes.
func Writes(bufs ...Buf) StageOption {
	return func(st *dag.StageSpec) { st.Writes = append(st.Writes, accesses(bufs)...) }
}

// Arg sets a kernel argument: a number, or a buffer name for a ptr
// parameter of a user kernel.
func Arg(name string, v any) StageOption {
	return func(st *dag.StageSpec) {
		if st.Args == nil {
			st.Args = map[string]any{}
		}
		st.Args[name] = v
	}
}

// Duration sets the stage's cost estimate in µs (duration_us), which the
// planner's critical path and caps use.
func Duration(us float64) StageOption { return func(st *dag.StageSpec) { st.DurationUS = us } }

// After orders the named earlier stages before this one (after: […]),
// beyond what the buffers imply.
func After(stages ...string) StageOption {
	return func(st *dag.StageSpec) { st.After = append(st.After, stages...) }
}

// OnStream pins the stage to the named stream ("host": the host thread).
func OnStream(name string) StageOption { return func(st *dag.StageSpec) { st.Stream = name } }

// OnDevice runs the stage on GPU d (device: d, 0-based). Without it a
// stage runs on its stream's device, else on the device of the device
// buffers it touches (a copy: its destination's), else on device 0; with
// Options.Placement "balance" the planner places it.
func OnDevice(d int) StageOption { return func(st *dag.StageSpec) { st.Device = d } }

// GoFunc makes the stage's kernel the Go function bound under its kernel
// name at run time (RunOptions.Funcs; in YAML `kernel: {go: name}`).
func GoFunc() StageOption { return func(st *dag.StageSpec) { st.Go = true } }

// Stage appends a stage running kernel (a built-in such as copy, fill,
// scale, mix or spin, a kernel of the spec's kernels, or with GoFunc a Go
// function's name) and returns b, so that stages chain.
func (b *SpecBuilder) Stage(name, kernel string, opts ...StageOption) *SpecBuilder {
	st := dag.StageSpec{Name: name, Kernel: kernel, Device: dag.AnyDevice} // no device: given
	for _, o := range opts {
		o(&st)
	}
	b.s.Stages = append(b.s.Stages, st)
	return b
}

// Devices sets how many GPUs the spec runs on (devices: n); by default one
// more than the largest device InDevice and OnDevice name.
func (b *SpecBuilder) Devices(n int) *SpecBuilder {
	b.s.Devices = n
	return b
}

// Placement sets options.placement: dag.PlacementSpec (the default: the
// devices InDevice and OnDevice name) or dag.PlacementBalance (the planner
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
	return &s
}

// accesses turns Bufs into accesses: a whole buffer has Bytes 0, which
// Plan resolves to the buffer's size as the loader does for a bare name.
func accesses(bufs []Buf) []dag.Access {
	out := make([]dag.Access, 0, len(bufs))
	for _, x := range bufs {
		a := dag.Access{Buffer: x.name}
		if x.ranged {
			a.Offset, a.Bytes = x.off, x.n
		}
		out = append(out, a)
	}
	return out
}
