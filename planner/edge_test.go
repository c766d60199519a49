package planner

import (
	"encoding/json"
	"testing"

	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

func TestEmptySpec(t *testing.T) {
	for _, strat := range []Strategy{"default", "single", "round-robin", "naive", "hazard-dag"} {
		for _, max := range []int{0, 1, 3} {
			p := build(t, spec(), Options{Strategy: strat, MaxStreams: max})
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var q plan.Plan
			if err := json.Unmarshal(b, &q); err != nil {
				t.Fatal(err)
			}
			if len(p.Streams) != 0 || p.Stats.Stages != 0 {
				t.Errorf("%s: %s", strat, b)
			}
		}
	}
	p := build(t, spec(stage("lonely")), Options{MaxStreams: 1})
	if p.Stats.Streams != 1 || p.Stats.Events != 0 {
		t.Errorf("one stage: %s", p.StatsLine())
	}
}

// TestJSONRoundTrip: a plan read back from its JSON prints and verifies the same.
func TestJSONRoundTrip(t *testing.T) {
	p := build(t, loadGraph(t, "googlenet"), Options{MaxStreams: 8})
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q plan.Plan
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(&q); err != nil {
		t.Fatal(err)
	}
	if table(t, p) != table(t, &q) {
		t.Error("the plan read back prints differently")
	}
}
