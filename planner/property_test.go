package planner

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
	"pgregory.net/rapid"
)

func mustBuild(t *rapid.T, s *dag.Spec, o Options) *plan.Plan {
	o.Check = true
	p, err := Build(s, o)
	if err != nil {
		t.Fatalf("Build(%+v): %v", o, err)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatalf("Verify(%+v): %v", o, err)
	}
	return p
}

// countErr reports how p's stats or iteration info disagree with what p
// contains: Build's contract is that every plan has iteration info, that
// Stats.Waits + Iteration.CrossWaits counts its wait ops (lag 0 and lagged),
// and Stats.Events its events.
func countErr(p *plan.Plan) error {
	if p.Iteration == nil {
		return fmt.Errorf("no iteration info")
	}
	waits, lagged := 0, 0
	for _, str := range p.Streams {
		for _, o := range str.Ops {
			switch {
			case o.Kind == plan.OpWait && o.Lag > 0:
				lagged++
			case o.Kind == plan.OpWait:
				waits++
			}
		}
	}
	if p.Stats.Waits != waits || p.Iteration.CrossWaits != lagged || p.Stats.Events != p.Events || p.Stats.Streams != len(p.Streams) {
		return fmt.Errorf("stats: %d waits, %d cross waits, %d events, %d streams; plan: %d, %d, %d, %d",
			p.Stats.Waits, p.Iteration.CrossWaits, p.Stats.Events, p.Stats.Streams, waits, lagged, p.Events, len(p.Streams))
	}
	return nil
}

// drawCap draws a stream cap for Options.MaxStreams: Uncapped or 1 to max.
func drawCap(t *rapid.T, max int) int {
	if c := rapid.IntRange(0, max).Draw(t, "max"); c > 0 {
		return c
	}
	return Uncapped
}

// Every plan of every strategy, cap, shuffle, ring size and stream sets
// validates, verifies across iterations, and counts what it contains.
func TestPropertyPlansVerify(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSpec(t, true, rapid.Bool().Draw(t, "pins"))
		for i := range s.Buffers {
			s.Buffers[i].Copies = rapid.IntRange(0, 3).Draw(t, "copies")
		}
		o := Options{
			Strategy:    rapid.SampledFrom([]Strategy{"default", "naive", "round-robin", "single", "hazard-dag"}).Draw(t, "strategy"),
			MaxStreams:  drawCap(t, 5),
			ShuffleSeed: rapid.Int64Range(0, 3).Draw(t, "shuffle"),
			StreamSets:  rapid.IntRange(0, 2).Draw(t, "sets"),
		}
		p := mustBuild(t, s, o)
		if err := countErr(p); err != nil {
			t.Fatal(err)
		}
		if o.MaxStreams > 0 && len(p.Streams) > o.MaxStreams && o.Strategy != StrategyHazardDAG {
			pinned := map[string]bool{}
			for _, st := range s.Stages {
				if st.Stream != "" {
					pinned[st.Stream] = true
				}
			}
			if len(pinned) < o.MaxStreams {
				var b strings.Builder
				p.WriteTable(&b)
				t.Fatalf("%d streams over the cap %d (pins: %d)\n%s\n%s", len(p.Streams), o.MaxStreams, len(pinned), describe(s), b.String())
			}
		}
		if p.Stats.IdealMakespanUS < p.Stats.CriticalPathUS-1e-9 {
			t.Fatalf("ideal makespan %v below the critical path %v", p.Stats.IdealMakespanUS, p.Stats.CriticalPathUS)
		}
	})
}

// Uncapped, unpinned default plans meet Nimble's bound and the critical
// path, and need no more waits than the naive baseline.
func TestPropertyDefaultOptimal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSpec(t, true, false)
		seed := rapid.Int64Range(0, 3).Draw(t, "shuffle")
		p := mustBuild(t, s, Options{MaxStreams: Uncapped, ShuffleSeed: seed})
		naive := mustBuild(t, s, Options{Strategy: "naive", ShuffleSeed: seed})
		st := p.Stats
		if st.Waits > st.LowerBoundWaits {
			t.Fatalf("waits %d > lower bound %d", st.Waits, st.LowerBoundWaits)
		}
		if math.Abs(st.IdealMakespanUS-st.CriticalPathUS) > 1e-9 {
			t.Fatalf("ideal makespan %v ≠ critical path %v", st.IdealMakespanUS, st.CriticalPathUS)
		}
		if st.Waits > naive.Stats.Waits {
			t.Fatalf("waits %d > naive's %d", st.Waits, naive.Stats.Waits)
		}
		if naive.Stats.Waits != st.CrossStreamEdges {
			t.Fatalf("naive waits %d ≠ cross-stream edges %d", naive.Stats.Waits, st.CrossStreamEdges)
		}
	})
}

// Every wait of a plan is needed: without it, Verify finds a race. (After
// edges are left out: they order stages without a data conflict, so the
// verifier cannot see them.)
func TestPropertyEveryWaitNeeded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSpec(t, false, rapid.Bool().Draw(t, "pins"))
		strategy := rapid.SampledFrom([]Strategy{"default", "round-robin"}).Draw(t, "strategy")
		p := mustBuild(t, s, Options{Strategy: strategy, MaxStreams: drawCap(t, 3)})
		for s2, str := range p.Streams {
			for j, o := range str.Ops {
				if o.Kind != plan.OpWait {
					continue
				}
				if err := verify.Verify(dropOp(p, s2, j)); err == nil {
					t.Fatalf("plan still verifies without the wait on e%d (stream %s op %d)", o.Event, str.Name, j)
				}
			}
		}
	})
}

// Plans are byte-stable: planning twice gives the same table and DOT.
func TestPropertyStable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSpec(t, true, true)
		a := mustBuild(t, s, Options{})
		b := mustBuild(t, s, Options{})
		if table(t, a) != table(t, b) {
			t.Fatal("two plans of one spec differ")
		}
	})
}

// Every spec of the repository, planned every way (its own streams and
// waits for sync: manual ones), has iteration info and counts what it
// contains.
func TestPlansCountWhatTheyContain(t *testing.T) {
	files, _ := filepath.Glob("../specs/*/*.yaml")
	if len(files) == 0 {
		t.Skip("no specs")
	}
	for _, f := range files {
		s, err := dag.LoadFile(f)
		if err != nil {
			continue // deliberately broken examples are the loader's tests'
		}
		for _, strategy := range []Strategy{"", StrategyNaive, StrategyRoundRobin, StrategySingle, StrategyHazardDAG} {
			p, err := Build(s, Options{Strategy: strategy})
			if err != nil {
				t.Fatalf("%s %s: %v", f, strategy, err)
			}
			if err := countErr(p); err != nil {
				t.Errorf("%s %s: %v", f, p.Strategy, err)
			}
			if s.Sync == dag.SyncManual {
				break // strategies do not apply
			}
		}
	}
}
