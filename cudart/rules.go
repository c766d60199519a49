//go:build cuda

package cudart

// CUDA's implicit ordering rules at the driver (the verifier's model is
// verify/implicit.go and verify/capture.go): streams of each kind, the
// synchronous copies of the "API synchronization behavior" table, host
// functions (cuLaunchHostFunc, which gorgonia.org/cu v0.9.6 lacks) and
// stream capture with an explicit mode.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>

extern void dagrunHostFunc(void *);

static CUresult dr_launch_host_func(CUstream s, uintptr_t h) {
	return cuLaunchHostFunc(s, dagrunHostFunc, (void *)h);
}
static CUresult dr_begin_capture_mode(CUstream s, int mode) {
	return cuStreamBeginCapture(s, (CUstreamCaptureMode)mode);
}
static CUstream dr_stream_legacy(void) { return CU_STREAM_LEGACY; }
static CUstream dr_stream_per_thread(void) { return CU_STREAM_PER_THREAD; }
static CUresult dr_end_capture_raw(CUstream s, CUgraph *g) { return cuStreamEndCapture(s, g); }
static CUresult dr_graph_nodes_raw(CUgraph g, size_t *n) { return cuGraphGetNodes(g, NULL, n); }
static CUresult dr_graph_destroy_raw(CUgraph g) { return cuGraphDestroy(g); }
static CUresult dr_stream_sync(CUstream s) { return cuStreamSynchronize(s); }
static CUresult dr_event_sync(CUevent e) { return cuEventSynchronize(e); }
static CUresult dr_mem_alloc(CUdeviceptr *p, size_t n) { return cuMemAlloc(p, n); }
static CUresult dr_mem_free(CUdeviceptr p) { return cuMemFree(p); }
static CUresult dr_htod(CUdeviceptr d, const void *h, size_t n) { return cuMemcpyHtoD(d, h, n); }
static CUresult dr_htod_async(CUdeviceptr d, const void *h, size_t n, CUstream s) { return cuMemcpyHtoDAsync(d, h, n, s); }
static CUresult dr_dtoh(void *h, CUdeviceptr d, size_t n) { return cuMemcpyDtoH(h, d, n); }
static CUresult dr_dtoh_async(void *h, CUdeviceptr d, size_t n, CUstream s) { return cuMemcpyDtoHAsync(h, d, n, s); }
static CUresult dr_end_capture_exec(CUstream s, CUgraphExec *e) {
	CUgraph g = NULL;
	CUresult r = cuStreamEndCapture(s, &g);
	if (r != CUDA_SUCCESS) {
		if (g != NULL) cuGraphDestroy(g);
		return r;
	}
	r = cuGraphInstantiateWithFlags(e, g, 0);
	cuGraphDestroy(g);
	return r;
}
static CUresult dr_exec_launch(CUgraphExec e, CUstream s) { return cuGraphLaunch(e, s); }
static CUresult dr_exec_destroy(CUgraphExec e) { return cuGraphExecDestroy(e); }
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
)

func asStream(c C.CUstream) cu.Stream { return *(*cu.Stream)(unsafe.Pointer(&c)) }

// makeStream creates (or, for the default streams, names) a stream of the
// given planner kind: non-blocking and blocking streams with
// cuStreamCreate's flags, the legacy and per-thread default streams as
// CU_STREAM_LEGACY and CU_STREAM_PER_THREAD. owned is false for the
// default streams (never destroyed).
func makeStream(kind string) (s cu.Stream, owned bool, err error) {
	switch kind {
	case plan.StreamNonBlocking:
		s, err = cu.MakeStream(cu.NonBlocking)
		return s, true, wrap(err, "cuStreamCreate(non-blocking)")
	case plan.StreamBlocking:
		s, err = cu.MakeStream(cu.DefaultStream)
		return s, true, wrap(err, "cuStreamCreate(blocking)")
	case plan.StreamLegacy:
		return asStream(C.dr_stream_legacy()), false, nil
	case plan.StreamPerThread:
		return asStream(C.dr_stream_per_thread()), false, nil
	}
	return s, false, fmt.Errorf("cudart: stream kind %q, want one of %v", kind, plan.StreamKinds)
}

// hostCall is what a host-function node calls. An eager launch calls fn
// once; a launch into a stream capture becomes a host node of the graph,
// which calls fn at every replay, so its handle lives as long as the graph.
type hostCall struct {
	fn   func()
	once bool
}

// launchHostFunc enqueues fn on s (cuLaunchHostFunc): the driver calls it
// on its own thread once the work before it on s is done, and work after it
// on s waits until it returns. fn must make no CUDA call. With once, the
// handle is deleted at the call; otherwise (s is being captured) the
// returned handle must be deleted by the caller once no replay of the
// graph can run.
func launchHostFunc(s cu.Stream, fn func(), once bool) (cgo.Handle, error) {
	h := cgo.NewHandle(&hostCall{fn: fn, once: once})
	if r := C.dr_launch_host_func(cuStream(s), C.uintptr_t(h)); r != C.CUDA_SUCCESS {
		h.Delete()
		return 0, rawErr(r)
	}
	return h, nil
}

// Capture modes of cuStreamBeginCapture, by plan.Capture.Mode.
func captureMode(mode string) C.int {
	switch mode {
	case plan.CaptureThreadLocal:
		return C.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
	case plan.CaptureRelaxed:
		return C.CU_STREAM_CAPTURE_MODE_RELAXED
	}
	return C.CU_STREAM_CAPTURE_MODE_GLOBAL
}

func beginCaptureMode(s cu.Stream, mode string) error {
	return rawErr(C.dr_begin_capture_mode(cuStream(s), captureMode(mode)))
}

// endCaptureRaw ends the capture on s; on success it returns the graph's
// node count and destroys the graph.
func endCaptureRaw(s cu.Stream) (nodes int, err error) {
	var g C.CUgraph
	if err := rawErr(C.dr_end_capture_raw(cuStream(s), &g)); err != nil {
		return 0, err
	}
	var n C.size_t
	err = rawErr(C.dr_graph_nodes_raw(g, &n))
	C.dr_graph_destroy_raw(g)
	return int(n), err
}

// endCaptureExec ends the capture on s and instantiates its graph; the
// graph is launched with graphExec.launch and freed with graphExec.destroy.
func endCaptureExec(s cu.Stream) (graphExec, error) {
	var e graphExec
	err := rawErr(C.dr_end_capture_exec(cuStream(s), &e.e))
	return e, err
}

// graphExec is an instantiated graph (CUgraphExec).
type graphExec struct{ e C.CUgraphExec }

func (e graphExec) launch(s cu.Stream) error { return rawErr(C.dr_exec_launch(e.e, cuStream(s))) }
func (e graphExec) destroy() error           { return rawErr(C.dr_exec_destroy(e.e)) }

func streamSync(s cu.Stream) error { return rawErr(C.dr_stream_sync(cuStream(s))) }
func eventSync(e cu.Event) error   { return rawErr(C.dr_event_sync(cuEvent(e))) }
func memAllocRaw(n int64) (cu.DevicePtr, error) {
	var p C.CUdeviceptr
	err := rawErr(C.dr_mem_alloc(&p, C.size_t(n)))
	return cu.DevicePtr(p), err
}
func memFreeRaw(p cu.DevicePtr) error { return rawErr(C.dr_mem_free(C.CUdeviceptr(p))) }

// Copies between host memory h (pinned or pageable, from C memory) and
// device memory d: the synchronous forms on the legacy default stream
// (cuMemcpyHtoD, cuMemcpyDtoH), the asynchronous ones on s.
func copyHtoD(d cu.DevicePtr, h unsafe.Pointer, n int64) error {
	return rawErr(C.dr_htod(C.CUdeviceptr(d), h, C.size_t(n)))
}
func copyHtoDAsync(d cu.DevicePtr, h unsafe.Pointer, n int64, s cu.Stream) error {
	return rawErr(C.dr_htod_async(C.CUdeviceptr(d), h, C.size_t(n), cuStream(s)))
}
func copyDtoH(h unsafe.Pointer, d cu.DevicePtr, n int64) error {
	return rawErr(C.dr_dtoh(h, C.CUdeviceptr(d), C.size_t(n)))
}
func copyDtoHAsync(h unsafe.Pointer, d cu.DevicePtr, n int64, s cu.Stream) error {
	return rawErr(C.dr_dtoh_async(h, C.CUdeviceptr(d), C.size_t(n), cuStream(s)))
}

// allocPageable returns n bytes of pageable C memory (free with freePageable).
func allocPageable(n int64) unsafe.Pointer { return C.calloc(C.size_t(n), 1) }
func freePageable(p unsafe.Pointer)        { C.free(p) }

var _ executor.StreamKinder = (*backend)(nil)

// NewStreamKind creates a stream of a planner kind with its real flags, or
// names the legacy or per-thread default stream (created by no one,
// destroyed by no one: DestroyStream only forgets it).
func (b *backend) NewStreamKind(kind string) (executor.Stream, error) {
	s := &stream{}
	err := b.call("cuStreamCreate("+kind+")", func(w *worker) error {
		var owned bool
		var err error
		s.s, owned, err = makeStream(kind)
		s.def = !owned
		return err
	})
	if err != nil {
		return nil, err
	}
	s.id = b.track("stream ("+kind+")", s)
	return s, nil
}

// syncCopy runs a synchronous copy (cuMemcpyHtoD, cuMemcpyDtoH,
// cuMemcpyDtoD) on the worker and returns when the driver call returns,
// as the "API synchronization behavior" table says. The driver's
// synchronous copies run on the legacy default stream; a per-thread
// default stream's copy gets the legacy stream's order too (more order,
// not less).
func (b *backend) syncCopy(l *executor.LaunchDesc) error {
	if len(l.Reads) != 1 || len(l.Writes) != 1 {
		return fmt.Errorf("cudart: %s: a copy reads one range and writes one", l.Name)
	}
	r, wr := l.Reads[0], l.Writes[0]
	src, err := asBuffer(r.Buffer)
	if err != nil {
		return err
	}
	dst, err := asBuffer(wr.Buffer)
	if err != nil {
		return err
	}
	n := wr.Bytes
	c := dst.c // the device side's context (devices.go): the destination's, else the source's
	if dst.host != nil {
		c = src.c
	}
	return b.callOn(c, l.Name+": synchronous copy", func(w *worker) error {
		switch {
		case src.host != nil && dst.host != nil:
			copy(unsafe.Slice((*byte)(unsafe.Add(dst.host, wr.Offset)), n), unsafe.Slice((*byte)(unsafe.Add(src.host, r.Offset)), n))
			return nil
		case src.host != nil:
			return wrap(copyHtoD(dst.dptr+cu.DevicePtr(wr.Offset), unsafe.Add(src.host, r.Offset), n), "%s: cuMemcpyHtoD %d bytes", l.Name, n)
		case dst.host != nil:
			return wrap(copyDtoH(unsafe.Add(dst.host, wr.Offset), src.dptr+cu.DevicePtr(r.Offset), n), "%s: cuMemcpyDtoH %d bytes", l.Name, n)
		}
		return wrap(cu.MemcpyDtoD(dst.dptr+cu.DevicePtr(wr.Offset), src.dptr+cu.DevicePtr(r.Offset), n), "%s: cuMemcpyDtoD %d bytes", l.Name, n)
	})
}

// hostFunc enqueues a host stage's built-in on s with cuLaunchHostFunc: the
// driver runs it on its own thread in s's order, on host memory (the
// loader and the executor keep host functions to host buffers). An error
// is reported at the next Synchronize.
func (b *backend) hostFunc(s *stream, l *executor.LaunchDesc) error {
	host := func(a executor.Arg) ([]byte, error) { return pinned(a.Buffer, a.Offset, a.Bytes, "function access") }
	ins, outs := make([][]byte, len(l.Reads)), make([][]byte, len(l.Writes))
	for i, a := range l.Reads {
		x, err := host(a)
		if err != nil {
			return fmt.Errorf("cudart: host function %s: %w", l.Name, err)
		}
		ins[i] = x
	}
	for i, a := range l.Writes {
		x, err := host(a)
		if err != nil {
			return fmt.Errorf("cudart: host function %s: %w", l.Name, err)
		}
		outs[i] = x
	}
	run := func() {
		in := make([][]byte, len(ins))
		for i, x := range ins {
			in[i] = append([]byte(nil), x...)
		}
		out, err := executor.HostKernel(l, in)
		if err != nil {
			b.noteHostErr(fmt.Errorf("cudart: host function %s: %w", l.Name, err))
			return
		}
		for i, o := range out {
			if o != nil {
				copy(outs[i], o)
			}
		}
	}
	return b.queueOn(s.c, l.Name+": cuLaunchHostFunc", func(w *worker) error {
		captured := w.capturing(s)
		h, err := launchHostFunc(s.s, run, !captured)
		if err == nil && captured {
			w.capture.hostFuncs = append(w.capture.hostFuncs, h)
		}
		return wrap(err, "%s: cuLaunchHostFunc", l.Name)
	})
}

// noteHostErr keeps err if it is the first since the last Synchronize.
func (b *backend) noteHostErr(err error) {
	b.hostErrMu.Lock()
	if b.hostErr == nil {
		b.hostErr = err
	}
	b.hostErrMu.Unlock()
}

// takeHostFuncErr returns and clears the first host-function error (or
// another thread's queued op's).
func (b *backend) takeHostFuncErr() error {
	b.hostErrMu.Lock()
	defer b.hostErrMu.Unlock()
	err := b.hostErr
	b.hostErr = nil
	return err
}
