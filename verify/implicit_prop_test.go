package verify_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
	"pgregory.net/rapid"
)

// genKindsSpec draws a genSpec with pins, gives the pinned streams random
// kinds (at most one legacy default stream, one per-thread default
// stream), and adds host memory: a pageable buffer copied synchronously to
// the device when there is a default stream, a pinned buffer that a
// host-function stage fills on a device stream and a host stage sums.
func genKindsSpec(t *rapid.T) *dag.Spec {
	s := genSpec(t, true, true)
	kinds := []string{dag.KindNonBlocking, dag.KindBlocking, dag.KindLegacy, dag.KindPerThread}
	used := map[string]bool{}
	for _, st := range s.Stages {
		if st.Stream != "" {
			used[st.Stream] = true
		}
	}
	var def string
	taken := map[string]bool{}
	for p := range 3 {
		name := fmt.Sprintf("p%d", p)
		k := kinds[rapid.IntRange(0, 3).Draw(t, "kind")]
		if taken[k] && (k == dag.KindLegacy || k == dag.KindPerThread) {
			k = dag.KindBlocking
		}
		taken[k] = true
		if (k == dag.KindLegacy || k == dag.KindPerThread) && def == "" {
			def = name
		}
		s.Streams = append(s.Streams, dag.StreamSpec{Name: name, Kind: k, Thread: dag.MainThread})
	}
	if rapid.Bool().Draw(t, "ring") {
		s.Buffers[0].Copies = 2 // a ring: the iterate pass would give iterations stream sets
	}
	s.Buffers = append(s.Buffers,
		dag.BufferSpec{Name: "g", Bytes: 64, Where: dag.WhereHostPageable},
		dag.BufferSpec{Name: "h", Bytes: 64, Where: dag.WhereHostPinned},
		dag.BufferSpec{Name: "sum", Bytes: 8, Where: dag.WhereHostPinned})
	at := func(label string) int { return rapid.IntRange(0, len(s.Stages)).Draw(t, label) }
	insert := func(i int, st dag.StageSpec) {
		s.Stages = append(s.Stages[:i], append([]dag.StageSpec{st}, s.Stages[i:]...)...)
	}
	whole := func(b string, n int64) []dag.Access { return []dag.Access{{Buffer: b, Bytes: n}} }
	if def != "" {
		mode := []string{dag.CopySync, dag.CopyAsync}[rapid.IntRange(0, 1).Draw(t, "copy mode")]
		insert(at("upload at"), dag.StageSpec{Name: "upload", Kernel: dag.BuiltinCopy, Copy: mode, Stream: def, Reads: whole("g", 64), Writes: whole("b0", 64)})
		insert(at("refill at"), dag.StageSpec{Name: "refill", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 1.0}, Stream: dag.HostStream, Writes: whole("g", 64)})
	}
	dev := fmt.Sprintf("p%d", rapid.IntRange(0, 2).Draw(t, "host func stream"))
	insert(at("cb at"), dag.StageSpec{Name: "cb", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 2.0}, HostFunc: true, Stream: dev, Writes: whole("h", 64)})
	insert(at("total at"), dag.StageSpec{Name: "total", Kernel: dag.BuiltinChecksum, Stream: dag.HostStream, Reads: whole("h", 64), Writes: whole("sum", 8)})
	// Declared streams must be used.
	for p := range 3 {
		if name := fmt.Sprintf("p%d", p); !used[name] && name != dev && name != def {
			s.Stages = append(s.Stages, dag.StageSpec{Name: "use-" + name, Kernel: dag.BuiltinSpin, Stream: name})
		}
	}
	return s
}

// TestPlansRaceFreeWithKinds: the planner's plans of specs that mix stream
// kinds, synchronous and asynchronous copies from pageable memory, host
// functions and host stages verify race-free under CUDA's implicit order,
// for every strategy.
func TestPlansRaceFreeWithKinds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genKindsSpec(t)
		for _, strategy := range []planner.Strategy{planner.StrategyDefault, planner.StrategyNaive, planner.StrategyRoundRobin} {
			p := mustBuild(t, s, planner.Options{Strategy: strategy})
			if err := p.Validate(); err != nil {
				t.Fatalf("%s: %v", strategy, err)
			}
		}
	})
}

// TestPlansRaceFreeWithCaptures: specs of TestPlansRaceFreeWithKinds with
// a capture region on one of their pinned streams plan race-free for
// every strategy, and the planner's waits keep the isolation and join
// rules; the rules the spec's own stages break (a host stage or a
// synchronous copy during the capture, say) are the capture checker's to
// report, and each violation it reports names a stage of the plan. A spec
// whose captured work must wait for work that follows the capture through
// a host stage has no plan: Build's spec error names both stages.
func TestPlansRaceFreeWithCaptures(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genKindsSpec(t)
		on := map[string][]string{}
		for _, st := range s.Stages {
			if st.Stream != "" && st.Stream != dag.HostStream {
				on[st.Stream] = append(on[st.Stream], st.Name)
			}
		}
		var streams []string
		for _, d := range s.Streams {
			if len(on[d.Name]) > 0 && d.Kind != dag.KindLegacy {
				streams = append(streams, d.Name)
			}
		}
		if len(streams) == 0 {
			t.Skip("no stream to capture")
		}
		cs := streams[rapid.IntRange(0, len(streams)-1).Draw(t, "capture stream")]
		names := on[cs]
		f := rapid.IntRange(0, len(names)-1).Draw(t, "first")
		l := rapid.IntRange(f, len(names)-1).Draw(t, "last")
		mode := []string{"", dag.CaptureThreadLocal, dag.CaptureRelaxed}[rapid.IntRange(0, 2).Draw(t, "mode")]
		s.Captures = []dag.CaptureSpec{{Stream: cs, First: names[f], Last: names[l], Mode: mode}}
		stages := map[string]bool{}
		for _, st := range s.Stages {
			stages[st.Name] = true
		}
		for _, strategy := range []planner.Strategy{planner.StrategyDefault, planner.StrategyNaive, planner.StrategyRoundRobin} {
			p, err := planner.Build(s, planner.Options{Strategy: strategy}) // not Check: a capture violation is the checker's verdict, not a Build failure
			var se dag.ErrorList
			if errors.As(err, &se) && strings.Contains(err.Error(), "CUDA_ERROR_STREAM_CAPTURE_ISOLATION") {
				for _, e := range se[:min(len(se), dag.MaxErrors)] { // not the "more errors not shown" entry
					var x, y string
					if _, serr := fmt.Sscanf(e.Msg, "stage %s which", &x); serr != nil || !stages[strings.TrimSuffix(x, ",")] {
						t.Fatalf("%s: Build: %v: names no stage first", strategy, err)
					}
					if i := strings.Index(e.Msg, "must wait for stage "); i < 0 {
						t.Fatalf("%s: Build: %v: names no stage waited for", strategy, err)
					} else if fmt.Sscanf(e.Msg[i:], "must wait for stage %s", &y); !stages[y] {
						t.Fatalf("%s: Build: %v: %q is not a stage", strategy, err, y)
					}
				}
				continue
			}
			if errors.As(err, &se) && strings.Contains(err.Error(), "is issued while the capture is under way but not taken by it") {
				// The replay order rule's refusal: no wait of the first
				// stage comes after the work a captured stage needs.
				for _, e := range se[:min(len(se), dag.MaxErrors)] { // not the "more errors not shown" entry
					var x, y string
					if _, serr := fmt.Sscanf(e.Msg, "stage %s which", &x); serr != nil || !stages[strings.TrimSuffix(x, ",")] {
						t.Fatalf("%s: Build: %v: names no stage first", strategy, err)
					}
					if i := strings.Index(e.Msg, " needs stage "); i < 0 {
						t.Fatalf("%s: Build: %v: names no stage needed", strategy, err)
					} else if fmt.Sscanf(e.Msg[i:], " needs stage %s", &y); !stages[y] {
						t.Fatalf("%s: Build: %v: %q is not a stage", strategy, err, y)
					}
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: Build: %v", strategy, err)
			}
			err = verify.Verify(p)
			var re *verify.RaceError
			if err != nil && !errors.As(err, &re) {
				t.Fatalf("%s: Verify: %v", strategy, err)
			}
			if re != nil && len(re.Races) > 0 {
				t.Fatalf("%s: %d races: %v", strategy, len(re.Races), err)
			}
			for _, v := range verify.CheckCaptures(p) {
				if !stages[v.Stage] {
					t.Fatalf("%s: violation names %q, not a stage: %v", strategy, v.Stage, v)
				}
				if v.Rule == verify.CaptureIsolation || v.Rule == verify.CaptureUnjoined {
					t.Fatalf("%s: the planner's own waits break a capture rule: %v\n%s", strategy, v, ops(p))
				}
			}
		}
	})
}
