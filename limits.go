package dagrun

import (
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// Limits and defaults of Plan and Run.
const (
	// DefaultMaxStreams is the stream cap Plan applies when neither the
	// options nor the spec set one (PlanOptions.MaxStreams 0, no
	// max_streams), for the default strategy of an automatically
	// synchronized spec; Uncapped plans without a cap
	// (planner.DefaultMaxStreams says how the value was chosen).
	DefaultMaxStreams = planner.DefaultMaxStreams

	// MaxIterations is the most iterations one run takes (RunOptions.Iterations,
	// --iterations): 2^40. Run returns an error for more.
	MaxIterations = executor.MaxIterations

	// MaxStages is the most stages a spec may have (dag.MaxStages).
	MaxStages = dag.MaxStages

	// MaxLatencies is the most latencies RunResult.Latencies holds: a
	// uniform sample of longer runs.
	MaxLatencies = executor.MaxLatencies

	// MaxSimOps is the most ops (launches, waits and records, over all
	// iterations) one run on the simulator issues: 100,000,000. The simulator
	// runs every op on the host, at tens of thousands a second, so this is
	// about half an hour of silent work; Run and CheckRun refuse a run of more
	// on the simulator, naming the most iterations of the plan that fit. On
	// the GPU a run takes up to MaxIterations.
	MaxSimOps = 100_000_000

	// MaxSimClockBytes bounds the memory of the simulator's race detector for
	// one run: 4 GiB. It keeps a vector clock of one 8-byte entry per stream
	// for each stream and for each event's latest record (package sim,
	// "Race detection"), so a plan of S physical streams and E physical
	// events takes up to S × (S + E) × 8 bytes: 10,000 streams 1.6 GB, 30,000
	// streams 14 GB. Run and CheckRun refuse a run past it on the simulator.
	MaxSimClockBytes = 4 << 30

	// TimelineIterations is how many iterations (the last ones) a run's
	// timeline shows.
	TimelineIterations = 4
)
