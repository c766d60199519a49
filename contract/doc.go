// Package contract is the vocabulary and the built-in kernel contract that
// dagrun's spec loader (dag), planner, executor, simulator (executor/sim)
// and CUDA backend (cudart) share. It imports only the standard library.
//
// The vocabulary is a set of typed strings: buffer placement (Where),
// buffer role (Role), initial contents (InitKind) and the executor's
// allocation modes (AllocMode).
//
// Range is the one byte-range type: every overlap test of accesses, in the
// loader, the planner, the verifier, the simulator and the CUDA backend, is
// Range.Overlaps. Hazard is the one hazard type: a HazardKind (RAW, WAR,
// WAW, or After for an order the spec asks for) on the bytes two accesses
// share; the loader's hazard graph (dag) and a wait's reason in a plan
// (plan.WaitReason) both carry it.
//
// The built-in kernels (fill, copy, scale, axpy, mix, spin, checksum) are
// described once, in the table that Lookup and Builtins return: how many
// reads and writes each takes, the rules between its accesses (same size,
// same range, in place, disjoint, minimum length), its argument schema and
// whether a host stage may run it. Builtin.Check and CheckBuiltin enforce
// that table and report the first rule broken as a *Violation; the
// accessors FillWord, ScaleFactor, MixMaxWords and SpinUS read arguments
// through the same schema. The semantics every backend implements
// bit-exactly are documented on the built-in names (BuiltinFill …).
package contract
