//go:build cuda

// The worker thread: its current context, the built-in and user PTX
// modules it loads, and the spin kernel's calibration.

package cudart

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"gorgonia.org/cu"
)

// makeCurrent retains the device's primary context and makes it current
// on the worker's OS thread.
func (w *worker) makeCurrent() error {
	ord := w.b.opts.ordinals()[0]
	dev, err := cu.GetDevice(ord)
	if err != nil {
		return wrap(err, "cuDeviceGet(%d)", ord)
	}
	w.dev = dev
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return wrap(err, "cuDevicePrimaryCtxRetain(%d)", ord)
	}
	w.ctx = ctx
	if err := cu.SetCurrentContext(ctx); err != nil {
		dev.ReleasePrimaryCtx()
		return wrap(err, "cuCtxSetCurrent")
	}
	return nil
}

func (w *worker) init() error {
	if err := w.makeCurrent(); err != nil {
		return err
	}
	dev := w.dev
	keepPrimary.Do(func() { dev.RetainPrimaryCtx() })
	info, err := deviceInfo(w.b.opts.ordinals()[0])
	if err != nil {
		dev.ReleasePrimaryCtx()
		return err
	}
	w.b.info = info
	ptx := builtinsPTX
	if len(w.b.opts.BuiltinsPTX) > 0 {
		ptx = w.b.opts.BuiltinsPTX
	}
	mod, err := loadBuiltins(ptx, w.fns, "")
	if err != nil {
		dev.ReleasePrimaryCtx()
		return err
	}
	w.builtins = mod
	w.b.builtinFns = w.fns
	if err := w.initContexts(ptx); err != nil { // devices.go
		w.closeContexts()
		mod.Unload()
		dev.ReleasePrimaryCtx()
		return err
	}
	if w.b.opts.SpinOverheadNS == 0 {
		ns, err := w.spinOverhead()
		if err != nil {
			w.closeContexts()
			mod.Unload()
			dev.ReleasePrimaryCtx()
			return err
		}
		w.b.spinOverheadNS = ns
	}
	if w.b.opts.KernelTimestamps {
		if w.b.stamps, err = newStampBuf(w); err != nil {
			mod.Unload()
			dev.ReleasePrimaryCtx()
			return err
		}
	}
	return nil
}

// builtinNames are the built-in kernels' entries (dagrun_NAME) in the PTX.
var builtinNames = []string{"fill", "scale", "axpy", "mix", "spin", "checksum", "timer_probe"}

// spinCalib caches calibrateSpin's answer for the process.
var spinCalib struct {
	sync.Mutex
	done bool
	ns   float64
	err  error
}

// spinOverhead returns the process's calibrated spin overhead, measured
// and cached by the first backend of one context. A backend of several
// contexts uses the cached figure, or measures its own without caching
// it: in a test run whose first backend had two contexts on one GPU the
// cached figure was 1378 ns against 1540 ns per queued spin(0), and
// spin(2 µs) ran 11.6% long in every later backend.
func (w *worker) spinOverhead() (float64, error) {
	spinCalib.Lock()
	defer spinCalib.Unlock()
	if spinCalib.done {
		return spinCalib.ns, spinCalib.err
	}
	ns, err := w.calibrateSpin()
	if len(w.b.ctxs) == 1 {
		spinCalib.done, spinCalib.ns, spinCalib.err = true, ns, err
	}
	return ns, err
}

// calibrateSpin measures the GPU time of a zero-length spin kernel between
// its neighbours on one stream, in ns: a 1 ms blocker spin holds the stream
// while 64 spin(0) launches queue behind it, bracketed by two timed events;
// the median of 3 batches of elapsed/64 is the answer. Spin launches then
// subtract it, so a spin(d) stage adds d to its stream's timeline (for d at
// least this floor, about 1–2 µs: shorter requests cost the floor).
func (w *worker) calibrateSpin() (float64, error) {
	s, err := cu.MakeStream(cu.NonBlocking)
	if err != nil {
		return 0, wrap(err, "calibrate spin: cuStreamCreate")
	}
	defer s.Destroy()
	var ev [2]cu.Event
	for i := range ev {
		if ev[i], err = cu.MakeEvent(cu.DefaultEvent); err != nil {
			return 0, wrap(err, "calibrate spin: cuEventCreate")
		}
		defer cu.DestroyEvent(&ev[i])
	}
	const k = 64
	spin := func(ns uint64) error {
		var p params
		p.u64(ns)
		return launchRaw(w.fns["spin"], [3]int{1, 1, 1}, [3]int{32, 1, 1}, s, p.blob, p.offs)
	}
	var per []float64
	for range 3 {
		if err := spin(1_000_000); err != nil {
			return 0, wrap(err, "calibrate spin: launch")
		}
		ev[0].Record(s)
		for range k {
			if err := spin(0); err != nil {
				return 0, wrap(err, "calibrate spin: launch")
			}
		}
		ev[1].Record(s)
		if err := s.Synchronize(); err != nil {
			return 0, wrap(err, "calibrate spin: cuStreamSynchronize")
		}
		ms, err := ev[0].Elapsed(ev[1])
		if err != nil {
			return 0, wrap(err, "calibrate spin: cuEventElapsedTime")
		}
		per = append(per, ms*1e6/k)
	}
	sort.Float64s(per)
	return per[1], nil
}

// SpinOverheadNS returns the ns subtracted from every spin request (see
// Options.SpinOverheadNS).
func (b *backend) SpinOverheadNS() float64 { return b.spinOverheadNS }

func (w *worker) close() {
	for _, e := range w.evPool {
		cu.DestroyEvent(&e)
	}
	for _, m := range w.mods {
		m.Unload()
	}
	w.b.stamps.free()
	w.b.capStamps.free()
	w.closeComms()    // nccl.go
	w.closeContexts() // devices.go
	w.builtins.Unload()
	w.dev.ReleasePrimaryCtx()
}

// loadBuiltins loads the built-in kernels' PTX into the current context and
// puts each entry dagrun_NAME of builtinNames in fns under NAME. where names
// the device in errors ("" for the first). On an error nothing stays loaded.
func loadBuiltins(ptx []byte, fns map[string]cu.Function, where string) (cu.Module, error) {
	what := "built-in kernels (cudart/kernels/builtins.ptx)"
	if where != "" {
		what = "built-in kernels on " + where
	}
	mod, err := loadPTX(ptx, what)
	if err != nil {
		return mod, err
	}
	for _, k := range builtinNames {
		f, err := mod.Function("dagrun_" + k)
		if err != nil {
			mod.Unload()
			if where != "" {
				return mod, wrap(err, "cuModuleGetFunction(dagrun_%s) in the built-in PTX (%s)", k, where)
			}
			return mod, wrap(err, "cuModuleGetFunction(dagrun_%s) in the built-in PTX", k)
		}
		fns[k] = f
	}
	return mod, nil
}

// loadPTX loads a PTX image with cuModuleLoadDataEx and returns the JIT's
// error log in the error when it fails.
func loadPTX(ptx []byte, what string) (cu.Module, error) {
	if n := len(ptx); n == 0 || ptx[n-1] != 0 {
		ptx = append(ptx[:n:n], 0)
	}
	errLog := &cu.JITErrorLogBuffer{Buffer: make([]byte, 16<<10)}
	infoLog := &cu.JITInfoLogBuffer{Buffer: make([]byte, 4<<10)}
	mod, err := cu.LoadDataEx(string(ptx[:len(ptx)-1]), errLog, infoLog)
	if err != nil {
		log := strings.TrimSpace(string(bytes.TrimRight(errLog.Buffer[:max(bytes.IndexByte(errLog.Buffer, 0), 0)], "\x00")))
		if log == "" {
			log = "(the JIT printed no log)"
		}
		return mod, fmt.Errorf("%w\nJIT error log:\n%s", wrap(err, "cuModuleLoadDataEx: %s", what), log)
	}
	return mod, nil
}

// ptxPath resolves a user kernel's PTX path against Options.PTXDir.
func (b *backend) ptxPath(p string) string {
	if filepath.IsAbs(p) || b.opts.PTXDir == "" {
		return p
	}
	return filepath.Join(b.opts.PTXDir, p)
}
