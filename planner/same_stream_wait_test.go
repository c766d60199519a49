package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
	"pgregory.net/rapid"
)

// strategies is every strategy Build takes.
var strategies = []Strategy{StrategyDefault, StrategyNaive, StrategyRoundRobin, StrategySingle, StrategyHazardDAG}

// sameStreamWaits lists p's waits on an event recorded on the waiting
// stream: a wait that orders nothing, stream order does. A lagged wait
// counts when its iteration runs on the same physical stream (its lag a
// multiple of the plan's stream sets).
func sameStreamWaits(p *plan.Plan) []string {
	recordedOn := make([]map[int]bool, p.Events)
	for s, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == plan.OpRecord {
				if recordedOn[o.Event] == nil {
					recordedOn[o.Event] = map[int]bool{}
				}
				recordedOn[o.Event][s] = true
			}
		}
	}
	sets := 1
	if p.Iteration != nil {
		sets = max(p.Iteration.StreamSets, 1)
	}
	var out []string
	for s, str := range p.Streams {
		for j, o := range str.Ops {
			if o.Kind == plan.OpWait && o.Lag%sets == 0 && recordedOn[o.Event][s] {
				out = append(out, fmt.Sprintf("stream %s op %d: wait e%d (lag %d), recorded on the same stream", str.Name, j, o.Event, o.Lag))
			}
		}
	}
	return out
}

// waitWarnings is Warnings(p) without the unwritten-output ones: what it
// says about p's waits.
func waitWarnings(p *plan.Plan) []string {
	var out []string
	for _, w := range verify.Warnings(p) {
		if !strings.Contains(w, "reads back as zeros") && !strings.Contains(w, "no stage writes") {
			out = append(out, w)
		}
	}
	return out
}

// No strategy plans a wait on its own stream's record, and the check of a
// planned plan warns of none of its waits (the hazard-dag strategy's waits
// on implied hazard edges are its design); the default strategy's waits
// stay at the lower bound. Random specs (after: edges, pins, ring copies,
// stream sets, caps) and the model graphs.
func TestPropertyNoSameStreamWait(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pins := rapid.Bool().Draw(t, "pins")
		s := genSpec(t, true, pins)
		for i := range s.Buffers {
			s.Buffers[i].Copies = rapid.IntRange(0, 2).Draw(t, "copies")
		}
		o := Options{
			Strategy:   rapid.SampledFrom(strategies).Draw(t, "strategy"),
			MaxStreams: drawCap(t, 4),
			StreamSets: rapid.IntRange(0, 2).Draw(t, "sets"),
		}
		p := mustBuild(t, s, o)
		if bad := sameStreamWaits(p); len(bad) > 0 {
			var b strings.Builder
			p.WriteTable(&b)
			t.Fatalf("%s\n%s\n%s", strings.Join(bad, "\n"), describe(s), b.String())
		}
		if o.Strategy != StrategyNaive { // naive waits on every cross-stream edge by design
			if w := waitWarnings(p); len(w) > 0 {
				var b strings.Builder
				p.WriteTable(&b)
				t.Fatalf("check warns of a planned plan's waits:\n%s\n%s\n%s", strings.Join(w, "\n"), describe(s), b.String())
			}
		}
		if o.Strategy == StrategyDefault && o.MaxStreams == Uncapped && !pins && p.Stats.Waits > p.Stats.LowerBoundWaits {
			t.Fatalf("default strategy: waits %d > lower bound %d", p.Stats.Waits, p.Stats.LowerBoundWaits)
		}
	})
}

func TestModelGraphsNoSameStreamWait(t *testing.T) {
	if testing.Short() {
		t.Skip("plans eight model graphs five ways")
	}
	for _, ref := range graphRefs {
		s := loadGraph(t, ref.model)
		for _, strategy := range strategies {
			p := build(t, s, Options{Strategy: strategy, MaxStreams: Uncapped})
			if bad := sameStreamWaits(p); len(bad) > 0 {
				t.Errorf("%s, strategy %s: %d waits on their own stream's record, first %s", ref.model, strategy, len(bad), bad[0])
			}
			if w := waitWarnings(p); len(w) > 0 && strategy != StrategyNaive {
				t.Errorf("%s, strategy %s: %d warnings on the plan's waits, first %s", ref.model, strategy, len(w), w[0])
			}
			if strategy == StrategyDefault && p.Stats.Waits > p.Stats.LowerBoundWaits {
				t.Errorf("%s: default strategy: waits %d > lower bound %d", ref.model, p.Stats.Waits, p.Stats.LowerBoundWaits)
			}
		}
	}
}
