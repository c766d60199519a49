package planner_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

func threeStage(t *testing.T) *dag.Spec {
	t.Helper()
	s, err := dag.LoadFile(filepath.Join("..", "specs", "seed", "three-stage.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A negative MemoryBudget other than BudgetAuto and BudgetNone means
// nothing: Build refuses it, as the CLI refuses --memory-budget -5,
// instead of planning without a budget. BudgetAuto and BudgetNone plan.
func TestNegativeMemoryBudget(t *testing.T) {
	for _, b := range []int64{-5, planner.BudgetNone - 1} {
		_, err := planner.Build(threeStage(t), planner.Options{MemoryBudget: b})
		if err == nil || !strings.Contains(err.Error(), "Options.MemoryBudget") {
			t.Errorf("Build with MemoryBudget %d: %v; want an error naming Options.MemoryBudget and the values it takes", b, err)
		}
	}
	for _, b := range []int64{planner.BudgetAuto, planner.BudgetNone, 0, 1 << 30} {
		if _, err := planner.Build(threeStage(t), planner.Options{MemoryBudget: b}); err != nil {
			t.Errorf("Build with MemoryBudget %d: %v", b, err)
		}
	}
}

// DumpAfter without a Dump writer would dump nothing: Build refuses it
// rather than ignoring the option.
func TestDumpAfterWithoutDump(t *testing.T) {
	if _, err := planner.Build(threeStage(t), planner.Options{DumpAfter: "sync"}); err == nil || !strings.Contains(err.Error(), "Options.Dump") {
		t.Errorf("Build with DumpAfter \"sync\" and a nil Dump: %v; want an error naming Options.Dump", err)
	}
	var b strings.Builder
	if _, err := planner.Build(threeStage(t), planner.Options{DumpAfter: "sync", Dump: &b}); err != nil || b.Len() == 0 {
		t.Errorf("Build with DumpAfter \"sync\" and a Dump: %v, %d bytes dumped", err, b.Len())
	}
}

// Build's option errors name the Go field beside the command line's flag.
func TestDumpAfterErrorInGoTerms(t *testing.T) {
	_, err := planner.Build(threeStage(t), planner.Options{DumpAfter: "nope", Dump: &strings.Builder{}})
	if err == nil || !strings.Contains(err.Error(), "Options.DumpAfter") {
		t.Errorf("Build with DumpAfter \"nope\": %v; want an error that names Options.DumpAfter", err)
	}
}
