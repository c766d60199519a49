package executor_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// graphSpecs are the specs the graph tests run: every race-free spec of
// specs/ (but the video pipeline, whose user kernels need their CPU bodies)
// and two model graphs.
func graphSpecs(t *testing.T) []string {
	var files []string
	for _, pat := range []string{"examples/*.yaml", "seed/*.yaml", "shared-io/*.yaml", "models/squeezenet1_1.yaml", "models/inception_v3.yaml"} {
		m, _ := filepath.Glob(filepath.Join("..", "specs", pat))
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Skip("no specs/ here")
	}
	return files
}

func quickSim(seed int64) *sim.Backend {
	return sim.New(sim.Options{Seed: seed, MaxDelay: -1, SpinScale: 1e-6})
}

func sums(outs []executor.Output) string {
	var s []string
	for _, o := range outs {
		s = append(s, o.Name+"="+o.Checksum)
	}
	return strings.Join(s, " ")
}

// TestRunGraphMatchesRun: graph mode (emulated on the simulator, whose race
// detector checks the replays) gives Run's checksums, for the default,
// round-robin and hazard-DAG plans, over 1 and 3 iterations.
func TestRunGraphMatchesRun(t *testing.T) {
	for _, f := range graphSpecs(t) {
		s, err := dag.LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, strategy := range []planner.Strategy{planner.StrategyDefault, planner.StrategyRoundRobin, planner.StrategyHazardDAG} {
			p, err := planner.Build(s, planner.Options{Strategy: strategy})
			if err != nil {
				t.Fatal(err)
			}
			if verify.Verify(p) != nil {
				continue // racy by design
			}
			for _, iters := range []int{1, 3} {
				if iters > 1 && slices.ContainsFunc(p.Buffers, func(b plan.Buffer) bool { return b.Copies > 1 }) {
					continue
				}
				want, err := executor.Run(context.Background(), p, quickSim(1), executor.Options{Iterations: iters})
				if err != nil {
					t.Fatalf("%s %s: Run: %v", f, strategy, err)
				}
				got, err := executor.RunGraph(context.Background(), p, executor.EmulateGraphs(quickSim(2)), executor.Options{Iterations: iters})
				if err != nil {
					t.Fatalf("%s %s: RunGraph: %v", f, strategy, err)
				}
				if sums(got.Outputs) != sums(want.Outputs) {
					t.Errorf("%s %s, %d iterations: graph %s\nstreams %s", f, strategy, iters, sums(got.Outputs), sums(want.Outputs))
				}
				if got.Launches != len(p.Stages)*iters {
					t.Errorf("%s %s: %d launches, want %d", f, strategy, got.Launches, len(p.Stages)*iters)
				}
			}
		}
	}
}

func TestRunGraphErrors(t *testing.T) {
	p := plan2().Plan()
	if _, err := executor.RunGraph(context.Background(), p, quickSim(1), executor.Options{}); !errors.Is(err, executor.ErrNoGraphs) {
		t.Errorf("plain simulator: %v, want ErrNoGraphs", err)
	}
	if _, err := executor.RunGraph(context.Background(), p, executor.EmulateGraphs(quickSim(1)), executor.Options{SyncEach: true}); err == nil || !strings.Contains(err.Error(), "sync-each") {
		t.Errorf("SyncEach: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := executor.RunGraph(ctx, p, executor.EmulateGraphs(quickSim(1)), executor.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestHazardPlan: the hazard-dag strategy's plan is valid and race-free,
// and captured as a graph it has every hazard edge, and nothing else.
func TestHazardPlan(t *testing.T) {
	for _, f := range graphSpecs(t) {
		s, err := dag.LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		g, err := dag.AllHazards(s)
		if err != nil {
			t.Fatal(err)
		}
		p, err := planner.Build(s, planner.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Sync == dag.SyncManual {
			continue // the spec's own streams and waits: no strategy applies
		}
		for _, hg := range []*dag.HazardGraph{g} {
			q, err := planner.Build(s, planner.Options{Strategy: planner.StrategyHazardDAG})
			if err != nil {
				t.Fatal(err)
			}
			if err := verify.Verify(q); err != nil && verify.Verify(p) == nil {
				t.Errorf("%s: hazard plan has races: %v", f, err)
			}
			edges := capturedEdges(t, q)
			want := map[[2]int]bool{}
			for v := range g.Len() {
				for _, u := range g.Pred(v) {
					want[[2]int{int(u), v}] = true
				}
			}
			if hg == nil && len(s.Stages) > 0 && hasAfter(s) {
				continue // after: edges are lost without the spec's graph
			}
			for e := range want {
				if !edges[e] {
					t.Errorf("%s: hazard edge %s → %s is not a graph edge", f, s.Stages[e[0]].Name, s.Stages[e[1]].Name)
				}
			}
			for e := range edges {
				if !want[e] {
					t.Errorf("%s: graph edge %s → %s is no hazard edge", f, s.Stages[e[0]].Name, s.Stages[e[1]].Name)
				}
			}
			if q.Stats.Waits+len(p.Stages)-len(q.Streams) != len(want) {
				t.Errorf("%s: %d waits + %d stream-order edges, want %d hazard edges", f, q.Stats.Waits, len(p.Stages)-len(q.Streams), len(want))
			}
		}
	}
}

func hasAfter(s *dag.Spec) bool {
	for _, st := range s.Stages {
		if len(st.After) > 0 {
			return true
		}
	}
	return false
}

// capturedEdges captures p with the capture checker and returns the edges
// between stages of the graph it recorded.
func capturedEdges(t *testing.T, p *plan.Plan) map[[2]int]bool {
	t.Helper()
	cb := &captureChecker{Backend: quickSim(1)}
	pr, err := executor.Prepare(p, cb)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := pr.Close(); err != nil {
			t.Error(err)
		}
	}()
	g, err := pr.Capture()
	if err != nil {
		t.Fatal(err)
	}
	return g.(*checkedGraph).edges
}

// TestCaptureDiscipline: for every plan, the capture follows CUDA's rules
// (every stream joins from the origin and is joined back before the end; no
// op lands on a stream outside the capture) and the captured graph's edges
// imply every edge of the plan's happens-before order between launches.
func TestCaptureDiscipline(t *testing.T) {
	for _, f := range graphSpecs(t) {
		s, err := dag.LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, strategy := range []planner.Strategy{planner.StrategyDefault, planner.StrategyRoundRobin, planner.StrategyNaive, planner.StrategySingle} {
			p, err := planner.Build(s, planner.Options{Strategy: strategy})
			if err != nil {
				t.Fatal(err)
			}
			edges := capturedEdges(t, p)
			// Stream order between consecutive launches must be an edge.
			for _, st := range p.Streams {
				prev := -1
				for _, op := range st.Ops {
					if op.Kind != plan.OpLaunch {
						continue
					}
					if prev >= 0 && !edges[[2]int{prev, op.Stage}] {
						t.Errorf("%s %s: stream %d order %s → %s is no graph edge", f, strategy, st.ID, p.Stages[prev].Name, p.Stages[op.Stage].Name)
					}
					prev = op.Stage
				}
			}
		}
	}
}

func TestPreparedIssueEqualsRun(t *testing.T) {
	for _, f := range graphSpecs(t) {
		s, err := dag.LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := planner.Build(s, planner.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if verify.Verify(p) != nil || slices.ContainsFunc(p.Buffers, func(b plan.Buffer) bool { return b.Copies > 1 }) {
			continue
		}
		want, err := executor.Run(context.Background(), p, quickSim(3), executor.Options{Iterations: 2})
		if err != nil {
			t.Fatal(err)
		}
		b := executor.EmulateGraphs(quickSim(4))
		pr, err := executor.Prepare(p, b)
		if err != nil {
			t.Fatal(err)
		}
		g, err := pr.Capture()
		if err != nil {
			t.Fatal(err)
		}
		// One iteration by streams, one by the graph.
		if err := pr.Issue(); err != nil {
			t.Fatal(err)
		}
		if err := pr.LaunchGraph(g); err != nil {
			t.Fatal(err)
		}
		outs, err := pr.Outputs()
		if err != nil {
			t.Fatal(err)
		}
		if err := pr.Close(); err != nil {
			t.Fatal(err)
		}
		if sums(outs) != sums(want.Outputs) {
			t.Errorf("%s: stream+graph iterations %s, Run ×2 %s", f, sums(outs), sums(want.Outputs))
		}
	}
}

// captureChecker is a GraphBackend that models CUDA stream capture (the
// rules of cuStreamBeginCapture, cuEventRecord and cuStreamWaitEvent in a
// capture) without running anything: it records the graph's nodes and edges
// and fails on the errors the driver would report.
type captureChecker struct {
	executor.Backend
	on     bool
	origin executor.Stream
	deps   map[executor.Stream][]int // stream in the capture → its current dependency set (node ids)
	evDeps map[executor.Event][]int  // event recorded in the capture → the set it captured
	preds  [][]int                   // node → predecessors
	stage  []int                     // node → stage (-1: none)
	err    error
}

type checkedGraph struct{ edges map[[2]int]bool }

func (c *captureChecker) fail(format string, args ...any) error {
	err := fmt.Errorf("capture checker: "+format, args...)
	if c.err == nil {
		c.err = err
	}
	return err
}

func (c *captureChecker) BeginCapture(s executor.Stream) error {
	if c.on {
		return c.fail("BeginCapture during a capture")
	}
	c.on, c.origin = true, s
	c.deps = map[executor.Stream][]int{s: nil}
	c.evDeps = map[executor.Event][]int{}
	c.preds, c.stage, c.err = nil, nil, nil
	return nil
}

func (c *captureChecker) Launch(s executor.Stream, l *executor.LaunchDesc) error {
	if !c.on {
		return nil
	}
	d, ok := c.deps[s]
	if !ok {
		return c.fail("launch %s on a stream that has not joined the capture (it would run now, outside the graph)", l.Name)
	}
	c.preds = append(c.preds, slices.Clone(d))
	c.stage = append(c.stage, l.Stage)
	c.deps[s] = []int{len(c.preds) - 1}
	return nil
}

func (c *captureChecker) Record(e executor.Event, s executor.Stream) error {
	if !c.on {
		return nil
	}
	d, ok := c.deps[s]
	if !ok {
		return c.fail("record on a stream outside the capture")
	}
	c.evDeps[e] = slices.Clone(d)
	return nil
}

func (c *captureChecker) Wait(s executor.Stream, e executor.Event) error {
	if !c.on {
		return nil
	}
	d, ok := c.evDeps[e]
	if !ok {
		return c.fail("wait on an event not recorded in the capture (CUDA_ERROR_STREAM_CAPTURE_ISOLATION)")
	}
	cur := c.deps[s]
	for _, n := range d {
		if !slices.Contains(cur, n) {
			cur = append(cur, n)
		}
	}
	c.deps[s] = cur
	return nil
}

func (c *captureChecker) EndCapture(s executor.Stream) (executor.Graph, error) {
	if !c.on || s != c.origin {
		return nil, c.fail("EndCapture on a stream that is not the origin")
	}
	c.on = false
	if c.err != nil {
		return nil, c.err
	}
	// Every stream's dependency set must be reachable from the origin's
	// (cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_UNJOINED otherwise).
	reach := map[int]bool{}
	var walk func(n int)
	walk = func(n int) {
		if reach[n] {
			return
		}
		reach[n] = true
		for _, p := range c.preds[n] {
			walk(p)
		}
	}
	for _, n := range c.deps[s] {
		walk(n)
	}
	for st, d := range c.deps {
		for _, n := range d {
			if !reach[n] {
				return nil, c.fail("a stream (%v) was not joined back into the origin: node of stage %d is unjoined", st, c.stage[n])
			}
		}
	}
	g := &checkedGraph{edges: map[[2]int]bool{}}
	for v, ps := range c.preds {
		for _, u := range ps {
			g.edges[[2]int{c.stage[u], c.stage[v]}] = true
		}
	}
	return g, nil
}

func (c *captureChecker) LaunchGraph(executor.Graph, executor.Stream) error { return nil }
func (c *captureChecker) DestroyGraph(executor.Graph) error                 { return nil }
