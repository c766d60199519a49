// Package planner turns a spec's hazard DAG into a stream plan: which stream
// runs each stage, the event records and waits between streams, the host
// issue order, buffer lifetimes and summary stats. Build is the entry point;
// Verify (verify.go) proves a plan race-free from the plan alone.
//
// Build runs dag.Hazards, fixes one stable topological order (declaration
// order when every edge points forward; seeded shuffles of independent
// stages in check mode), then the passes of the table in build.go, one file
// each:
//
//	reduce     transitive reduction (minimum equivalent graph) of the hazard DAG
//	assign     stages → streams: minimum path cover by Hopcroft–Karp matching
//	           (Nimble, Kwon et al., NeurIPS 2020, §4.2), max_streams folding
//	           that keeps the critical path on one stream, the single,
//	           round-robin (Taskflow's capturer) and naive baselines; pins win
//	sync       record/wait pairs by vector clocks over streams, one event per
//	           producer some wait needs, the issue order
//	lifetimes  per buffer and stream, the event after its last use
//	arena      temps share one device arena where happens-before orders their
//	           lifetimes; best fit by size, 256-byte aligned (arena.go)
//	budget     memory_budget: ordering edges of no makespan cost, then the
//	           cheapest serializing ones, re-planning after each (budget.go)
//	stats      Plan.Stats (lower bound on waits, critical path, ideal makespan)
//	iterate    iterations over a stream of inputs: stream sets, the waits
//	           between iterations (lag > 0) by vector clocks carried across
//	           iterations, event slots (iter.go; docs/iterations.md)
//
// Specs with `sync: manual` skip reduce, assign and sync: their plan is the
// spec's own streams and waits, issued in declaration order.
//
// Invariants of every plan Build returns for an automatically synchronized
// spec, checked after each pass in check mode (Options.Check) and by the
// tests: it validates (Plan.Validate) and verifies (Verify); each stream
// runs its stages in a topological order; every record is issued before
// each wait on it; the same spec and options give the same bytes (apart
// from Stats.PlanningMS). Uncapped and unpinned, the default strategy's
// waits are at most Stats.LowerBoundWaits (reduced edges − maximum
// matching), its ideal makespan equals the critical path, and removing any
// one wait makes Verify report a race.
//
// Costs are near-linear in stages and edges for the graphs this project
// meets (see BenchmarkBuild): reduce prunes its reachability searches by
// level and position, the matching is O(E·√V), and sync's sparse clocks
// drop streams once nothing can ask about them.
package planner
