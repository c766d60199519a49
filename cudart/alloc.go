//go:build cuda

package cudart

// Stream-ordered allocation (executor.StreamAllocator): the
// device's default memory pool through cuMemAllocAsync and cuMemFreeAsync
// (CUDA 11.2; gorgonia.org/cu v0.9.6 has neither). Unlike cuMemAlloc and
// cuMemFree, neither synchronizes the device: the pool reuses freed memory
// only where stream order or events make that safe.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

static CUresult dr_alloc_async(CUdeviceptr *p, size_t n, CUstream s) { return cuMemAllocAsync(p, n, s); }
static CUresult dr_free_async(CUdeviceptr p, CUstream s) { return cuMemFreeAsync(p, s); }
*/
import "C"

import (
	"fmt"

	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/executor"
)

var _ executor.StreamAllocator = (*backend)(nil)

// AllocAsync allocates d.Bytes of device memory in stream order on s
// (cuMemAllocAsync). It waits for the worker to issue the call, so that
// the address is known to the launches issued after it; the device does not
// synchronize.
func (b *backend) AllocAsync(d executor.BufferDesc, hs executor.Stream) (executor.Buffer, error) {
	s, ok := hs.(*stream)
	if !ok || s == nil {
		return nil, fmt.Errorf("cudart: AllocAsync %s: %T is not a cuda stream", d.Name, hs)
	}
	if d.Bytes <= 0 || contract.Where(d.Where) != contract.WhereDevice {
		return nil, fmt.Errorf("cudart: AllocAsync %s: %d bytes, where %q: want a device buffer of > 0 bytes", d.Name, d.Bytes, d.Where)
	}
	buf := &buffer{name: d.Name, bytes: d.Bytes, where: contract.WhereDevice, c: s.c, dev: s.dev}
	err := b.callOn(s.c, "cuMemAllocAsync "+d.Name, func(w *worker) error {
		var p C.CUdeviceptr
		if err := rawErr(C.dr_alloc_async(&p, C.size_t(d.Bytes), cuStream(s.s))); err != nil {
			return wrap(err, "cuMemAllocAsync %d bytes for buffer %s", d.Bytes, d.Name)
		}
		buf.dptr = cu.DevicePtr(p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	buf.id = b.track(fmt.Sprintf("buffer %s (%d bytes, stream-ordered)", d.Name, d.Bytes), buf)
	return buf, nil
}

// FreeAsync queues cuMemFreeAsync of the buffer on s.
func (b *backend) FreeAsync(h executor.Buffer, hs executor.Stream) error {
	buf, err := asBuffer(h)
	if err != nil {
		return err
	}
	s, ok := hs.(*stream)
	if !ok || s == nil {
		return fmt.Errorf("cudart: FreeAsync %s: %T is not a cuda stream", buf.name, hs)
	}
	b.untrack(buf.id)
	b.dropPrepared()
	p := buf.dptr
	return b.queueOn(s.c, "cuMemFreeAsync "+buf.name, func(w *worker) error {
		return wrap(rawErr(C.dr_free_async(C.CUdeviceptr(p), cuStream(s.s))), "cuMemFreeAsync buffer %s", buf.name)
	})
}
