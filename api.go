// Package dagrun is the embedded Go API of dagrun, a declarative DAG
// scheduler for CUDA streams, and the package the dagrun command line
// calls (its helpers that no embedding program needs sit under internal/).
// The whole API is three steps:
//
//	spec, err := dagrun.Load("pipeline.yaml")                // or build one in Go: NewSpec
//	plan, err := dagrun.Plan(spec, dagrun.PlanOptions{})      // streams, events, waits, lifetimes; verified
//	res, err  := dagrun.Run(ctx, plan, dagrun.RunOptions{Backend: dagrun.BackendAuto})
//
// Load reports spec mistakes as SpecErrors (file:line:column; for a spec
// built in Go, Plan reports them by path in the spec, with hints in Go's
// terms). Plan returns a plan that Verify has proved race-free, or the
// plan with a *VerifyReport, or another error. Run returns the run's
// outputs and figures; races that the simulator's detector sees are in
// RunResult.Races (and the error is then a *RunRaceError). Each error a
// caller tells apart with errors.As or errors.Is has a name here:
// SpecErrors, PlanError, VerifyReport, PassRaceError, BudgetError,
// RunRaceError, ErrNotSupported and ErrNoDevice.
//
// Around those steps: ReadPlan and WritePlanJSON (plan files), WriteSpec
// (a spec as YAML), Warnings (what check reports besides races) and
// CheckRun (what Run would refuse, before it opens a backend). The types
// that cross the API are defined here or are aliases of the packages
// below (Spec, StreamPlan, PlanOptions, FuncCall, ...), and RunOptions
// holds every option of a run, so a caller needs no other import. A nil
// *Spec or *StreamPlan argument is an error ("dagrun: nil plan"), not a
// panic.
package dagrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dagrun/dagrun/cudart"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/executor/trace"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// Types that cross the API, as aliases of the packages that define them.
type (
	// Spec is a loaded or hand-built spec (dag.Spec).
	Spec = dag.Spec
	// StreamPlan is a planned spec (plan.Plan): stages, streams and
	// their ops, the host issue order, events, buffers, lifetimes and
	// stats. Its JSON encoding is the plan file.
	StreamPlan = plan.Plan
	// PlanOptions control Plan (planner.Options); the spec's own options
	// are the defaults.
	PlanOptions = planner.Options
	// SpecErrors are a spec's mistakes, each at its file:line:column with
	// what to do (dag.ErrorList): Load's error, and Plan's for a mistake
	// found while planning (a lag whose event slots the plan cannot hold).
	SpecErrors = dag.ErrorList
	// PlanError is a plan that is not well-formed, with the JSON path of
	// the value at fault (plan.PlanError): ReadPlan's and Verify's
	// error for a plan no wait can fix.
	PlanError = plan.PlanError
	// VerifyReport is Verify's report of a plan that does not order what
	// it must (verify.RaceError): its races with their fixes, lifetime
	// gaps, broken capture rules and deadlocked collectives (Deadlocks).
	VerifyReport = verify.RaceError
	// PassRaceError is Plan's error with PlanOptions.Check when a planner
	// pass made a race: the pass's name and its plan's VerifyReport.
	PassRaceError = planner.PassRaceError
	// BudgetError is Plan's error when the memory budget
	// (PlanOptions.MemoryBudget, memory_budget) cannot be met
	// (planner.BudgetError): the budget and the smallest arena reached,
	// in bytes, and the steps taken.
	BudgetError = planner.BudgetError
	// RunRaceError is Run's error when the simulator's race detector saw
	// conflicting accesses with no happens-before path
	// (executor.RaceError): the races, also in RunResult.Races.
	RunRaceError = executor.RaceError
	// Strategy is a strategy of stream assignment (planner.Strategy):
	// PlanOptions.Strategy, one of the Strategy constants.
	Strategy = planner.Strategy
	// Mode is how Run issues a plan (executor.Mode): ModeStreams or ModeGraph.
	Mode = executor.Mode
	// FuncCall is what a Go-function stage's function receives
	// (RunOptions.Funcs; executor.FuncCall): the stage's name, its
	// stream's native handle, and its buffers.
	FuncCall = executor.FuncCall
	// LoadOptions control LoadWith (dag.LoadOptions).
	LoadOptions = dag.LoadOptions
)

// Errors of NewBackend and Run for BackendCUDA, wrapped (test them with
// errors.Is).
var (
	ErrNotSupported = cudart.ErrNotSupported // the binary was built without the cuda tag
	ErrNoDevice     = cudart.ErrNoDevice     // the driver answers but reports no usable CUDA device
)

// Values of PlanOptions and RunOptions fields.
const (
	StrategyDefault    = planner.StrategyDefault    // minimum path cover, fewest waits
	StrategySingle     = planner.StrategySingle     // every stage on one stream
	StrategyRoundRobin = planner.StrategyRoundRobin // stages of each level dealt over streams
	StrategyNaive      = planner.StrategyNaive      // a wait on every cross-stream edge
	StrategyHazardDAG  = planner.StrategyHazardDAG  // every hazard edge kept, no transitive reduction (for graph mode)

	ArenaPlanned     = dag.ArenaPlanned     // temps share bytes only along happens-before
	ArenaOff         = dag.ArenaOff         // every buffer its own allocation
	ArenaStreamOrder = dag.ArenaStreamOrder // the record_stream bug: racy, for demonstrations

	Uncapped = planner.Uncapped // PlanOptions.MaxStreams: no stream cap, whatever the spec says (--max-streams 0)

	BudgetAuto = planner.BudgetAuto // PlanOptions.MemoryBudget: within 10% of the live bound, no makespan cost
	BudgetNone = planner.BudgetNone // PlanOptions.MemoryBudget: no budget, whatever the spec says

	BudgetReuse     = planner.BudgetReuse     // StreamPlan.Budget[i].Kind: buffers already disjoint in time ordered, no makespan cost
	BudgetSerialize = planner.BudgetSerialize // StreamPlan.Budget[i].Kind: a first use delayed, makespan traded for bytes

	ModeStreams = executor.ModeStreams // RunOptions.Mode: issue every op of every iteration
	ModeGraph   = executor.ModeGraph   // RunOptions.Mode: capture one iteration as a CUDA graph and replay it

	AllocStatic  = executor.AllocStatic  // RunOptions.Alloc: every buffer before the run, the arena as one allocation
	AllocDynamic = executor.AllocDynamic // RunOptions.Alloc: temps allocated at first use, freed stream-ordered

	BackendAuto Backend = "auto" // RunOptions.Backend: cuda when built with the cuda tag and a device answers, else sim (AutoBackend)
	BackendSim  Backend = "sim"  // RunOptions.Backend: the CPU simulator, with its race detector
	BackendCUDA Backend = "cuda" // RunOptions.Backend: the GPU (a binary built with the cuda tag)

	RoleInput  = dag.RoleInput  // a buffer's role: written by the host before the run, only read by stages
	RoleOutput = dag.RoleOutput // a buffer's role: read back after the run (RunResult.Outputs)
	RoleTemp   = dag.RoleTemp   // a buffer's role: neither (the default); may share the arena

	PlacementSpec    = dag.PlacementSpec    // SpecBuilder.Placement: the devices InDevice and OnDevice name (the default)
	PlacementBalance = dag.PlacementBalance // SpecBuilder.Placement: the planner places what names no device, adding peer copies
)

// Load reads and strictly validates a spec file (YAML, or JSON: a .json
// file or one that starts with '{'). Errors are dag.ErrorList (each with
// file:line:column, what is wrong, and what to do). Init and PTX files the
// spec names must lie in its folder (or below); see LoadWith. A plan file
// is one error that says so (read it with ReadPlan).
func Load(path string) (*Spec, error) { return LoadWith(path, LoadOptions{}) }

// LoadWith is Load with options: o.AllowOutside lets init and PTX files
// lie outside the spec's folder (absolute paths, "..", symbolic links
// that lead out).
func LoadWith(path string, o LoadOptions) (*Spec, error) {
	s, err := dag.LoadFileWith(path, o)
	if err != nil && isPlanFile(path) {
		return nil, dag.ErrorList{{Pos: dag.Pos{File: path},
			Msg:  "is a plan file (`dagrun plan --json` and WritePlanJSON write them), not a spec",
			Hint: "pass it as --plan " + path + " (in Go, read it with ReadPlan)"}}
	}
	return s, err
}

// WriteSpec writes s as YAML in a fixed field order (the same spec gives the
// same bytes); for a spec that Load accepts, Load of the output gives back
// s apart from positions. It does not validate s. Errors: w's, or a stage
// argument of a type a spec cannot hold (not an integer, float or string).
func WriteSpec(w io.Writer, s *Spec) error {
	if s == nil {
		return errNilSpec
	}
	return dag.WriteYAML(w, s)
}

// errNilSpec and errNilPlan are the API's errors for a nil *Spec or
// *StreamPlan argument (Verify's is verify's, in the same words).
var (
	errNilSpec = errors.New("dagrun: nil spec")
	errNilPlan = errors.New("dagrun: nil plan")
)

// Plan builds the stream plan of spec and verifies it. Unless o or the
// spec sets a stream cap, the default strategy's plan has at most
// DefaultMaxStreams streams (a note says when the cap folded chains;
// MaxStreams: Uncapped plans without one). For specs with
// `sync: manual` the plan is the spec's own streams and waits. The plan's
// Dir (where relative PTX and init-file paths resolve) is made absolute, so
// that a plan file written from it runs from any directory. The plan's
// Timings end with the verifier's ("verify").
//
// A spec built in Go (File == "") is first checked as Load checks a spec
// file (dag.Validate): every mistake is reported at once as a
// dag.ErrorList whose entries name the stage or buffer and field by path
// ("stages[1].reads: stage b: reads unknown buffer \"nope\""), and the
// defaults of the format apply (an Access without Bytes is the whole
// buffer, or the rest of it from Offset; a buffer with DType and Shape
// has their size); hints are in Go's terms (declare a buffer with
// SpecBuilder.Buffer, not under buffers:). A spec from Load was checked
// when it was loaded.
//
// A race is returned as a *VerifyReport together with the plan, so that
// a caller can still print or inspect it (with PlanOptions.Check, a race
// after a pass as the *PassRaceError that wraps it, naming the pass); other errors (spec mistakes, bad
// options, cycles, an unmeetable memory_budget: *BudgetError) come
// with a nil plan.
func Plan(spec *Spec, o PlanOptions) (*StreamPlan, error) { return PlanWhile(spec, o, nil) }

// PlanWhile is Plan that also calls during(p) on the finished plan while
// the verifier runs, on another goroutine, and returns once both are
// done; during is not called when Build fails. during must only read p
// (Verify only reads it too): `dagrun plan` encodes the plan file then,
// and prints it only after the verifier has passed it. A nil during is
// Plan. The verifier's time in p.Timings is its own, not during's.
func PlanWhile(spec *Spec, o PlanOptions, during func(p *StreamPlan)) (*StreamPlan, error) {
	if spec == nil {
		return nil, errNilSpec
	}
	if spec.File == "" {
		checked, err := dag.Validate(spec)
		if err != nil {
			return nil, inGoTerms(err) // gohints.go
		}
		spec = checked
	}
	p, err := planner.Build(spec, o)
	var passRace *planner.PassRaceError
	if err != nil && (p == nil || !errors.As(err, &passRace)) {
		return nil, err
	}
	if abs, err := filepath.Abs(p.Dir); err == nil {
		p.Dir = abs
	}
	var wg sync.WaitGroup
	if during != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			during(p)
		}()
	}
	t0 := time.Now()
	err = verify.Verify(p)
	verifyMS := float64(time.Since(t0).Nanoseconds()) / 1e6
	wg.Wait()
	p.Timings = append(p.Timings, plan.PassTime{Pass: "verify", MS: verifyMS, Runs: 1})
	if err != nil {
		var race *verify.RaceError
		if !errors.As(err, &race) {
			return nil, err
		}
	}
	if passRace != nil {
		// The pass that first made the race says more than the end.
		return p, passRace
	}
	return p, err
}

// Verify proves from p alone (stream order plus event record/wait in host
// issue order) that every conflicting pair of accesses is ordered as in
// declaration order. It returns nil or a *VerifyReport whose text
// names both stages, their streams, the buffer and bytes, and the wait that
// would fix each race; or a *PlanError for a plan that no wait can fix (a
// malformed plan, a launch whose accesses share arena bytes).
func Verify(p *StreamPlan) error { return verify.Verify(p) }

// CheckRun reports what Run(ctx, p, o) would reject before it opens a
// backend (executor.CheckRun): plan errors, and options that conflict with
// each other or with p, such as graph mode on a plan with host stages.
func CheckRun(p *StreamPlan, o RunOptions) error {
	if p == nil {
		return errNilPlan
	}
	if err := checkDevices(p, o); err != nil {
		return err
	}
	if err := checkSimMemory(p, o); err != nil {
		return err
	}
	if onSim(o) {
		if err := checkSimOps(p, o.Iterations); err != nil {
			return err
		}
		if err := checkSimClocks(p); err != nil {
			return err
		}
	}
	return executor.CheckRun(p, o.executor())
}

// onSim reports whether o runs on the simulator: BackendSim, or auto where
// it opens the simulator.
func onSim(o RunOptions) bool {
	return o.Backend == BackendSim || (o.Backend == "" || o.Backend == BackendAuto) && !autoIsCUDA()
}

// checkSimOps refuses iters iterations of p on the simulator when they
// would issue more than MaxSimOps ops.
func checkSimOps(p *StreamPlan, iters int) error {
	per := 0
	for _, s := range p.Streams {
		per += len(s.Ops)
	}
	iters = max(iters, 1)
	if per == 0 || iters <= MaxSimOps/per {
		return nil
	}
	return fmt.Errorf("%d iterations of %d ops each would issue %d ops on the simulator, more than it takes in one run (%d ops, about half an hour: it runs every op on the host, tens of thousands a second); run at most %d iterations there (--iterations; in Go, RunOptions.Iterations), or run on the GPU (--backend cuda; in Go, BackendCUDA)",
		iters, per, int64(iters)*int64(per), MaxSimOps, MaxSimOps/per)
}

// maxSimClockBytes is MaxSimClockBytes (tests lower it).
var maxSimClockBytes float64 = MaxSimClockBytes

// checkSimClocks refuses a run of p on the simulator whose detector's
// clocks would pass MaxSimClockBytes, before any stream is made.
func checkSimClocks(p *StreamPlan) error {
	streams, events := int64(len(p.Streams)), int64(p.Events)
	if it := p.Iteration; it != nil {
		streams *= int64(max(it.StreamSets, 1))
		events = 0
		for _, n := range it.Slots {
			events += int64(max(n, 1))
		}
	}
	// S ≤ 2^22·2^20 and E ≤ 2^42 or so: the product in float64.
	need := float64(streams) * float64(streams+events) * 8
	if need <= maxSimClockBytes {
		return nil
	}
	fit := int64(float64(streams) * math.Sqrt(maxSimClockBytes/need))
	return fmt.Errorf("the simulator's race detector would keep %.3g bytes (%.1f GiB) of vector clocks for this plan, one 8-byte entry per stream for each of its %d streams and %d events (%d × (%d + %d) × 8), more than it holds in one run (%d bytes, %.3g GiB): use at most about %d streams (a hand-synchronized spec's stream: names, or --max-streams; in Go, PlanOptions.MaxStreams), or run on the GPU (--backend cuda; in Go, BackendCUDA)",
		need, need/(1<<30), streams, events, streams, streams, events, int64(maxSimClockBytes), maxSimClockBytes/(1<<30), fit)
}

// checkSimMemory refuses a run on the simulator whose buffers, allocated
// before the run (alloc static: the arena and every buffer outside it,
// each ring copy), pass the simulator's limit (sim.DefaultMaxBytes; it
// holds buffers in host memory), before any is allocated.
func checkSimMemory(p *StreamPlan, o RunOptions) error {
	if o.Alloc == AllocDynamic || !onSim(o) {
		return nil
	}
	n := p.Stats.ArenaBytes
	for _, b := range p.Buffers {
		if b.ArenaOffset == nil {
			n += b.Bytes * int64(max(b.Copies, 1))
		}
	}
	if n > sim.DefaultMaxBytes {
		return fmt.Errorf("the plan's buffers take %d bytes (%.1f GiB), more than the simulator holds (%d bytes, %.0f GiB of host memory): use smaller buffers, or run on the GPU (--backend cuda; in Go, BackendCUDA)",
			n, float64(n)/(1<<30), int64(sim.DefaultMaxBytes), float64(sim.DefaultMaxBytes)/(1<<30))
	}
	return nil
}

// checkDevices checks RunOptions.Devices against p: one ordinal per plan
// device, each ≥ 0; and that a timeline is not asked of cuda for a plan
// of several devices (its GPU timestamps are one device's).
func checkDevices(p *StreamPlan, o RunOptions) error {
	if n := p.DeviceCount(); n > 1 && o.Timeline && (o.Backend == BackendCUDA || (o.Backend == "" || o.Backend == BackendAuto) && autoIsCUDA()) {
		return fmt.Errorf("a timeline (--timeline, --trace; in Go, RunOptions.Timeline) comes from GPU timestamps of one device's streams, and the plan runs on %d devices: run it on cuda without one, or draw its timeline on the simulator (--backend sim; in Go, BackendSim)", n)
	}
	if len(o.Devices) == 0 {
		return nil
	}
	if o.Backend == BackendSim || (o.Backend == "" || o.Backend == BackendAuto) && !autoIsCUDA() {
		why := "the backend is sim"
		if o.Backend != BackendSim {
			_, reason := AutoBackend()
			why = "auto picked sim: " + reason
		}
		return fmt.Errorf("devices %s map plan devices onto GPU ordinals, and the run is on the simulator (%s), which simulates every plan device: drop the devices, or run on cuda", ordList(o.Devices), why)
	}
	if n := p.DeviceCount(); len(o.Devices) != n {
		return fmt.Errorf("devices %s name %d GPU ordinal(s), but the plan runs on %d device(s): give one ordinal per plan device (e.g. %s)", ordList(o.Devices), len(o.Devices), n, identityList(n))
	}
	for i, d := range o.Devices {
		if d < 0 {
			return fmt.Errorf("devices %s: plan device %d on ordinal %d, want ≥ 0", ordList(o.Devices), i, d)
		}
	}
	return nil
}

// autoIsCUDA reports whether BackendAuto opens cuda here.
func autoIsCUDA() bool {
	name, _ := AutoBackend()
	return name == BackendCUDA
}

// identityList is "0,1,…,n−1".
func identityList(n int) string {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return ordList(s)
}

// ordList is ords as --devices takes them: "1,0".
func ordList(ords []int) string {
	s := make([]string, len(ords))
	for i, o := range ords {
		s[i] = fmt.Sprint(o)
	}
	return strings.Join(s, ",")
}

// Backend names a backend for RunOptions.Backend and NewBackend: BackendAuto
// (or ""), BackendSim or BackendCUDA.
type Backend string

// RunOptions configure Run, CheckRun and NewBackend. The zero value runs
// one iteration in stream mode on the backend AutoBackend picks.
type RunOptions struct {
	// Backend is BackendAuto ("" too), BackendSim or BackendCUDA.
	Backend Backend
	// Iterations is how many times the plan is issued: 0 means 1, at most
	// MaxIterations (on the simulator, at most MaxSimOps ops in all).
	Iterations int
	// Mode is ModeStreams ("" too): issue every op of every iteration, or
	// ModeGraph: capture one iteration as a CUDA graph and replay it.
	Mode Mode
	// Alloc is AllocStatic ("" too: every buffer before the run, the
	// plan's arena as one allocation) or AllocDynamic (temps allocated at
	// first use and freed after their lifetime, stream-ordered; stream
	// mode only).
	Alloc string
	// SyncEach synchronizes the backend after every issued op, so an
	// asynchronous fault is attributed to the op, stage and stream that
	// caused it. A debugging mode: it serializes the run, so the
	// simulator's race detector sees no races then.
	SyncEach bool
	// InFlight bounds host run-ahead: before issuing iteration i the host
	// waits until iteration i−InFlight has completed (0: unbounded, or with
	// Inputs, Outputs or Progress a default of one more than the plan's own
	// bound).
	InFlight int
	// Inputs fill a host_pinned role=input buffer's copy for iteration it,
	// by buffer name: dst is the copy's bytes. Outputs receive a
	// host_pinned role=output buffer's bytes after each iteration, valid
	// only during the call. An error fails the run. Stream mode only.
	Inputs  map[string]func(it int, dst []byte) error
	Outputs map[string]func(it int, data []byte) error
	// Progress is called once per iteration, in order, when the host sees
	// it complete, with its latency (from the start of its host work).
	Progress func(iteration int, latency time.Duration)
	// Funcs are the Go functions of Go-function stages (a spec's
	// `kernel: {go: name}`, the builder's GoFunc), by kernel name; the
	// stage's buffers are in the FuncCall (executor.StageFunc says when
	// and where each backend calls it). An error fails the run.
	Funcs map[string]func(c *FuncCall) error
	// Seed seeds the simulator's random per-op delays.
	Seed int64
	// PTXDir is the directory that relative user-kernel PTX paths resolve
	// against on cuda; Run defaults it to the plan's Dir.
	PTXDir string
	// Timeline asks Run for RunResult.Timeline. On cuda it also makes the
	// backend record each mix stage's GPU start and end (%globaltimer, no
	// events, so a graph keeps its shape).
	Timeline bool
	// Devices is, on cuda, the GPU ordinal of each of the plan's devices
	// (cudart.Options.Devices): plan device i runs on GPU Devices[i]; Run
	// defaults it to 0, 1, …, Devices−1. Several plan devices may share a
	// GPU (a plan of two devices checked on one GPU); a collective needs
	// distinct GPUs. CheckRun wants one ordinal per plan device.
	Devices []int
}

// executor is o's executor options.
func (o RunOptions) executor() executor.Options {
	eo := executor.Options{Iterations: o.Iterations, SyncEach: o.SyncEach, Mode: o.Mode, InFlight: o.InFlight,
		Progress: o.Progress, Alloc: o.Alloc}
	if o.Inputs != nil {
		eo.Inputs = make(map[string]executor.InputFunc, len(o.Inputs))
		for k, f := range o.Inputs {
			eo.Inputs[k] = f
		}
	}
	if o.Outputs != nil {
		eo.Outputs = make(map[string]executor.OutputFunc, len(o.Outputs))
		for k, f := range o.Outputs {
			eo.Outputs[k] = f
		}
	}
	if o.Funcs != nil {
		eo.Funcs = make(map[string]executor.StageFunc, len(o.Funcs))
		for k, f := range o.Funcs {
			eo.Funcs[k] = f
		}
	}
	return eo
}

// AutoBackend says which backend BackendAuto opens in this process and why:
// BackendCUDA when this binary has the CUDA backend and a device answers
// (cudart.Probe, whose answer is cached), else BackendSim. reason is one
// clause for a log line, e.g. "this binary was built without the cuda tag".
func AutoBackend() (name Backend, reason string) {
	err := cudart.Probe()
	switch {
	case err == nil:
		return BackendCUDA, "a CUDA device answered"
	case errors.Is(err, cudart.ErrNotSupported):
		return BackendSim, "this binary was built without the cuda tag"
	default:
		return BackendSim, fmt.Sprintf("no CUDA device: %v", err)
	}
}

// NewBackend opens the named backend (BackendAuto: the one AutoBackend
// names) with o's backend settings: Seed and, in graph mode, graph
// emulation for the simulator; SyncEach, PTXDir and Timeline for cuda. Its
// Name is "sim" or "cuda". The caller closes it.
//
// Errors: an unknown name; for BackendCUDA (also when auto picked it),
// an error wrapping ErrNotSupported (built without the cuda tag),
// ErrNoDevice, or a driver error.
func NewBackend(name Backend, o RunOptions) (executor.Backend, error) {
	if name == "" || name == BackendAuto {
		name, _ = AutoBackend()
	}
	switch name {
	case BackendSim:
		var b executor.Backend = sim.New(sim.Options{Seed: o.Seed, Spans: o.Timeline})
		if o.Mode == ModeGraph {
			b = executor.EmulateGraphs(b)
		}
		return b, nil
	case BackendCUDA:
		return cudart.New(cudart.Options{SyncEach: o.SyncEach, PTXDir: o.PTXDir, KernelTimestamps: o.Timeline, Devices: o.Devices})
	}
	return nil, fmt.Errorf("unknown backend %q: want auto, sim or cuda", name)
}

// openBackend is Run's NewBackend (tests wrap the backend it opens).
var openBackend = NewBackend

// RunResult is what Run measured and read back.
type RunResult struct {
	// Result is the executor's: Outputs (checksums and bytes of the
	// role=output buffers), Wall (first issued op to the final
	// synchronize), the op counts, Races and, with host I/O, Latencies.
	executor.Result
	// Backend is the backend that ran the plan: BackendSim or BackendCUDA.
	Backend Backend
	// Total is executor.Run's whole time: allocation, initial contents,
	// issue, synchronize and read-back.
	Total time.Duration
	// Timeline is the run's timeline when RunOptions.Timeline is set: the
	// spans the backend measured (cuda: GPU timestamps; the simulator: its
	// goroutines' host time, which the title says is no GPU time) of the
	// last TimelineIterations iterations, with their overlap and the waits
	// within and across them; the plan's ideal schedule from its durations
	// when the backend measured none (a graph replay on cuda without
	// stamps), which the title says.
	Timeline *trace.Timeline
}

// Run runs p on the backend o.Backend names (NewBackend), with every
// executor option of o, and closes the backend before returning.
//
// Errors: NewBackend's; on the simulator, a run of more than MaxSimOps
// ops; the executor's (conflicting options such as graph
// mode with SyncEach, dynamic allocation or host I/O, rejected before the
// backend is touched; plan and backend errors), which come with a nil
// result; and a race seen by the simulator's detector, which comes with
// the result (RunResult.Races lists the races) and a *RunRaceError.
func Run(ctx context.Context, p *StreamPlan, o RunOptions) (*RunResult, error) {
	if p == nil {
		return nil, errNilPlan
	}
	if o.PTXDir == "" {
		o.PTXDir = p.Dir
	}
	if err := checkDevices(p, o); err != nil {
		return nil, err
	}
	if n := p.DeviceCount(); len(o.Devices) == 0 && n > 1 {
		for i := range n {
			o.Devices = append(o.Devices, i)
		}
	}
	b, err := openBackend(o.Backend, o)
	if err != nil {
		return nil, err
	}
	if Backend(b.Name()) == BackendSim {
		err := checkSimOps(p, o.Iterations)
		if err == nil {
			err = checkSimClocks(p)
		}
		if err != nil {
			return nil, errors.Join(err, b.Close())
		}
	}
	start := time.Now()
	res, err := executor.Run(ctx, p, b, o.executor())
	total := time.Since(start)
	var r *RunResult
	if res != nil {
		r = &RunResult{Result: *res, Backend: Backend(b.Name()), Total: total}
		if o.Timeline {
			r.Timeline = timeline(p, b)
		}
	}
	if cerr := b.Close(); cerr != nil {
		return nil, errors.Join(err, cerr)
	}
	return r, err
}

// timeline builds the run's timeline from the spans the backend measured:
// the k-th span of a stage is its iteration k (a graph replay reports its
// last replay only: one iteration); else the plan's ideal schedule from
// its durations.
func timeline(p *StreamPlan, b executor.Backend) *trace.Timeline {
	var spans []trace.Span
	if pb, ok := b.(executor.Profiler); ok {
		count := make([]int, len(p.Stages))
		for _, s := range pb.StageSpans() {
			if s.Stage < 0 || s.Stage >= len(p.Stages) {
				continue
			}
			spans = append(spans, trace.Span{Name: s.Name, Stage: s.Stage, Stream: p.Stages[s.Stage].Stream, StartUS: s.StartUS, EndUS: s.EndUS, Iteration: count[s.Stage]})
			count[s.Stage]++
		}
		last := 0
		for _, c := range count {
			last = max(last, c-1)
		}
		first := last - TimelineIterations + 1
		spans = slices.DeleteFunc(spans, func(s trace.Span) bool { return s.Iteration < first })
		if len(spans) > 0 {
			t0 := spans[0].StartUS
			for _, s := range spans {
				t0 = min(t0, s.StartUS)
			}
			for i := range spans {
				spans[i].StartUS -= t0
				spans[i].EndUS -= t0
			}
		}
	}
	if len(spans) > 0 {
		tl := trace.FromPlan(p, spans)
		if n := tl.Iterations(); n > 1 {
			tl.Title += fmt.Sprintf(" — iterations %d–%d", spans[0].Iteration+1, spans[0].Iteration+n)
		}
		if Backend(b.Name()) == BackendSim {
			tl.Title += " — simulator: host time of the simulation, not GPU time"
		}
		return tl
	}
	tl := trace.FromPlan(p, trace.Ideal(p))
	tl.Title += " — ideal schedule from duration_us (no measured spans)"
	return tl
}
