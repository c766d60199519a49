//go:build cuda

package cudart

import (
	"fmt"
	"runtime"
	"sync"

	"gorgonia.org/cu"
)

var probe struct {
	sync.Mutex
	done bool
	info Info
	err  error
}

// Probe reports whether a CUDA device answers: the driver is loaded
// (gorgonia.org/cu's init has called cuInit), it sees at least one device,
// and device 0's name, compute capability and memory can be read. A
// conclusive answer is cached. It returns nil, or an error wrapping
// ErrNoDevice, or a *DriverError.
func Probe() error {
	_, err := ProbeInfo()
	return err
}

// ProbeInfo is Probe that also returns what it found about device 0 and
// the number of devices (Info.Devices).
func ProbeInfo() (Info, error) {
	probe.Lock()
	defer probe.Unlock()
	if probe.done {
		return probe.info, probe.err
	}
	ch := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(ch)
		n, err := cu.NumDevices()
		if err != nil {
			probe.err = wrap(err, "cuDeviceGetCount")
			return
		}
		if n == 0 {
			probe.err = fmt.Errorf("cudart: %w", ErrNoDevice)
			return
		}
		probe.info, probe.err = deviceInfo(0)
		probe.info.Devices = n
	}()
	<-ch
	probe.done = true
	return probe.info, probe.err
}

func deviceInfo(ordinal int) (Info, error) {
	d, err := cu.GetDevice(ordinal)
	if err != nil {
		return Info{}, wrap(err, "cuDeviceGet(%d)", ordinal)
	}
	info := Info{Ordinal: ordinal, Driver: cu.Version(), HeaderVersion: headerVersion()}
	if info.Name, err = d.Name(); err != nil {
		return info, wrap(err, "cuDeviceGetName")
	}
	if info.Major, info.Minor, err = d.ComputeCapability(); err != nil {
		return info, wrap(err, "cuDeviceGetAttribute(compute capability)")
	}
	if info.TotalMem, err = d.TotalMem(); err != nil {
		return info, wrap(err, "cuDeviceTotalMem")
	}
	if info.Multiprocs, err = d.Attribute(cu.MultiprocessorCount); err != nil {
		return info, wrap(err, "cuDeviceGetAttribute(multiprocessor count)")
	}
	return info, nil
}
