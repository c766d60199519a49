package executor

import "sync"

// CPUKernel is a Go body of a user PTX kernel, for backends that run on the
// CPU (the simulator). reads holds the bytes of each of the stage's reads, in
// l.Reads order; writes the bytes of each write range, in l.Writes order, to
// be filled in. A slice is valid only during the call; a backend may pass
// copies of the reads, and each write starts with the range's current
// contents. The kernel's arguments are l.Args: for a ptr parameter the
// buffer's name, to be matched against l.Reads[i].Name or l.Writes[i].Name
// (the CUDA backend passes the address of that access, writes searched
// first). An error fails the launch (and the run) with the stage's name.
type CPUKernel func(l *LaunchDesc, reads, writes [][]byte) error

var cpuKernels sync.Map // entry name → CPUKernel

// RegisterCPUKernel registers k as the CPU body of every user kernel whose
// PTX entry is entry (KernelSpec.Entry, plan.Kernel.Entry), replacing an
// earlier registration. It is safe for concurrent use; packages of kernels
// usually call it from init. It panics on an empty entry or a nil k.
func RegisterCPUKernel(entry string, k CPUKernel) {
	if entry == "" || k == nil {
		panic("executor: RegisterCPUKernel needs an entry name and a kernel")
	}
	cpuKernels.Store(entry, k)
}

// LookupCPUKernel returns the CPU body registered for the PTX entry name,
// and whether there is one. It is safe for concurrent use.
func LookupCPUKernel(entry string) (CPUKernel, bool) {
	v, ok := cpuKernels.Load(entry)
	if !ok {
		return nil, false
	}
	return v.(CPUKernel), true
}
