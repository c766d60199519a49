// Package executor runs a plan.Plan on a Backend: it allocates and
// initialises the plan's buffers, creates its streams and events, issues the
// plan's ops in the plan's host issue order for N iterations, synchronizes,
// reads back and checksums the outputs, and releases everything it made.
//
// A Backend is a device with CUDA's stream and event semantics: the simulator
// (package executor/sim, the default where there is no GPU) and the CUDA
// backend (package cudart, built with the cuda tag). Package
// executor/backendtest holds the conformance suite that every backend passes.
//
// The run is split in two so the issue loop stays lean: prepare resolves every
// launch of the plan to a LaunchDesc (buffer handles, byte ranges, kernel)
// once per Run, and the issue loop only walks a flat list of ops; it
// allocates nothing per iteration (TestIssueLoopAllocatesNothing) and costs
// 5–20 ns per op on top of the backend's calls (BenchmarkIssue, no-op
// backend, on the 2-core development machine).
//
// A plan with iteration info (plan.Iteration) runs its iterations with
// the planned cross-iteration waits, ring copies, stream sets and event
// slots, overlapping, with host I/O through pinned staging copies and an
// in-flight bound (lower.go, hostio.go; docs/iterations.md). Plans without it
// (older plan files, manual specs) get a device-side barrier of events
// between iterations (every stream joins stream 0, which forks back out).
// Stream ordered allocation by lifetimes (--alloc dynamic) fits the
// same list as two more op kinds placed by the plan's lifetime records.
//
// A plan whose streams name host threads runs one goroutine per thread,
// each issuing its thread's instructions with the same loop on its view of
// the backend (threads.go); host events handed across threads are
// instructions too. In graph mode a plan's capture regions are captured
// where they are and the rest is issued eagerly (capture_regions.go).
//
// A plan of several devices (plan.Plan.Devices) needs a Devicer: each
// physical stream is created on its plan stream's device, each buffer
// and each device's arena on its device; events and waits are the same
// instructions as on one device (the backend records and waits across
// devices), peer copies are copy launches, and the ranks of a collective
// are launches that a Collectiver issues as one group (devices.go).
//
// Backends report races through *RaceError from Synchronize; Run returns
// it with the Result so callers can print outputs and still exit 1.
package executor
