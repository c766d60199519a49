package executor

// CUDA graph mode: a plan captured into a graph by stream capture, then
// replayed; the "whole hazard DAG" plan; and the optional backend
// interfaces for graphs and timed stage spans.

import (
	"errors"
	"fmt"
	"time"

	"github.com/dagrun/dagrun/plan"
)

// Mode says how Run issues a plan.
type Mode string

const (
	// ModeStreams issues every op of every iteration to the backend's
	// streams (Run's default).
	ModeStreams Mode = "streams"
	// ModeGraph captures one iteration into a graph, instantiates it once
	// and launches it per iteration (RunGraph). The backend must implement
	// GraphBackend.
	ModeGraph Mode = "graph"
)

// ErrNoGraphs is returned (wrapped) by RunGraph and Prepared.Capture when
// the backend does not implement GraphBackend.
var ErrNoGraphs = errors.New("backend cannot capture graphs (graph mode needs the cuda backend, or EmulateGraphs)")

// Graph is an opaque handle of an instantiated graph owned by a GraphBackend.
type Graph any

// GraphBackend is an optional Backend interface: a backend that can record
// the ops issued to its streams into a graph (CUDA stream capture,
// cuStreamBeginCapture … cuStreamEndCapture) and replay it.
//
// The contract is CUDA's: between BeginCapture(s) and EndCapture(s), ops
// issued to s, and to every stream that waits on an event recorded on a
// stream in the capture, are recorded instead of run, with the dependencies
// that stream order and record→wait pairs give them. Every stream that joined
// the capture must be joined back into s (s waits on an event recorded on it
// after its last captured op) before EndCapture. A replay started by
// LaunchGraph(g, s) begins after the work issued to s before it and work
// issued to s after it waits for the whole replay.
type GraphBackend interface {
	Backend
	// BeginCapture starts capturing on origin stream s.
	BeginCapture(s Stream) error
	// EndCapture ends the capture begun on s and returns the instantiated
	// graph. It returns an error if a captured op failed, if a stream was
	// not joined back, or if instantiation failed; no graph is left then.
	EndCapture(s Stream) (Graph, error)
	// LaunchGraph queues one replay of g on s.
	LaunchGraph(g Graph, s Stream) error
	// DestroyGraph releases g; replays already queued still run.
	DestroyGraph(g Graph) error
}

// StageSpan is one stage's execution measured by a profiling backend:
// StartUS and EndUS are µs from a start event recorded before the first
// timed stage (in graph mode: the first node of the graph).
type StageSpan struct {
	Stage   int    // index in the plan's stages (LaunchDesc.Stage)
	Name    string // stage name
	StartUS float64
	EndUS   float64
}

// Profiler is an optional Backend interface: a backend that brackets every
// stage with timed events (cudart with Options.Profile) and reports them.
type Profiler interface {
	// StageSpans returns the spans of the stages run since the last call,
	// gathered by Synchronize, and forgets them. A stage issued k times
	// between two calls has k spans; a graph replayed k times between two
	// Synchronize calls reports its last replay only.
	StageSpans() []StageSpan
}

// Prepared is a plan set up on a backend for tools that issue iterations
// one by one (the GPU makespan benchmark): buffers allocated and written
// with their initial contents, streams and events created, launches
// resolved. It holds the plan lowered in graph shape: one iteration is a
// fork (stream 0 records, the other streams wait), the plan's ops, and a
// join (the other streams record, stream 0 waits), issued directly (Issue)
// or captured into a graph (Capture) by the same issue loop. An iteration
// thus starts after the work issued to stream 0 before it, and stream 0's
// later work waits for all of it. Methods are called from one goroutine.
type Prepared struct {
	e      *exec
	graphs []Graph // made by Capture
}

// Prepare lowers p for single iterations in graph shape (see Prepared),
// allocates and initialises its buffers on b and creates its streams and
// events. It returns Run's lowering errors (plans with host stages are
// rejected: they cannot be captured). Call Close to release everything,
// also on errors.
func Prepare(p *plan.Plan, b Backend) (*Prepared, error) {
	o := Options{Mode: ModeGraph}
	if len(p.Captures) > 0 { // one iteration in graph shape: the whole of it
		q := *p
		q.Captures = nil
		p = &q
	}
	x, err := lower(p, &o)
	if err != nil {
		return nil, err
	}
	x.graphsOptional = true // Issue needs none; Capture reports ErrNoGraphs
	e, err := x.setup(b, &o)
	if err != nil {
		return nil, errors.Join(err, e.release())
	}
	return &Prepared{e: e}, nil
}

// Plan returns the prepared plan.
func (pr *Prepared) Plan() *plan.Plan { return pr.e.x.p }

// Streams returns the backend streams, indexed by plan stream id.
func (pr *Prepared) Streams() []Stream { return pr.e.streams[:len(pr.e.x.p.Streams)] }

// Issue issues one iteration in stream mode: fork, the plan's ops in issue
// order, join. Errors name the op, stage and stream.
func (pr *Prepared) Issue() error {
	e := pr.e
	if err := e.issue(e.x.capture[0], e.issued); err != nil {
		return err
	}
	e.issued++
	return nil
}

// Capture records one iteration (fork, the plan's ops, join) into a graph by
// stream capture on stream 0 and returns it instantiated. Close destroys the
// graphs it made. It returns an error wrapping ErrNoGraphs when the backend
// is no GraphBackend, or the backend's capture error (the capture is ended
// and its graph dropped).
func (pr *Prepared) Capture() (Graph, error) {
	e := pr.e
	if e.gb == nil {
		return nil, fmt.Errorf("executor: %s: %w", e.b.Name(), ErrNoGraphs)
	}
	if err := e.capture(0); err != nil {
		return nil, err
	}
	g := e.graphs[0]
	e.graphs[0] = nil
	pr.graphs = append(pr.graphs, g)
	return g, nil
}

// LaunchGraph queues one replay of g (from Capture) on stream 0.
func (pr *Prepared) LaunchGraph(g Graph) error {
	e := pr.e
	if e.gb == nil {
		return fmt.Errorf("executor: %s: %w", e.b.Name(), ErrNoGraphs)
	}
	e.pending = true
	if err := e.gb.LaunchGraph(g, e.streams[e.x.origin]); err != nil {
		return fmt.Errorf("executor: %s: launch graph (replay %d): %w", e.b.Name(), e.issued+1, err)
	}
	e.issued++
	return nil
}

// Synchronize waits for the issued work and returns the backend's first
// asynchronous error.
func (pr *Prepared) Synchronize() error {
	err := pr.e.b.Synchronize()
	pr.e.pending = false
	return err
}

// Outputs synchronizes, then reads back and checksums the plan's role=output
// buffers, in plan order. A race report does not stop it.
func (pr *Prepared) Outputs() ([]Output, error) {
	res, err := pr.e.tail(time.Now())
	if _, race := err.(*RaceError); err != nil && !race {
		return nil, err
	}
	return res.Outputs, nil
}

// Close waits for issued work, destroys the graphs, events and streams and
// frees the buffers, returning every error met.
func (pr *Prepared) Close() error {
	e := pr.e
	e.graphs = append(e.graphs, pr.graphs...)
	pr.graphs = nil
	return e.release()
}

// capture records phase ph of the program into a graph on the origin
// stream, with the issue loop, and keeps the graph and its op counts.
func (e *exec) capture(ph int) error {
	origin := e.streams[e.x.origin]
	if err := e.gb.BeginCapture(origin); err != nil {
		return fmt.Errorf("executor: %s: begin capture on stream 0: %w", e.b.Name(), err)
	}
	before := counts{e.launches, e.waits, e.records}
	ierr := e.issue(e.x.capture[ph], 0)
	e.pending = false
	e.captured[ph] = counts{e.launches - before.launches, e.waits - before.waits, e.records - before.records}
	e.launches, e.waits, e.records = before.launches, before.waits, before.records
	g, err := e.gb.EndCapture(origin)
	if ierr != nil {
		if err == nil {
			err = e.gb.DestroyGraph(g)
		}
		return errors.Join(fmt.Errorf("executor: capture: %w", ierr), err)
	}
	if err != nil {
		return fmt.Errorf("executor: %s: end capture on stream 0: %w", e.b.Name(), err)
	}
	e.graphs[ph] = g
	return nil
}

// EmulateGraphs wraps b in a GraphBackend that emulates capture: between
// BeginCapture(s) and EndCapture(s) it records the Launch, Record and Wait
// calls instead of issuing them, and LaunchGraph(g, s) issues them again in
// the same order, with a captured graph's dependencies: the ops of the
// capture's stream on it, and those of each stream that joined the capture
// on a stream of the graph's own (its branch), which first waits for an
// event recorded on the capture's stream at the launch, so a replay's
// captured work depends on captured work and on the work issued to the
// launch's stream before it only, not on a joined stream's work outside
// the capture (verify.CaptureReplayOrder). Graph mode thus runs on any
// backend (the simulator: its race detector then checks the replays). As in a real
// capture, only the ops of the streams that joined it are recorded; the
// others run (CUDA's join rule: capture_joins.go); a captured stream's
// wait on an event not recorded in the capture fails and invalidates it,
// as the driver's CUDA_ERROR_STREAM_CAPTURE_ISOLATION does. An allocation during a
// capture in global or thread-local mode (CaptureModer) fails as the
// driver's cuMemAlloc does. A graph may only be launched on its origin
// stream. The wrapper creates streams of b's kinds when b is a
// StreamKinder. If b is a
// Profiler or a HostSyncer, so is the wrapper (host waits are not captured;
// during a capture in global or thread-local mode they fail as the
// driver's do).
func EmulateGraphs(b Backend) GraphBackend {
	e := &emulated{Backend: b}
	p, isProfiler := b.(Profiler)
	hs, isHostSyncer := b.(HostSyncer)
	switch {
	case isProfiler && isHostSyncer:
		return struct {
			*emulated
			Profiler
			HostSyncer
		}{e, p, emulatedHost{hs, e}}
	case isProfiler:
		return struct {
			*emulated
			Profiler
		}{e, p}
	case isHostSyncer:
		return struct {
			*emulated
			HostSyncer
		}{e, emulatedHost{hs, e}}
	}
	return e
}

// emulatedHost is the HostSyncer of an emulation: cuEventSynchronize and
// cuEventQuery during a capture in global or thread-local mode fail as the
// driver's do (potentially unsafe calls: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
// seen on the H100; the emulation has one host thread, the capturing one).
type emulatedHost struct {
	HostSyncer
	e *emulated
}

func (h emulatedHost) unsafe(call string) error {
	if h.e.cur == nil || h.e.mode == plan.CaptureRelaxed {
		return nil
	}
	return fmt.Errorf("executor: emulated graphs: %s during a capture in %s mode (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED): wait before the capture begins, or capture in relaxed mode", call, map[bool]string{true: "global", false: h.e.mode}[h.e.mode == plan.CaptureGlobal])
}

func (h emulatedHost) SyncEvent(ev Event) error {
	if err := h.unsafe("cuEventSynchronize"); err != nil {
		return err
	}
	return h.HostSyncer.SyncEvent(ev)
}

func (h emulatedHost) QueryEvent(ev Event) (bool, error) {
	if err := h.unsafe("cuEventQuery"); err != nil {
		return false, err
	}
	return h.HostSyncer.QueryEvent(ev)
}

type emulated struct {
	Backend
	cur    *emulatedGraph // capture in progress
	mode   string         // its mode (plan.CaptureGlobal …)
	device map[Stream]int // the device of each stream made by NewStreamOn (others: 0)
}

var (
	_ CaptureModer = (*emulated)(nil)
	_ StreamKinder = (*emulated)(nil)
	_ Devicer      = (*emulated)(nil)
	_ Collectiver  = (*emulated)(nil)
)

// Devices is b's, or 1 when b is no Devicer.
func (e *emulated) Devices() int {
	if d, ok := e.Backend.(Devicer); ok {
		return d.Devices()
	}
	return 1
}

// NewStreamOn is b's; on a backend that is no Devicer, device 0 only.
func (e *emulated) NewStreamOn(dev int, kind string) (Stream, error) {
	if d, ok := e.Backend.(Devicer); ok {
		s, err := d.NewStreamOn(dev, kind)
		if err == nil {
			if e.device == nil {
				e.device = map[Stream]int{}
			}
			e.device[s] = dev
		}
		return s, err
	}
	if dev == 0 {
		return e.NewStreamKind(kind)
	}
	return nil, fmt.Errorf("executor: emulated graphs: %s: %w (device %d)", e.Backend.Name(), ErrNoDevices, dev)
}

// CollectiveLibrary is b's, or ErrNoCollectives when b is no Collectiver.
func (e *emulated) CollectiveLibrary() (string, error) {
	if c, ok := e.Backend.(Collectiver); ok {
		return c.CollectiveLibrary()
	}
	return "", fmt.Errorf("executor: emulated graphs: %s: %w", e.Backend.Name(), ErrNoCollectives)
}

// NewStreamKind is b's, or ErrNoStreamKinds when b is no StreamKinder.
func (e *emulated) NewStreamKind(kind string) (Stream, error) {
	if sk, ok := e.Backend.(StreamKinder); ok {
		return sk.NewStreamKind(kind)
	}
	if kind == plan.StreamNonBlocking {
		return e.Backend.NewStream()
	}
	return nil, fmt.Errorf("executor: emulated graphs: %s: %w", e.Backend.Name(), ErrNoStreamKinds)
}

// BeginCaptureMode is BeginCapture in a capture mode.
func (e *emulated) BeginCaptureMode(s Stream, mode string) error {
	if err := e.BeginCapture(s); err != nil {
		return err
	}
	e.mode = mode
	return nil
}

// Alloc fails during a capture unless its mode is relaxed, as cuMemAlloc
// does.
func (e *emulated) Alloc(d BufferDesc) (Buffer, error) {
	if e.cur != nil && e.mode != plan.CaptureRelaxed {
		return nil, fmt.Errorf("executor: emulated graphs: alloc %s during a capture (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED): allocate before the capture begins, or capture in relaxed mode", d.Name)
	}
	return e.Backend.Alloc(d)
}

type emulatedGraph struct {
	origin      Stream
	ops         []emulatedOp
	branches    map[Stream]Stream // per joined stream: its branch's stream, made at the first launch
	launch      Event             // recorded on origin at each launch; each branch waits on it first
	dead        bool
	invalidated error        // the error that invalidated the capture
	joins       captureJoins // which streams joined the capture, and whether they joined back (capture_joins.go)
}

// emulatedOp is a captured op: do issues it on the stream that runs it in
// a replay (s, or its branch).
type emulatedOp struct {
	s  Stream
	do func(Stream) error
}

func (e *emulated) BeginCapture(s Stream) error {
	if e.cur != nil {
		return errors.New("executor: emulated graphs: a capture is already in progress")
	}
	e.cur, e.mode = &emulatedGraph{origin: s}, plan.CaptureRelaxed
	e.cur.joins.begin(s)
	return nil
}

func (e *emulated) EndCapture(s Stream) (Graph, error) {
	g := e.cur
	if g == nil || g.origin != s {
		return nil, errors.New("executor: emulated graphs: EndCapture on a stream that is not capturing")
	}
	e.cur = nil
	if g.invalidated != nil {
		return nil, fmt.Errorf("executor: emulated graphs: the capture was invalidated (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) by an earlier error: %w", g.invalidated)
	}
	if err := g.joins.end(s); err != nil {
		return nil, err
	}
	return g, nil
}

func (e *emulated) LaunchGraph(h Graph, s Stream) error {
	g, ok := h.(*emulatedGraph)
	if !ok || g == nil || g.dead {
		return fmt.Errorf("executor: emulated graphs: %T is not a live graph of this backend", h)
	}
	if e.cur != nil {
		return errors.New("executor: emulated graphs: LaunchGraph during a capture")
	}
	if s != g.origin {
		return errors.New("executor: emulated graphs: a graph launches on its origin stream only")
	}
	if g.branches == nil {
		var err error
		if g.launch, err = e.Backend.NewEvent(); err != nil {
			return err
		}
		g.branches = map[Stream]Stream{}
		for _, op := range g.ops {
			if _, ok := g.branches[op.s]; ok || op.s == g.origin {
				continue
			}
			var b Stream
			var err error
			if d, ok := e.Backend.(Devicer); ok { // a branch runs on its stream's device
				b, err = d.NewStreamOn(e.device[op.s], plan.StreamNonBlocking)
			} else {
				b, err = e.Backend.NewStream()
			}
			if err != nil {
				return err
			}
			g.branches[op.s] = b
		}
	}
	if err := e.Backend.Record(g.launch, g.origin); err != nil {
		return err
	}
	started := map[Stream]bool{}
	for _, op := range g.ops {
		s := op.s
		if b, ok := g.branches[s]; ok {
			if !started[s] {
				started[s] = true
				if err := e.Backend.Wait(b, g.launch); err != nil {
					return err
				}
			}
			s = b
		}
		if err := op.do(s); err != nil {
			return err
		}
	}
	return nil
}

func (e *emulated) DestroyGraph(h Graph) error {
	g, ok := h.(*emulatedGraph)
	if !ok || g == nil || g.dead {
		return fmt.Errorf("executor: emulated graphs: %T is not a live graph of this backend", h)
	}
	g.dead = true
	var errs []error
	for _, b := range g.branches {
		errs = append(errs, e.Backend.DestroyStream(b))
	}
	if g.branches != nil {
		errs = append(errs, e.Backend.DestroyEvent(g.launch))
	}
	return errors.Join(errs...)
}

func (e *emulated) Launch(s Stream, l *LaunchDesc) error {
	if e.cur != nil && e.cur.joins.captured(s) {
		if l.Copy == plan.CopySync {
			return fmt.Errorf("executor: emulated graphs: stage %s is a synchronous copy, which a capture does not allow (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)", l.Name)
		}
		e.cur.joins.launch(s, l.Name)
		e.cur.ops = append(e.cur.ops, emulatedOp{s, func(s Stream) error { return e.Backend.Launch(s, l) }})
		return nil
	}
	return e.Backend.Launch(s, l)
}

func (e *emulated) Record(ev Event, s Stream) error {
	if e.cur != nil {
		e.cur.joins.record(ev, s)
		if e.cur.joins.captured(s) {
			e.cur.ops = append(e.cur.ops, emulatedOp{s, func(s Stream) error { return e.Backend.Record(ev, s) }})
			return nil
		}
	}
	return e.Backend.Record(ev, s)
}

func (e *emulated) Wait(s Stream, ev Event) error {
	if e.cur != nil {
		if e.cur.joins.isolated(s, ev) {
			err := errors.New("executor: emulated graphs: a captured stream waits on an event not recorded in the capture (CUDA_ERROR_STREAM_CAPTURE_ISOLATION); wait before the capture begins")
			if e.cur.invalidated == nil {
				e.cur.invalidated = err
			}
			return err
		}
		e.cur.joins.wait(s, ev)
		if e.cur.joins.captured(s) {
			e.cur.ops = append(e.cur.ops, emulatedOp{s, func(s Stream) error { return e.Backend.Wait(s, ev) }})
			return nil
		}
	}
	return e.Backend.Wait(s, ev)
}

func (e *emulated) Synchronize() error {
	if e.cur != nil {
		return errors.New("executor: emulated graphs: Synchronize during a capture")
	}
	return e.Backend.Synchronize()
}
