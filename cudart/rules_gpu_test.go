//go:build cuda

package cudart

// The driver against the verifier's model of CUDA's implicit rules
// (verify/implicit.go, verify/capture.go), one test per group of
// specs/rules/: for each pattern the buggy form goes wrong on the device
// (wrong results, or the capture error the checker predicts) and the fixed
// form is right. Each figure goes to $DAGRUN_OUT/figures.txt.

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"testing"
	"unsafe"

	"github.com/dagrun/dagrun/plan"
	"gorgonia.org/cu"
)

const (
	rulesTrials = 20
	rulesWords  = 1 << 20 // 4 MiB
	rulesSpinUS = 2000
)

// rulesRig is a backend with a device buffer, pinned and pageable host
// buffers of rulesWords words each.
type rulesRig struct {
	b      *backend
	d      cu.DevicePtr
	pinned unsafe.Pointer
	page   unsafe.Pointer
}

func newRulesRig(t *testing.T) *rulesRig {
	b := newTB(t, testOptions(t))
	r := &rulesRig{b: b}
	must(t, b.call("rules alloc", func(w *worker) error {
		var err error
		if r.d, err = memAllocRaw(4 * rulesWords); err != nil {
			return err
		}
		if r.pinned, err = allocHost(4*rulesWords, false); err != nil {
			return err
		}
		r.page = allocPageable(4 * rulesWords)
		return nil
	}))
	t.Cleanup(func() {
		b.call("rules free", func(w *worker) error {
			cu.Synchronize()
			memFreeRaw(r.d)
			cu.MemFreeHost(r.pinned)
			freePageable(r.page)
			return nil
		})
		b.Close()
	})
	return r
}

// do runs fn on the worker thread (every driver call of a trial).
func (r *rulesRig) do(t *testing.T, fn func(w *worker) error) {
	t.Helper()
	must(t, r.b.call("rules", fn))
}

func (r *rulesRig) spin(s cu.Stream) error {
	var p params
	p.u64(r.b.spinNS(rulesSpinUS))
	return launchRaw(r.b.kernel("spin").fn, [3]int{1, 1, 1}, [3]int{32, 1, 1}, s, p.blob, p.offs)
}

func (r *rulesRig) fill(s cu.Stream, v float32) error {
	return cu.MemsetD32Async(r.d, uint(math.Float32bits(v)), rulesWords, s)
}

func hostWords(p unsafe.Pointer) []uint32 { return unsafe.Slice((*uint32)(p), rulesWords) }

func setHost(p unsafe.Pointer, v float32) {
	w := hostWords(p)
	for i := range w {
		w[i] = math.Float32bits(v)
	}
}

// hostAll reports whether every word of host memory p is v.
func hostAll(p unsafe.Pointer, v float32) bool {
	for _, x := range hostWords(p) {
		if x != math.Float32bits(v) {
			return false
		}
	}
	return true
}

// deviceAll reads the device buffer back (synchronizing) and reports
// whether every word is v.
func (r *rulesRig) deviceAll(w *worker, v float32) (bool, error) {
	if err := cu.Synchronize(); err != nil {
		return false, err
	}
	out := make([]byte, 4*rulesWords)
	if err := copyDtoH(unsafe.Pointer(&out[0]), r.d, 4*rulesWords); err != nil {
		return false, err
	}
	for i := 0; i < rulesWords; i++ {
		if binary.LittleEndian.Uint32(out[4*i:]) != math.Float32bits(v) {
			return false, nil
		}
	}
	return true, nil
}

// TestRulesLegacyStream: a slow write on the legacy default stream, then a
// write on stream s. Declaration order wants s's value. With s blocking the
// legacy default stream orders it (specs/rules/legacy-fixed.yaml); with s
// non-blocking nothing does, and the legacy write lands last
// (specs/rules/legacy-racy.yaml).
func TestRulesLegacyStream(t *testing.T) {
	r := newRulesRig(t)
	legacy, _, _ := makeStream(plan.StreamLegacy)
	wrong := map[string]int{}
	for _, kind := range []string{plan.StreamNonBlocking, plan.StreamBlocking} {
		var s cu.Stream
		r.do(t, func(w *worker) error {
			var err error
			s, _, err = makeStream(kind)
			return err
		})
		for range rulesTrials {
			r.do(t, func(w *worker) error {
				if err := r.spin(legacy); err != nil {
					return err
				}
				if err := r.fill(legacy, 1); err != nil {
					return err
				}
				if err := r.fill(s, 2); err != nil {
					return err
				}
				ok, err := r.deviceAll(w, 2)
				if !ok {
					wrong[kind]++
				}
				return err
			})
		}
		r.do(t, func(w *worker) error { return s.Destroy() })
	}
	figure(t, "legacy default stream then stream s: s non_blocking: %d of %d trials wrong; s blocking: %d of %d wrong",
		wrong[plan.StreamNonBlocking], rulesTrials, wrong[plan.StreamBlocking], rulesTrials)
	if wrong[plan.StreamNonBlocking] == 0 || wrong[plan.StreamBlocking] != 0 {
		t.Errorf("want the non-blocking stream wrong and the blocking one right, got %v", wrong)
	}
}

// TestRulesCopies: the copy modes of the "API synchronization behavior"
// table and a host function.
func TestRulesCopies(t *testing.T) {
	r := newRulesRig(t)
	legacy, _, _ := makeStream(plan.StreamLegacy)
	var nb, bl cu.Stream
	r.do(t, func(w *worker) error {
		var err error
		if nb, _, err = makeStream(plan.StreamNonBlocking); err != nil {
			return err
		}
		bl, _, err = makeStream(plan.StreamBlocking)
		return err
	})
	defer r.do(t, func(w *worker) error { nb.Destroy(); return bl.Destroy() })
	var readAsync, readSync, srcAsync, srcSync, srcPageAsync, hostFn int
	var mu sync.Mutex
	for range rulesTrials {
		// Device → host: the host reads right after the call returns.
		// specs/rules/copy-racy.yaml: async copy on a non-blocking stream.
		r.do(t, func(w *worker) error {
			setHost(r.pinned, 0)
			if err := r.spin(nb); err != nil {
				return err
			}
			if err := r.fill(nb, 3); err != nil {
				return err
			}
			if err := copyDtoHAsync(r.pinned, r.d, 4*rulesWords, nb); err != nil {
				return err
			}
			if !hostAll(r.pinned, 3) {
				readAsync++
			}
			return cu.Synchronize()
		})
		// specs/rules/copy-fixed.yaml: the producer on a blocking stream,
		// a synchronous copy on the legacy default stream.
		r.do(t, func(w *worker) error {
			setHost(r.pinned, 0)
			if err := r.spin(bl); err != nil {
				return err
			}
			if err := r.fill(bl, 3); err != nil {
				return err
			}
			if err := copyDtoH(r.pinned, r.d, 4*rulesWords); err != nil {
				return err
			}
			if !hostAll(r.pinned, 3) {
				readSync++
			}
			return cu.Synchronize()
		})
		// Host → device, the host overwrites the source after the call.
		// Async from pinned memory (the copy runs after the spin): the
		// device gets the new bytes.
		r.do(t, func(w *worker) error {
			setHost(r.pinned, 5)
			if err := r.spin(nb); err != nil {
				return err
			}
			if err := copyHtoDAsync(r.d, r.pinned, 4*rulesWords, nb); err != nil {
				return err
			}
			setHost(r.pinned, 6)
			ok, err := r.deviceAll(w, 5)
			if !ok {
				srcAsync++
			}
			return err
		})
		// Synchronous from pageable memory: staged before the call returns.
		r.do(t, func(w *worker) error {
			setHost(r.page, 5)
			if err := r.spin(legacy); err != nil {
				return err
			}
			if err := copyHtoD(r.d, r.page, 4*rulesWords); err != nil {
				return err
			}
			setHost(r.page, 6)
			ok, err := r.deviceAll(w, 5)
			if !ok {
				srcSync++
			}
			return err
		})
		// Async from pageable memory (the table: "might be synchronous"; the
		// verifier does not rely on it): reported, not asserted.
		r.do(t, func(w *worker) error {
			setHost(r.page, 5)
			if err := r.spin(nb); err != nil {
				return err
			}
			if err := copyHtoDAsync(r.d, r.page, 4*rulesWords, nb); err != nil {
				return err
			}
			setHost(r.page, 6)
			ok, err := r.deviceAll(w, 5)
			if !ok {
				srcPageAsync++
			}
			return err
		})
		// specs/rules/hostfunc-fixed.yaml: a host function after the async
		// copy on its stream reads the copied bytes.
		r.do(t, func(w *worker) error {
			setHost(r.pinned, 0)
			if err := r.spin(nb); err != nil {
				return err
			}
			if err := r.fill(nb, 7); err != nil {
				return err
			}
			if err := copyDtoHAsync(r.pinned, r.d, 4*rulesWords, nb); err != nil {
				return err
			}
			if _, err := launchHostFunc(nb, func() {
				if !hostAll(r.pinned, 7) {
					mu.Lock()
					hostFn++
					mu.Unlock()
				}
			}, true); err != nil {
				return err
			}
			return cu.Synchronize()
		})
	}
	figure(t, "device→host, host reads at return: async (non_blocking stream) %d of %d wrong; sync after a blocking producer %d of %d wrong", readAsync, rulesTrials, readSync, rulesTrials)
	figure(t, "host→device, host overwrites the source at return: async from pinned %d of %d wrong; sync from pageable %d of %d wrong; async from pageable %d of %d wrong (not relied on)", srcAsync, rulesTrials, srcSync, rulesTrials, srcPageAsync, rulesTrials)
	figure(t, "host function after an async device→host copy on its stream: %d of %d saw wrong bytes", hostFn, rulesTrials)
	if readAsync == 0 || readSync != 0 || srcAsync == 0 || srcSync != 0 || hostFn != 0 {
		t.Errorf("want async reads and pinned-source reuse wrong, the sync forms and the host function right; got %d %d %d %d %d", readAsync, readSync, srcAsync, srcSync, hostFn)
	}
}

// TestRulesCapture: the capture checker's rules against the driver. Each
// case runs the buggy form, which must fail with the error the checker
// names (verify.CaptureViolation.Error), and the fixed form, which must
// capture a graph.
func TestRulesCapture(t *testing.T) {
	r := newRulesRig(t)
	legacy, _, _ := makeStream(plan.StreamLegacy)
	type result struct{ call, end error }
	runMode := func(name, kind, mode string, body func(s0, s1 cu.Stream, e0, e1 cu.Event) error) result {
		var res result
		r.do(t, func(w *worker) error {
			s0, _, err := makeStream(kind)
			if err != nil {
				return err
			}
			s1, _, err := makeStream(plan.StreamNonBlocking)
			if err != nil {
				return err
			}
			e0, _ := cu.MakeEvent(cu.DisableTiming)
			e1, _ := cu.MakeEvent(cu.DisableTiming)
			if err := beginCaptureMode(s0, mode); err != nil {
				return err
			}
			res.call = body(s0, s1, e0, e1)
			_, res.end = endCaptureRaw(s0)
			cu.Synchronize()
			cu.DestroyEvent(&e0)
			cu.DestroyEvent(&e1)
			s0.Destroy()
			s1.Destroy()
			return nil
		})
		figure(t, "capture %s: call %v, cuStreamEndCapture %v", name, errName(res.call), errName(res.end))
		return res
	}
	run := func(name, kind string, body func(s0, s1 cu.Stream, e0, e1 cu.Event) error) result {
		return runMode(name, kind, plan.CaptureGlobal, body)
	}
	fork := func(s0, s1 cu.Stream, e0 cu.Event) error {
		if err := r.fill(s0, 1); err != nil {
			return err
		}
		if err := e0.Record(s0); err != nil {
			return err
		}
		if err := s1.Wait(e0, 0); err != nil {
			return err
		}
		return r.fill(s1, 2)
	}
	check := func(name string, res result, want string) {
		got := errName(res.call)
		if got == "ok" {
			got = errName(res.end)
		}
		if got != want {
			t.Errorf("capture %s: got %s, the checker predicts %s", name, got, want)
		}
	}
	// specs/rules/capture-racy.yaml: s1 forked, never joined.
	check("unjoined fork", run("unjoined fork", plan.StreamNonBlocking, func(s0, s1 cu.Stream, e0, e1 cu.Event) error {
		return fork(s0, s1, e0)
	}), "CUDA_ERROR_STREAM_CAPTURE_UNJOINED")
	// specs/rules/capture-fixed.yaml: s0 waits for s1 before the end.
	check("joined fork", run("joined fork", plan.StreamNonBlocking, func(s0, s1 cu.Stream, e0, e1 cu.Event) error {
		if err := fork(s0, s1, e0); err != nil {
			return err
		}
		if err := e1.Record(s1); err != nil {
			return err
		}
		return s0.Wait(e1, 0)
	}), "ok")
	// The host waits for captured work.
	check("host wait inside", run("host wait inside", plan.StreamNonBlocking, func(s0, s1 cu.Stream, e0, e1 cu.Event) error {
		if err := r.fill(s0, 1); err != nil {
			return err
		}
		if err := e0.Record(s0); err != nil {
			return err
		}
		return eventSync(e0)
	}), "CUDA_ERROR_CAPTURED_EVENT")
	// The host waits for work outside the capture (cuEventSynchronize, a
	// potentially unsafe call): refused in global mode (seen through the
	// executor on the H100: specs/graph/capture-eager-order.yaml before it
	// was made relaxed), allowed in relaxed mode.
	hostWaitOutside := func(s0, s1 cu.Stream, e0, e1 cu.Event) error {
		if err := r.fill(s0, 1); err != nil {
			return err
		}
		if err := r.fill(s1, 2); err != nil {
			return err
		}
		if err := e1.Record(s1); err != nil {
			return err
		}
		return eventSync(e1)
	}
	check("host wait on uncaptured work inside", run("host wait on uncaptured work inside", plan.StreamNonBlocking, hostWaitOutside), "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
	check("host wait on uncaptured work inside, relaxed", runMode("host wait on uncaptured work inside, relaxed", plan.StreamNonBlocking, plan.CaptureRelaxed, hostWaitOutside), "ok")
	// cuMemAlloc inside the capture (a lazy workspace's first use on the
	// capture stream), and with the warm-up before it.
	check("allocation inside", run("allocation inside", plan.StreamNonBlocking, func(s0, s1 cu.Stream, e0, e1 cu.Event) error {
		p, err := memAllocRaw(1 << 20)
		if err == nil {
			memFreeRaw(p)
		}
		return err
	}), "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
	// The legacy default stream while a blocking stream is captured, and
	// while only non-blocking streams are.
	check("legacy inside, blocking capture", run("legacy inside, blocking capture", plan.StreamBlocking, func(s0, s1 cu.Stream, e0, e1 cu.Event) error {
		if err := r.fill(s0, 1); err != nil {
			return err
		}
		return r.fill(legacy, 2)
	}), "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT")
	// The legacy rule holds in relaxed mode too (the mode governs unsafe
	// calls only); an allocation is allowed there.
	check("legacy inside, blocking capture, relaxed", runMode("legacy inside, blocking capture, relaxed", plan.StreamBlocking, plan.CaptureRelaxed, func(s0, s1 cu.Stream, e0, e1 cu.Event) error {
		if err := r.fill(s0, 1); err != nil {
			return err
		}
		return r.fill(legacy, 2)
	}), "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT")
	check("allocation inside, relaxed", runMode("allocation inside, relaxed", plan.StreamNonBlocking, plan.CaptureRelaxed, func(s0, s1 cu.Stream, e0, e1 cu.Event) error {
		p, err := memAllocRaw(1 << 20)
		if err == nil {
			memFreeRaw(p)
		}
		return err
	}), "ok")
	// Merge: s1 runs a capture of its own and waits on an event
	// recorded in s0's.
	check("wait across two captures", run("wait across two captures", plan.StreamNonBlocking, func(s0, s1 cu.Stream, e0, e1 cu.Event) error {
		if err := beginCaptureMode(s1, plan.CaptureGlobal); err != nil {
			return err
		}
		err := r.fill(s0, 1)
		if err == nil {
			err = e0.Record(s0)
		}
		if err == nil {
			err = s1.Wait(e0, 0)
		}
		endCaptureRaw(s1)
		return err
	}), "CUDA_ERROR_STREAM_CAPTURE_MERGE")
	check("legacy inside, non-blocking capture", run("legacy inside, non-blocking capture", plan.StreamNonBlocking, func(s0, s1 cu.Stream, e0, e1 cu.Event) error {
		if err := r.fill(s0, 1); err != nil {
			return err
		}
		return r.fill(legacy, 2)
	}), "ok")
}

// TestRulesCaptureIsolation: the isolation rule (verify.CaptureIsolation)
// against the driver. Inside a capture, a wait on an event recorded on a
// stream that is not capturing (specs/rules/isolation-racy.yaml: a prefetch
// on a side stream between two captured segments, waited for inside the
// second, as in vllm-project/vllm#57785) must fail with
// CUDA_ERROR_STREAM_CAPTURE_ISOLATION and invalidate the capture; the same
// wait before the capture begins (isolation-fixed.yaml) captures a graph.
func TestRulesCaptureIsolation(t *testing.T) {
	r := newRulesRig(t)
	type result struct{ call, end error }
	run := func(name string, body func(s0, s1 cu.Stream, e cu.Event) (result, error)) result {
		var res result
		r.do(t, func(w *worker) error {
			s0, _, err := makeStream(plan.StreamNonBlocking)
			if err != nil {
				return err
			}
			s1, _, err := makeStream(plan.StreamNonBlocking)
			if err != nil {
				return err
			}
			e, _ := cu.MakeEvent(cu.DisableTiming)
			res, err = body(s0, s1, e)
			cu.Synchronize()
			cu.DestroyEvent(&e)
			s0.Destroy()
			s1.Destroy()
			return err
		})
		figure(t, "isolation, %s: wait %v, cuStreamEndCapture %v", name, errName(res.call), errName(res.end))
		return res
	}
	segment := func(s0 cu.Stream) error { // one captured segment, its graph dropped
		if err := beginCaptureMode(s0, plan.CaptureGlobal); err != nil {
			return err
		}
		if err := r.fill(s0, 1); err != nil {
			return err
		}
		_, err := endCaptureRaw(s0)
		return err
	}
	prefetch := func(s1 cu.Stream, e cu.Event) error { // eager work on s1, recorded
		if err := r.fill(s1, 2); err != nil {
			return err
		}
		return e.Record(s1)
	}
	// isolation-racy.yaml: the prefetch between two segments, waited for
	// inside the second.
	racy := run("prefetch between segments, waited for inside the second", func(s0, s1 cu.Stream, e cu.Event) (res result, err error) {
		if err := segment(s0); err != nil {
			return res, err
		}
		if err := prefetch(s1, e); err != nil {
			return res, err
		}
		if err := beginCaptureMode(s0, plan.CaptureGlobal); err != nil {
			return res, err
		}
		if res.call = r.fill(s0, 3); res.call == nil {
			res.call = s0.Wait(e, 0)
		}
		_, res.end = endCaptureRaw(s0)
		return res, nil
	})
	// The prefetch issued inside the capture on the side stream, which has
	// not joined it.
	inside := run("prefetch inside the capture on a stream that did not join", func(s0, s1 cu.Stream, e cu.Event) (res result, err error) {
		if err := beginCaptureMode(s0, plan.CaptureGlobal); err != nil {
			return res, err
		}
		if res.call = r.fill(s0, 3); res.call == nil {
			if res.call = prefetch(s1, e); res.call == nil {
				res.call = s0.Wait(e, 0)
			}
		}
		_, res.end = endCaptureRaw(s0)
		return res, nil
	})
	// isolation-fixed.yaml: the wait before the second capture begins.
	fixed := run("prefetch waited for before the capture begins", func(s0, s1 cu.Stream, e cu.Event) (res result, err error) {
		if err := segment(s0); err != nil {
			return res, err
		}
		if err := prefetch(s1, e); err != nil {
			return res, err
		}
		if err := s0.Wait(e, 0); err != nil {
			return res, err
		}
		if err := beginCaptureMode(s0, plan.CaptureGlobal); err != nil {
			return res, err
		}
		res.call = r.fill(s0, 3)
		_, res.end = endCaptureRaw(s0)
		return res, nil
	})
	// Reported, not asserted: an event the capture stream itself recorded
	// before the capture, waited for inside it.
	run("own record before the capture, waited for inside it", func(s0, s1 cu.Stream, e cu.Event) (res result, err error) {
		if err := r.fill(s0, 2); err != nil {
			return res, err
		}
		if err := e.Record(s0); err != nil {
			return res, err
		}
		if err := beginCaptureMode(s0, plan.CaptureGlobal); err != nil {
			return res, err
		}
		if res.call = r.fill(s0, 3); res.call == nil {
			res.call = s0.Wait(e, 0)
		}
		_, res.end = endCaptureRaw(s0)
		return res, nil
	})
	const iso = "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"
	for name, res := range map[string]result{"between segments": racy, "inside": inside} {
		if errName(res.call) != iso || res.end == nil {
			t.Errorf("%s: wait %s, end %s; the checker predicts %s and an invalidated capture", name, errName(res.call), errName(res.end), iso)
		}
	}
	if fixed.call != nil || fixed.end != nil {
		t.Errorf("wait before the capture: %s, %s; want a graph", errName(fixed.call), errName(fixed.end))
	}
}

// TestRulesCaptureReplayOrder: a stream that joins a capture runs its
// captured work, in a replay, after captured work and the launch only
// (verify.CaptureReplayOrder). Stream s1 joins a capture on s0 (a wait
// on an event recorded there) and fills the buffer with 3 in it; each
// trial issues eager work that fills it with 2 behind 2 ms of spin, then
// launches the graph on s0: declaration order wants the 3 last. "eager":
// the eager work is s1's own, before the launch
// (specs/rules/replay-eager-racy.yaml); "wait": it is s2's, which s1
// waited for during the capture right before the joining wait
// (replay-wait-racy.yaml). Neither order is in the graph, so the replay's
// fill lands first and the 2 stays. With s0 waiting for the eager work's
// record before the launch (the fixed twins: a wait of the capture's
// first stage, issued before cuStreamBeginCapture) the 3 lands last in
// every trial.
func TestRulesCaptureReplayOrder(t *testing.T) {
	r := newRulesRig(t)
	wrong := map[string]int{}
	for _, variant := range []string{"eager", "wait", "eager, fixed", "wait, fixed"} {
		r.do(t, func(w *worker) error {
			var ss [3]cu.Stream
			for i := range ss {
				s, _, err := makeStream(plan.StreamNonBlocking)
				if err != nil {
					return err
				}
				defer s.Destroy()
				ss[i] = s
			}
			s0, s1, s2 := ss[0], ss[1], ss[2]
			var es [4]cu.Event
			for i := range es {
				e, err := cu.MakeEvent(cu.DisableTiming)
				if err != nil {
					return err
				}
				defer cu.DestroyEvent(&e)
				es[i] = e
			}
			head, joined, done, eager := es[0], es[1], es[2], es[3]
			side := s1 // the eager work's stream
			if variant == "wait" || variant == "wait, fixed" {
				side = s2
			}
			warm := func() error { // the eager work, recorded
				if err := r.spin(side); err != nil {
					return err
				}
				if err := r.fill(side, 2); err != nil {
					return err
				}
				return eager.Record(side)
			}
			// The capture: head on s0 (one word), s1 joins, fills, and
			// is joined back.
			if err := warm(); err != nil {
				return err
			}
			if err := cu.Synchronize(); err != nil {
				return err
			}
			if err := beginCaptureMode(s0, plan.CaptureGlobal); err != nil {
				return err
			}
			if err := cu.MemsetD32Async(r.d, 0, 1, s0); err != nil {
				return err
			}
			if err := head.Record(s0); err != nil {
				return err
			}
			if side == s2 {
				if err := s1.Wait(eager, 0); err != nil { // s1 is not capturing yet
					return err
				}
			}
			if err := s1.Wait(head, 0); err != nil { // s1 joins the capture
				return err
			}
			if err := r.fill(s1, 3); err != nil {
				return err
			}
			if err := joined.Record(s1); err != nil {
				return err
			}
			if err := s0.Wait(joined, 0); err != nil {
				return err
			}
			g, err := endCaptureExec(s0)
			if err != nil {
				return err
			}
			defer g.destroy()
			if err := cu.Synchronize(); err != nil {
				return err
			}
			for range rulesTrials {
				if err := warm(); err != nil {
					return err
				}
				if variant == "eager, fixed" || variant == "wait, fixed" {
					if err := s0.Wait(eager, 0); err != nil {
						return err
					}
				}
				if err := g.launch(s0); err != nil {
					return err
				}
				if err := done.Record(s0); err != nil {
					return err
				}
				ok, err := r.deviceAll(w, 3)
				if err != nil {
					return err
				}
				if !ok {
					wrong[variant]++
				}
			}
			return nil
		})
	}
	figure(t, "replay order: a joined stream's own eager work before the launch %d of %d trials wrong (fixed: %d); a wait issued before the joining one %d of %d wrong (fixed: %d)",
		wrong["eager"], rulesTrials, wrong["eager, fixed"], wrong["wait"], rulesTrials, wrong["wait, fixed"])
	if wrong["eager"] == 0 || wrong["wait"] == 0 || wrong["eager, fixed"] != 0 || wrong["wait, fixed"] != 0 {
		t.Errorf("want both racy forms wrong and both fixed ones right, got %v", wrong)
	}
}

// TestRulesPageableAsyncSource: cuMemcpyHtoDAsync from pageable memory
// stages its source when the host calls it, not in stream order
// (NVIDIA/cccl#3814). A host function queued before the copy on the same
// stream, behind 2 ms of work, fills the source: the copy takes the bytes
// of the call, the host function's are lost (specs/rules/pageable-async-
// racy.yaml). From pinned memory the copy reads in stream order, after the
// host function; with a stream synchronization before the copy the host
// function has run (pageable-async-fixed.yaml). Both fixed forms are right
// in every trial. Also reported, not asserted: what a capture does with an
// asynchronous copy from pageable memory.
func TestRulesPageableAsyncSource(t *testing.T) {
	r := newRulesRig(t)
	var s cu.Stream
	r.do(t, func(w *worker) error {
		var err error
		s, _, err = makeStream(plan.StreamNonBlocking)
		return err
	})
	defer r.do(t, func(w *worker) error { return s.Destroy() })
	trial := func(src unsafe.Pointer, hostSync bool) bool {
		var ok bool
		r.do(t, func(w *worker) error {
			setHost(src, 5)
			if err := r.spin(s); err != nil {
				return err
			}
			if _, err := launchHostFunc(s, func() { setHost(src, 7) }, true); err != nil {
				return err
			}
			if hostSync {
				if err := streamSync(s); err != nil {
					return err
				}
			}
			if err := copyHtoDAsync(r.d, src, 4*rulesWords, s); err != nil {
				return err
			}
			var err error
			ok, err = r.deviceAll(w, 7)
			return err
		})
		return ok
	}
	wrong := map[string]int{}
	for range rulesTrials {
		for _, c := range []struct {
			name string
			src  unsafe.Pointer
			sync bool
		}{{"pageable", r.page, false}, {"pinned", r.pinned, false}, {"pageable after a stream sync", r.page, true}} {
			if !trial(c.src, c.sync) {
				wrong[c.name]++
			}
		}
	}
	figure(t, "host function fills the source, then cuMemcpyHtoDAsync on its stream: pageable %d of %d took the old bytes; pinned %d of %d; pageable after a stream sync %d of %d",
		wrong["pageable"], rulesTrials, wrong["pinned"], rulesTrials, wrong["pageable after a stream sync"], rulesTrials)
	if wrong["pageable"] == 0 || wrong["pinned"] != 0 || wrong["pageable after a stream sync"] != 0 {
		t.Errorf("want the pageable source taken at the call, the fixed forms right; got %v", wrong)
	}
	// A capture of the pageable copy: the call, the end, and which bytes a
	// replay copies (those at the capture, 5, or at the launch, 6).
	var call, end error
	got := "no replay"
	r.do(t, func(w *worker) error {
		setHost(r.page, 5)
		if err := beginCaptureMode(s, plan.CaptureGlobal); err != nil {
			return err
		}
		call = copyHtoDAsync(r.d, r.page, 4*rulesWords, s)
		ex, err := endCaptureExec(s)
		end = err
		if err != nil {
			return nil
		}
		defer ex.destroy()
		setHost(r.page, 6)
		if err := r.fill(s, 0); err != nil {
			return err
		}
		if err := ex.launch(s); err != nil {
			got = "launch " + errName(err)
			return nil
		}
		got = "neither"
		for _, v := range []float32{5, 6} {
			if ok, err := r.deviceAll(w, v); err != nil {
				return err
			} else if ok {
				got = fmt.Sprintf("the bytes at the %s", map[float32]string{5: "capture", 6: "launch"}[v])
			}
		}
		return nil
	})
	figure(t, "capture of cuMemcpyHtoDAsync from pageable memory: call %s, end %s, replay copies %s", errName(call), errName(end), got)
}

func errName(err error) string {
	if err == nil {
		return "ok"
	}
	if code, ok := resultCode(err); ok {
		return rawResult(code).Error() // the driver's name (cuGetErrorName), whichever wrapper returned it
	}
	return err.Error()
}

// TestRulesThreads: two host threads. Thread A runs a slow write on its
// stream and records event e; thread B waits on e on its stream and writes.
// Without a handoff B's wait may be issued before A's record and wait for
// nothing (specs/rules/threads-racy.yaml); with a host event (A signals
// after its record, B waits for the signal before its wait) B is ordered
// (specs/rules/threads-fixed.yaml). The racy form forces the unlucky
// interleaving (B first) that the verifier says is possible.
func TestRulesThreads(t *testing.T) {
	r := newRulesRig(t)
	var sa, sb cu.Stream
	var e cu.Event
	r.do(t, func(w *worker) error {
		var err error
		if sa, _, err = makeStream(plan.StreamNonBlocking); err != nil {
			return err
		}
		if sb, _, err = makeStream(plan.StreamNonBlocking); err != nil {
			return err
		}
		e, err = cu.MakeEvent(cu.DisableTiming)
		return err
	})
	defer r.do(t, func(w *worker) error { cu.DestroyEvent(&e); sa.Destroy(); return sb.Destroy() })
	wrong := map[bool]int{}
	for _, handoff := range []bool{false, true} {
		for range rulesTrials {
			// Each thread issues through the worker; the goroutines decide
			// the interleaving of their issues.
			signal := make(chan struct{})
			bFirst := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { // thread A
				defer wg.Done()
				if !handoff {
					<-bFirst
				}
				r.do(t, func(w *worker) error {
					if err := r.spin(sa); err != nil {
						return err
					}
					if err := r.fill(sa, 1); err != nil {
						return err
					}
					return e.Record(sa)
				})
				close(signal)
			}()
			go func() { // thread B
				defer wg.Done()
				if handoff {
					<-signal // the host event
				}
				r.do(t, func(w *worker) error {
					if err := sb.Wait(e, 0); err != nil {
						return err
					}
					return r.fill(sb, 2)
				})
				if !handoff {
					close(bFirst)
				}
			}()
			wg.Wait()
			r.do(t, func(w *worker) error {
				ok, err := r.deviceAll(w, 2)
				if !ok {
					wrong[handoff]++
				}
				return err
			})
		}
	}
	figure(t, "two host threads, B waits on A's event: no handoff %d of %d wrong; host-event handoff %d of %d wrong", wrong[false], rulesTrials, wrong[true], rulesTrials)
	if wrong[false] == 0 || wrong[true] != 0 {
		t.Errorf("want the unhanded wait wrong and the handed-over one right, got %v", wrong)
	}
}
