package dag

import "github.com/dagrun/dagrun/contract"

// Built-in kernels: the names of the built-in contract (contract.Builtins),
// whose documentation states their semantics, access rules and arguments.
const (
	BuiltinFill     = contract.BuiltinFill
	BuiltinCopy     = contract.BuiltinCopy
	BuiltinScale    = contract.BuiltinScale
	BuiltinAxpy     = contract.BuiltinAxpy
	BuiltinMix      = contract.BuiltinMix
	BuiltinSpin     = contract.BuiltinSpin
	BuiltinChecksum = contract.BuiltinChecksum
)

// Builtins lists the built-in kernel names (contract.BuiltinNames).
var Builtins = contract.BuiltinNames()

// IsBuiltin reports whether name is a built-in kernel.
func IsBuiltin(name string) bool { return contract.IsBuiltin(name) }

// Mix32 is the mixing step of the mix built-in (contract.Mix32).
func Mix32(x uint32) uint32 { return contract.Mix32(x) }

// MixSeed is the per-(stage, write) seed of the mix built-in
// (contract.MixSeed): stage is the stage's index in declaration order,
// write the index of the write access.
func MixSeed(stage, write int) uint32 { return contract.MixSeed(stage, write) }
