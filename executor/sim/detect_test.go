package sim_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/plan"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/backendtest"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/planner"
)

func fill(name string, v float64, w []plan.Access) plan.Stage {
	return plan.Stage{Name: name, Kernel: dag.BuiltinFill, Args: map[string]any{"value": v}, Writes: w}
}

// twoWriters is the seed's bug: a slow writer on stream 0 and a writer on
// stream 1, with (synced) or without an event between them.
func twoWriters(synced bool) *plan.Plan {
	p := backendtest.NewBuilder(2)
	p.Buffer(plan.Buffer{Name: "x", Bytes: 4096, Role: dag.RoleOutput})
	p.Launch(0, plan.Stage{Name: "slow", Kernel: dag.BuiltinSpin, Args: map[string]any{"us": 50}})
	p.Launch(0, fill("one", 1, p.All("x")))
	if synced {
		p.Record(0, 0)
		p.Wait(1, 0)
	}
	p.Launch(1, fill("two", 2, p.All("x")))
	return p.Plan()
}

// run runs p on a fresh simulator and checks for leaks.
func run(t *testing.T, p *plan.Plan, o sim.Options, iters int) (*executor.Result, error) {
	t.Helper()
	b := sim.New(o)
	res, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: iters})
	if cerr := b.Close(); cerr != nil {
		t.Fatalf("Close: %v", cerr)
	}
	return res, err
}

func raceOf(t *testing.T, err error) *executor.RaceError {
	t.Helper()
	var re *executor.RaceError
	if !errors.As(err, &re) {
		t.Fatalf("want a *executor.RaceError, got %v", err)
	}
	return re
}

func TestRacyTwoWritersFlaggedEverySeed(t *testing.T) {
	for seed := range int64(20) {
		res, err := run(t, twoWriters(false), sim.Options{Seed: seed}, 1)
		re := raceOf(t, err)
		if len(re.Races) != 1 {
			t.Fatalf("seed %d: %d races, want 1: %v", seed, len(re.Races), re)
		}
		r := re.Races[0]
		stages := map[string]int{r.First.Stage: r.First.Stream, r.Second.Stage: r.Second.Stream}
		if stages["one"] != 0 || stages["two"] != 1 || len(stages) != 2 || !r.First.Write || !r.Second.Write ||
			r.Buffer != "x" || r.Offset != 0 || r.Bytes != 4096 {
			t.Errorf("seed %d: race %+v, want stages one (stream 0) and two (stream 1) writing x[0:4096]", seed, r)
		}
		msg := err.Error()
		if r.First.StreamName != "s0" || r.Second.StreamName != "s1" {
			t.Errorf("seed %d: race streams named %q and %q, want s0 and s1", seed, r.First.StreamName, r.Second.StreamName)
		}
		for _, want := range []string{"fix 1: two: add one to waits", "WAW on x[0:4096]: one (stream s0) → two (stream s1)"} {
			if !strings.Contains(msg, want) {
				t.Errorf("seed %d: message %q lacks %q", seed, msg, want)
			}
		}
		if res == nil || len(res.Outputs) != 1 {
			t.Errorf("seed %d: a racy run still returns its outputs, got %+v", seed, res)
		}
	}
}

func TestWaitBeforeRecordFlaggedEverySeed(t *testing.T) {
	p := backendtest.NewBuilder(2)
	p.Buffer(plan.Buffer{Name: "x", Bytes: 64, Role: dag.RoleOutput})
	p.Wait(1, 0) // issued before its record: waits for nothing
	p.Launch(0, fill("one", 1, p.All("x")))
	p.Record(0, 0)
	p.Launch(1, fill("two", 2, p.All("x")))
	for seed := range int64(20) {
		_, err := run(t, p.Plan(), sim.Options{Seed: seed}, 1)
		raceOf(t, err)
	}
}

// synced is a correctly synchronized plan over three streams: fan-out,
// disjoint halves written concurrently, a read-read share, fan-in, and a
// cross-iteration write-after-read on the input.
func synced() *plan.Plan {
	p := backendtest.NewBuilder(3)
	p.Buffer(plan.Buffer{Name: "in", Bytes: 1024, Init: dag.InitRandom, InitSeed: 1})
	p.Buffer(plan.Buffer{Name: "half", Bytes: 1024})
	p.Buffer(plan.Buffer{Name: "acc", Bytes: 512, Role: dag.RoleOutput, Init: dag.InitRandom, InitSeed: 2})
	p.Buffer(plan.Buffer{Name: "sum", Bytes: 16, Role: dag.RoleOutput, Where: dag.WhereHostPinned})
	mix := func(name string, r, w []plan.Access) plan.Stage {
		return plan.Stage{Name: name, Kernel: dag.BuiltinMix, Reads: r, Writes: w}
	}
	p.Launch(0, mix("prep", append(p.All("in"), p.All("acc")...), p.All("in")))
	p.Record(0, 0)
	p.Wait(1, 0)
	p.Wait(2, 0)
	p.Launch(0, mix("lo", p.All("in"), backendtest.Range("half", 0, 512)))
	p.Launch(1, mix("hi", p.All("in"), backendtest.Range("half", 512, 512)))
	p.Launch(2, plan.Stage{Name: "peek", Kernel: dag.BuiltinChecksum, Reads: p.All("in"), Writes: backendtest.Range("sum", 8, 8)})
	p.Record(1, 1)
	p.Record(2, 2)
	p.Wait(0, 1)
	p.Launch(0, mix("join", p.All("half"), p.All("acc")))
	p.Wait(0, 2)
	p.Launch(0, plan.Stage{Name: "sum", Kernel: dag.BuiltinChecksum, Reads: p.All("acc"), Writes: backendtest.Range("sum", 0, 8)})
	return p.Plan()
}

func checksums(res *executor.Result) string {
	var b strings.Builder
	for _, o := range res.Outputs {
		fmt.Fprintf(&b, "%s=%s ", o.Name, o.Checksum)
	}
	return b.String()
}

func TestSyncedNeverFlaggedSameChecksums(t *testing.T) {
	want := ""
	for seed := range int64(20) {
		res, err := run(t, synced(), sim.Options{Seed: seed}, 3)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		got := checksums(res)
		if want == "" {
			want = got
		} else if got != want {
			t.Errorf("seed %d: checksums %s, seed 0 gave %s", seed, got, want)
		}
	}
	// The same stages on one stream, in declaration order, agree.
	one := synced()
	for i := range one.Stages {
		one.Stages[i].Stream = 0
	}
	one.Streams = one.Streams[:1]
	one.Streams[0].Ops = nil
	one.IssueOrder = nil
	for i := range one.Stages {
		one.IssueOrder = append(one.IssueOrder, [2]int{0, i})
		one.Streams[0].Ops = append(one.Streams[0].Ops, plan.Op{Kind: plan.OpLaunch, Stage: i})
	}
	one.Events = 0
	res, err := run(t, one, sim.Options{MaxDelay: -1}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := checksums(res); got != want {
		t.Errorf("one stream: %s, streams: %s", got, want)
	}
}

func TestNoRaceCases(t *testing.T) {
	cases := map[string]func(p *backendtest.Builder){
		"disjoint halves": func(p *backendtest.Builder) {
			p.Launch(0, fill("lo", 1, backendtest.Range("x", 0, 32)))
			p.Launch(1, fill("hi", 2, backendtest.Range("x", 32, 32)))
		},
		"read read": func(p *backendtest.Builder) {
			p.Launch(0, plan.Stage{Name: "r0", Kernel: dag.BuiltinCopy, Reads: p.All("x"), Writes: backendtest.Range("y", 0, 64)})
			p.Launch(1, plan.Stage{Name: "r1", Kernel: dag.BuiltinCopy, Reads: p.All("x"), Writes: backendtest.Range("y", 64, 64)})
		},
		"transitive": func(p *backendtest.Builder) {
			p.Launch(0, fill("a", 1, p.All("x")))
			p.Record(0, 0)
			p.Wait(1, 0)
			p.Launch(1, plan.Stage{Name: "b", Kernel: dag.BuiltinSpin})
			p.Record(1, 1)
			p.Wait(2, 1)
			p.Launch(2, fill("c", 3, p.All("x")))
		},
		"in place": func(p *backendtest.Builder) {
			p.Launch(0, plan.Stage{Name: "m", Kernel: dag.BuiltinMix, Reads: p.All("x"), Writes: p.All("x")})
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			p := backendtest.NewBuilder(3)
			p.Buffer(plan.Buffer{Name: "x", Bytes: 64, Role: dag.RoleOutput})
			p.Buffer(plan.Buffer{Name: "y", Bytes: 128, Role: dag.RoleOutput})
			build(p)
			for seed := range int64(5) {
				if _, err := run(t, p.Plan(), sim.Options{Seed: seed}, 2); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
		})
	}
}

func TestRaceKinds(t *testing.T) {
	cases := map[string]struct {
		build  func(p *backendtest.Builder)
		writes [2]bool // of stages a and b
	}{
		"read then write": {func(p *backendtest.Builder) {
			p.Launch(0, plan.Stage{Name: "a", Kernel: dag.BuiltinCopy, Reads: p.All("x"), Writes: p.All("y")})
			p.Launch(1, fill("b", 1, backendtest.Range("x", 8, 8)))
		}, [2]bool{false, true}},
		"write then read": {func(p *backendtest.Builder) {
			p.Launch(0, fill("a", 1, backendtest.Range("x", 8, 8)))
			p.Launch(1, plan.Stage{Name: "b", Kernel: dag.BuiltinCopy, Reads: p.All("x"), Writes: p.All("y")})
		}, [2]bool{true, false}},
		"event recorded too early": {func(p *backendtest.Builder) {
			p.Record(0, 0)
			p.Launch(0, fill("a", 1, backendtest.Range("x", 8, 8)))
			p.Wait(1, 0)
			p.Launch(1, fill("b", 2, p.All("x")))
		}, [2]bool{true, true}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := backendtest.NewBuilder(2)
			p.Buffer(plan.Buffer{Name: "x", Bytes: 64, Role: dag.RoleOutput})
			p.Buffer(plan.Buffer{Name: "y", Bytes: 64, Role: dag.RoleOutput})
			c.build(p)
			for seed := range int64(20) {
				_, err := run(t, p.Plan(), sim.Options{Seed: seed}, 1)
				re := raceOf(t, err)
				if len(re.Races) != 1 {
					t.Fatalf("seed %d: %v", seed, re)
				}
				r := re.Races[0]
				if r.First.Stage == "b" {
					r.First, r.Second = r.Second, r.First
				}
				if r.First.Stage != "a" || r.Second.Stage != "b" || r.First.Write != c.writes[0] || r.Second.Write != c.writes[1] ||
					r.Buffer != "x" || r.Offset != 8 || r.Bytes != 8 {
					t.Errorf("seed %d: %+v, want a and b on x[8:16]", seed, r)
				}
			}
		})
	}
}

func TestRacesDeduplicated(t *testing.T) {
	_, err := run(t, twoWriters(false), sim.Options{MaxDelay: -1}, 50)
	re := raceOf(t, err)
	if len(re.Races) != 1 || re.Races[0].Count != 50 {
		t.Errorf("want one race seen 50 times, got %+v", re.Races)
	}
}

// TestShadowBounded: many overlapping accesses from three streams without a
// Synchronize keep the shadow state within the number of distinct byte
// boundaries and one read per stream.
func TestShadowBounded(t *testing.T) {
	b := sim.New(sim.Options{MaxDelay: -1})
	x, _ := b.Alloc(executor.BufferDesc{Name: "x", Bytes: 256, Where: contract.WhereDevice})
	var streams []executor.Stream
	for range 3 {
		s, _ := b.NewStream()
		streams = append(streams, s)
	}
	e, _ := b.NewEvent()
	descs := make([]executor.LaunchDesc, 64)
	for i := range descs {
		off := int64(i%15) * 16
		acc := []executor.Arg{{Buffer: x, Name: "x", Offset: off, Bytes: 32 - 16*int64(i/16%2)}}
		descs[i] = executor.LaunchDesc{Stage: i, Name: fmt.Sprint("r", i), Kernel: dag.BuiltinSpin, Reads: acc}
		if i%7 == 0 {
			descs[i].Writes = acc
		}
	}
	for round := range 200 {
		for i := range descs {
			s := streams[(i+round)%3]
			if err := b.Launch(s, &descs[i]); err != nil {
				t.Fatal(err)
			}
			if i%5 == 0 {
				b.Record(e, s)
				b.Wait(streams[(i+round+1)%3], e)
			}
		}
	}
	for _, s := range streams {
		b.Wait(s, e)
	}
	sim.Drain(b)
	segs, reads := sim.ShadowSegments(x)
	if segs > 16 || reads > 3 {
		t.Errorf("shadow state: %d segments (want ≤ 16, one per 16-byte boundary), %d reads in one (want ≤ 3, one per stream)", segs, reads)
	}
	err := b.Synchronize()
	var re *executor.RaceError
	if err != nil && !errors.As(err, &re) {
		t.Fatal(err)
	}
	if segs, _ := sim.ShadowSegments(x); segs != 0 {
		t.Errorf("Synchronize left %d shadow segments", segs)
	}
	b.DestroyEvent(e)
	for _, s := range streams {
		b.DestroyStream(s)
	}
	b.Free(x)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRaceReportReproducible: two runs of a racy plan under the same seed
// print the same report, whatever interleaving the detector saw, in the
// plan's names (streams by name, buffer-relative bytes, race kinds).
func TestRaceReportReproducible(t *testing.T) {
	s, err := dag.LoadFile("../../specs/shared-io/shared-io-racy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for range 6 {
		_, err := run(t, p, sim.Options{Seed: 2}, 2)
		msg := raceOf(t, err).Error()
		if first == "" {
			first = msg
			for _, want := range []string{"(stream s0)", "WAW on in_d[0:16384]", "fix 1: in1 (", "shared-io-racy.yaml:"} {
				if !strings.Contains(msg, want) {
					t.Errorf("report lacks %q:\n%s", want, msg)
				}
			}
			continue
		}
		if msg != first {
			t.Fatalf("same seed, different reports:\n%s\n---\n%s", first, msg)
		}
	}
}
