package verify_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// TestWithWaitsIsAddWait: adding waits in one pass gives the plan that
// adding them one by one gives (ops, issue order, events).
func TestWithWaitsIsAddWait(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, err := planner.Build(genManual(t), planner.Options{})
		if err != nil {
			t.Fatalf("%v", err)
		}
		cands := candidates(p)
		if len(cands) == 0 {
			return
		}
		var ws [][2]int
		for range rapid.IntRange(0, 5).Draw(t, "waits") {
			ws = append(ws, cands[rapid.IntRange(0, len(cands)-1).Draw(t, "wait")])
		}
		want := verify.ClonePlan(p)
		for _, w := range ws {
			verify.AddWait(want, w[0], w[1])
		}
		got := verify.WithWaits(p, ws)
		if got.Events != want.Events || !slices.Equal(got.IssueOrder, want.IssueOrder) {
			t.Fatalf("waits %v: events %d, issue order %v; want %d, %v", ws, got.Events, got.IssueOrder, want.Events, want.IssueOrder)
		}
		for s := range want.Streams {
			if !slices.Equal(got.Streams[s].Ops, want.Streams[s].Ops) {
				t.Fatalf("waits %v: stream %d ops %v, want %v", ws, s, got.Streams[s].Ops, want.Streams[s].Ops)
			}
		}
	})
}

// interleavedPairs is a hand-synchronized plan of n racing pairs: w_i on
// stream a writes x_i, r_i on stream b reads it, issued w0 r0 w1 r1 …, so
// that each pair needs a wait of its own.
func interleavedPairs(t *testing.T, n int) *plan.Plan {
	t.Helper()
	var st []dag.StageSpec
	for i := range n {
		st = append(st, stage(fmt.Sprint("w", i), on("a"), writes(fmt.Sprint("x", i))), stage(fmt.Sprint("r", i), on("b"), reads(fmt.Sprint("x", i))))
	}
	p, err := planner.Build(manual(spec(st...)), planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFixSearchWorkBound: the fix search does no more work than it
// counted against its bound, falls back to one wait per race when the
// greedy search would pass it (and says so), keeps the greedy set
// unproven when the exact search would, and its fixes order every race.
func TestFixSearchWorkBound(t *testing.T) {
	defer func(w int) { (*verify.FixMaxWork) = w }((*verify.FixMaxWork))
	const n = 300
	p := interleavedPairs(t, n)
	// Per try, 600 ops on 2 streams: (600 + 2w)·3 + 300 steps.
	for _, c := range []struct {
		bound            int
		partial, minimal bool
		waits            int
		want             string
	}{
		{bound: 500_000, partial: true, waits: n, want: "the fix search stopped at its work bound"},       // 300 tries cost more than the bound
		{bound: 2_000_000, waits: n, want: "proving that none fewer do is past the search's work bound"},  // the greedy tries fit, not describing them after an exact search
		{bound: 50_000_000, waits: n, want: "proving that none fewer do is past the search's work bound"}, // the exact search has too many candidate sets
	} {
		(*verify.FixMaxWork) = c.bound
		(*verify.FixSteps).Store(0)
		err := verify.Verify(p)
		re, ok := err.(*verify.RaceError)
		if !ok {
			t.Fatalf("bound %d: %v", c.bound, err)
		}
		if got := (*verify.FixSteps).Load(); got > int64(c.bound) {
			t.Errorf("bound %d: the fix search did %d steps", c.bound, got)
		}
		if re.FixesPartial != c.partial || re.FixesMinimal != c.minimal || len(re.Fixes) != c.waits || len(re.Unfixed) != 0 {
			t.Errorf("bound %d: partial %v, minimal %v, %d fixes, %d unfixed; want %v, %v, %d, 0", c.bound, re.FixesPartial, re.FixesMinimal, len(re.Fixes), len(re.Unfixed), c.partial, c.minimal, c.waits)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("bound %d: report does not say %q:\n%.300s", c.bound, c.want, err)
		}
		var ws [][2]int
		ordered := 0
		for _, f := range re.Fixes {
			ws = append(ws, [2]int{f.After, f.Before})
			ordered += len(f.Races)
		}
		if ordered != len(re.Races) {
			t.Errorf("bound %d: the fixes list %d races of %d", c.bound, ordered, len(re.Races))
		}
		if err := verify.Verify(verify.WithWaits(p, ws)); err != nil {
			t.Errorf("bound %d: the plan with the fixes: %.300v", c.bound, err)
		}
	}
}
