// Package dagrun is the embedded Go API of dagrun, a declarative DAG
// scheduler for CUDA streams. The whole API is three steps:
//
//	spec, err := dagrun.Load("pipeline.yaml")          // or build a *dag.Spec in Go
//	plan, err := dagrun.Plan(spec, planner.Options{})   // streams, events, waits, lifetimes; verified
//	res, err  := dagrun.Run(ctx, plan, dagrun.RunOptions{Backend: "auto"})
//
// Load reports spec mistakes as *dag.Error / dag.ErrorList (file:line:column).
// Plan returns a plan that Verify has proved race-free, or an error.
// Run returns *executor.RaceError when the simulator's detector sees a race.
package dagrun

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dagrun/dagrun/cudart"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/planner"
)

// Load reads and strictly validates a YAML spec. Errors are dag.ErrorList
// (each with file:line:column, what is wrong, and what to do).
func Load(path string) (*dag.Spec, error) { return dag.LoadFile(path) }

// Plan builds the stream plan of spec and verifies it. For specs with
// `sync: manual` the plan is the spec's own streams and waits. A race is
// returned as *planner.RaceError (check it with errors.As) together with the
// plan, so that a caller can still print or inspect it; other errors (bad
// options, cycles) come with a nil plan.
func Plan(spec *dag.Spec, o planner.Options) (*planner.Plan, error) {
	p, err := planner.Build(spec, o)
	if err != nil {
		return nil, err
	}
	if err := planner.Verify(p); err != nil {
		return p, err
	}
	return p, nil
}

// Backend names accepted by RunOptions.Backend and NewBackend.
const (
	BackendAuto = "auto" // cuda when built with the cuda tag and a device answers, else sim
	BackendSim  = "sim"
	BackendCUDA = "cuda"
)

// RunOptions configure Run.
type RunOptions struct {
	Backend    string // BackendAuto (default), BackendSim or BackendCUDA
	Iterations int    // times the plan is issued; default 1
	Seed       int64  // simulator: seed of the random per-op delays
	SyncEach   bool   // cuda: synchronize after every op to attribute faults to a stage
	PTXDir     string // cuda: directory that relative user-kernel PTX paths resolve against (Plan.Dir)
	// Mode is executor.ModeStreams (default) or executor.ModeGraph: capture
	// one iteration as a CUDA graph, instantiate it once and replay it per
	// iteration (the simulator emulates graphs by replaying the captured ops).
	Mode executor.Mode
	// Timestamps: cuda records each mix stage's GPU start and end
	// (%globaltimer, no events, so a graph keeps its shape); the backend then
	// implements executor.Profiler. Used by --trace and --timeline.
	Timestamps bool

	// A stream of inputs (issue 6): with Iterations > 1 a plan's iterations
	// overlap as far as its planned cross-iteration waits allow (buffers
	// with copies: K are rings). Inputs fill a host_pinned input buffer's
	// staging copy for each iteration, Outputs receive a host_pinned output
	// buffer after each iteration, InFlight bounds how many iterations the
	// host issues ahead, Progress is called as iterations complete (see
	// executor.Options).
	Inputs   map[string]executor.InputFunc
	Outputs  map[string]executor.OutputFunc
	InFlight int
	Progress func(iteration int, latency time.Duration)
	// Funcs are Go-function stages by kernel name: a stage whose kernel is a
	// key runs the function, which gets the stage's stream (cudart's
	// CUstream) and the device pointers and sizes of its buffers (see
	// executor.StageFunc).
	Funcs map[string]executor.StageFunc
}

// NewBackend opens the named backend. For BackendAuto it returns the CUDA
// backend when this binary has it and a device answers, and the simulator
// otherwise; reason says which was picked and why. Errors: an unknown name,
// or for BackendCUDA, cudart.ErrNotSupported (built without the cuda tag) or
// a driver error.
func NewBackend(name string, o RunOptions) (b executor.Backend, reason string, err error) {
	switch name {
	case "", BackendAuto:
		cb, cerr := newCUDA(o)
		if cerr == nil {
			return cb, "auto: picked cuda (a device answered)", nil
		}
		if errors.Is(cerr, cudart.ErrNotSupported) {
			return newSim(o), "auto: picked sim (this binary was built without the cuda tag)", nil
		}
		return newSim(o), fmt.Sprintf("auto: picked sim (no CUDA device: %v)", cerr), nil
	case BackendSim:
		return newSim(o), "sim", nil
	case BackendCUDA:
		cb, err := newCUDA(o)
		if err != nil {
			return nil, "", err
		}
		return cb, "cuda", nil
	}
	return nil, "", fmt.Errorf("unknown backend %q: want auto, sim or cuda", name)
}

func newCUDA(o RunOptions) (executor.Backend, error) {
	return cudart.New(cudart.Options{SyncEach: o.SyncEach, PTXDir: o.PTXDir, KernelTimestamps: o.Timestamps})
}

func newSim(o RunOptions) executor.Backend {
	b := sim.New(sim.Options{Seed: o.Seed})
	if o.Mode == executor.ModeGraph {
		return executor.EmulateGraphs(b)
	}
	return b
}

// Run runs plan on the backend o.Backend names and returns each output
// buffer's checksum. It closes the backend before returning.
func Run(ctx context.Context, p *planner.Plan, o RunOptions) (*executor.Result, error) {
	if o.PTXDir == "" {
		o.PTXDir = p.Dir
	}
	b, _, err := NewBackend(o.Backend, o)
	if err != nil {
		return nil, err
	}
	res, err := executor.Run(ctx, p, b, executor.Options{Iterations: o.Iterations, SyncEach: o.SyncEach, Mode: o.Mode,
		Inputs: o.Inputs, Outputs: o.Outputs, InFlight: o.InFlight, Progress: o.Progress, Funcs: o.Funcs})
	if cerr := b.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return res, err
}
