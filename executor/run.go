package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// Options configure Run. The zero value runs one iteration.
type Options struct {
	// Iterations is how many times the plan is issued; 0 means 1.
	Iterations int
	// SyncEach synchronizes the backend after every issued op, so an
	// asynchronous fault is attributed to the op, stage and stream that
	// caused it. A debugging mode: it serializes the run, so a race detector
	// sees no races then (every op is ordered after the previous one's
	// Synchronize); check plans with the verifier or without SyncEach.
	SyncEach bool
	// Mode is ModeStreams ("" too): issue every op of every iteration, or
	// ModeGraph: capture one iteration into a graph and replay it (RunGraph;
	// the backend must implement GraphBackend).
	Mode Mode

	// Iterations of a plan with iteration info (issue 6; ring.go, hostio.go,
	// gofunc.go). InFlight bounds host run-ahead: before issuing iteration i
	// the host waits until iteration i−InFlight has completed (0: unbounded,
	// or with Inputs, Outputs or Progress a default of one more than the
	// plan's own bound). Inputs fill a host_pinned input buffer's copy for
	// each iteration; Outputs receive a host_pinned output buffer's bytes
	// after each iteration; Progress is called once per iteration, in order,
	// when the host sees it complete. Funcs are Go-function stages by kernel
	// name (any mode).
	InFlight int
	Inputs   map[string]InputFunc
	Outputs  map[string]OutputFunc
	Progress func(iteration int, latency time.Duration)
	Funcs    map[string]StageFunc
	// Alloc is AllocStatic ("" too: every buffer before the run, the plan's
	// arena as one allocation) or AllocDynamic (temps allocated at first use
	// and freed after their lifetime, stream-ordered; alloc.go).
	Alloc string
}

// Output is one role=output buffer after the run.
type Output struct {
	Name     string
	Bytes    int64
	Checksum string // Checksum(Data)
	Data     []byte
}

// Result is what Run measured and read back.
type Result struct {
	Outputs []Output // the plan's output buffers, in plan order
	// Wall is the host time from the first issued op to the end of the final
	// Synchronize: allocation, initial writes and read-back are not included.
	Wall time.Duration
	// Launches, Waits and Records count the ops issued to the backend over all
	// iterations, including the barrier between iterations.
	Launches, Waits, Records int
	// Latencies, for runs with iteration info and host I/O or Progress, is
	// each iteration's time from the start of its host work (filling its
	// inputs) to when the host saw its last op complete.
	Latencies []time.Duration
}

// Run runs plan p on backend b for o.Iterations iterations.
//
// It validates p (Plan.Validate and CheckLaunch on every stage), allocates
// every buffer and writes its initial contents (InitialContents), creates one
// backend stream per plan stream and one event per plan event, then issues
// the plan's ops in p.IssueOrder once per iteration. Between two iterations
// it issues a device-side barrier: every other stream records an event that
// stream 0 waits on, then stream 0 records an event that every other stream
// waits on, so iteration i+1 cannot race iteration i. (The planned
// cross-iteration waits of issue 6 will replace this barrier.) It then
// synchronizes, reads back and checksums every role=output buffer, and
// destroys or frees everything it created, also on errors.
//
// Errors from the backend name the op, stage and stream. When the backend's
// final Synchronize returns only a *RaceError, Run still reads the outputs
// and returns the Result together with that *RaceError; other errors (from
// which errors.As may still extract a *RaceError) come with a nil Result. Run checks ctx between
// iterations. Buffers with copies > 1 (rings, issue 6) are run with one copy
// for a single iteration and rejected for more.
func Run(ctx context.Context, p *planner.Plan, b Backend, o Options) (res *Result, err error) {
	switch o.Mode {
	case "", ModeStreams:
	case ModeGraph:
		return RunGraph(ctx, p, b, o)
	default:
		return nil, fmt.Errorf("executor: mode %q, want streams or graph", o.Mode)
	}
	iters := o.Iterations
	if iters == 0 {
		iters = 1
	}
	if iters < 0 {
		return nil, fmt.Errorf("executor: iterations = %d, want ≥ 1", iters)
	}
	if err := allocModeOK(o.Alloc); err != nil {
		return nil, err
	}
	if p.Iteration != nil && (iters > 1 || o.hostIO() || o.InFlight > 0) && !classicOnly(p, &o) {
		return runIterations(ctx, p, b, o, iters) // planned cross-iteration waits: ring.go
	}
	if o.hostIO() {
		return nil, errors.New("executor: host inputs, outputs and progress need a plan with iteration info (re-plan the spec)")
	}
	r, err := prepare(p, iters, o.Funcs)
	if err != nil {
		return nil, err
	}
	r.b = b
	defer func() {
		if cerr := r.release(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if err := r.setAlloc(o.Alloc); err != nil {
		return nil, err
	}
	if err := r.setup(); err != nil {
		return nil, err
	}

	res = &Result{}
	start := time.Now()
	r.issued = true
	for it := 0; it < iters; it++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("executor: stopped before iteration %d of %d: %w", it+1, iters, err)
		}
		if it > 0 {
			if err := r.issue(r.barrier, o.SyncEach, it); err != nil {
				return nil, err
			}
		}
		if err := r.issue(r.ops, o.SyncEach, it); err != nil {
			return nil, err
		}
	}
	syncErr := b.Synchronize()
	r.issued = false
	res.Wall = time.Since(start)
	if _, race := syncErr.(*RaceError); syncErr != nil && !race {
		// A fault (possibly joined with a race report) fails the run.
		return nil, fmt.Errorf("executor: %s: synchronize: %w", b.Name(), syncErr)
	}
	res.Launches, res.Waits, res.Records = r.counts(iters)
	for i, pb := range p.Buffers {
		if pb.Role != dag.RoleOutput {
			continue
		}
		data, err := b.Read(r.bufs[i])
		if err != nil {
			return nil, fmt.Errorf("executor: %s: read output %s: %w", b.Name(), pb.Name, err)
		}
		res.Outputs = append(res.Outputs, Output{Name: pb.Name, Bytes: pb.Bytes, Checksum: Checksum(data), Data: data})
	}
	return res, syncErr
}

// issueOp is one precomputed backend call of the issue loop.
type issueOp struct {
	kind   planner.OpKind
	stream int // plan stream id
	event  int // index into run.events
	desc   *LaunchDesc
	fn     StageFunc // a Go-function stage (gofunc.go)
}

// run is one Run's state: the precomputed ops and what was created on the
// backend (released by release).
type run struct {
	p       *planner.Plan
	b       Backend
	descs   []LaunchDesc // per stage
	ops     []issueOp    // one iteration, in issue order
	barrier []issueOp    // issued before every iteration after the first
	streams []Stream
	events  []Event // plan events, then barrier events
	bufs    []Buffer
	issued  bool        // work was issued and not synchronized
	funcs   []StageFunc // per stage: its Go function, or nil
	mem     *memRun     // arena, dynamic allocation, host stages (alloc.go)
}

// prepare validates p and precomputes every LaunchDesc (buffer handles are
// filled in by setup) and the issue list; nothing touches the backend.
// funcs (at most one map) are Go-function stages by kernel name.
func prepare(p *planner.Plan, iters int, funcs ...map[string]StageFunc) (*run, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	bufIdx := make(map[string]int, len(p.Buffers))
	for i, b := range p.Buffers {
		if b.Bytes <= 0 || b.Bytes > MaxBufferBytes {
			return nil, fmt.Errorf("executor: buffer %s has %d bytes, want 1 to %d (1 TiB)", b.Name, b.Bytes, int64(MaxBufferBytes))
		}
		if b.Copies > 1 && iters > 1 && p.Iteration == nil {
			return nil, fmt.Errorf("executor: buffer %s has copies: %d; ring buffers across iterations are not supported yet (issue 6): run one iteration or drop copies", b.Name, b.Copies)
		}
		bufIdx[b.Name] = i
	}
	kernels := make(map[string]*planner.Kernel, len(p.Kernels))
	for i := range p.Kernels {
		kernels[p.Kernels[i].Name] = &p.Kernels[i]
	}
	r := &run{p: p, descs: make([]LaunchDesc, len(p.Stages)), funcs: make([]StageFunc, len(p.Stages))}
	resolve := func(st *planner.Stage, acc []planner.Access, what string) ([]Arg, error) {
		args := make([]Arg, len(acc))
		for k, a := range acc {
			i, ok := bufIdx[a.Buffer]
			if !ok {
				return nil, fmt.Errorf("executor: stage %s %s unknown buffer %q", st.Name, what, a.Buffer)
			}
			if a.Offset < 0 || a.Bytes <= 0 || a.Offset+a.Bytes > p.Buffers[i].Bytes {
				return nil, fmt.Errorf("executor: stage %s %s %s[%d:%d], outside the buffer's %d bytes", st.Name, what, a.Buffer, a.Offset, a.Offset+a.Bytes, p.Buffers[i].Bytes)
			}
			args[k] = Arg{Name: a.Buffer, Offset: a.Offset, Bytes: a.Bytes}
		}
		return args, nil
	}
	for i := range p.Stages {
		st := &p.Stages[i]
		d := &r.descs[i]
		*d = LaunchDesc{Stage: i, Name: st.Name, Kernel: st.Kernel, Args: st.Args, Grid: st.Grid, Block: st.Block, DurationUS: st.DurationUS}
		var err error
		if d.Reads, err = resolve(st, st.Reads, "reads"); err != nil {
			return nil, err
		}
		if d.Writes, err = resolve(st, st.Writes, "writes"); err != nil {
			return nil, err
		}
		if f := funcOf(funcs, st.Kernel); f != nil {
			r.funcs[i] = f
			continue
		}
		if !dag.IsBuiltin(st.Kernel) {
			k, ok := kernels[st.Kernel]
			if !ok {
				return nil, fmt.Errorf("executor: stage %s: kernel %q is neither a built-in nor one of the plan's kernels", st.Name, st.Kernel)
			}
			d.UserKernel = k
		}
		if err := CheckLaunch(d); err != nil {
			return nil, fmt.Errorf("executor: stage %s: %w", st.Name, err)
		}
	}
	// One iteration as issued on its own (a barrier between iterations, a
	// graph capture): cross-iteration waits (Lag > 0) are left out.
	r.ops = make([]issueOp, 0, len(p.IssueOrder))
	for _, so := range p.IssueOrder {
		op := p.Streams[so[0]].Ops[so[1]]
		if op.Kind == planner.OpWait && op.Lag > 0 {
			continue
		}
		iop := issueOp{kind: op.Kind, stream: so[0], event: op.Event}
		if op.Kind == planner.OpLaunch {
			iop.desc, iop.fn = &r.descs[op.Stage], r.funcs[op.Stage]
		}
		r.ops = append(r.ops, iop)
	}
	if n := len(p.Streams); n > 1 && iters > 1 {
		// Join every stream onto stream 0 (events Events+s), then fork stream 0
		// back out (event Events).
		join := p.Events
		for s := 1; s < n; s++ {
			r.barrier = append(r.barrier,
				issueOp{kind: planner.OpRecord, stream: s, event: join + s},
				issueOp{kind: planner.OpWait, stream: 0, event: join + s})
		}
		r.barrier = append(r.barrier, issueOp{kind: planner.OpRecord, stream: 0, event: join})
		for s := 1; s < n; s++ {
			r.barrier = append(r.barrier, issueOp{kind: planner.OpWait, stream: s, event: join})
		}
	}
	if err := r.prepareMemory(); err != nil {
		return nil, err
	}
	return r, nil
}

// CheckPlan reports, without touching a backend, what Run would reject in
// p: structural errors (Plan.Validate), unknown buffers or kernels,
// accesses outside their buffer, built-in arguments of the wrong kind or
// arity, and buffers too large to hold. Tools call it on plan files before
// running them, so that a bad file is bad input rather than a run failure.
func CheckPlan(p *planner.Plan) error {
	_, err := prepare(p, 1)
	return err
}

// MaxBufferBytes bounds one buffer's size (1 TiB): larger sizes are certainly
// mistakes (an H200 has 141 GB) and would overflow host-side allocation.
const MaxBufferBytes = 1 << 40

// setup allocates and initialises the buffers, creates the streams and
// events, and fills the buffer handles into the launch descriptions.
func (r *run) setup() error {
	p, b := r.p, r.b
	var largest int64
	for _, pb := range p.Buffers {
		largest = max(largest, pb.Bytes)
	}
	scratch := make([]byte, largest) // initial contents, reused for each buffer
	if err := r.allocArena(); err != nil {
		return err
	}
	for i, pb := range p.Buffers {
		if h, ok := r.mem.handle(i); ok { // in the arena, or allocated at first use
			r.bufs = append(r.bufs, h)
			continue
		}
		where := pb.Where
		if where == "" {
			where = dag.WhereDevice
		}
		h, err := b.Alloc(BufferDesc{Name: pb.Name, Bytes: pb.Bytes, Where: where})
		if err != nil {
			return fmt.Errorf("executor: %s: alloc buffer %s (%d bytes, %s): %w", b.Name(), pb.Name, pb.Bytes, where, err)
		}
		r.bufs = append(r.bufs, h)
		data := scratch[:pb.Bytes]
		if err := initInto(p.Dir, pb, data); err != nil {
			return fmt.Errorf("executor: %w", err)
		}
		if err := b.Write(h, data); err != nil {
			return fmt.Errorf("executor: %s: write initial contents of buffer %s: %w", b.Name(), pb.Name, err)
		}
	}
	handle := make(map[string]Buffer, len(p.Buffers))
	for i, pb := range p.Buffers {
		handle[pb.Name] = r.bufs[i]
	}
	for i := range r.descs {
		for _, args := range [2][]Arg{r.descs[i].Reads, r.descs[i].Writes} {
			for k := range args {
				args[k].Buffer = handle[args[k].Name]
			}
		}
	}
	for range p.Streams {
		s, err := b.NewStream()
		if err != nil {
			return fmt.Errorf("executor: %s: create stream %d of %d: %w", b.Name(), len(r.streams), len(p.Streams), err)
		}
		r.streams = append(r.streams, s)
	}
	nev := p.Events
	if len(r.barrier) > 0 {
		nev += len(p.Streams)
	}
	for range nev {
		e, err := b.NewEvent()
		if err != nil {
			return fmt.Errorf("executor: %s: create event %d of %d: %w", b.Name(), len(r.events), nev, err)
		}
		r.events = append(r.events, e)
	}
	return r.setupSlow()
}

// issue issues ops once: the hot loop.
func (r *run) issue(ops []issueOp, syncEach bool, it int) error {
	b := r.b
	for i := range ops {
		op := &ops[i]
		var err error
		if r.mem.slow { // host stages, dynamic allocation: alloc.go
			if err = r.issueSlow(op); err == nil && syncEach {
				err = b.Synchronize()
			}
			if err != nil {
				return r.opError(op, it, err)
			}
			continue
		}
		switch op.kind {
		case planner.OpLaunch:
			if op.fn != nil {
				err = launchFunc(b, r.streams[op.stream], op.desc, op.fn)
				break
			}
			err = b.Launch(r.streams[op.stream], op.desc)
		case planner.OpRecord:
			err = b.Record(r.events[op.event], r.streams[op.stream])
		case planner.OpWait:
			err = b.Wait(r.streams[op.stream], r.events[op.event])
		}
		if err == nil && syncEach {
			err = b.Synchronize()
		}
		if err != nil {
			return r.opError(op, it, err)
		}
	}
	return nil
}

func (r *run) opError(op *issueOp, it int, err error) error {
	st := fmt.Sprintf("stream %d", op.stream)
	if name := r.p.Streams[op.stream].Name; name != "" {
		st += " (" + name + ")"
	}
	ev := fmt.Sprintf("event %d", op.event)
	if op.event >= r.p.Events {
		ev = fmt.Sprintf("barrier event %d", op.event-r.p.Events)
	}
	var what string
	switch op.kind {
	case planner.OpLaunch:
		what = fmt.Sprintf("launch stage %s (kernel %s) on %s", op.desc.Name, op.desc.Kernel, st)
	case planner.OpRecord:
		what = fmt.Sprintf("record %s on %s", ev, st)
	default:
		what = fmt.Sprintf("wait on %s on %s", ev, st)
	}
	return fmt.Errorf("executor: %s: iteration %d: %s: %w", r.b.Name(), it+1, what, err)
}

// counts returns the ops issued over iters iterations.
func (r *run) counts(iters int) (launches, waits, records int) {
	for _, set := range []struct {
		ops []issueOp
		n   int
	}{{r.ops, iters}, {r.barrier, iters - 1}} {
		for _, op := range set.ops {
			switch op.kind {
			case planner.OpLaunch:
				launches += set.n
			case planner.OpRecord:
				records += set.n
			case planner.OpWait:
				waits += set.n
			}
		}
	}
	return
}

// release waits for issued work, then destroys the events and streams and
// frees the buffers it created; it returns every error it met.
func (r *run) release() error {
	var errs []error
	if r.b == nil {
		return nil
	}
	if r.issued {
		if err := r.b.Synchronize(); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: synchronize before release: %w", r.b.Name(), err))
		}
	}
	for i, e := range r.events {
		if err := r.b.DestroyEvent(e); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: destroy event %d: %w", r.b.Name(), i, err))
		}
	}
	for i, s := range r.streams {
		if err := r.b.DestroyStream(s); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: destroy stream %d: %w", r.b.Name(), i, err))
		}
	}
	for i, h := range r.bufs {
		if r.mem != nil && !r.mem.owns(i) {
			continue // the arena's or a dynamic buffer's: releaseMemory
		}
		if err := r.b.Free(h); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: free buffer %s: %w", r.b.Name(), r.p.Buffers[i].Name, err))
		}
	}
	errs = append(errs, r.releaseMemory()...)
	r.events, r.streams, r.bufs = nil, nil, nil
	return errors.Join(errs...)
}
