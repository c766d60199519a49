package planner_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// orderingEdges returns the launch orders a plan's ops give within one
// iteration, by stage name: consecutive launches of a stream, and each
// producer of a wait (lag 0) before the next launch of the waiting stream.
func orderingEdges(p *plan.Plan) map[[2]string]bool {
	edges := map[[2]string]bool{}
	last := make([]int, len(p.Streams))
	for i := range last {
		last[i] = -1
	}
	prod := make([]int, p.Events)
	pending := make([][]int, len(p.Streams))
	for _, so := range p.IssueOrder {
		s := so[0]
		switch o := p.Streams[s].Ops[so[1]]; o.Kind {
		case plan.OpRecord:
			prod[o.Event] = last[s]
		case plan.OpWait:
			if o.Lag == 0 && prod[o.Event] >= 0 {
				pending[s] = append(pending[s], prod[o.Event])
			}
		case plan.OpLaunch:
			v := p.Stages[o.Stage].Name
			for _, u := range pending[s] {
				edges[[2]string{p.Stages[u].Name, v}] = true
			}
			if last[s] >= 0 {
				edges[[2]string{p.Stages[last[s]].Name, v}] = true
			}
			pending[s], last[s] = pending[s][:0], o.Stage
		}
	}
	return edges
}

// chains returns the plan's streams as the names of their stages in order,
// sorted: the stage→stream assignment up to stream numbering.
func chains(p *plan.Plan) []string {
	var out []string
	for _, str := range p.Streams {
		c := ""
		for _, o := range str.Ops {
			if o.Kind == plan.OpLaunch {
				c += p.Stages[o.Stage].Name + " "
			}
		}
		if c != "" {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// TestHazardDAGMatchesHazardPlan: the hazard-dag strategy orders exactly
// what referenceHazardPlan orders (the same chains and waits: every hazard
// edge that stream order does not imply, none other), on the race-free automatically synchronized specs and
// the model specs, pins left out (HazardPlan ignores them), and puts the
// same stages on each stream.
func TestHazardDAGMatchesHazardPlan(t *testing.T) {
	specs := map[string]*dag.Spec{"join": join()}
	for _, pat := range []string{"examples/*.yaml", "seed/*.yaml", "shared-io/*.yaml", "models/*.yaml"} {
		m, _ := filepath.Glob(filepath.Join("..", "specs", pat))
		for _, f := range m {
			s, err := dag.LoadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			specs[f] = s
		}
	}
	compared := 0
	for _, f := range slices.Sorted(maps.Keys(specs)) {
		s := specs[f]
		if s.Sync == dag.SyncManual {
			continue
		}
		s.Stages = slices.Clone(s.Stages)
		for i := range s.Stages {
			s.Stages[i].Stream = ""
		}
		g, err := dag.AllHazards(s)
		if err != nil {
			t.Fatal(err)
		}
		def, err := planner.Build(s, planner.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := referenceHazardPlan(def, g)
		if err != nil {
			t.Fatal(err)
		}
		got, err := planner.Build(s, planner.Options{Strategy: planner.StrategyHazardDAG, Check: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := verify.Verify(got); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if gc, wc := chains(got), chains(want); got.Strategy != string(planner.StrategyHazardDAG) || !slices.Equal(gc, wc) {
			i := 0
			for i < min(len(gc), len(wc)) && gc[i] == wc[i] {
				i++
			}
			t.Errorf("%s: strategy %s, %d streams, HazardPlan %d; first difference: stream %q, HazardPlan's %q", f, got.Strategy, len(gc), len(wc),
				gc[min(i, len(gc)-1)], wc[min(i, len(wc)-1)])
		}
		ge, we := orderingEdges(got), orderingEdges(want)
		for e := range we {
			if !ge[e] {
				t.Errorf("%s: HazardPlan orders %s → %s, the hazard-dag plan does not", f, e[0], e[1])
			}
		}
		for e := range ge {
			if !we[e] {
				t.Errorf("%s: the hazard-dag plan orders %s → %s, HazardPlan does not", f, e[0], e[1])
			}
		}
		// Every hazard edge is an ordering edge but those between two
		// stages of one stream that are not consecutive there (stream
		// order implies them).
		hazards, implied := 0, 0
		prev := map[int]int{} // stage → the stage before it on its stream
		for _, str := range got.Streams {
			last := -1
			for _, o := range str.Ops {
				if o.Kind == plan.OpLaunch {
					prev[o.Stage], last = last, o.Stage
				}
			}
		}
		for v := range g.Len() {
			for _, u := range g.Pred(v) {
				hazards++
				if got.Stages[u].Stream == got.Stages[v].Stream && prev[v] != int(u) {
					implied++
				}
			}
		}
		if len(ge) != hazards-implied {
			t.Errorf("%s: %d ordering edges, %d hazard edges, %d of them implied by stream order", f, len(ge), hazards, implied)
		}
		compared++
	}
	if compared < 2 {
		t.Skip("no automatically synchronized spec under ../specs")
	}
}

// join is a, b → c → d with b → d too: c may follow a or b on its stream
// (HazardPlan takes the stream made first, a's), and d may follow c or b.
func join() *dag.Spec {
	acc := func(b string) []dag.Access { return []dag.Access{{Buffer: b, Bytes: 64}} }
	return &dag.Spec{Name: "join", Sync: dag.SyncAuto,
		Buffers: []dag.BufferSpec{{Name: "x", Bytes: 64}, {Name: "y", Bytes: 64}, {Name: "z", Bytes: 64}},
		Stages: []dag.StageSpec{
			{Name: "a", Kernel: dag.BuiltinSpin, Writes: acc("x")},
			{Name: "b", Kernel: dag.BuiltinSpin, Writes: acc("y")},
			{Name: "c", Kernel: dag.BuiltinSpin, Reads: append(acc("x"), acc("y")...), Writes: acc("z")},
			{Name: "d", Kernel: dag.BuiltinSpin, Reads: append(acc("z"), acc("y")...)},
		}}
}

// referenceHazardPlan, the oracle of TestHazardDAGMatchesHazardPlan, returns a plan of p's stages whose ordering is every edge of the
// hazard DAG, none left out by transitive reduction: run as a graph
// (RunGraph, Prepared.Capture) it is the whole hazard DAG handed to the
// driver, one node per stage and one edge per hazard edge, for the driver to
// schedule.
//
// g is the hazard graph of the spec p was planned from (dag.Hazards, which
// also has its `after:` edges); nil re-derives it from the stages' reads and
// writes, which loses `after:` edges. Stages keep their order and indices.
// Streams are chains built greedily in stage order: a stage goes on the
// stream whose last stage is one of its hazard predecessors (the lowest such
// stream), else on a new stream, so stream order adds no edge that is not a
// hazard edge; every predecessor on another stream is a wait on an event
// recorded right after it (one on the same stream runs first by stream
// order: a wait on its own stream's record would order nothing). The plan passes Validate and Verify; Stats are p's, with Streams,
// Waits and Events recounted (CrossStreamEdges counts hazard edges across
// streams).
func referenceHazardPlan(p *plan.Plan, g *dag.HazardGraph) (*plan.Plan, error) {
	if g == nil {
		s := &dag.Spec{Name: p.Spec, Stages: make([]dag.StageSpec, len(p.Stages))}
		acc := func(in []plan.Access) []dag.Access {
			out := make([]dag.Access, len(in))
			for i, a := range in {
				out[i] = dag.Access{Buffer: a.Buffer, Offset: a.Offset, Bytes: a.Bytes}
			}
			return out
		}
		for i, st := range p.Stages {
			s.Stages[i] = dag.StageSpec{Name: st.Name, Kernel: st.Kernel, Reads: acc(st.Reads), Writes: acc(st.Writes)}
		}
		var err error
		if g, err = dag.AllHazards(s); err != nil {
			return nil, fmt.Errorf("hazard plan: %w", err)
		}
	}
	n := len(p.Stages)
	if g.Len() != n {
		return nil, fmt.Errorf("hazard plan: hazard graph has %d stages, plan has %d", g.Len(), n)
	}
	q := *p
	q.Strategy = string(planner.StrategyHazardDAG)
	q.Stages = append([]plan.Stage(nil), p.Stages...)
	q.Streams, q.IssueOrder, q.Lifetimes, q.Events = nil, nil, nil, 0
	q.Iteration = nil // its streams and events are new; a graph replay is one iteration
	// Pass 1: chains.
	stream := make([]int, n)
	needsEvent := make([]bool, n)
	var tail []int // stream → its last stage so far
	for _, v := range g.Order() {
		st := -1
		for _, u := range g.Pred(int(v)) {
			if s := stream[u]; tail[s] == int(u) && (st < 0 || s < st) {
				st = s
			}
		}
		if st < 0 {
			st = len(tail)
			tail = append(tail, -1)
		}
		stream[v], tail[st] = st, int(v)
		for _, u := range g.Pred(int(v)) {
			if stream[u] != st {
				needsEvent[u] = true
			}
		}
	}
	for s := range tail {
		q.Streams = append(q.Streams, plan.Stream{ID: s, Name: fmt.Sprintf("dag%d", s)})
	}
	// Pass 2: ops in topological order, so every record is issued before
	// the waits on it.
	event := make([]int, n) // stage → event recorded right after it
	waits := 0
	add := func(s int, op plan.Op) {
		q.IssueOrder = append(q.IssueOrder, [2]int{s, len(q.Streams[s].Ops)})
		q.Streams[s].Ops = append(q.Streams[s].Ops, op)
	}
	for _, v := range g.Order() {
		s := stream[v]
		for _, u := range g.Pred(int(v)) {
			if stream[u] != s {
				add(s, plan.Op{Kind: plan.OpWait, Event: event[u]})
				waits++
			}
		}
		add(s, plan.Op{Kind: plan.OpLaunch, Stage: int(v)})
		q.Stages[v].Stream, q.Stages[v].Pinned = s, ""
		if needsEvent[v] {
			event[v] = q.Events
			q.Events++
			add(s, plan.Op{Kind: plan.OpRecord, Event: event[v]})
		}
	}
	q.Stats.Streams = len(q.Streams)
	q.Stats.Waits = waits
	q.Stats.Events = q.Events
	q.Stats.CrossStreamEdges = waits
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("hazard plan: %w", err)
	}
	return &q, nil
}
