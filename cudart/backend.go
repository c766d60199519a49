//go:build cuda

package cudart

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/cgo"
	"sort"
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
	// deleted at Close (a replay in flight may still call them).
	retiredHostFuncs []cgo.Handle
	// cur is the context current on the worker's thread (devices.go), −1
	// when unknown (after a call into NCCL).
	cur int
}

type profRec struct {
	stage      string
	idx        int // stage index (LaunchDesc.Stage)
	start, end cu.Event
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

// makeCurrent retains the device's primary context and makes it current
// on the worker's OS thread.
func (w *worker) makeCurrent() error {
	ord := w.b.opts.ordinals()[0]
	dev, err := cu.GetDevice(ord)
	if err != nil {
		return wrap(err, "cuDeviceGet(%d)", ord)
	}
	w.dev = dev
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return wrap(err, "cuDevicePrimaryCtxRetain(%d)", ord)
	}
	w.ctx = ctx
	if err := cu.SetCurrentContext(ctx); err != nil {
		dev.ReleasePrimaryCtx()
		return wrap(err, "cuCtxSetCurrent")
	}
	return nil
}

func (w *worker) init() error {
	if err := w.makeCurrent(); err != nil {
		return err
	}
	dev := w.dev
	keepPrimary.Do(func() { dev.RetainPrimaryCtx() })
	info, err := deviceInfo(w.b.opts.ordinals()[0])
	if err != nil {
		dev.ReleasePrimaryCtx()
		return err
	}
	w.b.info = info
	ptx := builtinsPTX
	if len(w.b.opts.BuiltinsPTX) > 0 {
		ptx = w.b.opts.BuiltinsPTX
	}
	mod, err := loadBuiltins(ptx, w.fns, "")
	if err != nil {
		dev.ReleasePrimaryCtx()
		return err
	}
	w.builtins = mod
	w.b.builtinFns = w.fns
	if err := w.initContexts(ptx); err != nil { // devices.go
		w.closeContexts()
		mod.Unload()
		dev.ReleasePrimaryCtx()
		return err
	}
	if w.b.opts.SpinOverheadNS == 0 {
		ns, err := w.spinOverhead()
		if err != nil {
			w.closeContexts()
			mod.Unload()
			dev.ReleasePrimaryCtx()
			return err
		}
		w.b.spinOverheadNS = ns
	}
	if w.b.opts.KernelTimestamps {
		if w.b.stamps, err = newStampBuf(w); err != nil {
			mod.Unload()
			dev.ReleasePrimaryCtx()
			return err
		}
	}
	return nil
}

// builtinNames are the built-in kernels' entries (dagrun_NAME) in the PTX.
var builtinNames = []string{"fill", "scale", "axpy", "mix", "spin", "checksum", "timer_probe"}

// spinCalib caches calibrateSpin's answer for the process.
var spinCalib struct {
	sync.Mutex
	done bool
	ns   float64
	err  error
}

// spinOverhead returns the process's calibrated spin overhead, measured
// and cached by the first backend of one context. A backend of several
// contexts uses the cached figure, or measures its own without caching
// it: in a test run whose first backend had two contexts on one GPU the
// cached figure was 1378 ns against 1540 ns per queued spin(0), and
// spin(2 µs) ran 11.6% long in every later backend.
func (w *worker) spinOverhead() (float64, error) {
	spinCalib.Lock()
	defer spinCalib.Unlock()
	if spinCalib.done {
		return spinCalib.ns, spinCalib.err
	}
	ns, err := w.calibrateSpin()
	if len(w.b.ctxs) == 1 {
		spinCalib.done, spinCalib.ns, spinCalib.err = true, ns, err
	}
	return ns, err
}

// calibrateSpin measures the GPU time of a zero-length spin kernel between
// its neighbours on one stream, in ns: a 1 ms blocker spin holds the stream
// while 64 spin(0) launches queue behind it, bracketed by two timed events;
// the median of 3 batches of elapsed/64 is the answer. Spin launches then
// subtract it, so a spin(d) stage adds d to its stream's timeline (for d at
// least this floor, about 1–2 µs: shorter requests cost the floor).
func (w *worker) calibrateSpin() (float64, error) {
	s, err := cu.MakeStream(cu.NonBlocking)
	if err != nil {
		return 0, wrap(err, "calibrate spin: cuStreamCreate")
	}
	defer s.Destroy()
	var ev [2]cu.Event
	for i := range ev {
		if ev[i], err = cu.MakeEvent(cu.DefaultEvent); err != nil {
			return 0, wrap(err, "calibrate spin: cuEventCreate")
		}
		defer cu.DestroyEvent(&ev[i])
	}
	const k = 64
	spin := func(ns uint64) error {
		var p params
		p.u64(ns)
		return launchRaw(w.fns["spin"], [3]int{1, 1, 1}, [3]int{32, 1, 1}, s, p.blob, p.offs)
	}
	var per []float64
	for range 3 {
		if err := spin(1_000_000); err != nil {
			return 0, wrap(err, "calibrate spin: launch")
		}
		ev[0].Record(s)
		for range k {
			if err := spin(0); err != nil {
				return 0, wrap(err, "calibrate spin: launch")
			}
		}
		ev[1].Record(s)
		if err := s.Synchronize(); err != nil {
			return 0, wrap(err, "calibrate spin: cuStreamSynchronize")
		}
		ms, err := ev[0].Elapsed(ev[1])
		if err != nil {
			return 0, wrap(err, "calibrate spin: cuEventElapsedTime")
		}
		per = append(per, ms*1e6/k)
	}
	sort.Float64s(per)
	return per[1], nil
}

// SpinOverheadNS returns the ns subtracted from every spin request (see
// Options.SpinOverheadNS).
func (b *backend) SpinOverheadNS() float64 { return b.spinOverheadNS }

func (w *worker) close() {
	for _, e := range w.evPool {
		cu.DestroyEvent(&e)
	}
	for _, m := range w.mods {
		m.Unload()
	}
	w.b.stamps.free()
	w.b.capStamps.free()
	w.closeComms()    // nccl.go
	w.closeContexts() // devices.go
	w.builtins.Unload()
	w.dev.ReleasePrimaryCtx()
}

// loadBuiltins loads the built-in kernels' PTX into the current context and
// puts each entry dagrun_NAME of builtinNames in fns under NAME. where names
// the device in errors ("" for the first). On an error nothing stays loaded.
func loadBuiltins(ptx []byte, fns map[string]cu.Function, where string) (cu.Module, error) {
	what := "built-in kernels (cudart/kernels/builtins.ptx)"
	if where != "" {
		what = "built-in kernels on " + where
	}
	mod, err := loadPTX(ptx, what)
	if err != nil {
		return mod, err
	}
	for _, k := range builtinNames {
		f, err := mod.Function("dagrun_" + k)
		if err != nil {
			mod.Unload()
			if where != "" {
				return mod, wrap(err, "cuModuleGetFunction(dagrun_%s) in the built-in PTX (%s)", k, where)
			}
			return mod, wrap(err, "cuModuleGetFunction(dagrun_%s) in the built-in PTX", k)
		}
		fns[k] = f
	}
	return mod, nil
}

// loadPTX loads a PTX image with cuModuleLoadDataEx and returns the JIT's
// error log in the error when it fails.
func loadPTX(ptx []byte, what string) (cu.Module, error) {
	if n := len(ptx); n == 0 || ptx[n-1] != 0 {
		ptx = append(ptx[:n:n], 0)
	}
	errLog := &cu.JITErrorLogBuffer{Buffer: make([]byte, 16<<10)}
	infoLog := &cu.JITInfoLogBuffer{Buffer: make([]byte, 4<<10)}
	mod, err := cu.LoadDataEx(string(ptx[:len(ptx)-1]), errLog, infoLog)
	if err != nil {
		log := strings.TrimSpace(string(bytes.TrimRight(errLog.Buffer[:max(bytes.IndexByte(errLog.Buffer, 0), 0)], "\x00")))
		if log == "" {
			log = "(the JIT printed no log)"
		}
		return mod, fmt.Errorf("%w\nJIT error log:\n%s", wrap(err, "cuModuleLoadDataEx: %s", what), log)
	}
	return mod, nil
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

// liveHandle is a tracked stream, event or buffer.
type liveHandle struct {
	what string // e.g. "buffer x (64 bytes) allocated at run.go:88"
	obj  any    // *stream, *event or *buffer
}

// track records a new handle with its creator's call site (the caller of
// NewStream, NewEvent or Alloc).
func (b *backend) track(what string, obj any) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	if _, file, line, ok := runtime.Caller(2); ok {
		what += fmt.Sprintf(" created at %s:%d", filepath.Base(file), line)
	}
	b.live[b.nextID] = liveHandle{what, obj}
	return b.nextID
}

func (b *backend) untrack(id int) {
	b.mu.Lock()
	delete(b.live, id)
	b.mu.Unlock()
}

// Live counts the streams, events and buffers not yet destroyed or freed.
func (b *backend) Live() (streams, events, buffers int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range b.live {
		switch h.obj.(type) {
		case *stream:
			streams++
		case *event:
			events++
		case *buffer:
			buffers++
		}
	}
	return
}

// Leaks lists the live handles, each with where it was created, sorted.
func (b *backend) Leaks() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, h := range b.live {
		out = append(out, h.what)
	}
	sort.Strings(out)
	return out
}

// Info returns the device the backend runs on.
func (b *backend) Info() Info { return b.info }

func (b *backend) Name() string { return "cuda" }

func (b *backend) NewStream() (executor.Stream, error) {
	s := &stream{}
	err := b.call("cuStreamCreate", func(w *worker) error {
		var err error
		s.s, err = cu.MakeStream(cu.NonBlocking)
		return wrap(err, "cuStreamCreate(non-blocking)")
	})
	if err != nil {
		return nil, err
	}
	s.id = b.track("stream", s)
	return s, nil
}

func (b *backend) NewEvent() (executor.Event, error) {
	e := &event{}
	flags := cu.DisableTiming
	if b.opts.Profile {
		flags = cu.DefaultEvent
	}
	err := b.call("cuEventCreate", func(w *worker) error {
		var err error
		e.e, err = cu.MakeEvent(flags)
		return wrap(err, "cuEventCreate")
	})
	if err != nil {
		return nil, err
	}
	e.id = b.track("event", e)
	return e, nil
}

func (b *backend) Alloc(d executor.BufferDesc) (executor.Buffer, error) {
	if d.Bytes <= 0 {
		return nil, fmt.Errorf("cudart: buffer %s: size %d bytes, want > 0", d.Name, d.Bytes)
	}
	c, err := b.ctxOf(d.Device) // devices.go
	if err != nil {
		return nil, fmt.Errorf("%w: buffer %s", err, d.Name)
	}
	buf := &buffer{name: d.Name, bytes: d.Bytes, where: contract.Where(d.Where), c: c, dev: d.Device}
	err = b.callOn(c, "alloc "+d.Name, func(w *worker) error {
		switch buf.where {
		case contract.WhereHostPinned:
			p, err := allocHost(d.Bytes, len(b.ctxs) > 1)
			if err != nil {
				return wrap(err, "cuMemAllocHost %d bytes for buffer %s", d.Bytes, d.Name)
			}
			buf.host = p
			buf.dptr = cu.DevicePtr(uintptr(p))
			clear(unsafe.Slice((*byte)(p), d.Bytes))
			return nil
		case contract.WhereDevice, "":
			p, err := cu.MemAlloc(d.Bytes)
			if err != nil {
				err = wrap(err, "cuMemAlloc %d bytes for buffer %s", d.Bytes, d.Name)
				if free, total, ierr := cu.MemInfo(); ierr == nil {
					err = fmt.Errorf("%w (requested %d bytes, %d free of %d)", err, d.Bytes, free, total)
				}
				return err
			}
			buf.dptr = p
			return wrap(cu.MemsetD8(p, 0, d.Bytes), "cuMemsetD8 buffer %s", d.Name)
		case contract.WhereHostPageable:
			buf.host = allocPageable(d.Bytes) // rules.go
			if buf.host == nil {
				return fmt.Errorf("cudart: buffer %s: out of host memory for %d pageable bytes", d.Name, d.Bytes)
			}
			return nil
		}
		return fmt.Errorf("cudart: buffer %s: where %q, want %q, %q or %q", d.Name, d.Where, contract.WhereDevice, contract.WhereHostPinned, contract.WhereHostPageable)
	})
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("buffer %s (%d bytes, %s)", d.Name, d.Bytes, d.Where)
	if len(b.devs) > 1 {
		what = fmt.Sprintf("buffer %s (%d bytes, %s, device %d)", d.Name, d.Bytes, d.Where, d.Device)
	}
	buf.id = b.track(what, buf)
	return buf, nil
}

func (b *backend) Write(h executor.Buffer, data []byte) error {
	buf, err := asBuffer(h)
	if err != nil {
		return err
	}
	if int64(len(data)) != buf.bytes {
		return fmt.Errorf("cudart: write %s: %d bytes of data, buffer has %d", buf.name, len(data), buf.bytes)
	}
	return b.callOn(buf.c, "write "+buf.name, func(w *worker) error {
		// Non-blocking streams do not order with the synchronous copy: wait
		// for everything first.
		if err := w.syncAll("before writing " + buf.name); err != nil {
			return err
		}
		if buf.host != nil {
			copy(unsafe.Slice((*byte)(buf.host), buf.bytes), data)
			return nil
		}
		return wrap(cu.MemcpyHtoD(buf.dptr, unsafe.Pointer(&data[0]), buf.bytes), "cuMemcpyHtoD %d bytes into %s", buf.bytes, buf.name)
	})
}

func (b *backend) Read(h executor.Buffer) ([]byte, error) {
	buf, err := asBuffer(h)
	if err != nil {
		return nil, err
	}
	out := make([]byte, buf.bytes)
	err = b.callOn(buf.c, "read "+buf.name, func(w *worker) error {
		if err := w.syncAll("before reading " + buf.name); err != nil {
			return err
		}
		if buf.host != nil {
			copy(out, unsafe.Slice((*byte)(buf.host), buf.bytes))
			return nil
		}
		return wrap(cu.MemcpyDtoH(unsafe.Pointer(&out[0]), buf.dptr, buf.bytes), "cuMemcpyDtoH %d bytes from %s", buf.bytes, buf.name)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (b *backend) Record(he executor.Event, hs executor.Stream) error {
	e, s, err := asEvent(he, hs)
	if err != nil {
		return err
	}
	if b.group != nil {
		return b.groupOpen("a record") // nccl.go
	}
	if s.c != 0 || len(b.ctxs) > 1 {
		return b.queueOn(s.c, "record", func(w *worker) error { // devices.go
			ev, err := w.eventIn(e, s.c)
			if err != nil {
				return err
			}
			e.last = s.c
			return wrap(ev.Record(s.s), "cuEventRecord")
		})
	}
	return b.queue("record", func(w *worker) error {
		return wrap(e.e.Record(s.s), "cuEventRecord")
	})
}

func (b *backend) Wait(hs executor.Stream, he executor.Event) error {
	e, s, err := asEvent(he, hs)
	if err != nil {
		return err
	}
	if b.group != nil {
		return b.groupOpen("a wait") // nccl.go
	}
	if s.c != 0 || len(b.ctxs) > 1 {
		return b.queueOn(s.c, "wait", func(w *worker) error { // devices.go
			ev, _ := e.latest()
			return wrap(s.s.Wait(ev, 0), "cuStreamWaitEvent")
		})
	}
	return b.queue("wait", func(w *worker) error {
		return wrap(s.s.Wait(e.e, 0), "cuStreamWaitEvent")
	})
}

func (b *backend) Synchronize() error {
	if err := b.groupOpen("Synchronize"); err != nil { // nccl.go
		return err
	}
	if err := b.drainThreads(); err != nil { // threads.go
		return err
	}
	return b.call("synchronize", func(w *worker) error {
		err := w.asyncErr
		w.asyncErr = nil
		if herr := b.takeHostFuncErr(); herr != nil && err == nil { // rules.go
			err = herr
		}
		if serr := w.syncAll(""); serr != nil && err == nil {
			err = serr
		}
		if err == nil && (len(w.prof) > 0 || len(w.timedGraphs) > 0 || b.stamps != nil && len(b.stamps.owner) > 0) {
			err = w.collectProfile()
		}
		return err
	})
}

func (b *backend) DestroyStream(h executor.Stream) error {
	s, ok := h.(*stream)
	if !ok || s == nil {
		return fmt.Errorf("cudart: DestroyStream: %T is not a cuda stream", h)
	}
	if s.def {
		b.untrack(s.id) // a default stream: nothing to destroy (rules.go)
		return nil
	}
	err := b.callOn(s.c, "cuStreamDestroy", func(w *worker) error {
		if err := w.freeRetired(s); err != nil {
			return err
		}
		if s.scratch != 0 {
			if err := w.syncAll("before freeing a stream's scratch"); err != nil {
				return err
			}
			if err := cu.MemFree(s.scratch); err != nil {
				return wrap(err, "cuMemFree scratch")
			}
			s.scratch, s.scratchBytes = 0, 0
		}
		return wrap(s.s.Destroy(), "cuStreamDestroy")
	})
	b.untrack(s.id)
	return err
}

func (b *backend) DestroyEvent(h executor.Event) error {
	e, ok := h.(*event)
	if !ok || e == nil {
		return fmt.Errorf("cudart: DestroyEvent: %T is not a cuda event", h)
	}
	err := b.call("cuEventDestroy", func(w *worker) error { return w.destroyEvent(e) }) // devices.go
	b.untrack(e.id)
	return err
}

func (b *backend) Free(h executor.Buffer) error {
	buf, err := asBuffer(h)
	if err != nil {
		return err
	}
	b.dropPrepared()
	err = b.callOn(buf.c, "free "+buf.name, func(w *worker) error {
		if err := w.syncAll("before freeing " + buf.name); err != nil {
			return err
		}
		if buf.where == contract.WhereHostPageable {
			freePageable(buf.host)
			return nil
		}
		if buf.host != nil {
			return wrap(cu.MemFreeHost(buf.host), "cuMemFreeHost %s", buf.name)
		}
		return wrap(cu.MemFree(buf.dptr), "cuMemFree %s", buf.name)
	})
	b.untrack(buf.id)
	return err
}

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
		deleteHandles(w.retiredHostFuncs) // every stream is synchronized: no replay calls them
		w.retiredHostFuncs = nil
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

// MemInfo returns the device's free and total memory in bytes.
func (b *backend) MemInfo() (free, total int64, err error) {
	err = b.call("cuMemGetInfo", func(w *worker) error {
		var err error
		free, total, err = cu.MemInfo()
		return wrap(err, "cuMemGetInfo")
	})
	return
}

// StageTimes returns, with Options.Profile, the GPU time in ms of each stage
// launched since the last call, summed by stage name; it is filled in by
// Synchronize.
func (b *backend) StageTimes() map[string]float64 {
	var out map[string]float64
	b.call("stage times", func(w *worker) error {
		out = w.times
		w.times = map[string]float64{}
		return nil
	})
	return out
}

func (w *worker) timedEvent() (cu.Event, error) {
	if n := len(w.evPool); n > 0 {
		e := w.evPool[n-1]
		w.evPool = w.evPool[:n-1]
		return e, nil
	}
	e, err := cu.MakeEvent(cu.DefaultEvent)
	return e, wrap(err, "cuEventCreate (timed)")
}

// collectProfile reads the timed events of the stages run since the last
// Synchronize (in stream mode, and of the last replay of each profiled graph)
// into times and spans, and recycles the stream-mode events.
func (w *worker) collectProfile() error {
	add := func(origin *cu.Event, recs []profRec) {
		for _, p := range recs {
			ms, err := p.start.Elapsed(p.end)
			if err != nil {
				continue
			}
			w.times[p.stage] += ms
			if origin == nil {
				continue
			}
			s0, err1 := origin.Elapsed(p.start)
			s1, err2 := origin.Elapsed(p.end)
			if err1 == nil && err2 == nil {
				w.spans = append(w.spans, executor.StageSpan{Stage: p.idx, Name: p.stage, StartUS: s0 * 1000, EndUS: max(s1, s0) * 1000})
			}
		}
	}
	var origin *cu.Event
	if w.hasOrigin {
		origin = &w.origin
	}
	add(origin, w.prof)
	for _, p := range w.prof {
		w.evPool = append(w.evPool, p.start, p.end)
	}
	w.prof = w.prof[:0]
	if w.hasOrigin {
		w.evPool = append(w.evPool, w.origin)
		w.hasOrigin = false
	}
	var err error
	if sb := w.b.stamps; sb != nil {
		err = w.readStamps(sb, true)
	}
	for _, g := range w.timedGraphs {
		if g.timed {
			add(&g.start, g.prof)
		}
		if g.stamps != nil && err == nil {
			err = w.readStamps(g.stamps, false)
		}
	}
	w.timedGraphs = w.timedGraphs[:0]
	return err
}

// StageSpans returns, with Options.Profile, the stage spans gathered by the
// Synchronize calls since the last call (executor.Profiler). In stream mode
// they are µs from a timed event recorded just before the first stage issued
// after the previous Synchronize; in graph mode, from the graph's first
// node, for the last replay before each Synchronize. A stage's span covers
// all its work (a mix stage's snapshot copies, a checksum's zeroing).
func (b *backend) StageSpans() []executor.StageSpan {
	var out []executor.StageSpan
	b.call("stage spans", func(w *worker) error {
		out = w.spans
		w.spans = nil
		return nil
	})
	return out
}

var _ executor.Profiler = (*backend)(nil)

// freeRetired frees the scratch buffers s outgrew during captures.
func (w *worker) freeRetired(s *stream) error {
	if len(s.retired) == 0 {
		return nil
	}
	if err := w.syncAll("before freeing a stream's old scratch"); err != nil {
		return err
	}
	for _, p := range s.retired {
		if err := cu.MemFree(p); err != nil {
			return wrap(err, "cuMemFree old scratch")
		}
	}
	s.retired = nil
	return nil
}

func asBuffer(h executor.Buffer) (*buffer, error) {
	b, ok := h.(*buffer)
	if !ok || b == nil {
		return nil, fmt.Errorf("cudart: %T is not a cuda buffer", h)
	}
	return b, nil
}

func asEvent(he executor.Event, hs executor.Stream) (*event, *stream, error) {
	e, ok := he.(*event)
	if !ok || e == nil {
		return nil, nil, fmt.Errorf("cudart: %T is not a cuda event", he)
	}
	s, ok := hs.(*stream)
	if !ok || s == nil {
		return nil, nil, fmt.Errorf("cudart: %T is not a cuda stream", hs)
	}
	return e, s, nil
}

// ptxPath resolves a user kernel's PTX path against Options.PTXDir.
func (b *backend) ptxPath(p string) string {
	if filepath.IsAbs(p) || b.opts.PTXDir == "" {
		return p
	}
	return filepath.Join(b.opts.PTXDir, p)
}
