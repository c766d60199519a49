package dagrun_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dagrun/dagrun"
)

// TestErrorsWithRootImportOnly: the typed errors of Plan and Run are
// told apart with errors.As and errors.Is through the root package's
// names alone (this file imports no other package of the module): an
// unmeetable memory budget is a *BudgetError with its figures, a race the
// simulator's detector sees a *RunRaceError with the races, and a build
// without the cuda tag ErrNotSupported.
func TestErrorsWithRootImportOnly(t *testing.T) {
	// b reads x and y together: 2048 bytes live at once in every plan.
	b := dagrun.NewSpec("over-budget")
	x, y := b.Buffer("x", 1024), b.Buffer("y", 1024)
	o := b.Buffer("o", 1024).Output()
	b.Stage("a", "fill").Writes(x).Arg("value", 1.0)
	b.Stage("a2", "fill").Writes(y).Arg("value", 2.0)
	b.Stage("b", "mix").Reads(x, y).Writes(o)
	_, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{MemoryBudget: 1024})
	var be *dagrun.BudgetError
	if !errors.As(err, &be) || be.Budget != 1024 || be.Arena != 2048 {
		t.Errorf("Plan over budget: %v; want a *dagrun.BudgetError of 1024 bytes asked, 2048 reached", err)
	}

	s, err := dagrun.Load("specs/seed/two-writers-racy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := dagrun.Plan(s, dagrun.PlanOptions{})
	res, err := dagrun.Run(context.Background(), p, dagrun.RunOptions{Backend: dagrun.BackendSim})
	var re *dagrun.RunRaceError
	if !errors.As(err, &re) || res == nil || len(re.Races) != len(res.Races) || len(re.Races) == 0 {
		t.Errorf("Run of a racy plan: %v; want a *dagrun.RunRaceError with the races of RunResult.Races", err)
	}

	if _, why := dagrun.AutoBackend(); strings.Contains(why, "cuda tag") {
		_, err := dagrun.NewBackend(dagrun.BackendCUDA, dagrun.RunOptions{})
		if !errors.Is(err, dagrun.ErrNotSupported) || errors.Is(err, dagrun.ErrNoDevice) {
			t.Errorf("cuda without the cuda tag: %v; want an error wrapping dagrun.ErrNotSupported", err)
		}
	}
}
