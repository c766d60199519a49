package executor

import (
	"context"
	"errors"
	"time"

	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
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

	// InFlight bounds host run-ahead: before issuing iteration i the host
	// waits until iteration i−InFlight has completed (0: unbounded, or with
	// Inputs, Outputs or Progress a default of one more than the plan's own
	// bound). Inputs fill a host_pinned input buffer's copy for each
	// iteration; Outputs receive a host_pinned output buffer's bytes after
	// each iteration; Progress is called once per iteration, in order, when
	// the host sees it complete. Funcs are Go-function stages by kernel
	// name. Graph mode supports InFlight and Progress, not Inputs or Outputs.
	InFlight int
	Inputs   map[string]InputFunc
	Outputs  map[string]OutputFunc
	Progress func(iteration int, latency time.Duration)
	Funcs    map[string]StageFunc
	// Alloc is AllocStatic ("" too: every buffer before the run, the plan's
	// arena as one allocation) or AllocDynamic (temps allocated at first use
	// and freed after their lifetime, stream-ordered; stream mode only).
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
	// Launches, Waits and Records count the ops issued to the backend over
	// all iterations, the executor's own (fork, join, completion tracking,
	// the waits before a dynamic free) included; in graph mode, the captured
	// ops times the replays.
	Launches, Waits, Records int
	// Races are the races the backend's detector reported (the simulator),
	// also returned as a *RaceError: those the run's timing exposed.
	Races []Race
	// RaceReport, with Races, is verify.Verify's report of the plan: its
	// races grouped by the fewest waits that fix them, the same for every
	// seed (nil when the verifier finds the plan race-free, as when the
	// backend or the executor, not the plan, is at fault).
	RaceReport *verify.RaceError
	// Latencies, for runs with iteration info and host I/O or Progress, is
	// each iteration's time from the start of its host work (filling its
	// inputs) to when the host saw its last op complete, in iteration
	// order; for runs of more than MaxLatencies iterations, a uniform
	// random sample of MaxLatencies of them (Vitter's reservoir algorithm
	// R, ACM TOMS 1985), in no order. LatencyIterations is how many
	// iterations it is taken from.
	Latencies         []time.Duration
	LatencyIterations int
}

// MaxLatencies bounds Result.Latencies (2^20 iterations, 8 MiB): a run's
// memory must not grow with its iterations.
const MaxLatencies = 1 << 20

// Run runs plan p on backend b for o.Iterations iterations.
//
// It lowers p once for o into a program (physical streams, ring copies and
// event slots resolved per phase, through plan.IterationMap), creates
// what the program names on b (buffers with their initial contents, the
// arena, streams, events) and issues it with one loop. Iteration i issues
// the plan's ops, cross-iteration waits included, on stream set i mod
// StreamSets with ring copy i mod K of every buffer and slot i mod Slots[e]
// of every event; iterations overlap as far as the planned waits allow. A
// plan without iteration info run for several iterations is first given the
// barrier form of planner.WithIteration. In graph mode (ModeGraph) each
// phase is captured once into a graph (forked from and joined back to
// stream 0) and replayed per iteration; a plan with capture regions
// (plan.Plan.Captures) has those regions captured and replayed, the
// rest issued as in stream mode (capture_regions.go). A plan whose streams
// name host threads is issued from one goroutine per thread, each on its
// view of the backend (Threader), host events handed across threads
// included (threads.go).
//
// Host side, with host I/O or an in-flight bound: before issuing iteration
// i the host notes which iterations have completed (every stream's end is
// joined on a stream of the executor's, which records the iteration's end
// event), waits for iteration i−InFlight, delivers each output of iteration
// i−K and fills each input's copy for iteration i after the events of that
// copy's last uses in iteration i−K (the executor raises those events'
// slots to K).
//
// Then it synchronizes, reads back and checksums every role=output buffer
// (the last iteration's copy) and releases everything it created, also on
// errors.
//
// Errors: options that conflict or that the backend cannot honour are
// rejected before anything is created (graph mode with SyncEach, dynamic
// allocation, host stages or host inputs and outputs; a backend without
// the interface a feature needs: ErrNoGraphs, ErrNoHostSync,
// ErrNoStreamAlloc, ErrNoFuncs, ErrNoThreads; host threads with graph
// mode, dynamic allocation, host I/O, an in-flight bound or SyncEach); plan errors as CheckPlan; backend errors
// name the op, stage, stream and iteration. When the final Synchronize
// returns only a *RaceError, Run returns the Result (with Result.Races)
// together with it; other errors come with a nil Result. Run checks ctx
// between iterations.
func Run(ctx context.Context, p *plan.Plan, b Backend, o Options) (res *Result, err error) {
	x, err := lower(p, &o)
	if err != nil {
		return nil, err
	}
	e, err := x.setup(b, &o)
	defer func() {
		if cerr := e.release(); cerr != nil {
			err = errors.Join(err, cerr)
			if _, race := err.(*RaceError); !race {
				res = nil
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	if x.graph {
		for ph := range x.capture {
			if err := e.capture(ph); err != nil {
				return nil, err
			}
		}
	}
	return e.run(ctx)
}

// RunGraph is Run in graph mode (o.Mode is set to ModeGraph).
func RunGraph(ctx context.Context, p *plan.Plan, b Backend, o Options) (*Result, error) {
	o.Mode = ModeGraph
	return Run(ctx, p, b, o)
}

// CheckPlan reports, without touching a backend, what Run would reject in
// p: structural errors (Plan.Validate), unknown buffers or kernels,
// accesses outside their buffer, built-in arguments of the wrong kind or
// arity, arena offsets out of range, and buffers too large to hold. Tools
// call it on plan files before running them, so that a bad file is bad
// input rather than a run failure.
func CheckPlan(p *plan.Plan) error { return CheckRun(p, Options{}) }

// CheckRun reports what Run(p, o) would reject before touching a backend:
// CheckPlan's errors and the options that conflict with each other or with
// p (graph mode with host stages, dynamic allocation, sync-each or host
// inputs and outputs; a negative in-flight bound; ring sizes beyond the
// executor's phases). What a backend cannot do is known only at Run.
func CheckRun(p *plan.Plan, o Options) error {
	_, err := lower(p, &o)
	return err
}

// MaxBufferBytes bounds one buffer's size, and all buffers' together
// (1 TiB): plan.MaxBufferBytes, a limit of the plan format.
const MaxBufferBytes = plan.MaxBufferBytes

// Allocation modes (Options.Alloc).
const (
	// AllocStatic allocates every buffer before the run; buffers the plan
	// places in its arena (plan.Buffer.ArenaOffset) share one allocation
	// of Stats.ArenaBytes at their offsets. The default.
	AllocStatic = "static"
	// AllocDynamic allocates each temp that has a lifetime first stage
	// (plan.Lifetime.First) on that stage's stream just before it, and
	// frees it after the events of its lifetime on every stream that used
	// it: a dedicated stream waits on those events and frees it there
	// (stream-ordered, like cuMemFreeAsync; never a device-wide
	// synchronization). The backend must be a StreamAllocator. Other
	// buffers are allocated as in AllocStatic, without the arena.
	AllocDynamic = "dynamic"
)

// StreamAllocator is an optional Backend interface: stream-ordered
// allocation (cuMemAllocAsync, cuMemFreeAsync).
type StreamAllocator interface {
	// AllocAsync allocates a device buffer of d.Bytes for use in stream
	// order after this call on s: work issued to s afterwards, and work
	// ordered after it by events, may use it. Its contents are undefined.
	AllocAsync(d BufferDesc, s Stream) (Buffer, error)
	// FreeAsync releases b when s reaches this call. Every use of b must be
	// ordered before that point (waits on s); the handle is invalid after
	// the call. A race detector checks the order.
	FreeAsync(b Buffer, s Stream) error
}

// ErrNoStreamAlloc is returned (wrapped) by Run for AllocDynamic on a
// backend that is no StreamAllocator.
var ErrNoStreamAlloc = errors.New("backend cannot allocate stream-ordered memory")
