package cudart

import (
	"errors"
	"fmt"
)

// ErrNotSupported is returned (wrapped) by New and Probe in a binary built
// without the cuda build tag.
var ErrNotSupported = errors.New("dagrun was built without the cuda tag: run scripts/build-gpu.sh (see README)")

// ErrNoDevice is returned (wrapped) by New and Probe when the driver answers
// but reports no usable CUDA device.
var ErrNoDevice = errors.New("no CUDA device: check nvidia-smi and CUDA_VISIBLE_DEVICES")

// Options configure a CUDA backend.
type Options struct {
	// Device is the ordinal of the device to use (default 0) when Devices
	// is empty.
	Device int
	// Devices maps a plan's devices to ordinals: plan device i runs on the
	// device of ordinal Devices[i] (empty: one device, Device). Several
	// plan devices may share an ordinal: they share its primary context,
	// so a plan of several devices can be checked on one GPU (its peer
	// copies are then copies within the GPU, its cross-device waits waits
	// within one context); a collective needs distinct ordinals (NCCL
	// refuses two ranks on one GPU). New returns an error wrapping
	// ErrNoDevice, naming the device count (cuDeviceGetCount), for an
	// ordinal the driver does not report.
	Devices []int
	// separateContexts, a testing hook, gives each plan device after the
	// first a context of its own, created on its ordinal (cuCtxCreate),
	// instead of the ordinal's primary context: on one GPU, two plan
	// devices then exercise what two GPUs do (events recorded in one
	// context and waited on in another, copies between contexts with
	// cuMemcpyPeerAsync, context switches), NCCL aside.
	separateContexts bool
	// SyncEach synchronizes the context after every queued op (launch,
	// record, wait, copy, memset) and makes each call wait for it, so that a
	// faulting kernel is reported by the Launch of its stage, named. Slow:
	// for debugging only (dagrun run --sync-each).
	SyncEach bool
	// Profile creates events with timing enabled and brackets every launch
	// with a pair of timed events; StageTimes reports the GPU time per stage
	// after Synchronize. Ordering events stay timing-free otherwise.
	Profile bool
	// KernelTimestamps makes every mix stage's block 0 store the GPU's
	// %globaltimer (ns) at its start and end into a device buffer of the
	// backend, and StageSpans report them, in µs from the earliest start
	// gathered by a Synchronize (in graph mode: of the last replay of each
	// graph). Unlike Profile it records no event, so a graph keeps its shape
	// and a stream its issue rate: the spans are those of an unprofiled run
	// to within a store and a block barrier per stage. Only mix stages get
	// spans (the model graphs are all mix); at most 65,536 stamped launches
	// between two Synchronize calls and per captured graph (later ones get
	// none). Needs the kernel PTX of cudart/kernels with the stamp field;
	// with an older PTX no span comes back.
	KernelTimestamps bool
	// PTXDir is the directory that relative user-kernel PTX paths
	// (plan.Kernel.PTX) resolve against; "" means the working directory.
	PTXDir string
	// BuiltinsPTX, if set, replaces the embedded built-in kernels' PTX (a
	// testing hook: the GPU tests load freshly compiled PTX through it).
	BuiltinsPTX []byte
	// SpinOverheadNS is subtracted from every spin request, in ns, so that a
	// spin stage occupies its stream for the requested µs: the GPU spends
	// this long on a zero-length spin kernel between its neighbours. 0 (the
	// default) measures it once per process at the first New (about 5 ms;
	// see calibrateSpin); a negative value subtracts nothing (raw spins).
	SpinOverheadNS float64
}

// Info describes the device a backend or Probe found.
type Info struct {
	Name          string
	Ordinal       int
	Major, Minor  int   // compute capability
	Driver        int   // driver API version, e.g. 13000 for 13.0
	TotalMem      int64 // bytes
	Multiprocs    int
	HeaderVersion int // CUDA_VERSION of the cuda.h the binary was built with
	Devices       int // CUDA devices the driver reports (cuDeviceGetCount)
}

func (i Info) String() string {
	return fmt.Sprintf("%s (device %d, sm_%d%d, %d SMs, %.1f GiB, driver %d.%d, built with cuda.h %d.%d)",
		i.Name, i.Ordinal, i.Major, i.Minor, i.Multiprocs, float64(i.TotalMem)/(1<<30),
		i.Driver/1000, i.Driver%1000/10, i.HeaderVersion/1000, i.HeaderVersion%1000/10)
}
