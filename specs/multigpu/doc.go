// Package multigpu holds specs of several devices: the failure patterns of
// memory read or reused across devices, each fixed (right output, no race
// report) and racy (a wait taken out, or the arena planned with the
// caching allocator's rule: Verify and the simulator's detector report
// it), and workloads planned across devices:
//
//	peer-read.yaml       a peer copy's destination read before the copy is waited for
//	peer-stream.yaml     the copy issued on the source device's stream, the wait on the wrong one
//	peer-reuse.yaml      a block reused on its device while another device's copy still reads it
//	peer-ring.yaml       peer copies around a ring of four devices, one wait missing
//	data-parallel.yaml   forward and backward per device, an all-reduce of the gradients, an optimizer step per device (2 devices; data-parallel-4.yaml: 4)
//	nasnet-split.yaml    nasnetalarge split over two devices by the planner (placement: balance)
//
// with the racy variants in *-racy.yaml. The tests run them on the
// simulator; a two-camera pipeline with a camera per device is
// specs/video/cameras-2gpu.yaml.
package multigpu

//go:generate go run gen.go

// Patterns lists the fixed and racy spec files of each pattern.
var Patterns = [][2]string{
	{"peer-read.yaml", "peer-read-racy.yaml"},
	{"peer-stream.yaml", "peer-stream-racy.yaml"},
	{"peer-reuse.yaml", "peer-reuse-racy.yaml"},
	{"peer-ring.yaml", "peer-ring-racy.yaml"},
}
