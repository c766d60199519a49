package dag

import (
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/internal/safefile"
)

// Pos is a position in a spec file: 1-based line and column. The zero Pos
// means "no position" (a spec built in Go rather than loaded from YAML).
type Pos struct {
	File string
	Line int
	Col  int
}

// String is file:line:col, the file quoted where it holds control
// characters or spaces (safefile.Quote).
func (p Pos) String() string {
	file := p.File
	if file != goSpecFile { // Validate's own marker, replaced before it reaches anyone
		file = safefile.Quote(file)
	}
	if p.Line == 0 {
		if p.File == "" {
			return "<spec>"
		}
		return file
	}
	return fmt.Sprintf("%s:%d:%d", file, p.Line, p.Col)
}

// Buffer placement (BufferSpec.Where): the values of contract.Where.
const (
	WhereDevice       = string(contract.WhereDevice)       // device memory (cuMemAlloc)
	WhereHostPinned   = string(contract.WhereHostPinned)   // page-locked host memory (cuMemAllocHost)
	WhereHostPageable = string(contract.WhereHostPageable) // ordinary host memory (malloc): copies are staged
)

// Buffer roles (BufferSpec.Role): the values of contract.Role.
const (
	RoleInput  = string(contract.RoleInput)  // written by the host before the run; stages may only read it
	RoleOutput = string(contract.RoleOutput) // read back and checksummed after the run
	RoleTemp   = string(contract.RoleTemp)   // scratch; lives only within the run
)

// Initial contents kinds (Init.Kind): the values of contract.InitKind.
const (
	InitZeros  = string(contract.InitZeros)  // all bytes 0
	InitFill   = string(contract.InitFill)   // every float32 element = Value
	InitFile   = string(contract.InitFile)   // raw bytes of Path (relative to the spec file), exactly Bytes long
	InitRandom = string(contract.InitRandom) // bytes from a seeded PRNG (Seed); see executor.RandomBytes
)

// Sync modes of a spec.
const (
	SyncAuto   = "auto"   // the planner derives streams, events and waits
	SyncManual = "manual" // every stage names its stream; the spec lists its own waits
)

// Init is the initial contents of a buffer before the first iteration.
type Init struct {
	Kind  string  // one of InitZeros, InitFill, InitFile, InitRandom; "" means zeros
	Value float64 // InitFill: the float32 value of every element
	Path  string  // InitFile: path, relative to the spec's directory
	Seed  int64   // InitRandom: PRNG seed
}

// BufferSpec declares one named buffer. Bytes is always set after loading:
// either given directly or computed as the dtype's size × the product of Shape.
type BufferSpec struct {
	Name   string
	Bytes  int64   // size in bytes, > 0
	DType  string  // optional element type: f32, f16, bf16, i32, u32, i8, u8, f64, i64
	Shape  []int64 // optional shape in elements; with DType it determines Bytes
	Where  string  // WhereDevice (default) or WhereHostPinned
	Role   string  // RoleInput, RoleOutput, RoleTemp (default temp)
	Init   Init
	Copies int // ring size across iterations; 0 or 1 means one copy
	// Alloc is AllocLazy for a buffer each stream allocates with cuMemAlloc
	// at its first use (a library's per-stream workspace), AllocProducer
	// for a temp that its first writer allocates for itself (never in the
	// arena), "" otherwise.
	Alloc string
	// Device is the GPU a WhereDevice buffer lives on (0-based; docs/spec.md,
	// "Several devices"), 0 for host memory. AnyDevice, only with
	// Options.Placement PlacementBalance, leaves it to the planner. In a
	// spec built in Go (Validate) 0 is device 0, given, once the spec has
	// several devices or placement balance; AnyDevice is a buffer that names
	// none, as a YAML buffer without device: (dagrun.NewSpec's buffers).
	Device int
	Pos    Pos
}

// Buffer allocation modes (BufferSpec.Alloc).
const (
	// AllocLazy is `alloc: lazy`: each stream allocates the buffer with
	// cuMemAlloc at its first use, like a library's workspace.
	AllocLazy = "lazy"
	// AllocProducer is `alloc: producer`: a temp that its first writer
	// allocates for itself (a library call that returns a new tensor, as
	// PyTorch's operators do). The planner never places it in the arena;
	// the executors give it bytes of its own. Only a temp may have it.
	AllocProducer = "producer"
)

func (b BufferSpec) String() string {
	return fmt.Sprintf("buffer %s (%d bytes, %s, %s)", b.Name, b.Bytes, b.Where, b.Role)
}

// ParamSpec is one typed parameter of a user PTX kernel.
// Type is one of: ptr (a buffer name), u32, i32, u64, i64, f32, f64.
type ParamSpec struct {
	Name string
	Type string
}

// KernelSpec declares a user kernel loaded from a PTX file.
type KernelSpec struct {
	Name   string
	PTX    string // path to the PTX file, relative to the spec's directory
	Entry  string // the .entry name in the PTX
	Params []ParamSpec
	Pos    Pos
}

func (k KernelSpec) String() string {
	return fmt.Sprintf("kernel %s (%s:%s)", k.Name, k.PTX, k.Entry)
}

// Access is one read or write of a stage: the byte range [Offset, Offset+Bytes)
// of Buffer. After loading, Bytes is always > 0 (a whole-buffer access has
// Offset 0 and Bytes = the buffer's size).
type Access struct {
	Buffer string
	Offset int64 // bytes
	Bytes  int64 // bytes
	Pos    Pos
}

// Range is the byte range of the access (without its position).
func (a Access) Range() contract.Range {
	return contract.Range{Buffer: a.Buffer, Offset: a.Offset, Bytes: a.Bytes}
}

// End is the first byte past the access.
func (a Access) End() int64 { return a.Range().End() }

// Overlaps reports whether a and b touch at least one common byte of the
// same buffer (contract.Range.Overlaps).
func (a Access) Overlaps(b Access) bool { return a.Range().Overlaps(b.Range()) }

// Covers reports whether a includes every byte of b (same buffer;
// contract.Range.Covers).
func (a Access) Covers(b Access) bool { return a.Range().Covers(b.Range()) }

func (a Access) String() string { return a.Range().String() }

// Launch is a kernel launch shape. Zero values mean "let the backend choose".
type Launch struct {
	Grid  [3]int
	Block [3]int
}

// StageSpec declares one stage: one kernel launch (built-in or user kernel)
// with the buffers it reads and writes.
type StageSpec struct {
	Name   string
	Kernel string // a built-in (contract.Builtins), a KernelSpec name, or (Go) a Go function's name
	// Go marks Kernel as the name of a Go function, bound when the plan
	// runs (executor.Options.Funcs; written `kernel: {go: name}`), rather
	// than a built-in or a kernel of Spec.Kernels.
	Go bool
	// Args are the kernel arguments by name: numbers, or buffer names for
	// ptr params. Load gives stages whose args are written alike one
	// shared map: treat a loaded spec's Args as read-only (copy a map,
	// e.g. with maps.Clone, before changing it).
	Args   map[string]any
	Launch Launch
	Reads  []Access
	Writes []Access
	After  []string // control dependencies: stage names that must happen-before this one
	Stream string   // optional pin to a named stream; required in SyncManual
	// Waits lists, in SyncManual specs only, the stages whose completion this
	// stage's stream waits for before the launch (an event recorded right after
	// each named stage, and a stream wait on it issued just before this launch).
	Waits []string
	// WaitFor lists, in SyncManual specs only, the waits written as
	// mappings: on a named event ({event: req_done}) or on a stage's record
	// some iterations back ({stage: d2h, lag: 2}).
	WaitFor []WaitSpec
	// Event names an event this stage records right after its launch
	// (SyncManual only); several stages may record the same event, and a
	// wait on it waits for its latest record issued before the wait.
	Event      string
	DurationUS float64 // cost estimate in µs (0 = unknown, treated as 1 µs by the planner's critical path)
	// Copy is CopySync for a synchronous copy (cuMemcpy, on a default
	// stream), "" or CopyAsync for cuMemcpyAsync on the stage's stream.
	Copy string
	// HostFunc: the stage's built-in runs on the host in its device
	// stream's order (cuLaunchHostFunc), not when the host issues it.
	HostFunc bool
	// Device is the GPU the stage runs on (0-based). After loading it is
	// set on every stage: its `device:`, else its stream's device, else
	// the device of the device buffers it touches (a copy's destination),
	// else 0. AnyDevice marks a collective (its ranks run on its buffers'
	// devices) and, with PlacementBalance, a stage the planner places.
	// In a spec built in Go (Validate) AnyDevice is a stage that names no
	// device, as a YAML stage without device: (dagrun.NewSpec's stages);
	// 0 is device 0, given, once the spec has several devices.
	Device int
	Pos    Pos
}

// AnyDevice is the Device of a stage or buffer no device was given to
// under PlacementBalance (the planner places it), and of a collective.
const AnyDevice = -1

// MaxDevices bounds Spec.Devices (and every device index + 1).
const MaxDevices = contract.MaxDevices

// Placement strategies (Options.Placement).
const (
	PlacementSpec    = "spec"    // devices as the spec's device: fields say (default)
	PlacementBalance = "balance" // the planner places stages and buffers without device:
)

// Copy modes (StageSpec.Copy).
const (
	CopyAsync = "async"
	CopySync  = "sync"
)

// Stream kinds (StreamSpec.Kind): CUDA's stream flags and default streams
// (docs/spec.md, "Streams").
const (
	KindNonBlocking = "non_blocking" // cuStreamCreate(CU_STREAM_NON_BLOCKING), the default
	KindBlocking    = "blocking"     // cuStreamCreate(CU_STREAM_DEFAULT): ordered with the legacy default stream
	KindLegacy      = "legacy"       // the legacy default stream (CU_STREAM_LEGACY)
	KindPerThread   = "per_thread"   // a thread's per-thread default stream (CU_STREAM_PER_THREAD)
	KindHost        = "host"         // a host thread's own host stream (its host stages and waits)
)

// StreamSpec declares a stream's kind and the host thread that issues its
// ops ("" or MainThread: the main thread). Streams not declared are
// non-blocking streams of the main thread.
type StreamSpec struct {
	Name   string
	Kind   string
	Thread string
	// Device is the GPU whose context creates the stream (0-based): its
	// `device:`, else its stages' device. Host streams have none (0).
	Device int
	Pos    Pos
}

// MainThread is the host thread of streams that name none.
const MainThread = "main"

// CaptureSpec is a stream-capture region: cuStreamBeginCapture on Stream
// before stage First, cuStreamEndCapture after stage Last (both on
// Stream), in Mode (CaptureGlobal when "").
type CaptureSpec struct {
	Stream, First, Last, Mode string
	Pos                       Pos
}

// Capture modes (CaptureSpec.Mode).
const (
	CaptureGlobal      = "global"
	CaptureThreadLocal = "thread_local"
	CaptureRelaxed     = "relaxed"
)

// WaitSpec is a wait of a hand-synchronized stage: on the latest record of
// Stage's event (the event recorded right after Stage) or of the named
// Event, issued Lag iterations back (0: this iteration's latest record
// issued before the wait; Lag > 0 needs the spec to run several
// iterations, and is checked by the verifier over unrolled iterations).
type WaitSpec struct {
	Stage string // a stage name, or ""
	Event string // an event name (a stage's event:), or ""
	Lag   int    // iterations back, ≥ 0
	Pos   Pos
}

func (s StageSpec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stage %s (%s)", s.Name, s.Kernel)
	return b.String()
}

// Options are planner options a spec may carry; CLI flags override them.
type Options struct {
	Strategy   string // "default" (path cover), "single", "round-robin", "naive"; "" = default
	MaxStreams int    // 0 = the planner's default (planner.DefaultMaxStreams for the default strategy)
	// Arena is how temp buffers share one device arena: ArenaPlanned
	// (the default when ""), ArenaOff, or ArenaStreamOrder (the caching
	// allocator's mistake, for demonstrations: its plans have races).
	Arena string
	// MemoryBudget caps the arena in bytes (each device's, with several
	// devices) by adding ordering edges (planner's budget pass); 0 = no
	// budget, MemoryBudgetAuto = within 10% of the live bound of the plan's
	// own schedule using only edges that do not lengthen the critical path.
	MemoryBudget int64
	// Placement is PlacementSpec ("" is the same) or PlacementBalance: the
	// planner places stages and buffers that name no device
	// (docs/spec.md, "Placement").
	Placement string
}

// MemoryBudgetAuto is Options.MemoryBudget's "auto" (`memory_budget: auto`).
const MemoryBudgetAuto = -1

// Arena modes (Options.Arena).
const (
	ArenaPlanned     = "planned"      // bytes shared only between buffers whose lifetimes the plan orders (happens-before)
	ArenaOff         = "off"          // every buffer has its own allocation
	ArenaStreamOrder = "stream-order" // bytes shared once the allocating stream is done (unsafe: the record_stream bug)
)

// HostStream is the reserved stream name of the host thread: a stage with
// `stream: host` runs its built-in kernel on the CPU when the executor
// issues it, on host_pinned buffers only, ordered after device work by host
// waits on events (see docs/spec.md, "Host stages").
const HostStream = "host"

// HostKernels are the built-ins a host stage may run (contract.HostKernels).
var HostKernels = contract.HostKernels()

// Spec is a whole pipeline spec: plain data, as loaded from YAML (LoadFile)
// or built in Go. Stages are in declaration order, the order one stream would run them.
type Spec struct {
	Version int
	Name    string
	File    string // path the spec was loaded from ("" if built in Go)
	Dir     string // directory relative paths are resolved against
	Sync    string // SyncAuto (default) or SyncManual
	Options Options
	Buffers []BufferSpec
	Kernels []KernelSpec
	Stages  []StageSpec
	// Streams declares stream kinds and host threads; Captures, capture
	// regions (docs/spec.md, "Streams", "Capture regions").
	Streams  []StreamSpec
	Captures []CaptureSpec
	// Devices is the number of GPUs the spec runs on, ≥ 1 after loading:
	// `devices:`, else one more than the largest device index named.
	Devices int
}

// StreamOf returns the declaration of stream name, or nil.
func (s *Spec) StreamOf(name string) *StreamSpec {
	for i := range s.Streams {
		if s.Streams[i].Name == name {
			return &s.Streams[i]
		}
	}
	return nil
}

// IsHostStream reports whether stream name is a host stream: HostStream
// (the main thread's) or one declared kind: host.
func (s *Spec) IsHostStream(name string) bool {
	if name == HostStream {
		return true
	}
	d := s.StreamOf(name)
	return d != nil && d.Kind == KindHost
}

func (s *Spec) String() string {
	return fmt.Sprintf("spec %s (%d buffers, %d kernels, %d stages)", s.Name, len(s.Buffers), len(s.Kernels), len(s.Stages))
}

// Buffer returns the buffer named name, or nil.
func (s *Spec) Buffer(name string) *BufferSpec {
	for i := range s.Buffers {
		if s.Buffers[i].Name == name {
			return &s.Buffers[i]
		}
	}
	return nil
}

// StageIndex returns the index of the stage named name, or -1.
func (s *Spec) StageIndex(name string) int {
	for i := range s.Stages {
		if s.Stages[i].Name == name {
			return i
		}
	}
	return -1
}
