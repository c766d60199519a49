//go:build cuda

package cudart

// CUDA graph mode: the backend implements executor.GraphBackend with stream
// capture. gorgonia.org/cu v0.9.6 has graph types but no capture, launch
// or instantiate-with-flags, so the calls are made here, on the worker
// thread like every other driver call.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stddef.h>

static CUresult dr_end_capture(CUstream s, CUgraph *g) { return cuStreamEndCapture(s, g); }
static CUresult dr_instantiate(CUgraphExec *e, CUgraph g) { return cuGraphInstantiateWithFlags(e, g, 0); }
static CUresult dr_graph_upload(CUgraphExec e, CUstream s) { return cuGraphUpload(e, s); }
static CUresult dr_graph_launch(CUgraphExec e, CUstream s) { return cuGraphLaunch(e, s); }
static CUresult dr_graph_exec_destroy(CUgraphExec e) { return cuGraphExecDestroy(e); }
static CUresult dr_graph_destroy(CUgraph g) { return cuGraphDestroy(g); }
static CUresult dr_graph_counts(CUgraph g, size_t *nodes, size_t *edges) {
	CUresult r = cuGraphGetNodes(g, NULL, nodes);
	if (r != CUDA_SUCCESS) return r;
	return cuGraphGetEdges(g, NULL, NULL, edges);
}
// An event record that a capture keeps as an event-record node (timed
// events inside a graph), not as a capture-internal dependency.
static CUresult dr_record_external(CUevent e, CUstream s) {
	return cuEventRecordWithFlags(e, s, CU_EVENT_RECORD_EXTERNAL);
}
static int dr_stream_capturing(CUstream s) {
	CUstreamCaptureStatus st;
	if (cuStreamIsCapturing(s, &st) != CUDA_SUCCESS) return 0;
	return st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
)

var _ executor.GraphBackend = (*backend)(nil)

func cuEvent(e cu.Event) C.CUevent { return *(*C.CUevent)(unsafe.Pointer(&e)) }

func init() {
	if unsafe.Sizeof(cu.Event{}) != unsafe.Sizeof(C.CUevent(nil)) {
		panic("cudart: gorgonia.org/cu Event layout changed; update graph.go")
	}
}

// captureState is an open stream capture, kept by the worker.
type captureState struct {
	origin    *stream
	errBefore error // the worker's pending asynchronous error when the capture began
	timed     bool  // Profile: stages are bracketed by event-record nodes
	start     cu.Event
	prof      []profRec
	// hostFuncs are the handles of the capture's host-function nodes
	// (rules.go), called at every replay of its graph.
	hostFuncs []cgo.Handle
}

// graph is an instantiated CUDA graph (an executor.Graph).
type graph struct {
	id           int
	g            C.CUgraph
	exec         C.CUgraphExec
	nodes, edges int
	// Profile: an event-record node that starts the graph, and one pair of
	// nodes around every stage (events owned by the graph).
	timed bool
	start cu.Event
	prof  []profRec
	// stamps holds the kernel timestamps of the graph's mix nodes
	// (Options.KernelTimestamps), rewritten by every replay.
	stamps *stampBuf
	// hostFuncs are the handles its host-function nodes call.
	hostFuncs []cgo.Handle
}

// Nodes and Edges count the graph's nodes and dependency edges, event-record
// nodes of a profiled capture included.
func (g *graph) Nodes() int { return g.nodes }
func (g *graph) Edges() int { return g.edges }

// capturing reports whether s is being captured (cuStreamIsCapturing): a
// capture is open and s is its origin or has joined it. A stream that runs
// eager work while a capture is open elsewhere is not.
func (w *worker) capturing(s *stream) bool {
	return w.capture != nil && C.dr_stream_capturing(cuStream(s.s)) != 0
}

// recordTimed records timed event e on s: an event-record node while s is
// being captured (CU_EVENT_RECORD_EXTERNAL is valid only there), a plain
// record otherwise.
func (w *worker) recordTimed(e cu.Event, s *stream) error {
	if w.capturing(s) {
		return wrap(rawErr(C.dr_record_external(cuEvent(e), cuStream(s.s))), "cuEventRecordWithFlags(external) (profile)")
	}
	return wrap(e.Record(s.s), "cuEventRecord (profile)")
}

// BeginCapture starts a stream capture on s (cuStreamBeginCapture, relaxed
// mode): the work queued on s, and on every stream that waits on an event
// recorded on a capturing stream, is recorded into a graph until EndCapture.
// With Options.Profile the graph starts with a timed event-record node and
// brackets each stage with two, so that replays report stage spans. Errors:
// a capture already open, Options.SyncEach (a capture cannot synchronize),
// driver errors.
func (b *backend) BeginCapture(hs executor.Stream) error {
	// Relaxed mode: the worker may still allocate (a mix stage's scratch
	// grows on first use) while a capture is open.
	return b.BeginCaptureMode(hs, plan.CaptureRelaxed)
}

var _ executor.CaptureModer = (*backend)(nil)

// BeginCaptureMode is BeginCapture in one of cuStreamBeginCapture's modes
// (plan.CaptureGlobal, CaptureThreadLocal, CaptureRelaxed): graph mode
// begins a plan's capture regions in their mode, so that the driver
// refuses what the mode refuses (a cuMemAlloc in global mode:
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED). In global and thread-local mode
// an in-place mix stage whose scratch buffer must grow fails the same way.
func (b *backend) BeginCaptureMode(hs executor.Stream, mode string) error {
	s, ok := hs.(*stream)
	if !ok || s == nil {
		return fmt.Errorf("cudart: BeginCapture: %T is not a cuda stream", hs)
	}
	if b.opts.SyncEach {
		return errors.New("cudart: BeginCapture: the backend synchronizes after each op (SyncEach), which a stream capture cannot do")
	}
	return b.callOn(s.c, "cuStreamBeginCapture", func(w *worker) error {
		if w.capture != nil {
			return errors.New("cudart: BeginCapture: a capture is already open on this backend")
		}
		if b.opts.KernelTimestamps {
			sb, err := newStampBuf(w)
			if err != nil {
				return err
			}
			b.capStamps = sb
		}
		if err := beginCaptureMode(s.s, mode); err != nil { // rules.go
			b.capStamps.free()
			b.capStamps = nil
			return wrap(err, "cuStreamBeginCapture")
		}
		c := &captureState{origin: s, errBefore: w.asyncErr}
		w.asyncErr = nil
		w.capture = c
		if m := b.markers; m != nil {
			if err := w.recordTimed(m[0], s); err != nil {
				w.asyncErr = err
			}
		}
		if b.opts.Profile {
			e, err := w.timedEvent()
			if err == nil {
				err = w.recordTimed(e, s)
			}
			if err != nil {
				var g C.CUgraph
				C.dr_end_capture(cuStream(s.s), &g)
				if g != nil {
					C.dr_graph_destroy(g)
				}
				w.capture, w.asyncErr = nil, c.errBefore
				b.capStamps.free()
				b.capStamps = nil
				return err
			}
			c.timed, c.start = true, e
		}
		return nil
	})
}

// EndCapture ends the capture begun on s (cuStreamEndCapture), instantiates
// the graph (cuGraphInstantiateWithFlags) and uploads it to the device
// (cuGraphUpload, so that the first launch is not slower than the rest). It
// returns the first error of an op queued during the capture, or the
// driver's: CUDA_ERROR_STREAM_CAPTURE_UNJOINED when a stream that joined the
// capture was not joined back into s.
func (b *backend) EndCapture(hs executor.Stream) (executor.Graph, error) {
	s, ok := hs.(*stream)
	if !ok || s == nil {
		return nil, fmt.Errorf("cudart: EndCapture: %T is not a cuda stream", hs)
	}
	g := &graph{}
	err := b.callOn(s.c, "cuStreamEndCapture", func(w *worker) error {
		c := w.capture
		if c == nil || c.origin != s {
			return errors.New("cudart: EndCapture: no capture was begun on this stream")
		}
		if m := b.markers; m != nil {
			if err := w.recordTimed(m[1], s); err != nil && w.asyncErr == nil {
				w.asyncErr = err
			}
		}
		w.capture = nil
		opErr := w.asyncErr
		w.asyncErr = c.errBefore
		stamps := b.capStamps
		b.capStamps = nil
		dropEvents := func() { // the graph never runs: its host functions' handles go too
			deleteHandles(c.hostFuncs)
			stamps.free()
			if c.timed {
				cu.DestroyEvent(&c.start)
			}
			for i := range c.prof {
				cu.DestroyEvent(&c.prof[i].start)
				cu.DestroyEvent(&c.prof[i].end)
			}
		}
		var cg C.CUgraph
		r := C.dr_end_capture(cuStream(s.s), &cg)
		if opErr != nil || r != C.CUDA_SUCCESS {
			if cg != nil {
				C.dr_graph_destroy(cg)
			}
			dropEvents()
			err := wrap(rawErr(r), "cuStreamEndCapture")
			if r == C.CUDA_ERROR_STREAM_CAPTURE_UNJOINED {
				err = fmt.Errorf("%w (a stream that joined the capture was not joined back into the origin stream)", err)
			}
			return errors.Join(opErr, err)
		}
		var nodes, edges C.size_t
		if err := rawErr(C.dr_graph_counts(cg, &nodes, &edges)); err != nil {
			C.dr_graph_destroy(cg)
			dropEvents()
			return wrap(err, "cuGraphGetNodes/cuGraphGetEdges")
		}
		var ex C.CUgraphExec
		if err := rawErr(C.dr_instantiate(&ex, cg)); err != nil {
			C.dr_graph_destroy(cg)
			dropEvents()
			return wrap(err, "cuGraphInstantiateWithFlags (%d nodes, %d edges)", int(nodes), int(edges))
		}
		if err := rawErr(C.dr_graph_upload(ex, cuStream(s.s))); err != nil {
			C.dr_graph_exec_destroy(ex)
			C.dr_graph_destroy(cg)
			dropEvents()
			return wrap(err, "cuGraphUpload")
		}
		g.g, g.exec, g.nodes, g.edges = cg, ex, int(nodes), int(edges)
		g.timed, g.start, g.prof, g.stamps = c.timed, c.start, c.prof, stamps
		g.hostFuncs = c.hostFuncs
		return nil
	})
	if err != nil {
		return nil, err
	}
	g.id = b.track(fmt.Sprintf("graph (%d nodes, %d edges)", g.nodes, g.edges), g)
	return g, nil
}

func asGraph(h executor.Graph) (*graph, error) {
	g, ok := h.(*graph)
	if !ok || g == nil || g.exec == nil {
		return nil, fmt.Errorf("cudart: %T is not a live cuda graph", h)
	}
	return g, nil
}

// LaunchGraph queues one replay of g on s (cuGraphLaunch). With a profiled
// graph, the next Synchronize reads its stage spans (of the last replay).
func (b *backend) LaunchGraph(hg executor.Graph, hs executor.Stream) error {
	g, err := asGraph(hg)
	if err != nil {
		return err
	}
	s, ok := hs.(*stream)
	if !ok || s == nil {
		return fmt.Errorf("cudart: LaunchGraph: %T is not a cuda stream", hs)
	}
	return b.queueOn(s.c, "cuGraphLaunch", func(w *worker) error { return w.launchGraph(g, s) })
}

// launchGraph launches g on s now (worker thread only).
func (w *worker) launchGraph(g *graph, s *stream) error {
	if err := rawErr(C.dr_graph_launch(g.exec, cuStream(s.s))); err != nil {
		return wrap(err, "cuGraphLaunch (%d nodes)", g.nodes)
	}
	if (g.timed || g.stamps != nil) && !containsGraph(w.timedGraphs, g) {
		w.timedGraphs = append(w.timedGraphs, g)
	}
	return nil
}

func deleteHandles(hs []cgo.Handle) {
	for _, h := range hs {
		h.Delete()
	}
}

// dropRetiredHostFuncs deletes the host-function handles of destroyed
// graphs; call it only when no replay of them can still run.
func (w *worker) dropRetiredHostFuncs() {
	deleteHandles(w.retiredHostFuncs)
	w.retiredHostFuncs = nil
}

func containsGraph(gs []*graph, g *graph) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}

// DestroyGraph destroys g's executable and graph and its timed events; a
// replay in flight completes first (the driver frees it then).
func (b *backend) DestroyGraph(hg executor.Graph) error {
	g, err := asGraph(hg)
	if err != nil {
		return err
	}
	err = b.call("cuGraphExecDestroy", func(w *worker) error { return w.destroyGraph(g) })
	b.untrack(g.id)
	return err
}

func (w *worker) destroyGraph(g *graph) error {
	for i, x := range w.timedGraphs {
		if x == g {
			w.timedGraphs = append(w.timedGraphs[:i], w.timedGraphs[i+1:]...)
			break
		}
	}
	err := wrap(rawErr(C.dr_graph_exec_destroy(g.exec)), "cuGraphExecDestroy")
	if e := wrap(rawErr(C.dr_graph_destroy(g.g)), "cuGraphDestroy"); err == nil {
		err = e
	}
	if g.timed {
		cu.DestroyEvent(&g.start)
	}
	for i := range g.prof {
		cu.DestroyEvent(&g.prof[i].start)
		cu.DestroyEvent(&g.prof[i].end)
	}
	g.stamps.free()
	// A replay in flight still calls the host functions: their handles are
	// deleted once every context is synchronized (syncAll).
	w.retiredHostFuncs = append(w.retiredHostFuncs, g.hostFuncs...)
	g.exec, g.g, g.prof, g.stamps, g.hostFuncs = nil, nil, nil, nil, nil
	return err
}
