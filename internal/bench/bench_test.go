package bench

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// TestBenchVerifyDeadlock: bench memory counts a plan's races but fails on
// a plan that deadlocks (a collective's ranks with a launch issued between
// them): a plan that never completes has no memory figures.
func TestBenchVerifyDeadlock(t *testing.T) {
	rank := func(r int) *plan.Collective {
		return &plan.Collective{Group: 0, Op: "all_reduce", Reduce: "sum", Rank: r, Ranks: 2}
	}
	acc := func(b string) []plan.Access { return []plan.Access{{Buffer: b, Bytes: 64}} }
	p := &plan.Plan{Version: 1, Devices: 2,
		Buffers: []plan.Buffer{{Name: "x", Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleTemp, Device: 1},
			{Name: "g0", Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleTemp},
			{Name: "g1", Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleTemp, Device: 1}},
		Stages: []plan.Stage{
			{Name: "r/0", Stream: 0, Kernel: "all_reduce", Args: map[string]any{"op": "sum"}, Reads: acc("g0"), Writes: acc("g0"), Collective: rank(0)},
			{Name: "between", Stream: 1, Kernel: "fill", Args: map[string]any{"value": 1.0}, Writes: acc("x")},
			{Name: "r/1", Stream: 1, Kernel: "all_reduce", Args: map[string]any{"op": "sum"}, Reads: acc("g1"), Writes: acc("g1"), Collective: rank(1)},
		},
		Streams: []plan.Stream{
			{ID: 0, Name: "s0", Ops: []plan.Op{{Kind: plan.OpLaunch, Stage: 0}}},
			{ID: 1, Name: "s1", Device: 1, Ops: []plan.Op{{Kind: plan.OpLaunch, Stage: 1}, {Kind: plan.OpLaunch, Stage: 2}}},
		},
		IssueOrder: [][2]int{{0, 0}, {1, 0}, {1, 1}},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err := countRaces(verify.Verify(p))
	var re *verify.RaceError
	if !errors.As(err, &re) || len(re.Deadlocks) == 0 || !strings.Contains(err.Error(), "DEADLOCK") {
		t.Fatalf("countRaces: %v, want the deadlock", err)
	}
	// In issue order the ranks are one group: no error.
	p.IssueOrder = [][2]int{{1, 0}, {0, 0}, {1, 1}}
	if races, err := countRaces(verify.Verify(p)); err != nil || races != 0 {
		t.Fatalf("ranks consecutive: %d races, %v", races, err)
	}
}

// TestBenchMemoryDefaultPlan: bench memory's default plan is the plan
// `dagrun plan` makes with no options (Plan's defaults, the default
// stream cap among them), on one device and on several; its one-stream
// plan stays one stream per device.
func TestBenchMemoryDefaultPlan(t *testing.T) {
	for _, f := range []string{"specs/models/squeezenet1_1.yaml", "specs/models/googlenet.yaml", "specs/multigpu/data-parallel-4.yaml"} {
		s, err := dagrun.Load("../../" + f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Memory(context.Background(), s, false)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		p, err := dagrun.Plan(s, dagrun.PlanOptions{MemoryBudget: dagrun.BudgetNone})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if m.Streams != p.Stats.Streams || m.ArenaBytes != p.Stats.ArenaBytes || m.MakespanUS != p.Stats.IdealMakespanUS {
			t.Errorf("%s: bench memory's default plan: %d streams, arena %d bytes, ideal makespan %.1f µs; dagrun plan's: %d, %d, %.1f",
				f, m.Streams, m.ArenaBytes, m.MakespanUS, p.Stats.Streams, p.Stats.ArenaBytes, p.Stats.IdealMakespanUS)
		}
		if m.Streams > dagrun.DefaultMaxStreams*m.Devices {
			t.Errorf("%s: %d streams over the default cap of %d per device (%d devices)", f, m.Streams, dagrun.DefaultMaxStreams, m.Devices)
		}
	}
}
