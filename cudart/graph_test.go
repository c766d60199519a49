//go:build cuda

package cudart

// GPU tests of graph mode: checksums of graph mode
// against stream mode and the simulator, the GPU makespan table of the model
// graphs, and timelines of nasnetalarge from timed spans.

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/executor/trace"
	"github.com/dagrun/dagrun/executor/trace/tracepng"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// pytorchGraphMS is the PyTorch time of one CUDA-graph replay of each model
// (one stream, batch 1, median of 20, on the H200), in ms. Copied from the
// column "PyTorch CUDA graph ms" of specs/models/graphs/README.md, the README
// of the operator graphs that specs/models/ were imported from.
var pytorchGraphMS = map[string]float64{
	"inception_v3":       1.76,
	"googlenet":          0.77,
	"resnet50":           0.90,
	"densenet121":        1.85,
	"squeezenet1_1":      0.30,
	"mobilenet_v3_large": 0.52,
	"nasnetalarge":       5.84,
	"inception_v4":       2.92,
}

// fastSimSums runs p on the simulator without delays and with near-zero
// spins (the model graphs spin for ms) and returns its checksums.
func fastSimSums(t testing.TB, p *plan.Plan, iters int) string {
	t.Helper()
	b := sim.New(sim.Options{Seed: 5, MaxDelay: -1, SpinScale: 1e-6})
	defer b.Close()
	return checksums(t, p, b, iters)
}

func outSums(outs []executor.Output) string {
	var s []string
	for _, o := range outs {
		s = append(s, o.Name+"="+o.Checksum)
	}
	return strings.Join(s, " ")
}

func graphSums(t testing.TB, p *plan.Plan, b executor.Backend, iters int) string {
	t.Helper()
	res, err := executor.RunGraph(context.Background(), p, b, executor.Options{Iterations: iters})
	must(t, err)
	return outSums(res.Outputs)
}

// TestGraphMatchesStreams: graph mode gives the checksums
// of stream mode and of the simulator, for the specs in specs/ and 40 random
// DAGs (in-place mixes whose reads are snapshotted by copies, so graphs hold
// memcpy and memset nodes too), with the default, round-robin and hazard-DAG
// plans, over 1 and 3 iterations; also with Profile (event-record nodes).
func TestGraphMatchesStreams(t *testing.T) {
	b := newTB(t, testOptions(t))
	defer func() { must(t, b.Close()) }()
	po := testOptions(t)
	po.Profile = true
	bp := newTB(t, po)
	defer func() { must(t, bp.Close()) }()
	check := func(name string, s *dag.Spec, withSim bool) {
		t.Helper()
		def, err := planner.Build(s, planner.Options{MaxStreams: planner.Uncapped})
		must(t, err)
		if verify.Verify(def) != nil {
			return
		}
		rr, err := planner.Build(s, planner.Options{Strategy: planner.StrategyRoundRobin})
		must(t, err)
		hz := def
		if s.Sync != dag.SyncManual { // manual specs keep their own streams and waits
			hz, err = planner.Build(s, planner.Options{Strategy: planner.StrategyHazardDAG})
			must(t, err)
		}
		must(t, verify.Verify(hz))
		iterations := []int{1, 3}
		if slices.ContainsFunc(def.Buffers, func(b plan.Buffer) bool { return b.Copies > 1 }) {
			iterations = []int{1}
		}
		for _, iters := range iterations {
			want := checksums(t, def, b, iters)
			if withSim {
				if s := fastSimSums(t, def, iters); s != want {
					t.Errorf("%s, %d iterations: cuda streams %s\nsim %s", name, iters, want, s)
				}
			}
			for _, c := range []struct {
				mode string
				p    *plan.Plan
				b    *backend
			}{{"graph", def, b}, {"rr graph", rr, b}, {"hazard-DAG graph", hz, b}, {"profiled graph", def, bp}} {
				if got := graphSums(t, c.p, c.b, iters); got != want {
					t.Errorf("%s, %d iterations: %s %s\nstreams %s", name, iters, c.mode, got, want)
				}
			}
		}
		spans := bp.StageSpans()
		limit := 2 * len(def.Stages)
		if len(def.Captures) > 0 {
			limit = 5 * len(def.Stages) // stages outside the capture regions run eagerly: a span per launch (1 + 3 iterations)
		}
		if len(spans) == 0 || len(spans) > limit {
			t.Errorf("%s: profiled graph runs gave %d stage spans, want 1–2 per stage, or one per eager launch (%d stages)", name, len(spans), len(def.Stages))
		}
	}
	dir := specsDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.yaml"))
	nspec := 0
	for _, f := range files {
		if strings.Contains(f, "models") {
			continue
		}
		s, err := dag.LoadFile(f)
		must(t, err)
		if len(s.Kernels) > 0 {
			continue // user PTX resolves against the spec's folder: TestSpecsMatchSim's business
		}
		if s.Devices > 1 {
			continue // graph mode is one device's (refused for several): TestDevicesSpecs runs them in stream mode
		}
		if slices.ContainsFunc(s.Stages, func(st dag.StageSpec) bool { return st.Stream == "host" }) {
			continue // host stages run at issue time: graph mode rejects them
		}
		if slices.ContainsFunc(s.Streams, func(d dag.StreamSpec) bool {
			return d.Kind == dag.KindLegacy || d.Thread != "" && d.Thread != dag.MainThread
		}) ||
			slices.ContainsFunc(s.Stages, func(st dag.StageSpec) bool { return st.Copy == dag.CopySync }) {
			continue // graph mode refuses the legacy default stream and synchronous copies (not capturable), the executor host threads
		}
		check(f, s, true)
		nspec++
	}
	for _, m := range []string{"squeezenet1_1", "inception_v3"} {
		s, err := dag.LoadFile(filepath.Join(dir, "models", m+".yaml"))
		must(t, err)
		check(m, s, true)
	}
	r := rand.New(rand.NewPCG(4, 2026))
	for i := 0; i < 40; i++ {
		src := randomSpec(r, i, 20+r.IntN(200), 1+r.IntN(8))
		s, err := dag.Load([]byte(src), "generated.yaml", ".")
		must(t, err)
		check(fmt.Sprintf("random dag %d", i), s, true)
	}
	figure(t, "graph mode == stream mode == sim on %d spec files, 2 model graphs and 40 random DAGs (default, rr, hazard-DAG plans; 1 and 3 iterations; profiled too): %v", nspec, !t.Failed())
}

// TestCaptureUnjoined: a stream forked into a capture and not joined back
// makes EndCapture fail with the driver's reason, and the backend stays
// usable.
func TestCaptureUnjoined(t *testing.T) {
	b := newTB(t, testOptions(t))
	defer func() { must(t, b.Close()) }()
	s0, err := b.NewStream()
	must(t, err)
	s1, err := b.NewStream()
	must(t, err)
	e, err := b.NewEvent()
	must(t, err)
	must(t, b.BeginCapture(s0))
	must(t, b.Record(e, s0))
	must(t, b.Wait(s1, e))
	must(t, b.Launch(s1, &executor.LaunchDesc{Name: "lonely", Kernel: dag.BuiltinSpin, Args: map[string]any{"us": 1.0}}))
	g, err := b.EndCapture(s0)
	figure(t, "unjoined capture: %v", err)
	if err == nil {
		b.DestroyGraph(g)
		t.Fatal("EndCapture of an unjoined capture succeeded")
	}
	must(t, b.Synchronize())
	must(t, b.DestroyEvent(e))
	must(t, b.DestroyStream(s0))
	must(t, b.DestroyStream(s1))
	p := planFile(t, filepath.Join(specsDir(t), "seed/three-stage.yaml"), planner.Options{})
	if got, want := graphSums(t, p, b, 2), checksums(t, p, b, 2); got != want {
		t.Errorf("after a failed capture: graph %s, streams %s", got, want)
	}
}

// gpuTimer is a pair of timed events around one iteration.
type gpuTimer struct {
	b          *backend
	start, end cu.Event
}

func newGPUTimer(t testing.TB, b *backend) *gpuTimer {
	tm := &gpuTimer{b: b}
	must(t, b.call("timer events", func(w *worker) error {
		var err error
		if tm.start, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
			return wrap(err, "cuEventCreate")
		}
		tm.end, err = cu.MakeEvent(cu.DefaultEvent)
		return wrap(err, "cuEventCreate")
	}))
	return tm
}

func (tm *gpuTimer) mark(end bool, hs executor.Stream) error {
	s := hs.(*stream)
	ev := tm.start
	if end {
		ev = tm.end
	}
	return tm.b.queue("timer record", func(w *worker) error { return wrap(ev.Record(s.s), "cuEventRecord (timer)") })
}

func (tm *gpuTimer) elapsedUS() (float64, error) {
	var ms float64
	err := tm.b.call("timer elapsed", func(w *worker) error {
		var err error
		ms, err = tm.start.Elapsed(tm.end)
		return wrap(err, "cuEventElapsedTime")
	})
	return ms * 1000, err
}

func (tm *gpuTimer) close() {
	tm.b.call("timer destroy", func(w *worker) error {
		cu.DestroyEvent(&tm.start)
		cu.DestroyEvent(&tm.end)
		return nil
	})
}

const (
	warmReps  = 3
	timedReps = 25
	pipelined = 20
)

// modeStats is one mode's measurement of one plan.
type modeStats struct {
	med, min, max float64 // µs, makespan over timedReps iterations
	hostUS        float64 // stream mode: host time to issue one iteration; graph: one cuGraphLaunch call (medians)
	pipelinedUS   float64 // graph: per replay, pipelined replays back to back
	inGraphUS     float64 // graph: median GPU time from the graph's first node to its last (timed event-record nodes)
	nodes, edges  int     // graph
	sums          string
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	sort.Float64s(y)
	if len(y) == 0 {
		return math.NaN()
	}
	return y[len(y)/2]
}

func summarize(us, host []float64) modeStats {
	return modeStats{med: median(us), min: slices.Min(us), max: slices.Max(us), hostUS: median(host)}
}

func durUS(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// measureStreams times iterations in stream mode: a timed event on stream 0,
// the iteration (fork, ops, join), a timed event on stream 0, synchronize.
func measureStreams(t testing.TB, b *backend, pr *executor.Prepared) modeStats {
	tm := newGPUTimer(t, b)
	defer tm.close()
	s0 := pr.Streams()[0]
	var us, host []float64
	for i := 0; i < warmReps+timedReps; i++ {
		must(t, tm.mark(false, s0))
		t0 := time.Now()
		must(t, pr.Issue())
		must(t, tm.mark(true, s0))
		must(t, b.call("drain", func(*worker) error { return nil }))
		h := time.Since(t0)
		must(t, pr.Synchronize())
		e, err := tm.elapsedUS()
		must(t, err)
		if i >= warmReps {
			us, host = append(us, e), append(host, durUS(h))
		}
	}
	st := summarize(us, host)
	outs, err := pr.Outputs()
	must(t, err)
	st.sums = outSums(outs)
	return st
}

// measureGraph times replays of g: a timed event on stream 0, cuGraphLaunch
// on stream 0 (its host time measured), a timed event, synchronize; then
// pipelined replays back to back between one pair of events.
func measureGraph(t testing.TB, b *backend, pr *executor.Prepared, hg executor.Graph) modeStats {
	g := hg.(*graph)
	tm := newGPUTimer(t, b)
	defer tm.close()
	s0 := pr.Streams()[0]
	var us, host []float64
	for i := 0; i < warmReps+timedReps; i++ {
		must(t, tm.mark(false, s0))
		var h time.Duration
		must(t, b.call("graph launch", func(w *worker) error {
			t0 := time.Now()
			err := w.launchGraph(g, s0.(*stream))
			h = time.Since(t0)
			return err
		}))
		must(t, tm.mark(true, s0))
		must(t, pr.Synchronize())
		e, err := tm.elapsedUS()
		must(t, err)
		if i >= warmReps {
			us, host = append(us, e), append(host, durUS(h))
		}
	}
	st := summarize(us, host)
	must(t, tm.mark(false, s0))
	for range pipelined {
		must(t, pr.LaunchGraph(hg))
	}
	must(t, tm.mark(true, s0))
	must(t, pr.Synchronize())
	e, err := tm.elapsedUS()
	must(t, err)
	st.pipelinedUS = e / pipelined
	st.nodes, st.edges = g.nodes, g.edges
	outs, err := pr.Outputs()
	must(t, err)
	st.sums = outSums(outs)
	return st
}

// measurePlan prepares p on b and measures it in stream mode, graph mode or
// both; Close releases everything before it returns.
func measurePlan(t testing.TB, b *backend, p *plan.Plan, streams, graphs bool) (st, gs modeStats) {
	var markers *gpuTimer // destroyed after the graphs that record them
	defer func() {
		if markers != nil {
			markers.close()
		}
	}()
	pr, err := executor.Prepare(p, b)
	must(t, err)
	defer func() { must(t, pr.Close()) }()
	if streams {
		st = measureStreams(t, b, pr)
	}
	if graphs {
		g, err := pr.Capture()
		must(t, err)
		gs = measureGraph(t, b, pr, g)
		markers = newGPUTimer(t, b)
		gs.inGraphUS = measureInGraph(t, b, pr, markers)
	}
	return st, gs
}

// measureInGraph captures the plan again with a timed event-record node
// first (before the fork) and last (after the join), and returns the median
// of their elapsed time over replays: the replay's GPU time without the
// launch's latency.
func measureInGraph(t testing.TB, b *backend, pr *executor.Prepared, tm *gpuTimer) float64 {
	b.markers = &[2]cu.Event{tm.start, tm.end}
	g, err := pr.Capture()
	b.markers = nil
	must(t, err)
	var us []float64
	for i := 0; i < warmReps+timedReps; i++ {
		must(t, pr.LaunchGraph(g))
		must(t, pr.Synchronize())
		e, err := tm.elapsedUS()
		must(t, err)
		if i >= warmReps {
			us = append(us, e)
		}
	}
	return median(us)
}

// TestMakespan prints the GPU makespan of every model
// graph in specs/models by mode, as one Markdown table, and a table of
// diagnostics. Each node is a mix+spin stage of one thread block that spins
// for the node's measured duration. Run it alone with
//
//	.gpu/cudart.test -test.run 'TestMakespan$' -test.v
//
// (CUDA_DEVICE_MAX_CONNECTIONS sets the hardware queues, 8 by default).
func TestMakespan(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the makespan table takes about a minute")
	}
	files, _ := filepath.Glob(filepath.Join(specsDir(t), "models", "*.yaml"))
	if len(files) == 0 {
		t.Skip("no specs/models")
	}
	b := newTB(t, testOptions(t))
	defer func() { must(t, b.Close()) }()
	conn := os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS")
	if conn == "" {
		conn = "8 (default)"
	}
	var table, diag strings.Builder
	fmt.Fprintf(&table, "GPU makespan by mode on %s, CUDA_DEVICE_MAX_CONNECTIONS=%s: median of %d iterations after %d warm-up, timed events on stream 0 around each iteration (graph: around cuGraphLaunch). Cells: µs · ×critical path · ×one stream.\n\n", b.info.Name, conn, timedReps, warmReps)
	table.WriteString("| model | critical path µs | one stream µs | streams (default plan) | graph (default plan) | rr graph | hazard-DAG graph | PyTorch CUDA graph ms |\n|---|---|---|---|---|---|---|---|\n")
	diag.WriteString("| model | stages | streams default/rr/DAG | graph nodes/edges default/rr/DAG | hazard edges | streams: host µs to issue one iteration | graph: cuGraphLaunch host µs | graph pipelined µs/replay default/rr/DAG | graph first→last node µs default/rr/DAG | graph min–max µs (default) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	start := time.Now()
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		s, err := dag.LoadFile(f)
		must(t, err)
		hg, err := dag.AllHazards(s)
		must(t, err)
		build := func(strategy planner.Strategy) *plan.Plan {
			p, err := planner.Build(s, planner.Options{Strategy: strategy})
			must(t, err)
			must(t, verify.Verify(p))
			return p
		}
		one, def, rr := build(planner.StrategySingle), build(planner.StrategyDefault), build(planner.StrategyRoundRobin)
		hz, err := planner.Build(s, planner.Options{Strategy: planner.StrategyHazardDAG})
		must(t, err)
		want := fastSimSums(t, def, 1)
		oneS, _ := measurePlan(t, b, one, true, false)
		defS, defG := measurePlan(t, b, def, true, true)
		_, rrG := measurePlan(t, b, rr, false, true)
		_, hzG := measurePlan(t, b, hz, false, true)
		cp := def.Stats.CriticalPathUS
		cell := func(m modeStats, what string) string {
			ok := ""
			if m.sums != want {
				ok = " ✗checksum"
				t.Errorf("%s %s: checksums %s, simulator %s", name, what, m.sums, want)
			}
			return fmt.Sprintf("%.0f · %.2f× · %.2f×%s", m.med, m.med/cp, m.med/oneS.med, ok)
		}
		oneCell := fmt.Sprintf("%.0f", oneS.med)
		if oneS.sums != want {
			oneCell += " ✗checksum"
			t.Errorf("%s one stream: checksums %s, simulator %s", name, oneS.sums, want)
		}
		fmt.Fprintf(&table, "| %s | %.0f | %s | %s | %s | %s | %s | %.2f |\n", name, cp, oneCell,
			cell(defS, "streams"), cell(defG, "graph"), cell(rrG, "rr graph"), cell(hzG, "hazard-DAG graph"), pytorchGraphMS[name])
		fmt.Fprintf(&diag, "| %s | %d | %d/%d/%d | %d/%d · %d/%d · %d/%d | %d | %.0f | %.1f | %.0f/%.0f/%.0f | %.0f/%.0f/%.0f | %.0f–%.0f |\n", name, len(def.Stages),
			len(def.Streams), len(rr.Streams), len(hz.Streams), defG.nodes, defG.edges, rrG.nodes, rrG.edges, hzG.nodes, hzG.edges, hg.NumEdges(),
			defS.hostUS, defG.hostUS, defG.pipelinedUS, rrG.pipelinedUS, hzG.pipelinedUS, defG.inGraphUS, rrG.inGraphUS, hzG.inGraphUS, defG.min, defG.max)
	}
	out := table.String() + "\n" + diag.String()
	fmt.Printf("\n%s\n(%.1f s)\n", out, time.Since(start).Seconds())
	figure(t, "\n%s", out)
}

// stageStat summarises the timed spans of one iteration.
type stageStat struct {
	makespan, firstUS                float64 // µs: last end − first start; first start from the origin event
	chain                            int     // stages on the measured critical chain
	chainDur, chainReq, chainGap     float64 // µs: Σ measured durations, Σ requested durations, Σ gaps on it
	gapMed, gapP90, gapMean          float64 // µs: each stage's start − its last predecessor's end
	sumDur, sumReq, meanConc         float64
	maxConc, spans, missing, negGaps int
}

// analyzeSpans explains a makespan from timed spans: preds are the hazard
// predecessors and the previous stage on the same plan stream. The measured
// critical chain walks back from the last stage to end through the
// predecessor that ended last; makespan = first start + Σ durations + Σ gaps
// along it.
func analyzeSpans(p *plan.Plan, hg *dag.HazardGraph, spans []executor.StageSpan) stageStat {
	var st stageStat
	n := len(p.Stages)
	at := make([]*executor.StageSpan, n)
	for i := range spans {
		if s := &spans[i]; s.Stage >= 0 && s.Stage < n && at[s.Stage] == nil {
			at[s.Stage] = s
		}
	}
	prevOnStream := make([]int, n)
	for _, s := range p.Streams {
		prev := -1
		for _, op := range s.Ops {
			if op.Kind == plan.OpLaunch {
				prevOnStream[op.Stage] = prev
				prev = op.Stage
			}
		}
	}
	preds := func(v int) []int {
		var out []int
		for _, u := range hg.Pred(v) {
			out = append(out, int(u))
		}
		if u := prevOnStream[v]; u >= 0 && !slices.Contains(out, u) {
			out = append(out, u)
		}
		return out
	}
	first, last, lastStage := math.Inf(1), math.Inf(-1), -1
	type ev struct {
		t float64
		d int
	}
	var evs []ev
	for v, s := range at {
		if s == nil {
			st.missing++
			continue
		}
		st.spans++
		first = math.Min(first, s.StartUS)
		if s.EndUS > last {
			last, lastStage = s.EndUS, v
		}
		st.sumDur += s.EndUS - s.StartUS
		st.sumReq += p.Stages[v].DurationUS
		evs = append(evs, ev{s.StartUS, 1}, ev{s.EndUS, -1})
	}
	if st.spans == 0 {
		return st
	}
	st.makespan, st.firstUS = last-first, first
	st.meanConc = st.sumDur / st.makespan
	sort.Slice(evs, func(i, j int) bool { return evs[i].t < evs[j].t || evs[i].t == evs[j].t && evs[i].d < evs[j].d })
	c := 0
	for _, e := range evs {
		c += e.d
		st.maxConc = max(st.maxConc, c)
	}
	var gaps []float64
	for v, s := range at {
		if s == nil {
			continue
		}
		end := math.Inf(-1)
		for _, u := range preds(v) {
			if at[u] != nil {
				end = math.Max(end, at[u].EndUS)
			}
		}
		if !math.IsInf(end, -1) {
			g := s.StartUS - end
			if g < 0 {
				st.negGaps++
			}
			gaps = append(gaps, g)
			st.gapMean += g
		}
	}
	if len(gaps) > 0 {
		sort.Float64s(gaps)
		st.gapMed, st.gapP90 = gaps[len(gaps)/2], gaps[len(gaps)*9/10]
		st.gapMean /= float64(len(gaps))
	}
	for v := lastStage; v >= 0; {
		s := at[v]
		st.chain++
		st.chainDur += s.EndUS - s.StartUS
		st.chainReq += p.Stages[v].DurationUS
		u, end := -1, math.Inf(-1)
		for _, w := range preds(v) {
			if at[w] != nil && at[w].EndUS > end {
				u, end = w, at[w].EndUS
			}
		}
		if u >= 0 {
			st.chainGap += s.StartUS - end
		}
		v = u
	}
	return st
}

func (st stageStat) String() string {
	if st.spans == 0 {
		return "no timed spans"
	}
	return fmt.Sprintf("makespan %.0f µs from the first stage's start (which is %.1f µs after the origin event); measured critical chain: %d stages, Σ durations %.0f µs (requested %.0f), Σ gaps %.0f µs (%.2f µs per edge); gap from the last predecessor's end to a stage's start, all stages: median %.2f, p90 %.2f, mean %.2f µs (%d negative); Σ durations %.0f µs (requested %.0f); concurrency mean %.1f, max %d; %d spans, %d stages without one",
		st.makespan, st.firstUS, st.chain, st.chainDur, st.chainReq, st.chainGap, st.chainGap/math.Max(float64(st.chain-1), 1),
		st.gapMed, st.gapP90, st.gapMean, st.negGaps, st.sumDur, st.sumReq, st.meanConc, st.maxConc, st.spans, st.missing)
}

// writeTimeline writes the PNG (1600 px wide) and the Chrome trace of p's
// spans under dir.
func writeTimeline(t testing.TB, dir, base, title string, p *plan.Plan, spans []executor.StageSpan) {
	ts := make([]trace.Span, len(spans))
	for i, s := range spans {
		ts[i] = trace.Span{Name: s.Name, Stage: s.Stage, Stream: p.Stages[s.Stage].Stream, StartUS: s.StartUS, EndUS: s.EndUS}
	}
	tl := trace.FromPlan(p, ts)
	tl.Title += " " + title
	if err := tracepng.Write(tl, filepath.Join(dir, base+".png"), 1600, 0); err != nil {
		t.Errorf("%s.png: %v", base, err)
	}
	f, err := os.Create(filepath.Join(dir, base+".json"))
	must(t, err)
	w := bufio.NewWriter(f)
	if err := tl.WriteChromeTrace(w); err != nil {
		t.Errorf("%s.json: %v", base, err)
	}
	must(t, w.Flush())
	must(t, f.Close())
}

// TestTimelines: timed spans of one iteration of the
// default plan in stream mode and in graph mode, for nasnetalarge and
// inception_v3, with the analysis of where the makespan goes, from two
// sources: timed events (Options.Profile: two event records per stage, in
// graph mode event-record nodes) and kernel timestamps
// (Options.KernelTimestamps: each mix kernel stores its start and end
// %globaltimer, which changes neither the graph nor the issue rate).
// nasnetalarge's timelines from kernel timestamps (from events when the PTX
// has no stamp field) are written as PNG and Chrome trace JSON to
// $DAGRUN_OUT (or a temporary folder).
func TestTimelines(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := filepath.Join(specsDir(t), "models")
	out := os.Getenv("DAGRUN_OUT")
	if out == "" {
		out = t.TempDir()
	}
	oe := testOptions(t)
	oe.Profile = true
	be := newTB(t, oe)
	defer func() { must(t, be.Close()) }()
	ok := testOptions(t)
	ok.KernelTimestamps = true
	bs := newTB(t, ok)
	defer func() { must(t, bs.Close()) }()
	for _, name := range []string{"nasnetalarge", "inception_v3"} {
		s, err := dag.LoadFile(filepath.Join(dir, name+".yaml"))
		if err != nil {
			t.Skip(err)
		}
		hg, err := dag.AllHazards(s)
		must(t, err)
		p, err := planner.Build(s, planner.Options{MaxStreams: planner.Uncapped})
		must(t, err)
		want := fastSimSums(t, p, 1)
		type result struct{ streams, graph []executor.StageSpan }
		var res [2]result
		for k, c := range []struct {
			b    *backend
			what string
		}{{be, "timed events"}, {bs, "kernel timestamps"}} {
			b := c.b
			pr, err := executor.Prepare(p, b)
			must(t, err)
			one := func(issue func() error) []executor.StageSpan {
				must(t, issue())
				must(t, pr.Synchronize())
				b.StageSpans() // warm-up
				must(t, issue())
				outs, err := pr.Outputs()
				must(t, err)
				if got := outSums(outs); got != want {
					t.Errorf("%s with %s: checksums %s, simulator %s", name, c.what, got, want)
				}
				return b.StageSpans()
			}
			res[k].streams = one(pr.Issue)
			figure(t, "%s, stream mode, %s: %s", name, c.what, analyzeSpans(p, hg, res[k].streams))
			g, err := pr.Capture()
			must(t, err)
			res[k].graph = one(func() error { return pr.LaunchGraph(g) })
			figure(t, "%s, graph mode (%d nodes, %d edges), %s: %s", name, g.(*graph).nodes, g.(*graph).edges, c.what, analyzeSpans(p, hg, res[k].graph))
			must(t, pr.Close())
		}
		if name != "nasnetalarge" {
			continue
		}
		src, r := "kernel timestamps", res[1]
		if len(r.streams) < len(p.Stages) || len(r.graph) < len(p.Stages) {
			src, r = "timed events", res[0]
			t.Errorf("kernel timestamps gave %d and %d spans for %d stages: is the PTX older than the stamp field? Drawing the timed events", len(res[1].streams), len(res[1].graph), len(p.Stages))
		}
		writeTimeline(t, out, "timeline-nasnetalarge-streams", "— H200, stream mode, "+src, p, r.streams)
		writeTimeline(t, out, "timeline-nasnetalarge-graph", "— H200, CUDA graph, "+src, p, r.graph)
	}
}
