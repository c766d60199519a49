// Package planner turns a spec's hazard DAG into a stream plan: which stream
// runs each stage, the event records and waits between streams, the host
// issue order, buffer lifetimes, how iterations follow each other, and
// summary stats. Build is the entry point; the plan's types, its file
// format, Validate and Unroll are package plan's, and package verify proves
// a plan race-free from the plan alone (verify.Verify). The planner imports
// the verifier (check mode runs it after every pass; the arena and capture
// steps ask its happens-before order, verify.Order); the verifier never
// imports the planner.
//
// A run of the pipeline is dag.Hazards, one stable topological order
// (declaration order when every edge points forward; seeded shuffles of
// independent stages in check mode), then the passes of the table in
// build.go (a file or a few each, by job; docs/design has a page per
// pass: what, why, source, and what the verifier checks). Passes read what earlier passes left in the
// shared state and never call each other; the table marks which are
// required (run for every spec) and which run only for automatically
// synchronized ones:
//
//	reduce     transitive reduction (minimum equivalent graph) of the hazard DAG (required)
//	assign     stages → streams: minimum path cover by Hopcroft–Karp matching
//	           (Nimble, Kwon et al., NeurIPS 2020, §4.2), max_streams folding
//	           that keeps the critical path on one stream, the single,
//	           round-robin (Taskflow's capturer), naive and hazard-dag
//	           baselines; pins win
//	sync       record/wait pairs by vector clocks over streams, one event per
//	           producer some wait needs, the issue order (hazard-dag: a wait
//	           on every hazard edge that stream order does not give)
//	lifetimes  per buffer and stream, the event after its last use (required)
//	arena      temps share one device arena where happens-before orders their
//	           lifetimes; best fit by size, 256-byte aligned (required)
//	stats      Plan.Stats (lower bound on waits, critical path, ideal makespan) (required)
//	iterate    iterations over a stream of inputs: stream sets, the waits
//	           between iterations (lag > 0) by vector clocks carried across
//	           iterations, event slots (iter.go; docs/iterations.md); for
//	           manual specs and plans beyond its cost bounds, the barrier
//	           form (WithIteration) (required)
//
// Build is a driver around the pipeline: while memory_budget is not met,
// it chooses buffer orders from the last plan (budget.go: first orders of
// no makespan cost, then the cheapest serializing ones), adds them to the
// spec as after: edges and runs the pipeline again.
//
// Specs with `sync: manual` skip assign and sync: their plan is the spec's
// own streams and waits, issued in declaration order.
//
// Invariants of every plan Build returns: it validates (plan.Plan.Validate);
// it has iteration info (plan.Plan.Iteration); Stats.Waits + Iteration.CrossWaits
// counts its waits and Stats.Events its events; each quality limit it met
// is a note (Plan.Notes). For an automatically synchronized spec, checked
// after each pass in check mode (Options.Check) and by the tests, also: it
// verifies (verify.Verify), across iterations too; each stream runs its
// stages in a topological order; every record is issued before each wait on
// it; the same spec and options give the same bytes (apart from
// Stats.PlanningMS).
// Uncapped and unpinned, the default strategy's streams are a minimum path
// cover of the reduced graph, its waits are at most Stats.LowerBoundWaits
// (reduced edges − maximum matching), its ideal makespan equals the
// critical path, and removing any one wait makes verify.Verify report a race.
//
// Vector clocks. The passes' clocks are in clock.go, one implementation
// per need. The sync pass's are sparse and immutable: a join costs
// O(live streams), where dense clocks would cost O(waits × streams) time
// and O(streams²) memory on plans of thousands of streams. denseClocks
// (one entry per stream, numbered, copied on write) serves the arena
// pass's launch happens-before (launchHB) and the iterate pass's walk,
// where a happens-before test must be one read. Three other
// implementations stay separate on purpose: the verifier's (verify/hb.go:
// clocks over a chain cover of the plan's ops), the simulator's race
// detector (executor/sim: FastTrack-style clocks over the run it
// executes) and the executor's emulation of CUDA's capture-join check
// (executor/capture_joins.go). Each computes happens-before from what it
// is given, never from what a pass computed, so that one bug cannot hide
// both in the code that builds a plan and in the code that checks or
// runs it. The builder does call on the verifier's happens-before where
// its own clocks do not serve: the arena pass asks verify.Order (graphOrder)
// for plans whose dense clocks would not fit, and the capture steps
// (capture.go, capture_replay.go) ask verify.Order, verify.ReplayRaces or
// verify.Races of the plan they are editing.
//
// Costs are near-linear in stages and edges for the graphs this project
// meets (see BenchmarkBuild): reduce prunes its reachability searches by
// level and position, the matching is O(E·√V), and sync's sparse clocks
// drop streams once nothing can ask about them. The arena pass splits the
// temps at points no lifetime crosses, sweeps each part in issue order with
// a coalescing free list, and lays out by size (comparing only temps whose
// lifetimes overlap) within a bound on its pairs; the iterate pass's walk
// (dense vector clocks over physical streams, read only by joins that
// teach a stream something) is bounded by iterMaxClock; past a bound the
// plan takes the cheaper correct form and says so in a note.
package planner
