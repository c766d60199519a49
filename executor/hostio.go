package executor

import (
	"errors"
)

// HostSyncer is an optional Backend interface: the host waits on events and
// reaches host_pinned buffers while work is in flight, without synchronizing
// the device. Run uses it for host I/O across iterations (Options.Inputs,
// Outputs, InFlight, Progress): before the host overwrites a pinned staging
// copy it waits for the event after the copy's last use (its lifetime), and
// before it reads the destination of a device-to-host copy it waits for the
// copy's event.
type HostSyncer interface {
	// SyncEvent blocks until the work captured by the most recent Record of
	// e issued before the call has completed (cuEventSynchronize); at once
	// if e was never recorded. Host accesses after it are ordered after
	// that work.
	SyncEvent(e Event) error
	// QueryEvent reports, without blocking, whether that work has completed
	// (cuEventQuery); true orders the host after it as SyncEvent does.
	QueryEvent(e Event) (bool, error)
	// HostWrite copies data into host_pinned buffer b at byte offset off.
	// Work issued after the call sees the data; the caller orders it after
	// earlier work on the bytes with SyncEvent (a race detector checks it).
	HostWrite(b Buffer, off int64, data []byte) error
	// HostRead copies bytes [off, off+len(data)) of host_pinned buffer b
	// into data, with HostWrite's ordering rules.
	HostRead(b Buffer, off int64, data []byte) error
}

// ErrNoHostSync is returned (wrapped) by Run when host I/O or an in-flight
// bound is asked of a backend that is no HostSyncer.
var ErrNoHostSync = errors.New("backend cannot wait on events from the host")

// InputFunc fills dst, the staging copy of a host_pinned input buffer, with
// the input of iteration it (len(dst) is the buffer's size). It is called on
// the issuing goroutine after the host has waited for the copy's previous
// uses. An error stops the run.
type InputFunc func(it int, dst []byte) error

// OutputFunc receives the bytes of a host_pinned output buffer after
// iteration it (valid only during the call), in iteration order, after the
// host waited for the work that wrote them. An error stops the run.
type OutputFunc func(it int, data []byte) error

// hostIO reports whether o asks for host I/O or completion tracking.
func (o *Options) hostIO() bool {
	return len(o.Inputs) > 0 || len(o.Outputs) > 0 || o.Progress != nil
}
