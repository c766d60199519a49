package executor

// CUDA graph mode (issue 4, point 3): a plan issued once into a graph by
// stream capture, then replayed; the "whole hazard DAG" plan; and the
// optional backend interfaces for graphs and timed stage spans.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
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

// Prepared is a plan set up on a backend: buffers allocated and written with
// their initial contents, streams and events created, launches resolved. It
// issues iterations on demand, in stream mode (Issue) or as a captured graph
// (Capture, LaunchGraph), for tools that time iterations one by one (the GPU
// makespan benchmark) and for RunGraph. Methods are called from one
// goroutine.
type Prepared struct {
	r      *run
	fork   Event   // recorded on stream 0 at the start of an iteration; every other stream waits on it
	join   []Event // join[s-1] recorded on stream s at the end; stream 0 waits on each
	graphs []Graph
	issued int // iterations issued (stream mode) or launched (graph mode)
	// counts of one iteration's ops including fork and join
	launches, waits, records int
}

// Prepare validates p (as Run does), allocates and initialises its buffers on
// b and creates its streams and events, plus a fork event and one join event
// per stream after the first. Every iteration it issues is wrapped in a fork
// (stream 0 records, the other streams wait) and a join (each other stream
// records, stream 0 waits), so an iteration starts after the work issued to
// stream 0 before it and stream 0's later work waits for all of it: the same
// device-side barrier as Run's between iterations, and what stream capture
// needs. Call Close to release everything, also on errors.
func Prepare(p *planner.Plan, b Backend) (pr *Prepared, err error) {
	r, err := prepare(p, 1)
	if err != nil {
		return nil, err
	}
	r.b = b
	pr = &Prepared{r: r}
	defer func() {
		if err != nil {
			err = errors.Join(err, pr.Close())
			pr = nil
		}
	}()
	if err := r.setup(); err != nil {
		return pr, err
	}
	if n := len(p.Streams); n > 1 {
		if pr.fork, err = b.NewEvent(); err != nil {
			return pr, fmt.Errorf("executor: %s: create fork event: %w", b.Name(), err)
		}
		for s := 1; s < n; s++ {
			e, err := b.NewEvent()
			if err != nil {
				return pr, fmt.Errorf("executor: %s: create join event of stream %d: %w", b.Name(), s, err)
			}
			pr.join = append(pr.join, e)
		}
	}
	pr.launches, pr.waits, pr.records = r.counts(1)
	pr.records += len(pr.join) + min(len(pr.join), 1)
	pr.waits += 2 * len(pr.join)
	return pr, nil
}

// Plan returns the prepared plan.
func (pr *Prepared) Plan() *planner.Plan { return pr.r.p }

// Streams returns the backend streams, indexed by plan stream id.
func (pr *Prepared) Streams() []Stream { return pr.r.streams }

// Issue issues one iteration in stream mode: fork, the plan's ops in issue
// order, join. Errors name the op, stage and stream.
func (pr *Prepared) Issue() error {
	if err := pr.issueIteration(pr.issued); err != nil {
		return err
	}
	pr.issued++
	return nil
}

func (pr *Prepared) issueIteration(it int) error {
	r := pr.r
	b := r.b
	r.issued = true
	if len(pr.join) > 0 {
		if err := b.Record(pr.fork, r.streams[0]); err != nil {
			return fmt.Errorf("executor: %s: record fork event on stream 0: %w", b.Name(), err)
		}
		for s := 1; s < len(r.streams); s++ {
			if err := b.Wait(r.streams[s], pr.fork); err != nil {
				return fmt.Errorf("executor: %s: stream %d waits on the fork event: %w", b.Name(), s, err)
			}
		}
	}
	if err := r.issue(r.ops, false, it); err != nil {
		return err
	}
	for s := 1; s < len(r.streams); s++ {
		if err := b.Record(pr.join[s-1], r.streams[s]); err != nil {
			return fmt.Errorf("executor: %s: record join event on stream %d: %w", b.Name(), s, err)
		}
		if err := b.Wait(r.streams[0], pr.join[s-1]); err != nil {
			return fmt.Errorf("executor: %s: stream 0 waits on the join event of stream %d: %w", b.Name(), s, err)
		}
	}
	return nil
}

// Capture records one iteration (fork, the plan's ops, join) into a graph by
// stream capture on stream 0 and returns it instantiated. Close destroys the
// graphs it made. It returns an error wrapping ErrNoGraphs when the backend
// is no GraphBackend, or the backend's capture error (the capture is ended
// and its graph dropped).
func (pr *Prepared) Capture() (Graph, error) {
	r := pr.r
	gb, ok := r.b.(GraphBackend)
	if !ok {
		return nil, fmt.Errorf("executor: %s: %w", r.b.Name(), ErrNoGraphs)
	}
	if err := gb.BeginCapture(r.streams[0]); err != nil {
		return nil, fmt.Errorf("executor: %s: begin capture on stream 0: %w", r.b.Name(), err)
	}
	ierr := pr.issueIteration(0)
	g, err := gb.EndCapture(r.streams[0])
	if ierr != nil {
		if err == nil {
			err = gb.DestroyGraph(g)
		}
		return nil, errors.Join(fmt.Errorf("executor: capture: %w", ierr), err)
	}
	if err != nil {
		return nil, fmt.Errorf("executor: %s: end capture on stream 0: %w", r.b.Name(), err)
	}
	pr.graphs = append(pr.graphs, g)
	return g, nil
}

// LaunchGraph queues one replay of g (from Capture) on stream 0.
func (pr *Prepared) LaunchGraph(g Graph) error {
	r := pr.r
	gb, ok := r.b.(GraphBackend)
	if !ok {
		return fmt.Errorf("executor: %s: %w", r.b.Name(), ErrNoGraphs)
	}
	r.issued = true
	if err := gb.LaunchGraph(g, r.streams[0]); err != nil {
		return fmt.Errorf("executor: %s: launch graph (replay %d): %w", r.b.Name(), pr.issued+1, err)
	}
	pr.issued++
	return nil
}

// Synchronize waits for the issued work and returns the backend's first
// asynchronous error.
func (pr *Prepared) Synchronize() error {
	err := pr.r.b.Synchronize()
	pr.r.issued = false
	return err
}

// Outputs synchronizes, then reads back and checksums the plan's role=output
// buffers, in plan order.
func (pr *Prepared) Outputs() ([]Output, error) {
	r := pr.r
	if err := pr.Synchronize(); err != nil {
		if _, race := err.(*RaceError); !race {
			return nil, fmt.Errorf("executor: %s: synchronize: %w", r.b.Name(), err)
		}
	}
	var outs []Output
	for i, pb := range r.p.Buffers {
		if pb.Role != dag.RoleOutput {
			continue
		}
		data, err := r.b.Read(r.bufs[i])
		if err != nil {
			return nil, fmt.Errorf("executor: %s: read output %s: %w", r.b.Name(), pb.Name, err)
		}
		outs = append(outs, Output{Name: pb.Name, Bytes: pb.Bytes, Checksum: Checksum(data), Data: data})
	}
	return outs, nil
}

// Close waits for issued work, destroys the graphs, events and streams and
// frees the buffers, returning every error met.
func (pr *Prepared) Close() error {
	r := pr.r
	var errs []error
	if r.issued {
		if err := r.b.Synchronize(); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: synchronize before release: %w", r.b.Name(), err))
		}
		r.issued = false
	}
	if gb, ok := r.b.(GraphBackend); ok {
		for i, g := range pr.graphs {
			if err := gb.DestroyGraph(g); err != nil {
				errs = append(errs, fmt.Errorf("executor: %s: destroy graph %d: %w", r.b.Name(), i, err))
			}
		}
	}
	pr.graphs = nil
	for _, e := range append([]Event{pr.fork}, pr.join...) {
		if e == nil {
			continue
		}
		if err := r.b.DestroyEvent(e); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: destroy fork/join event: %w", r.b.Name(), err))
		}
	}
	pr.fork, pr.join = nil, nil
	errs = append(errs, r.release())
	return errors.Join(errs...)
}

// RunGraph runs plan p in graph mode: it prepares p on b (Prepare), captures
// one iteration into a graph on stream 0 (fork, the plan's ops in issue
// order, join: every stream is joined back before the capture ends),
// instantiates it once, launches it o.Iterations times on stream 0 (each
// replay starts after the previous one ends), synchronizes and reads back the
// outputs as Run does. The graph's edges are the plan's stream order and its
// record→wait pairs, so its outputs equal Run's.
//
// Result.Wall is the host time from the first graph launch to the end of the
// final Synchronize (capture and instantiation are not included); Launches,
// Waits and Records count the captured ops (the fork and join included)
// times o.Iterations. Errors: ErrNoGraphs (wrapped) when b is no
// GraphBackend, o.SyncEach (a capture cannot synchronize), Run's errors.
// RunGraph checks ctx between launches.
func RunGraph(ctx context.Context, p *planner.Plan, b Backend, o Options) (res *Result, err error) {
	iters := o.Iterations
	if iters == 0 {
		iters = 1
	}
	if iters < 0 {
		return nil, fmt.Errorf("executor: iterations = %d, want ≥ 1", iters)
	}
	if o.SyncEach {
		return nil, errors.New("executor: graph mode cannot synchronize after each op (sync-each): use stream mode to find a faulting stage")
	}
	if _, ok := b.(GraphBackend); !ok {
		return nil, fmt.Errorf("executor: %s: %w", b.Name(), ErrNoGraphs)
	}
	for _, pb := range p.Buffers {
		if pb.Copies > 1 && iters > 1 {
			return nil, fmt.Errorf("executor: buffer %s has copies: %d; ring buffers across iterations are not supported yet (issue 6): run one iteration or drop copies", pb.Name, pb.Copies)
		}
	}
	for _, st := range p.Streams {
		if st.Host {
			return nil, fmt.Errorf("executor: graph mode: stream %s is the host's (host stages run on the CPU at issue time, not in a graph replay): use stream mode", st.Name)
		}
	}
	pr, err := Prepare(p, b)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := pr.Close(); cerr != nil {
			err = errors.Join(err, cerr)
			if _, race := err.(*RaceError); !race {
				res = nil
			}
		}
	}()
	g, err := pr.Capture()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for it := 0; it < iters; it++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("executor: stopped before replay %d of %d: %w", it+1, iters, err)
		}
		if err := pr.LaunchGraph(g); err != nil {
			return nil, err
		}
	}
	syncErr := pr.Synchronize()
	res = &Result{Wall: time.Since(start)}
	if _, race := syncErr.(*RaceError); syncErr != nil && !race {
		return nil, fmt.Errorf("executor: %s: synchronize: %w", b.Name(), syncErr)
	}
	res.Launches, res.Waits, res.Records = pr.launches*iters, pr.waits*iters, pr.records*iters
	if res.Outputs, err = pr.Outputs(); err != nil {
		return nil, err
	}
	return res, syncErr
}

// StrategyHazardDAG is the Strategy of plans made by HazardPlan.
const StrategyHazardDAG = "hazard-dag"

// HazardPlan returns a plan of p's stages whose ordering is every edge of the
// hazard DAG, none left out by transitive reduction: run as a graph
// (RunGraph, Prepared.Capture) it is the whole hazard DAG handed to the
// driver, one node per stage and one edge per hazard edge, for the driver to
// schedule.
//
// g is the hazard graph of the spec p was planned from (dag.Hazards, which
// also has its `after:` edges); nil re-derives it from the stages' reads and
// writes, which loses `after:` edges. Stages keep their order and indices.
// Streams are chains built greedily in stage order: a stage goes on the
// stream whose last stage is one of its hazard predecessors (the lowest such
// stream), else on a new stream, so stream order adds no edge that is not a
// hazard edge; every other predecessor is a wait on an event recorded right
// after it. The plan passes Validate and Verify; Stats are p's, with Streams,
// Waits and Events recounted (CrossStreamEdges counts hazard edges across
// streams).
func HazardPlan(p *planner.Plan, g *dag.HazardGraph) (*planner.Plan, error) {
	if g == nil {
		s := &dag.Spec{Name: p.Spec, Stages: make([]dag.StageSpec, len(p.Stages))}
		acc := func(in []planner.Access) []dag.Access {
			out := make([]dag.Access, len(in))
			for i, a := range in {
				out[i] = dag.Access{Buffer: a.Buffer, Offset: a.Offset, Bytes: a.Bytes}
			}
			return out
		}
		for i, st := range p.Stages {
			s.Stages[i] = dag.StageSpec{Name: st.Name, Kernel: st.Kernel, Reads: acc(st.Reads), Writes: acc(st.Writes)}
		}
		var err error
		if g, err = dag.Hazards(s); err != nil {
			return nil, fmt.Errorf("executor: hazard plan: %w", err)
		}
	}
	n := len(p.Stages)
	if g.Len() != n {
		return nil, fmt.Errorf("executor: hazard plan: hazard graph has %d stages, plan has %d", g.Len(), n)
	}
	q := *p
	q.Strategy = StrategyHazardDAG
	q.Stages = append([]planner.Stage(nil), p.Stages...)
	q.Streams, q.IssueOrder, q.Lifetimes, q.Events = nil, nil, nil, 0
	q.Iteration = nil // its streams and events are new; a graph replay is one iteration
	// Pass 1: chains. prevOf[v] is the stage before v on its stream (-1).
	stream := make([]int, n)
	prevOf := make([]int, n)
	needsEvent := make([]bool, n)
	var tail []int // stream → its last stage so far
	for _, v := range g.Order() {
		st := -1
		for _, u := range g.Pred(int(v)) {
			if s := stream[u]; tail[s] == int(u) && (st < 0 || s < st) {
				st = s
			}
		}
		if st < 0 {
			st = len(tail)
			tail = append(tail, -1)
		}
		stream[v], prevOf[v], tail[st] = st, tail[st], int(v)
		for _, u := range g.Pred(int(v)) {
			if int(u) != prevOf[v] {
				needsEvent[u] = true
			}
		}
	}
	for s := range tail {
		q.Streams = append(q.Streams, planner.Stream{ID: s, Name: fmt.Sprintf("dag%d", s)})
	}
	// Pass 2: ops in topological order, so every record is issued before
	// the waits on it.
	event := make([]int, n) // stage → event recorded right after it
	waits := 0
	add := func(s int, op planner.Op) {
		q.IssueOrder = append(q.IssueOrder, [2]int{s, len(q.Streams[s].Ops)})
		q.Streams[s].Ops = append(q.Streams[s].Ops, op)
	}
	for _, v := range g.Order() {
		s := stream[v]
		for _, u := range g.Pred(int(v)) {
			if int(u) != prevOf[v] {
				add(s, planner.Op{Kind: planner.OpWait, Event: event[u]})
				waits++
			}
		}
		add(s, planner.Op{Kind: planner.OpLaunch, Stage: int(v)})
		q.Stages[v].Stream, q.Stages[v].Pinned = s, ""
		if needsEvent[v] {
			event[v] = q.Events
			q.Events++
			add(s, planner.Op{Kind: planner.OpRecord, Event: event[v]})
		}
	}
	q.Stats.Streams = len(q.Streams)
	q.Stats.Waits = waits
	q.Stats.Events = q.Events
	q.Stats.CrossStreamEdges = waits
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("executor: hazard plan: %w", err)
	}
	return &q, nil
}

// EmulateGraphs wraps b in a GraphBackend that emulates capture: between
// BeginCapture(s) and EndCapture(s) it records the Launch, Record and Wait
// calls instead of issuing them, and LaunchGraph(g, s) issues them again in
// the same order. Replaying the same ops on the same streams gives the same
// dependencies as a captured graph, so graph mode runs on any backend (the
// simulator: its race detector then checks the replays). Every op issued
// during a capture is recorded (a real capture records only the streams that
// joined it); a graph may only be launched on its origin stream. If b is a
// Profiler, so is the wrapper.
func EmulateGraphs(b Backend) GraphBackend {
	e := &emulated{Backend: b}
	if p, ok := b.(Profiler); ok {
		return &emulatedProfiler{emulated: e, p: p}
	}
	return e
}

type emulated struct {
	Backend
	cur *emulatedGraph // capture in progress
}

type emulatedGraph struct {
	origin Stream
	ops    []func() error
	dead   bool
}

type emulatedProfiler struct {
	*emulated
	p Profiler
}

func (e *emulatedProfiler) StageSpans() []StageSpan { return e.p.StageSpans() }

func (e *emulated) BeginCapture(s Stream) error {
	if e.cur != nil {
		return errors.New("executor: emulated graphs: a capture is already in progress")
	}
	e.cur = &emulatedGraph{origin: s}
	return nil
}

func (e *emulated) EndCapture(s Stream) (Graph, error) {
	g := e.cur
	if g == nil || g.origin != s {
		return nil, errors.New("executor: emulated graphs: EndCapture on a stream that is not capturing")
	}
	e.cur = nil
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
	for _, op := range g.ops {
		if err := op(); err != nil {
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
	return nil
}

func (e *emulated) Launch(s Stream, l *LaunchDesc) error {
	if e.cur != nil {
		e.cur.ops = append(e.cur.ops, func() error { return e.Backend.Launch(s, l) })
		return nil
	}
	return e.Backend.Launch(s, l)
}

func (e *emulated) Record(ev Event, s Stream) error {
	if e.cur != nil {
		e.cur.ops = append(e.cur.ops, func() error { return e.Backend.Record(ev, s) })
		return nil
	}
	return e.Backend.Record(ev, s)
}

func (e *emulated) Wait(s Stream, ev Event) error {
	if e.cur != nil {
		e.cur.ops = append(e.cur.ops, func() error { return e.Backend.Wait(s, ev) })
		return nil
	}
	return e.Backend.Wait(s, ev)
}

func (e *emulated) Synchronize() error {
	if e.cur != nil {
		return errors.New("executor: emulated graphs: Synchronize during a capture")
	}
	return e.Backend.Synchronize()
}
