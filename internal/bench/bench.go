// Package bench measures the planner and the arena for `dagrun bench`:
// the stats of a spec's plans under each strategy (Plans), the arena's
// figures with the simulator's verdict (Memory), and the cost of planning
// and verifying synthetic specs at scale (Scale, ScaleSpec, ChainSpec).
// Every plan it makes goes through dagrun.Plan, and every run through
// dagrun.Run, so its figures are those of the command line's plan and run.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/synth"
	"github.com/dagrun/dagrun/verify"
)

// Stats are a plan's figures (plan.Stats; times in µs, sizes in bytes),
// and PassTime the time of one planning phase (ms).
type (
	Stats    = plan.Stats
	PassTime = plan.PassTime
)

// PlanResult is the planner's quality on one spec: the stats of its plan
// under each strategy (uncapped) and under the default strategy capped at 8
// and 16 streams. Times are µs (plan.Stats).
type PlanResult struct {
	Default, Naive, RoundRobin, Single Stats
	Max8, Max16                        Stats
}

// ErrManualSpec is Plans' and Memory's error for a `sync: manual` spec.
var ErrManualSpec = errors.New("the spec uses sync: manual (its streams and waits are its own), so the planner's strategies do not apply: bench plan and bench memory take planned specs (sync: auto)")

// Benchable reports whether Plans and Memory take s: nil, or
// ErrManualSpec (wrapped with the spec's file or name) for a `sync:
// manual` spec.
func Benchable(s *dagrun.Spec) error {
	if s.Sync == dag.SyncManual {
		return fmt.Errorf("%s: %w", cmp.Or(s.File, s.Name), ErrManualSpec)
	}
	return nil
}

// Plans plans s six ways (the four strategies uncapped, the default
// strategy with max_streams 8 and 16) and verifies every plan. Errors name
// the variant: a planning error or a *dagrun.VerifyReport; a `sync: manual`
// spec, whose streams and waits are its own, is refused (ErrManualSpec).
func Plans(s *dagrun.Spec) (*PlanResult, error) {
	if err := Benchable(s); err != nil {
		return nil, err
	}
	var b PlanResult
	for _, c := range []struct {
		name string
		o    dagrun.PlanOptions
		st   *Stats
	}{
		{"default", dagrun.PlanOptions{Strategy: dagrun.StrategyDefault, MaxStreams: dagrun.Uncapped}, &b.Default},
		{"naive", dagrun.PlanOptions{Strategy: dagrun.StrategyNaive, MaxStreams: dagrun.Uncapped}, &b.Naive},
		{"round-robin", dagrun.PlanOptions{Strategy: dagrun.StrategyRoundRobin, MaxStreams: dagrun.Uncapped}, &b.RoundRobin},
		{"single", dagrun.PlanOptions{Strategy: dagrun.StrategySingle, MaxStreams: dagrun.Uncapped}, &b.Single},
		{"max8", dagrun.PlanOptions{Strategy: dagrun.StrategyDefault, MaxStreams: 8}, &b.Max8},
		{"max16", dagrun.PlanOptions{Strategy: dagrun.StrategyDefault, MaxStreams: 16}, &b.Max16},
	} {
		p, err := dagrun.Plan(s, c.o)
		if err != nil {
			return nil, fmt.Errorf("strategy %s: %w", c.name, err)
		}
		*c.st = p.Stats
	}
	return &b, nil
}

// MemoryResult is the arena's figures on one spec (bytes; µs).
type MemoryResult struct {
	Stages, Streams int // of the default plan
	// Devices is the spec's device count (Spec.Devices, ≥ 1).
	Devices int
	// ArenaBytes is the default plan's arena (memory_budget none),
	// NoReuseBytes the same temps without sharing, SingleArenaBytes the
	// one-stream plan's arena, LiveBoundBytes the most bytes live at any
	// instant of the default plan's ideal schedule (planner.LiveBound).
	ArenaBytes, NoReuseBytes, SingleArenaBytes, LiveBoundBytes int64
	// AutoArenaBytes is the arena with memory_budget auto, AutoExtraWaits
	// the waits that plan has beyond the default plan's.
	AutoArenaBytes int64
	AutoExtraWaits int
	// VerifierRaces counts the races Verify finds in the default, the
	// one-stream and the auto plan (0 for a correct planner).
	VerifierRaces int
	// Sim is nil unless Memory ran the simulator.
	Sim *MemorySim

	// With several devices the arenas above are the sums of the devices'.

	// The budget curve: memory_budget set to the one-stream arena
	// (BudgetBytes), from the default plan (BudgetStartBytes, MakespanUS,
	// its ideal makespan) step by step. No steps when the default arena
	// is already within it. With several devices the budget caps each
	// device's arena, and these are the largest device's arenas
	// (planner.BudgetArena). BudgetErr is the *planner.BudgetError when
	// the budget cannot be met, nil otherwise.
	BudgetBytes      int64
	BudgetStartBytes int64
	MakespanUS       float64
	BudgetSteps      []plan.BudgetStep
	BudgetErr        error
}

// MemorySim is the simulator's verdict on the default plan's arena.
type MemorySim struct {
	// DetectorRaces counts the races the detector listed in the runs with
	// the arena and without it (0 for a correct arena).
	DetectorRaces int
	// SameOutputs is whether the outputs with the arena equal those of the
	// plan without it (arena off).
	SameOutputs bool
}

// Memory plans s with the default options (dagrun.Plan's: the default
// stream cap, dagrun.DefaultMaxStreams, applies), with one stream and with
// memory_budget auto, and (withSim) runs the default plan on the simulator
// (dagrun.Run, seed 1) with and without the arena; then it plans s again
// with memory_budget set to the one-stream arena. Races the verifier finds
// are counted (VerifierRaces), not errors. Errors: a planning error other
// than races and an unmet budget, a plan that deadlocks (the verifier's
// report with Deadlocks: a plan that never completes has no memory
// figures), a run the simulator refuses (dagrun.Run's limits) or a
// simulator error other than a race, or ErrManualSpec for a `sync: manual` spec; ctx
// cancels the simulator runs.
func Memory(ctx context.Context, s *dagrun.Spec, withSim bool) (*MemoryResult, error) {
	if err := Benchable(s); err != nil {
		return nil, err
	}
	var m MemoryResult
	// build plans s with o and counts the verifier's races.
	build := func(o dagrun.PlanOptions) (*dagrun.StreamPlan, error) {
		p, err := dagrun.Plan(s, o)
		races, err := countRaces(err)
		m.VerifierRaces += races
		return p, err
	}
	def, err := build(dagrun.PlanOptions{MemoryBudget: dagrun.BudgetNone})
	if err != nil {
		return nil, err
	}
	single, err := build(dagrun.PlanOptions{Strategy: dagrun.StrategySingle, MemoryBudget: dagrun.BudgetNone})
	if err != nil {
		return nil, err
	}
	auto, err := build(dagrun.PlanOptions{MemoryBudget: dagrun.BudgetAuto})
	if err != nil {
		return nil, err
	}
	m.Stages, m.Streams, m.Devices = def.Stats.Stages, def.Stats.Streams, def.DeviceCount()
	m.ArenaBytes, m.NoReuseBytes = def.Stats.ArenaBytes, plan.NoReuseBytes(def)
	m.SingleArenaBytes, m.LiveBoundBytes = single.Stats.ArenaBytes, planner.LiveBound(def)
	m.AutoArenaBytes, m.AutoExtraWaits = auto.Stats.ArenaBytes, auto.Stats.Waits-def.Stats.Waits
	if withSim {
		off, err := dagrun.Plan(s, dagrun.PlanOptions{Arena: dagrun.ArenaOff, MemoryBudget: dagrun.BudgetNone})
		if _, err := countRaces(err); err != nil {
			return nil, err
		}
		m.Sim = &MemorySim{}
		run := func(p *dagrun.StreamPlan) (map[string]string, error) {
			res, err := dagrun.Run(ctx, p, dagrun.RunOptions{Backend: dagrun.BackendSim, Seed: 1})
			if res == nil {
				return nil, err
			}
			m.Sim.DetectorRaces += len(res.Races)
			sums := map[string]string{}
			for _, o := range res.Outputs {
				sums[o.Name] = o.Checksum
			}
			return sums, nil
		}
		with, err := run(def)
		if err != nil {
			return nil, err
		}
		without, err := run(off)
		if err != nil {
			return nil, err
		}
		m.Sim.SameOutputs = len(with) == len(without)
		for k, v := range with {
			m.Sim.SameOutputs = m.Sim.SameOutputs && without[k] == v
		}
	}
	m.BudgetBytes, m.BudgetStartBytes, m.MakespanUS = planner.BudgetArena(single), planner.BudgetArena(def), def.Stats.IdealMakespanUS
	if m.BudgetBytes < m.BudgetStartBytes {
		p, err := build(dagrun.PlanOptions{MemoryBudget: m.BudgetBytes})
		var be *planner.BudgetError
		switch {
		case errors.As(err, &be):
			m.BudgetSteps, m.BudgetErr = be.Steps, be
		case err != nil:
			return nil, err
		default:
			m.BudgetSteps = p.Budget
		}
	}
	return &m, nil
}

// countRaces sorts Plan's error for Memory: the races the verifier found
// (counted, not an error there), or an error for anything else, a
// collective that deadlocks included.
func countRaces(err error) (races int, _ error) {
	var re *verify.RaceError
	if !errors.As(err, &re) {
		return 0, err
	}
	if len(re.Deadlocks) > 0 {
		return len(re.Races), fmt.Errorf("the plan deadlocks (dagrun check says DEADLOCK): %w", err)
	}
	return len(re.Races), nil
}

// ScaleResult is the cost of planning and verifying one spec: the plan's
// size, where the time went and the bytes allocated.
type ScaleResult struct {
	Spec                           string
	Stages, Streams, Waits, Events int
	LowerBoundWaits                int
	ArenaBytes                     int64 // the plan's arena, bytes
	LiveBoundBytes                 int64 // planner.LiveBound of the plan, bytes
	CriticalPathUS, IdealMakespan  float64
	// Timings are the planner's phases and the verifier's ("verify"), ms.
	Timings []PassTime
	// AllocBytes is what planning and verifying allocated, bytes (Go's
	// runtime.MemStats.TotalAlloc difference).
	AllocBytes uint64
	Notes      []string
}

// Scale plans s with o and verifies the plan (dagrun.Plan), timing each
// phase. Errors: a planning error, or the verifier's (a race is an error
// here).
func Scale(s *dagrun.Spec, o dagrun.PlanOptions) (*ScaleResult, error) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	p, err := dagrun.Plan(s, o)
	runtime.ReadMemStats(&m1)
	if err != nil {
		return nil, err
	}
	st := p.Stats
	return &ScaleResult{Spec: s.Name, Stages: st.Stages, Streams: st.Streams, Waits: st.Waits, Events: st.Events,
		LowerBoundWaits: st.LowerBoundWaits, ArenaBytes: st.ArenaBytes, LiveBoundBytes: planner.LiveBound(p),
		CriticalPathUS: st.CriticalPathUS, IdealMakespan: st.IdealMakespanUS,
		Timings: p.Timings, AllocBytes: m1.TotalAlloc - m0.TotalAlloc, Notes: p.Notes}, nil
}

// Shapes are the shapes ScaleSpec makes besides model chains.
var Shapes = synth.Shapes

// ScaleSpec returns a synthetic spec of n stages of the named shape
// (Shapes; synth.Shape says what each is).
func ScaleSpec(shape string, n int) (*dagrun.Spec, error) { return synth.Shape(shape, n) }

// ChainSpec returns k copies of the model graph in graphFile (the format of
// `dagrun import`) run one after the other (synth.Chain); with n > 0, k is
// the fewest copies of at least n stages in all.
func ChainSpec(graphFile string, k, n int) (*dagrun.Spec, error) {
	g, err := dag.ReadGraphFile(graphFile)
	if err != nil {
		return nil, err
	}
	m, err := dag.ImportGraph(g, dag.ImportOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", graphFile, err)
	}
	if n > 0 {
		k = (n + 1 + len(m.Stages)) / (len(m.Stages) + 1) // k·(stages+1) − 1 ≥ n
	}
	return synth.Chain(m, k)
}
