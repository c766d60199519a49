//go:build cuda

package cudart

// Several devices (executor.Devicer). The backend drives one context per
// distinct ordinal of Options.Devices: the ordinal's primary context
// (cuDevicePrimaryCtxRetain), the one the CUDA runtime and NCCL use too.
// The worker keeps one context current at a time and switches
// (cuCtxSetCurrent) before each op whose stream, event or buffer is of
// another context, so every driver call keeps the host issue order of the
// plan, across devices too: a record on device 1 is issued before a wait
// on it from device 0 because both go through the one worker queue.
//
// Streams and buffers are created in their device's context. An event is
// one driver event per context, made on first use there: cuEventRecord
// needs the event and the stream in one context, while cuStreamWaitEvent
// accepts an event of another context, so a record on a stream of context
// c records the event's context-c handle and notes c, and a wait takes the
// handle of the context of the latest record issued before it — CUDA's
// "most recent record" rule across devices. Peer access
// (cuCtxEnablePeerAccess) is enabled between every pair of contexts whose
// devices cuDeviceCanAccessPeer allows; a copy between buffers of two
// plan devices is cuMemcpyPeerAsync with the source and destination
// contexts on the stage's stream (the driver stages it through the host
// where peer access is off).

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
)

var _ executor.Devicer = (*backend)(nil)

// devCtx is one context of the backend: the primary context of an ordinal,
// shared by every plan device mapped to it.
type devCtx struct {
	ordinal int
	dev     cu.Device
	ctx     cu.CUContext
	// fns are the built-in kernels loaded in this context; read-only after
	// New. Context 0's are the main worker's (worker.fns).
	fns map[string]cu.Function
	mod cu.Module
	// User kernels loaded in this context (contexts other than 0: context
	// 0's are the backend's userFns), by PTX path and by path + "\x00" +
	// entry; loaded on first launch there.
	umu   sync.Mutex
	umods map[string]cu.Module
	ufns  map[string]cu.Function
	owned bool // created by the backend (separateContexts), not a primary context
}

// ordinals returns the ordinal of each plan device (Options.Devices, or
// Options.Device alone).
func (o *Options) ordinals() []int {
	if len(o.Devices) == 0 {
		return []int{o.Device}
	}
	return o.Devices
}

// checkDevices rejects options that name a device the driver does not
// report (count devices, cuDeviceGetCount) or that several devices cannot
// honour yet (profiling, kernel timestamps: their events and buffers are
// device 0's).
func (o *Options) checkDevices(count int) error {
	ords := o.ordinals()
	for i, ord := range ords {
		if ord < 0 || ord >= count {
			what := fmt.Sprintf("device %d", i)
			if len(ords) == 1 {
				what = "the backend's device"
			}
			return fmt.Errorf("cudart: %s is ordinal %d, but the driver reports %d CUDA device(s) (cuDeviceGetCount; ordinals 0 to %d): run the plan on a machine with more GPUs, map its devices onto these (Options.Devices, dagrun run --devices), or check CUDA_VISIBLE_DEVICES: %w", what, ord, count, count-1, ErrNoDevice)
		}
	}
	if len(ords) > 1 && (o.Profile || o.KernelTimestamps) {
		return errors.New("cudart: profiling (Profile, KernelTimestamps) times device 0's streams only: run a plan of several devices without it")
	}
	return nil
}

// Devices returns the number of plan devices the backend drives.
func (b *backend) Devices() int { return len(b.devs) }

// Ordinals returns the ordinal each plan device runs on.
func (b *backend) Ordinals() []int {
	out := make([]int, len(b.devs))
	for i, c := range b.devs {
		out[i] = b.ctxs[c].ordinal
	}
	return out
}

// PeerAccess reports whether peer access from plan device a to plan device
// b's memory was enabled (cuDeviceCanAccessPeer said yes and
// cuCtxEnablePeerAccess succeeded); true for two plan devices on one
// ordinal (one context).
func (b *backend) PeerAccess(from, to int) bool {
	if from < 0 || to < 0 || from >= len(b.devs) || to >= len(b.devs) {
		return false
	}
	ca, cb := b.devs[from], b.devs[to]
	return ca == cb || b.peer[ca][cb]
}

// ctxOf returns the context index of plan device dev, or an error naming
// the devices the backend drives.
func (b *backend) ctxOf(dev int) (int, error) {
	if dev < 0 || dev >= len(b.devs) {
		return 0, fmt.Errorf("cudart: device %d: the backend drives %d device(s) (Options.Devices %v)", dev, len(b.devs), b.Ordinals())
	}
	return b.devs[dev], nil
}

// NewStreamOn creates a stream of kind on plan device dev, in its context.
// Default streams (legacy, per-thread) are device 0's only.
func (b *backend) NewStreamOn(dev int, kind string) (executor.Stream, error) {
	if dev == 0 {
		if kind == plan.StreamNonBlocking {
			return b.NewStream()
		}
		return b.NewStreamKind(kind)
	}
	c, err := b.ctxOf(dev)
	if err != nil {
		return nil, err
	}
	switch kind {
	case plan.StreamNonBlocking, plan.StreamBlocking:
	default:
		return nil, fmt.Errorf("cudart: stream of kind %s on device %d: default streams are device 0's only; give it a non-blocking or blocking stream", kind, dev)
	}
	s := &stream{c: c, dev: dev}
	err = b.callOn(c, "cuStreamCreate on device "+fmt.Sprint(dev), func(w *worker) error {
		var owned bool
		var err error
		s.s, owned, err = makeStream(kind) // rules.go
		s.def = !owned
		return err
	})
	if err != nil {
		return nil, err
	}
	s.id = b.track(fmt.Sprintf("stream (device %d)", dev), s)
	return s, nil
}

// on makes context c current on the worker's thread (no call when it is).
func (w *worker) on(c int) error {
	if c == w.cur {
		return nil
	}
	if err := cu.SetCurrentContext(w.b.ctxs[c].ctx); err != nil {
		w.cur = -1
		return wrap(err, "cuCtxSetCurrent (device ordinal %d)", w.b.ctxs[c].ordinal)
	}
	w.cur = c
	return nil
}

// syncAll synchronizes every context of the backend (cuCtxSynchronize in
// each) and makes the one that was current current again; once every
// context is synchronized, no replay of a destroyed graph can still call
// its host functions, whose handles it then deletes.
func (w *worker) syncAll(what string) error {
	if len(w.b.ctxs) == 1 {
		err := wrap(cu.Synchronize(), "cuCtxSynchronize %s", what)
		if err == nil {
			w.dropRetiredHostFuncs()
		}
		return err
	}
	prev := max(w.cur, 0)
	var errs []error
	for c := range w.b.ctxs {
		if err := w.on(c); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := cu.Synchronize(); err != nil {
			errs = append(errs, wrap(err, "cuCtxSynchronize %s (device ordinal %d)", what, w.b.ctxs[c].ordinal))
		}
	}
	if err := w.on(prev); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		w.dropRetiredHostFuncs()
	}
	return errors.Join(errs...)
}

// initContexts retains and sets up the contexts of the ordinals after the
// first (context 0 is the worker's, set up by init): it loads the built-in
// kernels in each and enables peer access between each pair whose devices
// allow it. Context 0 is current again when it returns.
func (w *worker) initContexts(ptx []byte) error {
	b := w.b
	ords := b.opts.ordinals()
	b.ctxs = []*devCtx{{ordinal: ords[0], dev: w.dev, ctx: w.ctx, fns: w.fns, mod: w.builtins}}
	byOrd := map[int]int{ords[0]: 0}
	b.devs = make([]int, len(ords))
	for i, ord := range ords {
		c, ok := byOrd[ord]
		if i > 0 && b.opts.separateContexts {
			ok = false
		}
		if !ok {
			dc, err := w.retainContext(ord, ptx)
			if err != nil {
				return err
			}
			c = len(b.ctxs)
			b.ctxs = append(b.ctxs, dc)
			byOrd[ord] = c
		}
		b.devs[i] = c
	}
	b.peer = make([][]bool, len(b.ctxs))
	for i := range b.ctxs {
		b.peer[i] = make([]bool, len(b.ctxs))
	}
	for i, a := range b.ctxs {
		for j, p := range b.ctxs {
			if i == j {
				continue
			}
			can, err := a.dev.CanAccessPeer(p.dev)
			if err != nil {
				return wrap(err, "cuDeviceCanAccessPeer(%d, %d)", a.ordinal, p.ordinal)
			}
			if can == 0 {
				continue
			}
			if err := w.on(i); err != nil {
				return err
			}
			if err := p.ctx.EnablePeerAccess(0); err != nil && !errors.Is(err, cu.PeerAccessAlreadyEnabled) {
				return wrap(err, "cuCtxEnablePeerAccess(ordinal %d → %d)", a.ordinal, p.ordinal)
			}
			b.peer[i][j] = true
		}
	}
	return w.on(0)
}

// retainContext retains ordinal ord's primary context (with
// Options.separateContexts: creates a context of its own there), makes it
// current and loads the built-in kernels there.
func (w *worker) retainContext(ord int, ptx []byte) (*devCtx, error) {
	dev, err := cu.GetDevice(ord)
	if err != nil {
		return nil, wrap(err, "cuDeviceGet(%d)", ord)
	}
	dc := &devCtx{ordinal: ord, dev: dev, fns: map[string]cu.Function{}, umods: map[string]cu.Module{}, ufns: map[string]cu.Function{}}
	w.cur = -1
	if w.b.opts.separateContexts {
		if dc.ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
			return nil, wrap(err, "cuCtxCreate(%d)", ord)
		}
		dc.owned = true
	} else if dc.ctx, err = dev.RetainPrimaryCtx(); err != nil {
		return nil, wrap(err, "cuDevicePrimaryCtxRetain(%d)", ord)
	}
	if err := cu.SetCurrentContext(dc.ctx); err != nil {
		dc.release()
		return nil, wrap(err, "cuCtxSetCurrent (device ordinal %d)", ord)
	}
	mod, err := loadBuiltins(ptx, dc.fns, fmt.Sprintf("device ordinal %d", ord))
	if err != nil {
		dc.release()
		return nil, err
	}
	dc.mod = mod
	return dc, nil
}

// release gives up the context: releases the primary context, or destroys
// a context of the backend's own (separateContexts).
func (dc *devCtx) release() {
	if dc.owned {
		dc.ctx.Destroy()
		return
	}
	dc.dev.ReleasePrimaryCtx()
}

// closeContexts unloads the modules of the contexts after the first and
// releases them (context 0 is released by close).
func (w *worker) closeContexts() {
	for c, dc := range w.b.ctxs {
		if c == 0 {
			continue
		}
		if w.on(c) == nil {
			for _, m := range dc.umods {
				m.Unload()
			}
			dc.mod.Unload()
		}
		if dc.owned {
			w.on(0)
		}
		dc.release()
	}
	w.cur = -1
	w.on(0)
}

// fnIn returns k's function in context c (the worker has c current):
// a built-in's, or a user kernel's, loaded there on first use.
func (w *worker) fnIn(c int, k *kernelLaunch) (cu.Function, error) {
	if c == 0 {
		return k.fn, nil
	}
	dc := w.b.ctxs[c]
	if k.user == nil {
		return dc.fns[k.name], nil
	}
	dc.umu.Lock()
	defer dc.umu.Unlock()
	if f, ok := dc.ufns[k.name]; ok {
		return f, nil
	}
	path, entry, _ := strings.Cut(k.name, "\x00")
	mod, ok := dc.umods[path]
	if !ok {
		var err error
		if mod, err = loadUserPTX(k.user.Name, path); err != nil {
			return cu.Function{}, err
		}
		dc.umods[path] = mod
	}
	f, err := mod.Function(entry)
	if err != nil {
		return f, wrap(err, "kernel %s: entry %q in %s (device ordinal %d)", k.user.Name, entry, path, dc.ordinal)
	}
	dc.ufns[k.name] = f
	return f, nil
}

// eventIn returns e's driver event in context c (the worker has c
// current), creating it on first use there.
func (w *worker) eventIn(e *event, c int) (cu.Event, error) {
	if c == 0 {
		return e.e, nil
	}
	if e.per == nil {
		e.per = make([]cu.Event, len(w.b.ctxs))
		e.made = make([]bool, len(w.b.ctxs))
	}
	if !e.made[c] {
		ev, err := cu.MakeEvent(cu.DisableTiming)
		if err != nil {
			return ev, wrap(err, "cuEventCreate (device ordinal %d)", w.b.ctxs[c].ordinal)
		}
		e.per[c], e.made[c] = ev, true
	}
	return e.per[c], nil
}

// latest returns the driver event of e's latest record (its context-0
// event if it was never recorded elsewhere) and that record's context.
func (e *event) latest() (cu.Event, int) {
	if e.last == 0 {
		return e.e, 0
	}
	return e.per[e.last], e.last
}

// destroyEvent destroys e's driver events, each in its context.
func (w *worker) destroyEvent(e *event) error {
	err := wrap(cu.DestroyEvent(&e.e), "cuEventDestroy")
	for c, made := range e.made {
		if !made || c == 0 {
			continue
		}
		if cerr := w.on(c); cerr != nil {
			err = errors.Join(err, cerr)
			continue
		}
		err = errors.Join(err, wrap(cu.DestroyEvent(&e.per[c]), "cuEventDestroy (device ordinal %d)", w.b.ctxs[c].ordinal))
	}
	e.per, e.made, e.last = nil, nil, 0
	return err
}

// peerCopyStep returns the worker step of a prepared copy between device
// buffers of two plan devices on s: cuMemcpyPeerAsync with the source's
// and the destination's contexts; while a capture is open, cuMemcpyAsync
// (unified addressing names both contexts by the pointers), since stream
// capture does not record cuMemcpyPeerAsync
// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED).
func (b *backend) peerCopyStep(p *prep, s *stream) func(*worker) error {
	dst, src, n, what := p.dst, p.srcPtr, p.n, p.what
	dctx, sctx := b.ctxs[p.dstCtx], b.ctxs[p.srcCtx]
	return func(w *worker) error {
		if w.capture != nil {
			return wrap(cu.MemcpyAsync(dst, src, n, s.s), "%s: cuMemcpyAsync %d bytes between devices (device ordinal %d → %d, captured)", what, n, sctx.ordinal, dctx.ordinal)
		}
		return wrap(cu.MemcpyPeerAsync(dst, dctx.ctx, src, sctx.ctx, n, s.s), "%s: cuMemcpyPeerAsync %d bytes (device ordinal %d → %d)", what, n, sctx.ordinal, dctx.ordinal)
	}
}
