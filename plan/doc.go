// Package plan is the stream plan: the contract between the planner that
// makes it (package planner), the verifier that proves it race-free, the
// executor that runs it and tools that read it.
//
// A Plan lists the stages (Stage: one launch, its reads and writes as byte
// ranges, Access), the streams (Stream) with their ops in stream order
// (Op: launch, record, wait), the host issue order, buffers and their
// lifetimes, how iterations over a stream of inputs follow each other
// (Iteration), capture regions (Capture), summary figures (Stats) and the
// quality limits it met (Notes).
//
// The package holds what a plan is and says of itself, with no planning
// and no verification:
//
//	plan.go, encode.go   the types and the plan file (JSON): UnmarshalJSON
//	                     strict, EncodeJSON streaming, byte for byte what
//	                     encoding/json writes
//	validate.go          Validate, the structural checks, and Recount
//	why.go               WaitReasons: the hazards each wait orders (the
//	                     plan file's "why")
//	itermap.go           IterationMap: stream sets, event slots and ring
//	                     copies of iteration i
//	unroll.go            Unroll: iterations as one plan without iteration
//	                     info, as the executor issues them
//	output.go            the table, DOT and Mermaid forms
//	access.go, ops.go    accesses as byte ranges; a stream's ops, launch
//	                     positions and waits
//	capture.go           capture regions: their validation and queries
//	iteration.go         Iteration: how iterations follow each other
//	kinds.go             stream kinds and copy modes
//	arena.go, budget.go, devices.go, stats.go
//	                     the plan-level parts of the arena, the memory
//	                     budget, devices and Stats
//
// Memo carries what the code that made a plan knows of it beyond its
// fields (a plan read from a file, an unrolled plan's base); only the
// verifier reads it.
package plan
