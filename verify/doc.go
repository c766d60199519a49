// Package verify proves a stream plan race-free from the plan alone:
// every pair of conflicting accesses (RAW, WAR, WAW on overlapping bytes of
// one buffer) of stages i < j in declaration order must be ordered by
// happens-before, stream order plus record→wait edges resolved in issue
// order with CUDA's semantics. Verify is the entry point; a refusal is a
// *RaceError that lists the races, the waits that would fix them and, for
// a plan of several devices, collectives that would deadlock.
//
// The verifier does not trust the code that made the plan: it reads only
// the plan's documented fields (package plan) and computes what it needs
// itself. It imports plan and contract, never the planner or the spec
// package (TestImports holds it to that), so that a bug in a pass cannot
// hide a race from the check that runs after it.
//
//	verify.go          Verify and its bounds of work (WorkBoundError)
//	race.go            Race and RaceError, the refusal
//	access.go          accesses and their address spaces
//	sweep.go           the sweep that checks each conflicting pair
//	hb.go              happens-before: vector clocks over chains of ops
//	                   (Fidge 1988, Mattern 1989), dense or sparse
//	implicit.go        CUDA's order without events: the legacy default
//	                   stream, host stages and waits, synchronous and
//	                   pageable copies (Rule*)
//	alias_verify.go    launches that alias a buffer's bytes
//	arena_verify.go    buffers that share arena bytes: their lifetimes
//	                   must be ordered (a sweep over the arena's pieces)
//	devices_verify.go  accesses on the right device, collective deadlocks
//	iter_verify.go     plans with iteration info, unrolled (plan.UnrollDerived)
//	                   over enough iterations to hold a race of every pair
//	fixes.go           the fewest waits that fix the races (Fix)
//	lifetime_gaps.go   lifetimes that end before a use (LifetimeGap)
//	report.go          the race report RaceError.Error prints
//	sites.go           races grouped by the source line that made them
//	warnings.go        Warnings: redundant waits, unwritten outputs
//	capture.go         CheckCaptures: CUDA's stream capture rules
//	replay.go          ReplayPlan and the races a graph replay adds
//	order.go           Order: the happens-before of a plan's ops, for the
//	                   planner's arena and capture steps
//
// Plans too large to check within a bound of work are refused with a
// *WorkBoundError that says what to change.
package verify
