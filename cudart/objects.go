//go:build cuda

// Streams, events and buffers: the executor.Backend methods that make,
// use and free them, each run on the worker thread.

package cudart

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/executor"
)

func (b *backend) NewStream() (executor.Stream, error) {
	s := &stream{}
	err := b.call("cuStreamCreate", func(w *worker) error {
		var err error
		s.s, err = cu.MakeStream(cu.NonBlocking)
		return wrap(err, "cuStreamCreate(non-blocking)")
	})
	if err != nil {
		return nil, err
	}
	s.id = b.track("stream", s)
	return s, nil
}

func (b *backend) NewEvent() (executor.Event, error) {
	e := &event{}
	flags := cu.DisableTiming
	if b.opts.Profile {
		flags = cu.DefaultEvent
	}
	err := b.call("cuEventCreate", func(w *worker) error {
		var err error
		e.e, err = cu.MakeEvent(flags)
		return wrap(err, "cuEventCreate")
	})
	if err != nil {
		return nil, err
	}
	e.id = b.track("event", e)
	return e, nil
}

func (b *backend) Alloc(d executor.BufferDesc) (executor.Buffer, error) {
	if d.Bytes <= 0 {
		return nil, fmt.Errorf("cudart: buffer %s: size %d bytes, want > 0", d.Name, d.Bytes)
	}
	c, err := b.ctxOf(d.Device) // devices.go
	if err != nil {
		return nil, fmt.Errorf("%w: buffer %s", err, d.Name)
	}
	buf := &buffer{name: d.Name, bytes: d.Bytes, where: contract.Where(d.Where), c: c, dev: d.Device}
	err = b.callOn(c, "alloc "+d.Name, func(w *worker) error {
		switch buf.where {
		case contract.WhereHostPinned:
			p, err := allocHost(d.Bytes, len(b.ctxs) > 1)
			if err != nil {
				return wrap(err, "cuMemAllocHost %d bytes for buffer %s", d.Bytes, d.Name)
			}
			buf.host = p
			buf.dptr = cu.DevicePtr(uintptr(p))
			clear(unsafe.Slice((*byte)(p), d.Bytes))
			return nil
		case contract.WhereDevice, "":
			p, err := cu.MemAlloc(d.Bytes)
			if err != nil {
				err = wrap(err, "cuMemAlloc %d bytes for buffer %s", d.Bytes, d.Name)
				if free, total, ierr := cu.MemInfo(); ierr == nil {
					err = fmt.Errorf("%w (requested %d bytes, %d free of %d)", err, d.Bytes, free, total)
				}
				return err
			}
			buf.dptr = p
			return wrap(cu.MemsetD8(p, 0, d.Bytes), "cuMemsetD8 buffer %s", d.Name)
		case contract.WhereHostPageable:
			buf.host = allocPageable(d.Bytes) // rules.go
			if buf.host == nil {
				return fmt.Errorf("cudart: buffer %s: out of host memory for %d pageable bytes", d.Name, d.Bytes)
			}
			return nil
		}
		return fmt.Errorf("cudart: buffer %s: where %q, want %q, %q or %q", d.Name, d.Where, contract.WhereDevice, contract.WhereHostPinned, contract.WhereHostPageable)
	})
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("buffer %s (%d bytes, %s)", d.Name, d.Bytes, d.Where)
	if len(b.devs) > 1 {
		what = fmt.Sprintf("buffer %s (%d bytes, %s, device %d)", d.Name, d.Bytes, d.Where, d.Device)
	}
	buf.id = b.track(what, buf)
	return buf, nil
}

func (b *backend) Write(h executor.Buffer, data []byte) error {
	buf, err := asBuffer(h)
	if err != nil {
		return err
	}
	if int64(len(data)) != buf.bytes {
		return fmt.Errorf("cudart: write %s: %d bytes of data, buffer has %d", buf.name, len(data), buf.bytes)
	}
	return b.callOn(buf.c, "write "+buf.name, func(w *worker) error {
		// Non-blocking streams do not order with the synchronous copy: wait
		// for everything first.
		if err := w.syncAll("before writing " + buf.name); err != nil {
			return err
		}
		if buf.host != nil {
			copy(unsafe.Slice((*byte)(buf.host), buf.bytes), data)
			return nil
		}
		return wrap(cu.MemcpyHtoD(buf.dptr, unsafe.Pointer(&data[0]), buf.bytes), "cuMemcpyHtoD %d bytes into %s", buf.bytes, buf.name)
	})
}

func (b *backend) Read(h executor.Buffer) ([]byte, error) {
	buf, err := asBuffer(h)
	if err != nil {
		return nil, err
	}
	out := make([]byte, buf.bytes)
	err = b.callOn(buf.c, "read "+buf.name, func(w *worker) error {
		if err := w.syncAll("before reading " + buf.name); err != nil {
			return err
		}
		if buf.host != nil {
			copy(out, unsafe.Slice((*byte)(buf.host), buf.bytes))
			return nil
		}
		return wrap(cu.MemcpyDtoH(unsafe.Pointer(&out[0]), buf.dptr, buf.bytes), "cuMemcpyDtoH %d bytes from %s", buf.bytes, buf.name)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (b *backend) Record(he executor.Event, hs executor.Stream) error {
	e, s, err := asEvent(he, hs)
	if err != nil {
		return err
	}
	if b.group != nil {
		return b.groupOpen("a record") // nccl.go
	}
	if s.c != 0 || len(b.ctxs) > 1 {
		return b.queueOn(s.c, "record", func(w *worker) error { // devices.go
			ev, err := w.eventIn(e, s.c)
			if err != nil {
				return err
			}
			e.last = s.c
			return wrap(ev.Record(s.s), "cuEventRecord")
		})
	}
	return b.queue("record", func(w *worker) error {
		return wrap(e.e.Record(s.s), "cuEventRecord")
	})
}

func (b *backend) Wait(hs executor.Stream, he executor.Event) error {
	e, s, err := asEvent(he, hs)
	if err != nil {
		return err
	}
	if b.group != nil {
		return b.groupOpen("a wait") // nccl.go
	}
	if s.c != 0 || len(b.ctxs) > 1 {
		return b.queueOn(s.c, "wait", func(w *worker) error { // devices.go
			ev, _ := e.latest()
			return wrap(s.s.Wait(ev, 0), "cuStreamWaitEvent")
		})
	}
	return b.queue("wait", func(w *worker) error {
		return wrap(s.s.Wait(e.e, 0), "cuStreamWaitEvent")
	})
}

func (b *backend) Synchronize() error {
	if err := b.groupOpen("Synchronize"); err != nil { // nccl.go
		return err
	}
	if err := b.drainThreads(); err != nil { // threads.go
		return err
	}
	return b.call("synchronize", func(w *worker) error {
		err := w.asyncErr
		w.asyncErr = nil
		if herr := b.takeHostFuncErr(); herr != nil && err == nil { // rules.go
			err = herr
		}
		if serr := w.syncAll(""); serr != nil && err == nil {
			err = serr
		}
		if err == nil && (len(w.prof) > 0 || len(w.timedGraphs) > 0 || b.stamps != nil && len(b.stamps.owner) > 0) {
			err = w.collectProfile()
		}
		return err
	})
}

func (b *backend) DestroyStream(h executor.Stream) error {
	s, ok := h.(*stream)
	if !ok || s == nil {
		return fmt.Errorf("cudart: DestroyStream: %T is not a cuda stream", h)
	}
	if s.def {
		b.untrack(s.id) // a default stream: nothing to destroy (rules.go)
		return nil
	}
	err := b.callOn(s.c, "cuStreamDestroy", func(w *worker) error {
		if err := w.freeRetired(s); err != nil {
			return err
		}
		if s.scratch != 0 {
			if err := w.syncAll("before freeing a stream's scratch"); err != nil {
				return err
			}
			if err := cu.MemFree(s.scratch); err != nil {
				return wrap(err, "cuMemFree scratch")
			}
			s.scratch, s.scratchBytes = 0, 0
		}
		return wrap(s.s.Destroy(), "cuStreamDestroy")
	})
	b.untrack(s.id)
	return err
}

func (b *backend) DestroyEvent(h executor.Event) error {
	e, ok := h.(*event)
	if !ok || e == nil {
		return fmt.Errorf("cudart: DestroyEvent: %T is not a cuda event", h)
	}
	err := b.call("cuEventDestroy", func(w *worker) error { return w.destroyEvent(e) }) // devices.go
	b.untrack(e.id)
	return err
}

func (b *backend) Free(h executor.Buffer) error {
	buf, err := asBuffer(h)
	if err != nil {
		return err
	}
	b.dropPrepared()
	err = b.callOn(buf.c, "free "+buf.name, func(w *worker) error {
		if err := w.syncAll("before freeing " + buf.name); err != nil {
			return err
		}
		if buf.where == contract.WhereHostPageable {
			freePageable(buf.host)
			return nil
		}
		if buf.host != nil {
			return wrap(cu.MemFreeHost(buf.host), "cuMemFreeHost %s", buf.name)
		}
		return wrap(cu.MemFree(buf.dptr), "cuMemFree %s", buf.name)
	})
	b.untrack(buf.id)
	return err
}

// MemInfo returns the device's free and total memory in bytes.
func (b *backend) MemInfo() (free, total int64, err error) {
	err = b.call("cuMemGetInfo", func(w *worker) error {
		var err error
		free, total, err = cu.MemInfo()
		return wrap(err, "cuMemGetInfo")
	})
	return
}

// freeRetired frees the scratch buffers s outgrew during captures.
func (w *worker) freeRetired(s *stream) error {
	if len(s.retired) == 0 {
		return nil
	}
	if err := w.syncAll("before freeing a stream's old scratch"); err != nil {
		return err
	}
	for _, p := range s.retired {
		if err := cu.MemFree(p); err != nil {
			return wrap(err, "cuMemFree old scratch")
		}
	}
	s.retired = nil
	return nil
}

func asBuffer(h executor.Buffer) (*buffer, error) {
	b, ok := h.(*buffer)
	if !ok || b == nil {
		return nil, fmt.Errorf("cudart: %T is not a cuda buffer", h)
	}
	return b, nil
}

func asEvent(he executor.Event, hs executor.Stream) (*event, *stream, error) {
	e, ok := he.(*event)
	if !ok || e == nil {
		return nil, nil, fmt.Errorf("cudart: %T is not a cuda event", he)
	}
	s, ok := hs.(*stream)
	if !ok || s == nil {
		return nil, nil, fmt.Errorf("cudart: %T is not a cuda stream", hs)
	}
	return e, s, nil
}
