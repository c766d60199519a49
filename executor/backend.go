package executor

import (
	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/plan"
)

// Stream, Event and Buffer are opaque handles owned by a Backend.
type (
	Stream any
	Event  any
	Buffer any
)

// BufferDesc describes a buffer to allocate.
type BufferDesc struct {
	Name  string
	Bytes int64          // size in bytes, > 0
	Where contract.Where // device or host_pinned
	// Device is the device of a device buffer (0 unless the backend is a
	// Devicer and the plan places the buffer on another device).
	Device int
}

// Arg is one resolved buffer access of a launch: the backend's buffer handle
// and the byte range [Offset, Offset+Bytes) the stage touches.
type Arg struct {
	Buffer Buffer
	Name   string // buffer name, for messages and the race detector
	Offset int64  // bytes
	Bytes  int64  // bytes

	buf, copy int // the plan buffer and its ring copy (the executor's)
}

// Range is the byte range of a, named by its buffer's name (Name): two
// arguments overlap when their ranges do (contract.Range.Overlaps); a
// backend that keeps one handle per ring copy compares Buffer as well.
func (a Arg) Range() contract.Range {
	return contract.Range{Buffer: a.Name, Offset: a.Offset, Bytes: a.Bytes}
}

// LaunchDesc is everything a backend needs to run one stage.
type LaunchDesc struct {
	Stage int // index in the plan's stages
	// Seed is the index the mix built-in seeds its output by
	// (contract.MixSeed): the stage's index in the user's spec
	// (plan.Plan.SeedIndex), so that outputs do not depend on the
	// stages the planner added.
	Seed       int
	Name       string // stage name
	Kernel     string // built-in name or user kernel name
	Args       map[string]any
	Grid       [3]int
	Block      [3]int
	DurationUS float64
	Reads      []Arg
	Writes     []Arg
	// UserKernel is set when Kernel names a user PTX kernel.
	UserKernel *plan.Kernel
	// Copy is plan.CopySync for a synchronous copy (StreamKinder), ""
	// for an asynchronous one.
	Copy string
	// HostFunc marks a host stage enqueued on a device stream
	// (cuLaunchHostFunc): the backend runs it on the host in the stream's
	// order.
	HostFunc bool
	// Collective marks a rank of a collective (Kernel is its built-in,
	// all_reduce): Reads[0] is the rank's send range and Writes[0] its
	// receive range, on its stream's device; the ranks of one collective
	// are launched one after another, rank 0 first (Collectiver).
	Collective *plan.Collective
}

// Backend is what the executor drives: a device with streams, events and
// memory. All methods are called from one goroutine (the executor's issue
// loop; for a plan issued from several host threads, each thread's view
// from its thread's goroutine: Threader); implementations may run the work
// asynchronously.
//
// CUDA semantics are the contract: Wait(s, e) orders s after the work
// captured by the most recent Record(e, ·) issued before the Wait call; a
// Wait on an event never recorded waits for nothing.
type Backend interface {
	// Name is a short name for messages ("sim", "cuda").
	Name() string
	NewStream() (Stream, error)
	NewEvent() (Event, error)
	Alloc(d BufferDesc) (Buffer, error)
	// Write copies data into b synchronously (initial contents); len(data) == its Bytes.
	Write(b Buffer, data []byte) error
	// Read copies b's contents to the host synchronously, after Synchronize.
	Read(b Buffer) ([]byte, error)
	Record(e Event, s Stream) error
	Wait(s Stream, e Event) error
	Launch(s Stream, l *LaunchDesc) error
	// Synchronize blocks until all issued work is done and returns the first
	// asynchronous error (a fault, a race report) since the last call.
	Synchronize() error
	DestroyStream(s Stream) error
	DestroyEvent(e Event) error
	Free(b Buffer) error
	// Close releases the backend; handles must have been destroyed or freed.
	Close() error
}
