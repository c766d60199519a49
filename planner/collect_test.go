package planner

import (
	"runtime"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/synth"
)

// Build collects garbage twice on a spec of collectAt stages or more
// (once the spec is let go, once the passes are done), and not at all on a
// smaller one or where the budget loop keeps the spec.
func TestBuildCollectsWhereMemoryDies(t *testing.T) {
	defer func(n int) { collectAt = n }(collectAt)
	collectAt = 2000
	forced := func(s *dag.Spec, o Options) uint32 {
		t.Helper()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := Build(s, o); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.NumForcedGC - before.NumForcedGC
	}
	if n := forced(synth.Layered(3000), Options{}); n != 2 {
		t.Errorf("3000 stages: %d forced collections, want 2", n)
	}
	if n := forced(synth.Layered(1000), Options{}); n != 0 {
		t.Errorf("1000 stages: %d forced collections, want 0", n)
	}
	// Under a budget the spec stays for re-planning: only the collection
	// after the passes runs.
	if n := forced(synth.Layered(3000), Options{MemoryBudget: BudgetAuto}); n != 1 {
		t.Errorf("3000 stages, memory budget auto: %d forced collections, want 1", n)
	}
}
