//go:build cuda

package cudart

import (
	_ "embed"
	"errors"
	"fmt"
	"runtime"
	"runtime/cgo"
	"strings"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/executor"
)

// Available reports whether this binary was built with the cuda tag.
const Available = true

//go:embed kernels/builtins.ptx
var builtinsPTX []byte

// keepPrimary retains the primary context once more for the life of the
// process, so that backends created one after another (tests, iterations of
// a tool) do not tear the context down and rebuild it each time.
var keepPrimary sync.Once

// queueLen is the capacity of the worker's op queue. Large enough that a
// launch burst does not block the caller on a full queue (which would cost a
// wake-up per op).
const queueLen = 1 << 16

// op is one unit of work for the worker: fn runs on the locked thread. reply
// is nil for queued ops (their error is kept for the next Synchronize).
type op struct {
	fn    func(w *worker) error
	reply chan error
	what  string // for --sync-each: which stage or op this was
	ctx   int    // the context fn runs in (devices.go): made current first
}

// backend implements executor.Backend on one CUDA device: the main host
// thread's, which owns the context, or another host thread's view
// (Thread, threads.go). Each has its own worker goroutine locked to an OS
// thread with the context current; they share the device state.
type backend struct {
	*shared
	q     chan op
	done  chan struct{}
	reply chan error // reused reply channel for synchronous ops
	// thread is the host thread this view issues for ("" the main one).
	thread string
	// group is a collective whose ranks this view is launching (nccl.go).
	group *rankGroup
}

// shared is the state of a device that every host thread's view shares.
type shared struct {
	opts Options
	info Info
	// spinOverheadNS: see Options.SpinOverheadNS.
	spinOverheadNS float64

	mu     sync.Mutex // guards the fields below (and the threads' views)
	closed bool
	nextID int
	live   map[int]liveHandle // streams, events and buffers not yet destroyed or freed
	// threads are the other host threads' views, by name (threads.go).
	threads map[string]*backend
	// builtinFns are the built-in kernels' functions, set by the worker's
	// init before New returns, read-only after.
	builtinFns map[string]cu.Function
	// userFns caches user kernels by PTX path + "\x00" + entry.
	userFns map[string]cu.Function
	// preps caches prepared launches by descriptor (launch.go, prepared).
	prepMu sync.Mutex
	preps  map[*executor.LaunchDesc]*prep
	// markers, when set (by tests, between captures), are two timed events
	// that the next capture records as its first and last nodes, so that a
	// replay's GPU time excludes the launch's latency.
	markers *[2]cu.Event
	// hostErr is the first error of a host function (rules.go), set on a
	// driver thread, or of an op queued by another host thread's view
	// (threads.go), since the last Synchronize.
	hostErrMu sync.Mutex
	hostErr   error
	// stamps is the kernel-timestamp buffer of stream-mode launches;
	// capStamps, that of the capture in progress (Options.KernelTimestamps).
	stamps, capStamps *stampBuf
	// ctxs are the backend's contexts, one per distinct ordinal (context 0
	// is Options.Devices[0]'s); devs maps each plan device to its context;
	// peer[i][j] says peer access from context i to j's memory is on
	// (devices.go). Set by the worker's init, read-only after.
	ctxs []*devCtx
	devs []int
	peer [][]bool
	// comms are the NCCL communicators made so far (nccl.go).
	ncclMu sync.Mutex
	comms  []*ncclComms
}

// worker is the state that lives on the locked OS thread.
type worker struct {
	b *backend
	// nvtxNames are the stages' names as C strings, for NVTX ranges (nvtx.go).
	nvtxNames map[string]unsafe.Pointer
	dev       cu.Device
	ctx       cu.CUContext
	asyncErr  error
	builtins  cu.Module
	fns       map[string]cu.Function // built-in kernel entries by short name
	mods      map[string]cu.Module   // user modules by PTX path
	ufns      map[string]cu.Function // user kernels by path + "\x00" + entry
	prof      []profRec
	evPool    []cu.Event
	times     map[string]float64 // profile: GPU ms per stage, summed
	// Profile, stream mode: a timed event recorded before the first stage
	// after a Synchronize; spans are measured from it.
	origin    cu.Event
	hasOrigin bool
	spans     []executor.StageSpan // profile: collected by Synchronize, taken by StageSpans
	// capture is the open stream capture, nil if none (graph.go).
	capture *captureState
	// timedGraphs are profiled graphs launched since the last Synchronize.
	timedGraphs []*graph
	// retiredHostFuncs are the host-function handles of destroyed graphs,
	// deleted at the next synchronization of every context (a replay in
	// flight may still call them until then): dropRetiredHostFuncs.
	retiredHostFuncs []cgo.Handle
	// cur is the context current on the worker's thread (devices.go), −1
	// when unknown (after a call into NCCL).
	cur int
}

type stream struct {
	id int
	s  cu.Stream
	// scratch holds snapshots of in-place mix reads (see mixLaunch); 0 if none.
	scratch      cu.DevicePtr
	scratchBytes int64
	// retired are scratch buffers outgrown during a stream capture: captured
	// copies may still use them, so they live as long as the stream.
	retired []cu.DevicePtr
	// def marks a default stream (legacy or per-thread, rules.go): named,
	// never created or destroyed.
	def bool
	// c is the stream's context and dev its plan device (devices.go).
	c, dev int
}

type event struct {
	id int
	e  cu.Event // context 0's
	// With several contexts (devices.go): the event's driver event in
	// each context where it was recorded (made on first use), and the
	// context of the latest record issued; worker-only.
	per  []cu.Event
	made []bool
	last int
}

type buffer struct {
	id    int
	name  string
	bytes int64
	where contract.Where
	dptr  cu.DevicePtr   // device address (for pinned memory, the same address: unified addressing; 0 for pageable memory)
	host  unsafe.Pointer // pinned or pageable host memory, nil for device buffers
	c     int            // the context it was allocated in
	dev   int            // its plan device (devices.go)
}

var _ executor.Backend = (*backend)(nil)

// New starts a CUDA backend on device opts.Device: it locks a worker
// goroutine to an OS thread, makes the device's primary context current
// there and loads the built-in kernels. It returns an error wrapping
// ErrNoDevice when the driver sees no device, or a *DriverError.
func New(opts Options) (executor.Backend, error) {
	return newBackend(opts)
}

func newBackend(opts Options) (*backend, error) {
	info, err := ProbeInfo()
	if err != nil {
		return nil, err
	}
	if err := opts.checkDevices(info.Devices); err != nil { // devices.go
		return nil, err
	}
	b := &backend{
		shared: &shared{
			opts:           opts,
			live:           map[int]liveHandle{},
			userFns:        map[string]cu.Function{},
			preps:          map[*executor.LaunchDesc]*prep{},
			spinOverheadNS: max(opts.SpinOverheadNS, 0),
		},
		q:     make(chan op, queueLen),
		done:  make(chan struct{}),
		reply: make(chan error, 1),
	}
	started := make(chan error, 1)
	go b.run(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return b, nil
}

// run is the worker goroutine: locked to its thread for its whole life.
func (b *backend) run(started chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	defer close(b.done)
	w := &worker{b: b, fns: map[string]cu.Function{}, mods: map[string]cu.Module{}, ufns: map[string]cu.Function{}, times: map[string]float64{}}
	init, close := w.init, w.close
	if b.thread != "" {
		init, close = w.initThread, w.closeThread // threads.go
	}
	if err := init(); err != nil {
		started <- err
		return
	}
	started <- nil
	for {
		o, ok := b.next()
		if !ok {
			break
		}
		var err error
		if o.ctx != w.cur { // several devices only: one context never switches
			err = w.on(o.ctx) // devices.go
		}
		if err == nil {
			err = o.fn(w)
		}
		if b.opts.SyncEach && err == nil {
			if serr := cu.Synchronize(); serr != nil {
				err = wrap(serr, "%s (synchronized after it: --sync-each)", o.what)
			}
		}
		switch {
		case o.reply != nil:
			o.reply <- err
		case err != nil && b.thread != "":
			b.noteHostErr(err) // another thread's: the main thread's Synchronize reports it
		case err != nil && w.asyncErr == nil:
			w.asyncErr = err
		}
	}
	close()
}

// spinPolls is how many times the worker polls its empty queue before it
// parks (about 20–50 µs). Parking a goroutine locked to its thread, and
// waking it, costs a futex round trip of the thread: in a burst of ops the
// executor's next op is usually less than a microsecond away.
const spinPolls = 2000

// next returns the worker's next op, polling briefly before it blocks; ok is
// false once the queue is closed and drained.
func (b *backend) next() (op, bool) {
	for range spinPolls {
		select {
		case o, ok := <-b.q:
			return o, ok
		default:
		}
	}
	o, ok := <-b.q
	return o, ok
}

// call runs fn on the worker, in context 0, and waits for its error.
func (b *backend) call(what string, fn func(w *worker) error) error {
	return b.callOn(0, what, fn)
}

// callOn runs fn on the worker in context c and waits for its error.
func (b *backend) callOn(c int, what string, fn func(w *worker) error) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return fmt.Errorf("cudart: %s: backend is closed", what)
	}
	b.mu.Unlock()
	b.q <- op{fn: fn, reply: b.reply, what: what, ctx: c}
	return <-b.reply
}

// queue runs fn on the worker, in context 0, without waiting (or
// waiting, with SyncEach).
func (b *backend) queue(what string, fn func(w *worker) error) error {
	return b.queueOn(0, what, fn)
}

// queueOn is queue in context c.
func (b *backend) queueOn(c int, what string, fn func(w *worker) error) error {
	if b.opts.SyncEach {
		return b.callOn(c, what, fn)
	}
	b.q <- op{fn: fn, what: what, ctx: c}
	return nil
}

// Info returns the device the backend runs on.
func (b *backend) Info() Info { return b.info }

func (b *backend) Name() string { return "cuda" }

// Close waits for queued work, releases what is still alive (so a leak
// does not outlive the backend), stops the worker and releases the context.
// It returns an error listing each stream, event and buffer that was still
// alive, with the call site that created it.
func (b *backend) Close() error {
	if b.thread != "" {
		return nil // a thread's view lives until the backend's Close
	}
	b.closeThreads() // threads.go
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return fmt.Errorf("cudart: Close: backend already closed")
	}
	b.mu.Unlock()
	leaks := b.Leaks()
	b.mu.Lock()
	var objs []any
	for _, h := range b.live {
		objs = append(objs, h.obj)
	}
	b.mu.Unlock()
	err := b.call("close", func(w *worker) error {
		err := w.syncAll("at close")
		if err == nil {
			err = w.asyncErr
		}
		for _, o := range objs {
			switch o := o.(type) {
			case *stream:
				w.on(o.c)
				w.freeRetired(o)
				if o.scratch != 0 {
					cu.MemFree(o.scratch)
				}
				o.s.Destroy()
			case *event:
				w.on(0)
				w.destroyEvent(o)
			case *graph:
				w.on(0)
				w.destroyGraph(o)
			case *buffer:
				w.on(o.c)
				if o.host != nil {
					cu.MemFreeHost(o.host)
				} else {
					cu.MemFree(o.dptr)
				}
			}
		}
		w.dropRetiredHostFuncs() // every stream is synchronized: no replay calls them
		w.on(0)
		return err
	})
	b.mu.Lock()
	b.closed = true
	b.live = map[int]liveHandle{}
	b.mu.Unlock()
	b.dropPrepared()
	close(b.q)
	<-b.done
	if len(leaks) > 0 {
		err = errors.Join(err, fmt.Errorf("cudart: %d leaked handle(s):\n\t%s", len(leaks), strings.Join(leaks, "\n\t")))
	}
	return err
}
