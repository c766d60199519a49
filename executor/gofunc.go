package executor

import "errors"

// StageFunc is a stage implemented as a Go function. A
// stage whose kernel name is a key of Options.Funcs runs its function
// instead of a kernel; the planner orders it like any other stage, from
// its reads and writes.
//
// On the CUDA backend the function is called on the backend's thread, with
// the device's context current, when the stage is issued: it should queue
// its work on c.Stream (the stream's CUstream, e.g. for cuLaunchKernel, a
// cuBLAS handle's stream, or any library taking a stream) and return without
// synchronizing; the stage's buffers are device addresses (c.Reads[i].Ptr).
// On the simulator the function is called in stream order on the stream's
// goroutine, with c.Stream = 0, and does its work on the bytes themselves
// (c.Reads[i].Host, c.Writes[i].Host), valid only during the call.
//
// An error fails the run, naming the stage (on the CUDA backend, at the next
// synchronization, as an asynchronous fault would).
type StageFunc func(c *FuncCall) error

// FuncCall is what a StageFunc receives.
type FuncCall struct {
	Stage string // stage name
	// Stream is the backend's native stream handle: cudart's CUstream as a
	// uintptr; 0 on the simulator.
	Stream uintptr
	// Reads and Writes are the stage's accesses, in its Reads and Writes order.
	Reads, Writes []FuncBuffer
	// Desc is the stage's launch description (arguments, launch shape).
	Desc *LaunchDesc
}

// FuncBuffer is one access of a Go-function stage.
type FuncBuffer struct {
	Name  string  // buffer name
	Ptr   uintptr // device address of the access's first byte (CUDA); 0 on the simulator
	Bytes int64   // length of the access
	// Host is the access's bytes where the host can reach them: on the
	// simulator always (reads that overlap a write of the stage are
	// copies), on CUDA for host_pinned buffers; nil otherwise.
	Host []byte
}

// FuncLauncher is an optional Backend interface: a backend that can run
// Go-function stages (the simulator, the CUDA backend).
type FuncLauncher interface {
	// LaunchFunc issues f as stage l on stream s, with StageFunc's contract.
	LaunchFunc(s Stream, l *LaunchDesc, f StageFunc) error
}

// ErrUnboundFunc is returned (wrapped) when a stage runs a Go function
// (plan.Stage.Go, `kernel: {go: name}` in a spec) that Options.Funcs
// does not bind.
var ErrUnboundFunc = errors.New("Go function not bound")

// ErrNoFuncs is returned (wrapped) when a plan has Go-function stages and
// the backend cannot run them.
var ErrNoFuncs = errors.New("backend cannot run Go-function stages")
