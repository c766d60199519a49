//go:build cuda

package cudart

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/executor"
)

// Host I/O and Go-function stages: the optional executor
// interfaces HostSyncer and FuncLauncher.

var (
	_ executor.HostSyncer   = (*backend)(nil)
	_ executor.FuncLauncher = (*backend)(nil)
)

// SyncEvent waits on the worker thread, after every op queued before it has
// been issued, for the event's latest record (cuEventSynchronize).
func (b *backend) SyncEvent(he executor.Event) error {
	e, ok := he.(*event)
	if !ok || e == nil {
		return fmt.Errorf("cudart: SyncEvent: %T is not a cuda event", he)
	}
	return b.call("cuEventSynchronize", func(w *worker) error {
		ev, c := e.latest() // devices.go
		if err := w.on(c); err != nil {
			return err
		}
		return wrap(ev.Synchronize(), "cuEventSynchronize")
	})
}

// QueryEvent asks, after every op queued before it has been issued, whether
// the event's latest record has completed (cuEventQuery).
func (b *backend) QueryEvent(he executor.Event) (bool, error) {
	e, ok := he.(*event)
	if !ok || e == nil {
		return false, fmt.Errorf("cudart: QueryEvent: %T is not a cuda event", he)
	}
	done := false
	err := b.call("cuEventQuery", func(w *worker) error {
		ev, c := e.latest() // devices.go
		if err := w.on(c); err != nil {
			return err
		}
		err := ev.Query()
		if err == nil {
			done = true
			return nil
		}
		if errors.Is(err, cu.NotReady) {
			return nil
		}
		return wrap(err, "cuEventQuery")
	})
	return done, err
}

// pinned returns the host bytes [off, off+n) of a host_pinned buffer.
func pinned(h executor.Buffer, off, n int64, what string) ([]byte, error) {
	buf, err := asBuffer(h)
	if err != nil {
		return nil, err
	}
	if buf.host == nil {
		return nil, fmt.Errorf("cudart: host %s of %s: it is device memory; the host reaches only host_pinned buffers during a run", what, buf.name)
	}
	if off < 0 || n < 0 || off+n > buf.bytes {
		return nil, fmt.Errorf("cudart: host %s of %s[%d:%d]: outside the buffer's %d bytes", what, buf.name, off, off+n, buf.bytes)
	}
	return unsafe.Slice((*byte)(unsafe.Add(buf.host, off)), n), nil
}

// HostWrite copies data into pinned memory on the calling goroutine. Ops
// queued before it may not have been issued to the driver yet, but they
// cannot touch these bytes unless the caller skipped the SyncEvent that
// orders them (which runs after everything queued before it).
func (b *backend) HostWrite(h executor.Buffer, off int64, data []byte) error {
	dst, err := pinned(h, off, int64(len(data)), "write")
	if err != nil {
		return err
	}
	copy(dst, data)
	return nil
}

// HostRead copies pinned memory into data on the calling goroutine.
func (b *backend) HostRead(h executor.Buffer, off int64, data []byte) error {
	src, err := pinned(h, off, int64(len(data)), "read")
	if err != nil {
		return err
	}
	copy(data, src)
	return nil
}

// LaunchFunc queues f on the worker thread, where the context is current:
// it receives the stream's CUstream and the device addresses of its
// accesses (host bytes too for host_pinned buffers) and should queue its
// work on that stream. Its error is reported at the next Synchronize.
func (b *backend) LaunchFunc(hs executor.Stream, l *executor.LaunchDesc, f executor.StageFunc) error {
	s, ok := hs.(*stream)
	if !ok || s == nil {
		return fmt.Errorf("cudart: launch %s: %T is not a cuda stream", l.Name, hs)
	}
	what := fmt.Sprintf("Go stage %q", l.Name)
	c := &executor.FuncCall{Stage: l.Name, Desc: l,
		Reads: make([]executor.FuncBuffer, len(l.Reads)), Writes: make([]executor.FuncBuffer, len(l.Writes))}
	for k, set := range [2][]executor.Arg{l.Reads, l.Writes} {
		out := [2][]executor.FuncBuffer{c.Reads, c.Writes}[k]
		for i, a := range set {
			ptr, buf, err := argPtr(a)
			if err != nil {
				return fmt.Errorf("cudart: %s: %w", what, err)
			}
			fb := executor.FuncBuffer{Name: a.Name, Ptr: uintptr(ptr), Bytes: a.Bytes}
			if buf.host != nil {
				fb.Host = unsafe.Slice((*byte)(unsafe.Add(buf.host, a.Offset)), a.Bytes)
			}
			out[i] = fb
		}
	}
	return b.queueStage(s, l, what, func(w *worker) error {
		c.Stream = uintptr(unsafe.Pointer(cuStream(s.s)))
		if err := f(c); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}
