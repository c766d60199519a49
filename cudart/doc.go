// Package cudart is dagrun's CUDA backend: an executor.Backend over the CUDA
// driver API through gorgonia.org/cu v0.9.6.
//
// The package is opt-in. Every file that imports gorgonia.org/cu carries the
// `cuda` build tag, because that package calls cuInit in its init and exits
// the process when no driver is present, and it needs cuda.h and libcuda.so
// to build. Without the tag, New returns an error wrapping ErrNotSupported;
// scripts/build-gpu.sh fetches CUDA 11.8 headers and the driver stub and
// builds the tagged binaries (README.md says why 11.8: gorgonia.org/cu does
// not compile against CUDA 13's cuda.h).
//
// Threading: a CUDA context is current per OS thread. The backend owns one
// worker goroutine locked to its OS thread with the context current, and
// every driver call runs there. Backend methods (called from the executor's
// one goroutine) hand work to the worker: launches, records, waits, memsets
// and copies are queued without waiting (their driver errors surface at the
// next Synchronize, or at once with Options.SyncEach); calls that return a
// value or must be ordered with the host (NewStream, Alloc, Read, Write,
// Synchronize, Destroy*, Free) wait for the worker. A plan issued from
// several host threads (executor.Threader) gives each other thread a view
// of the backend with a worker of its own, on its own OS thread with the
// primary context current (threads.go); the main thread's Synchronize
// waits until every view's worker has issued what it was given.
//
// Graph mode: the backend is an executor.GraphBackend (graph.go): stream
// capture in relaxed mode (cuStreamBeginCapture … cuStreamEndCapture), then
// cuGraphInstantiateWithFlags, cuGraphUpload and one cuGraphLaunch per
// replay, through small cgo wrappers (gorgonia.org/cu v0.9.6 has none).
// Capture errors, such as a stream not joined back, come from EndCapture.
//
// Timing (executor.Profiler): with Options.Profile every stage is bracketed by
// timed events (event-record nodes in a capture), which slows a run down
// (the graph of nasnetalarge ran 5× longer); with Options.KernelTimestamps the
// mix kernel stores its own start and end %globaltimer (stamps.go), which
// leaves the graph and the issue rate as they are.
//
// Several devices (executor.Devicer, devices.go): Options.Devices maps the
// plan's devices to ordinals; the backend retains the primary context of
// each distinct ordinal and enables peer access where
// cuDeviceCanAccessPeer allows. The one worker switches contexts
// (cuCtxSetCurrent) before each op of another device's stream, event or
// buffer, so driver calls keep the plan's host issue order across devices
// (a record before every wait on it). An event keeps one driver event per
// context (cuEventRecord needs the stream's context; cuStreamWaitEvent
// takes an event of any context). A copy between two plan devices'
// buffers is cuMemcpyPeerAsync (cuMemcpyAsync while a capture is open,
// which does not take the peer call). Collectives (executor.Collectiver,
// nccl.go) go through NCCL, loaded at run time with dlopen (DAGRUN_NCCL
// names the library; no NCCL header is needed to build): the ranks of a
// collective, launched one after another, are issued as one group. Graph
// mode captures an iteration over every device as one graph; profiling
// and kernel timestamps are one device's.
//
// Built-in kernels (package contract states their semantics) run as driver
// memsets and copies (fill and copy on device memory) or as the PTX in
// kernels/builtins.ptx, compiled from kernels/builtins.cu with the command in
// kernels/README.md. The first launch of each *executor.LaunchDesc checks it
// against the contract and packs its parameters; later launches of the same
// descriptor reuse that (launch.go).
package cudart
