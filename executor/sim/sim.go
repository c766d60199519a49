package sim

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
)

// Defaults of Options.
const (
	DefaultMaxDelay  = 20 * time.Microsecond
	DefaultMaxBytes  = 16 << 30 // 16 GiB of host memory for buffers
	DefaultSpinScale = 0.001    // 1 ms of spin takes 1 µs
	DefaultMaxSpin   = 5 * time.Microsecond
	DefaultMaxRaces  = 64
)

// KernelFunc is a CPU body for a user kernel (the same type as
// executor.CPUKernel). in holds the bytes of each read (in LaunchDesc.Reads
// order; a copy where the read overlaps a write of the launch, else the live
// bytes, which must not be modified), out the live bytes of each write range
// (in Writes order); both are valid only during the call, and out starts
// with the range's current contents.
type KernelFunc = executor.CPUKernel

// Options configure the simulator. The zero value is the default: 20 µs of
// random delay per op at most, seed 0, race detection on.
type Options struct {
	// Seed seeds the per-stream delay generators.
	Seed int64
	// MaxDelay bounds the random delay before each op: 0 means
	// DefaultMaxDelay, a negative value means no delay.
	MaxDelay time.Duration
	// NoDetect turns the race detector off.
	NoDetect bool
	// SpinScale is the fraction of a spin's µs that the simulator really
	// waits: 0 means DefaultSpinScale.
	SpinScale float64
	// MaxSpin caps the real wait of one spin: 0 means DefaultMaxSpin, a
	// negative value means no cap.
	MaxSpin time.Duration
	// Kernels are CPU bodies of user kernels, by kernel name. A user kernel
	// without one here runs the body registered for its PTX entry with
	// executor.RegisterCPUKernel, and without that either as an opaque stage:
	// each write becomes the mix built-in's function of the stage and the
	// bytes read (a trailing partial word is read zero-padded and written
	// truncated).
	Kernels map[string]KernelFunc
	// MaxBytes bounds the bytes of all live buffers (the simulator holds
	// them in host memory): 0 means DefaultMaxBytes. Alloc past it fails
	// with an error instead of exhausting the host.
	MaxBytes int64
	// MaxRaces is how many distinct races a report lists: 0 means
	// DefaultMaxRaces.
	MaxRaces int
	// Spans records each launch's start and end on its stream's goroutine
	// (host wall-clock time of the simulation, not GPU time) for
	// StageSpans (executor.Profiler).
	Spans bool
	// Devices is the number of simulated devices (executor.Devicer): 0
	// means DefaultDevices (devices.go).
	Devices int
}

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("sim: backend is closed")

// Backend is the simulator. Its methods must be called from one goroutine
// (executor.Backend's contract), its threads' views each from its own
// (Thread); the work runs on one goroutine per stream.
type Backend struct {
	opt      Options
	maxDelay time.Duration
	detect   bool
	closed   bool

	pending sync.WaitGroup // ops enqueued and not yet executed
	running sync.WaitGroup // stream goroutines

	mu        sync.Mutex // guards the fields below (stream goroutines report here)
	streams   map[*stream]string
	events    map[*event]string
	buffers   map[*buffer]string
	liveBytes int64 // bytes of live buffers, against Options.MaxBytes
	nextVC    int   // vector-clock index of the next stream (never reused)
	nextBuf   int
	faults    []error
	races     map[raceKey]*executor.Race
	raceOrder []raceKey
	dropped   int

	// host is the issuing host thread's clock (hostio.go): mainHost's, or
	// while a thread's view issues (threads.go), that thread's.
	host     *hostState
	mainHost hostState
	// Host threads (threads.go): issueMu serializes the views' calls,
	// threads holds the views by name, threaded is set once one exists.
	issueMu  sync.Mutex
	threads  map[string]*thread
	threaded bool

	// The legacy default stream and its holders; kinded once a stream of
	// another kind exists (kinds.go).
	legacy     *stream
	legacyRefs int
	kinded     bool

	// With Options.Spans: the launches run since the last StageSpans, and
	// the time of the first Launch call after it, their time origin.
	spans []executor.StageSpan
	epoch time.Time

	// Collectives (devices.go): the issuing goroutine's rendezvous being
	// filled, by group; the rendezvous not yet complete (guarded by mu);
	// ops run so far, for deadlock detection.
	rvs      map[int]*rendezvous
	open     []*rendezvous
	progress atomic.Uint64
}

// StageSpans returns, with Options.Spans, the spans of the stages run since
// the last call (executor.Profiler), in µs from the first Launch call
// after it: when each launch's body began and its spin ended on its
// stream's goroutine, in the order they ended. They are the simulation's
// host time, not a prediction of GPU time.
func (b *Backend) StageSpans() []executor.StageSpan {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.spans
	b.spans, b.epoch = nil, time.Time{}
	return out
}

var _ executor.Profiler = (*Backend)(nil)

// markEpoch sets the spans' time origin at the first launch issued after
// StageSpans (Options.Spans).
func (b *Backend) markEpoch() {
	if !b.opt.Spans {
		return
	}
	b.mu.Lock()
	if b.epoch.IsZero() {
		b.epoch = time.Now()
	}
	b.mu.Unlock()
}

// span records a launch that ran from t0 to t1 (Options.Spans).
func (b *Backend) span(l *executor.LaunchDesc, t0, t1 time.Time) {
	b.mu.Lock()
	us := func(t time.Time) float64 { return float64(t.Sub(b.epoch).Nanoseconds()) / 1e3 }
	b.spans = append(b.spans, executor.StageSpan{Stage: l.Stage, Name: l.Name, StartUS: max(0, us(t0)), EndUS: max(0, us(t1))})
	b.mu.Unlock()
}

// New returns a simulator with options o.
func New(o Options) *Backend {
	b := &Backend{
		opt:      o,
		maxDelay: o.MaxDelay,
		detect:   !o.NoDetect,
		streams:  map[*stream]string{},
		events:   map[*event]string{},
		buffers:  map[*buffer]string{},
		races:    map[raceKey]*executor.Race{},
	}
	b.host = &b.mainHost
	if b.maxDelay == 0 {
		b.maxDelay = DefaultMaxDelay
	}
	if b.opt.SpinScale == 0 {
		b.opt.SpinScale = DefaultSpinScale
	}
	if b.opt.MaxSpin == 0 {
		b.opt.MaxSpin = DefaultMaxSpin
	}
	if b.opt.MaxRaces <= 0 {
		b.opt.MaxRaces = DefaultMaxRaces
	}
	return b
}

var _ executor.Backend = (*Backend)(nil)

// Name returns "sim".
func (b *Backend) Name() string { return "sim" }

// Live returns how many streams, events and buffers are alive.
func (b *Backend) Live() (streams, events, buffers int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.streams), len(b.events), len(b.buffers)
}

// NewStream creates a stream and starts its goroutine. Streams are numbered
// from 0 in creation order; a destroyed stream's number is given to the next
// new stream (race reports use these numbers).
func (b *Backend) NewStream() (executor.Stream, error) {
	if b.closed {
		return nil, ErrClosed
	}
	b.mu.Lock()
	used := make([]bool, len(b.streams))
	for s := range b.streams {
		if s.num < len(used) {
			used[s.num] = true
		}
	}
	num := slices.Index(used, false)
	if num < 0 {
		num = len(used)
	}
	s := &stream{b: b, num: num, vc: b.nextVC, rng: rand.New(rand.NewPCG(uint64(b.opt.Seed), uint64(num)))}
	b.nextVC++
	s.cond = sync.NewCond(&s.mu)
	s.space = sync.NewCond(&s.mu)
	b.streams[s] = callSite()
	b.mu.Unlock()
	b.running.Add(1)
	go s.loop()
	return s, nil
}

// NewEvent creates an event that was never recorded.
func (b *Backend) NewEvent() (executor.Event, error) {
	if b.closed {
		return nil, ErrClosed
	}
	e := &event{}
	b.mu.Lock()
	b.events[e] = callSite()
	b.mu.Unlock()
	return e, nil
}

// Alloc allocates a zeroed buffer in host memory.
func (b *Backend) Alloc(d executor.BufferDesc) (executor.Buffer, error) {
	if b.closed {
		return nil, ErrClosed
	}
	if d.Bytes <= 0 {
		return nil, fmt.Errorf("sim: alloc %s: %d bytes, want > 0", d.Name, d.Bytes)
	}
	where, err := contract.ParseWhere(string(d.Where))
	if err != nil {
		return nil, fmt.Errorf("sim: alloc %s: %w", d.Name, err)
	}
	limit := cmp.Or(b.opt.MaxBytes, DefaultMaxBytes)
	b.mu.Lock()
	if b.liveBytes+d.Bytes > limit {
		live := b.liveBytes
		b.mu.Unlock()
		return nil, fmt.Errorf("sim: alloc %s: %d bytes with %d live would pass the simulator's %d-byte limit (it holds buffers in host memory): use smaller buffers, or sim.Options.MaxBytes", d.Name, d.Bytes, live, limit)
	}
	b.liveBytes += d.Bytes
	buf := &buffer{id: b.nextBuf, name: d.Name, where: where, data: make([]byte, d.Bytes), fresh: true}
	if where == contract.WhereDevice {
		buf.device = d.Device
	}
	b.nextBuf++
	b.buffers[buf] = callSite()
	b.mu.Unlock()
	return buf, nil
}

// Write copies data into the buffer. The host write is ordered after all
// work synchronized before it; it clears the buffer's shadow state.
func (b *Backend) Write(h executor.Buffer, data []byte) error {
	buf, err := b.buffer(h)
	if err != nil {
		return err
	}
	if int64(len(data)) != int64(len(buf.data)) {
		return fmt.Errorf("sim: write %s: %d bytes, the buffer has %d", buf.name, len(data), len(buf.data))
	}
	buf.mu.Lock()
	// A buffer never written since Alloc is still zero: skip writing zeros,
	// so that untouched pages of large buffers are never faulted in.
	if !buf.fresh || !allZero(data) {
		copy(buf.data, data)
	}
	buf.fresh = false
	buf.mu.Unlock()
	buf.shadow.reset()
	return nil
}

var zeroPage [4096]byte

func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:n], zeroPage[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// Read returns a copy of the buffer's bytes.
func (b *Backend) Read(h executor.Buffer) ([]byte, error) {
	buf, err := b.buffer(h)
	if err != nil {
		return nil, err
	}
	buf.mu.RLock()
	defer buf.mu.RUnlock()
	return slices.Clone(buf.data), nil
}

// Record enqueues a new generation of e on s.
func (b *Backend) Record(he executor.Event, hs executor.Stream) error {
	e, err := b.event(he)
	if err != nil {
		return err
	}
	s, err := b.stream(hs)
	if err != nil {
		return err
	}
	sl := &slot{done: make(chan struct{}), stream: s.num}
	b.stampRecord(sl) // threads.go
	e.latest = sl
	s.push(op{kind: opRecord, slot: sl})
	return nil
}

// Wait makes s wait for the generation of e most recently recorded on the
// host; if e was never recorded it waits for nothing.
func (b *Backend) Wait(hs executor.Stream, he executor.Event) error {
	e, err := b.event(he)
	if err != nil {
		return err
	}
	s, err := b.stream(hs)
	if err != nil {
		return err
	}
	s.push(op{kind: opWait, slot: e.latest, blind: b.unordered(e.latest)}) // threads.go
	return nil
}

// checkArgs checks that every access of l names a live buffer of this
// backend and lies inside it.
func (b *Backend) checkArgs(l *executor.LaunchDesc) error {
	for _, set := range [2][]executor.Arg{l.Reads, l.Writes} {
		for _, a := range set {
			buf, err := b.buffer(a.Buffer)
			if err != nil {
				return fmt.Errorf("%s %s: %w", l.Name, a.Name, err)
			}
			if a.Bytes <= 0 || !contract.InBounds(a.Offset, a.Bytes, int64(len(buf.data))) {
				return fmt.Errorf("sim: stage %s: access %s at offset %d, %d bytes, is outside the buffer's %d bytes", l.Name, a.Name, a.Offset, a.Bytes, len(buf.data))
			}
		}
	}
	return nil
}

// Launch checks l's handles and ranges and enqueues it on s. The backend
// keeps l until the launch has run: l must not change until Synchronize.
func (b *Backend) Launch(hs executor.Stream, l *executor.LaunchDesc) error {
	s, err := b.stream(hs)
	if err != nil {
		return err
	}
	if err := b.checkArgs(l); err != nil {
		return err
	}
	if l.UserKernel == nil && !contract.IsBuiltin(l.Kernel) {
		return fmt.Errorf("sim: stage %s: unknown kernel %q", l.Name, l.Kernel)
	}
	if err := b.checkDevices(s, l); err != nil { // devices.go
		return err
	}
	b.markEpoch()
	if l.Copy == plan.CopySync {
		return b.syncCopy(s, l) // kinds.go
	}
	if pageableAsync(l) {
		if l, err = b.stageSource(l); err != nil { // kinds.go
			return err
		}
	}
	var rv *rendezvous
	if l.Collective != nil {
		if rv, err = b.issueRank(s, l); err != nil { // devices.go
			return err
		}
	}
	s.push(op{kind: opLaunch, desc: l, rv: rv})
	return nil
}

// Synchronize waits for all enqueued work, then returns the faults met since
// the last call and, if the detector saw races, an *executor.RaceError
// (joined with the faults when both occur). Everything before it is ordered
// before everything after it, so it clears the shadow state.
func (b *Backend) Synchronize() error {
	if b.closed {
		return ErrClosed
	}
	deadlock := b.waitPending() // devices.go
	b.mu.Lock()
	errs := b.faults
	b.faults = nil
	if deadlock != nil {
		errs = append(errs, deadlock)
	}
	if len(b.raceOrder) > 0 {
		re := &executor.RaceError{Backend: "sim", Dropped: b.dropped}
		for _, k := range b.raceOrder {
			re.Races = append(re.Races, *b.races[k])
		}
		errs = append(errs, re)
		clear(b.races)
		b.raceOrder, b.dropped = nil, 0
	}
	for buf := range b.buffers {
		buf.shadow.reset()
	}
	b.mu.Unlock()
	if len(errs) == 1 {
		return errs[0] // a lone *executor.RaceError keeps its type
	}
	return errors.Join(errs...)
}

// DestroyStream ends s once its queued work is done.
func (b *Backend) DestroyStream(hs executor.Stream) error {
	s, err := b.stream(hs)
	if err != nil {
		return err
	}
	if s == b.legacy {
		if b.legacyRefs--; b.legacyRefs > 0 {
			return nil
		}
		b.legacy = nil
	}
	b.mu.Lock()
	delete(b.streams, s)
	b.mu.Unlock()
	s.stop()
	return nil
}

// DestroyEvent destroys e; queued waits on it still wait for their generation.
func (b *Backend) DestroyEvent(he executor.Event) error {
	e, err := b.event(he)
	if err != nil {
		return err
	}
	b.mu.Lock()
	delete(b.events, e)
	b.mu.Unlock()
	e.destroyed = true
	return nil
}

// Free releases a buffer. A queued launch that reaches the buffer afterwards
// fails (an asynchronous fault reported by Synchronize).
func (b *Backend) Free(h executor.Buffer) error {
	buf, err := b.buffer(h)
	if err != nil {
		return err
	}
	b.mu.Lock()
	if _, live := b.buffers[buf]; live {
		b.liveBytes -= int64(len(buf.data))
	}
	delete(b.buffers, buf)
	b.mu.Unlock()
	buf.freed.Store(true)
	return nil
}

// Close waits for queued work, stops every stream goroutine, and returns an error that
// lists each stream, event and buffer still alive with the call site that
// created it.
func (b *Backend) Close() error {
	if b.closed {
		return ErrClosed
	}
	b.pending.Wait()
	b.closed = true
	b.mu.Lock()
	var leaks []string
	for s, site := range b.streams {
		leaks = append(leaks, fmt.Sprintf("stream %d created at %s", s.num, site))
		s.stop()
	}
	for _, site := range b.events {
		leaks = append(leaks, "event created at "+site)
	}
	for buf, site := range b.buffers {
		leaks = append(leaks, fmt.Sprintf("buffer %s (%d bytes) allocated at %s", buf.name, len(buf.data), site))
	}
	b.mu.Unlock()
	b.running.Wait()
	if len(leaks) == 0 {
		return nil
	}
	slices.Sort(leaks)
	return fmt.Errorf("sim: %d leaked handle(s):\n\t%s", len(leaks), strings.Join(leaks, "\n\t"))
}

func (b *Backend) stream(h executor.Stream) (*stream, error) {
	if b.closed {
		return nil, ErrClosed
	}
	s, ok := h.(*stream)
	if !ok || s == nil || s.b != b {
		return nil, fmt.Errorf("sim: %T is not a stream of this backend", h)
	}
	if s.stopped {
		return nil, fmt.Errorf("sim: stream %d was destroyed", s.num)
	}
	return s, nil
}

func (b *Backend) event(h executor.Event) (*event, error) {
	if b.closed {
		return nil, ErrClosed
	}
	e, ok := h.(*event)
	if !ok || e == nil {
		return nil, fmt.Errorf("sim: %T is not an event of this backend", h)
	}
	if e.destroyed {
		return nil, fmt.Errorf("sim: event was destroyed")
	}
	return e, nil
}

func (b *Backend) buffer(h executor.Buffer) (*buffer, error) {
	if b.closed {
		return nil, ErrClosed
	}
	buf, ok := h.(*buffer)
	if !ok || buf == nil {
		return nil, fmt.Errorf("sim: %T is not a buffer of this backend", h)
	}
	if buf.freed.Load() {
		return nil, fmt.Errorf("sim: buffer %s was freed", buf.name)
	}
	return buf, nil
}

func (b *Backend) fault(err error) {
	b.mu.Lock()
	b.faults = append(b.faults, err)
	b.mu.Unlock()
}

// event is an executor.Event: latest is the generation of the most recent
// Record issued on the host (nil: never recorded).
type event struct {
	latest    *slot
	destroyed bool
}

// slot is one generation of an event: done is closed when the recording
// stream reaches it, after clock (the recording stream's vector clock at that
// point) is set.
type slot struct {
	done   chan struct{}
	clock  []uint64
	stream int
	// thread and seq, for a record issued through a thread's view
	// (threads.go): the issuing thread and its count of records then (0:
	// not a thread's record).
	thread int
	seq    uint64
}

// buffer is an executor.Buffer.
type buffer struct {
	id     int // creation order: the lock order
	name   string
	where  contract.Where
	mu     sync.RWMutex // guards data and fresh during kernels, Read and Write
	data   []byte
	fresh  bool // no byte written since Alloc (data is all zero)
	freed  atomic.Bool
	shadow shadow
	device int // the device of device memory (devices.go)
}

// callSite names the first caller outside this package.
func callSite() string {
	var pcs [16]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !strings.Contains(f.Function, "/executor/sim.") {
			return fmt.Sprintf("%s:%d (%s)", f.File, f.Line, f.Function)
		}
		if !more {
			return "unknown"
		}
	}
}
