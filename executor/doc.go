// Package executor runs a planner.Plan on a Backend: it allocates and
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
// once per Run, and the issue loop only walks a flat list of ops.
package executor
