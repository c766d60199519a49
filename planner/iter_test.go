package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// crossWaits lists the plan's lagged waits as "stage waits producer lag".
func crossWaits(p *plan.Plan) []string {
	prod := p.Producers()
	var out []string
	for _, str := range p.Streams {
		for j, o := range str.Ops {
			if o.Kind != plan.OpWait || o.Lag == 0 {
				continue
			}
			next := ""
			for _, o2 := range str.Ops[j:] {
				if o2.Kind == plan.OpLaunch {
					next = p.Stages[o2.Stage].Name
					break
				}
			}
			out = append(out, next+"<"+p.Stages[prod[o.Event]].Name+"@-"+string(rune('0'+o.Lag)))
		}
	}
	return out
}

// One copy: every buffer conflicts with the next iteration. The upload of
// iteration i must wait for the previous iteration's preprocess (WAR on
// frame), net for down (WAR on out); nothing else is needed (down's WAW on
// res is program order, up's WAW on frame too).
func TestIterateOneCopy(t *testing.T) {
	// Per-buffer hazards: with the arena, frame, x, out and res may share
	// bytes, which adds the arena's own cross waits (TestArenaIterations).
	p := build(t, ioPipe(), Options{Arena: dag.ArenaOff})
	got := crossWaits(p)
	want := []string{"up<pre@-1", "net<down@-1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("cross waits %v, want %v\n%s", got, want, table(t, p))
	}
	if it := p.Iteration; it.StreamSets != 1 || it.CrossWaits != 2 || it.InFlight != 1 {
		t.Errorf("iteration %+v", *it)
	}
}

// Two copies and one stream set (pinned streams): the waits move two
// iterations back, and their events need enough slots that the record of
// iteration i−2 is still the latest one when the wait is issued.
func TestIterateRingTwoCopies(t *testing.T) {
	s := withCopies(ioPipe(), 2, "frame", "x", "out", "res")
	p := build(t, s, Options{StreamSets: 1})
	got := crossWaits(p)
	want := []string{"up<pre@-2", "net<down@-2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("cross waits %v, want %v\n%s", got, want, table(t, p))
	}
	prod := p.Producers()
	for e, n := range p.Iteration.Slots {
		name := p.Stages[prod[e]].Name
		// pre's record comes after up's wait in an iteration: 2 slots
		// suffice; down's record comes after net's wait too.
		if (name == "pre" || name == "down") && n != 2 {
			t.Errorf("event e%d after %s has %d slots, want 2", e, name, n)
		}
	}
	if p.Iteration.InFlight != 2 {
		t.Errorf("in flight %d, want 2", p.Iteration.InFlight)
	}
}

// Mixed rings: a one-copy buffer shared by every iteration still needs its
// waits at distance 1, the ring's at distance K.
func TestIterateMixedCopies(t *testing.T) {
	s := spec(
		stage("up", writes("frame"), on("h2d")),
		stage("pre", reads("frame"), writes("acc"), on("comp")),
		stage("sum", reads("acc"), writes("total"), on("d2h")),
	)
	withCopies(s, 3, "frame")
	p := build(t, s, Options{StreamSets: 1})
	got := crossWaits(p)
	want := []string{"up<pre@-3", "pre<sum@-1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("cross waits %v, want %v\n%s", got, want, table(t, p))
	}
	if p.Iteration.InFlight != 1 {
		t.Errorf("in flight %d, want 1 (acc has one copy)", p.Iteration.InFlight)
	}
}

// By default iterations rotate over as many stream sets as the largest
// ring: each iteration's chain runs on its own streams, so a chain whose
// buffers are all rings needs no cross wait at all.
func TestIterateStreamSets(t *testing.T) {
	s := spec(
		stage("up", writes("frame")),
		stage("pre", reads("frame"), writes("x")),
		stage("down", reads("x"), writes("res")),
	)
	withCopies(s, 2, "frame", "x", "res")
	p := build(t, s, Options{})
	if p.Iteration.StreamSets != 2 || p.Iteration.CrossWaits != 0 {
		t.Fatalf("iteration %+v, want 2 stream sets, no cross wait\n%s", *p.Iteration, table(t, p))
	}
	m, total := p.PhysicalStreams()
	if total != 2*len(p.Streams) || m[1][0] != len(p.Streams) {
		t.Errorf("physical streams %v (%d)", m, total)
	}
	// The single strategy stays on one stream, whatever the copies.
	q := build(t, s, Options{Strategy: StrategySingle})
	if q.Iteration.StreamSets != 1 || len(q.Streams) != 1 || q.Iteration.CrossWaits != 0 {
		t.Errorf("single: %+v on %d streams", *q.Iteration, len(q.Streams))
	}
	// Copies 2 but three stream sets: iterations i and i+2 share the ring
	// copy and run on different streams, so they need waits.
	r := build(t, s, Options{StreamSets: 3})
	if r.Iteration.CrossWaits == 0 {
		t.Errorf("3 stream sets over 2 copies: no cross wait\n%s", table(t, r))
	}
}

// Removing a cross wait by hand (the seed's bug: a batch overwrites the
// previous batch's data) makes Verify report the race across iterations,
// naming the iterations and the ring copy.
func TestVerifyCatchesMissingCrossWait(t *testing.T) {
	s := withCopies(ioPipe(), 2, "frame", "x", "out", "res")
	p := build(t, s, Options{StreamSets: 1})
	for si, str := range p.Streams {
		for j, o := range str.Ops {
			if o.Kind != plan.OpWait || o.Lag == 0 {
				continue
			}
			err := verify.Verify(dropOp(p, si, j))
			var re *verify.RaceError
			if !errors.As(err, &re) {
				t.Fatalf("without the cross wait on e%d: %v, want a race", o.Event, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "@") || !strings.Contains(msg, "#") || !strings.Contains(msg, "across iterations") {
				t.Errorf("race does not name iterations and copies: %s", msg)
			}
		}
	}
}

// Event slots matter: a lagged wait must find the record of iteration i−d.
// With one slot it finds a later iteration's record instead. On one stream
// set that over-synchronizes (the later record is on the same stream), but
// with three stream sets over two copies the later record is on another
// stream and orders nothing: Verify reports the race through the unrolled
// plan.
func TestVerifySlotsTooFew(t *testing.T) {
	s := spec(
		stage("up", writes("frame"), on("h2d")),
		stage("pre", reads("frame"), writes("x"), on("comp")),
	)
	withCopies(s, 2, "frame", "x")
	p := build(t, s, Options{StreamSets: 3})
	q := *p
	it := *p.Iteration
	it.Slots = make([]int, len(p.Iteration.Slots))
	changed := false
	for i := range it.Slots {
		changed = changed || p.Iteration.Slots[i] > 1
		it.Slots[i] = 1
	}
	if !changed {
		t.Fatalf("plan has no event with several slots\n%s", table(t, p))
	}
	q.Iteration = &it
	var re *verify.RaceError
	if err := verify.Verify(&q); !errors.As(err, &re) {
		t.Fatalf("one slot per event: Verify = %v, want a race", err)
	}
}

// Every wait placed by the pass is needed (property tests do this on random
// specs; here on the mixed-ring example), and Unroll numbers stages, copies,
// streams and slots as documented.
func TestUnroll(t *testing.T) {
	s := withCopies(ioPipe(), 2, "frame", "x", "out", "res")
	p := build(t, s, Options{})
	q, err := plan.Unroll(p, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Stages) != 4*len(p.Stages) || q.Stages[len(p.Stages)].Name != "up@1" {
		t.Fatalf("stages: %d, [%d] = %s", len(q.Stages), len(p.Stages), q.Stages[len(p.Stages)].Name)
	}
	if got := q.Stages[len(p.Stages)].Writes[0].Buffer; got != "frame#1" {
		t.Errorf("up@1 writes %s, want frame#1", got)
	}
	if _, total := p.PhysicalStreams(); len(q.Streams) != total {
		t.Errorf("unrolled streams %d, want %d", len(q.Streams), total)
	}
	if q.Iteration != nil || len(q.Lifetimes) != 0 {
		t.Error("unrolled plan keeps iteration info or lifetimes")
	}
	if err := verify.Verify(q); err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Unroll(p, 0); err == nil {
		t.Error("Unroll(p, 0): no error")
	}
	// Two copies and two stream sets: a period of 2, one iteration more.
	if n := plan.UnrollIterations(p); p.Iteration.StreamSets != 2 || n != 3 {
		t.Errorf("UnrollIterations = %d with %d stream sets, want 3", n, p.Iteration.StreamSets)
	}
	big := *p
	big.Buffers = slices.Clone(p.Buffers)
	big.Buffers[0].Copies, big.Buffers[1].Copies = 7, 9 // period 126
	if n := plan.UnrollIterations(&big); n != plan.MaxUnroll {
		t.Errorf("period 126: UnrollIterations = %d, want the bound %d", n, plan.MaxUnroll)
	}
	if note := plan.UnrollNote(&big); !strings.Contains(note, "needs 127 ") {
		t.Errorf("period 126: note %q", note)
	}
	if note := plan.UnrollNote(p); note != "" {
		t.Errorf("period 2: note %q", note)
	}
	// A plan read from a file gets the note by Recount, once, and loses
	// one that no longer holds.
	big.Notes = nil
	plan.Recount(&big)
	plan.Recount(&big)
	if len(big.Notes) != 1 || !strings.HasPrefix(big.Notes[0], plan.UnrollNotePrefix) {
		t.Errorf("period 126 after Recount: notes %q", big.Notes)
	}
	small := *p
	small.Notes = append(slices.Clone(p.Notes), big.Notes[0])
	plan.Recount(&small)
	if !slices.Equal(small.Notes, p.Notes) {
		t.Errorf("period 2 after Recount: notes %q, want %q", small.Notes, p.Notes)
	}
}

// Plans with iteration info round-trip through JSON, lags included.
func TestIterationJSON(t *testing.T) {
	s := withCopies(ioPipe(), 2, "frame", "x", "out", "res")
	p := build(t, s, Options{StreamSets: 1})
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"lag":2`) || !strings.Contains(string(b), `"iteration":{"stream_sets":1`) {
		t.Fatalf("JSON lacks lag or iteration: %s", b)
	}
	var q plan.Plan
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(q.Streams, p.Streams) || !reflect.DeepEqual(q.Iteration, p.Iteration) {
		t.Error("round trip changed the streams or the iteration info")
	}
}

func TestValidateIteration(t *testing.T) {
	s := withCopies(ioPipe(), 2, "frame", "x", "out", "res")
	for _, c := range []struct {
		name string
		edit func(p *plan.Plan)
		want string
	}{
		{"slots", func(p *plan.Plan) { p.Iteration.Slots = p.Iteration.Slots[1:] }, "iteration.slots: 3 entries"},
		{"zero slot", func(p *plan.Plan) { p.Iteration.Slots[0] = 0 }, "want 1 to"},
		{"huge lag", func(p *plan.Plan) {
			p.Streams[0].Ops = append(p.Streams[0].Ops, plan.Op{Kind: plan.OpWait, Event: 0, Lag: 1 << 30})
			p.IssueOrder = append(p.IssueOrder, [2]int{0, len(p.Streams[0].Ops) - 1})
		}, "lag 1073741824"},
		{"negative in-flight", func(p *plan.Plan) { p.Iteration.InFlight = -5 }, "iteration.in_flight: -5"},
		{"sets", func(p *plan.Plan) { p.Iteration.StreamSets = 0 }, "stream_sets"},
		{"lag without info", func(p *plan.Plan) { p.Iteration = nil }, "lag"},
		{"lag on record", func(p *plan.Plan) {
			for i, o := range p.Streams[0].Ops {
				if o.Kind == plan.OpRecord {
					p.Streams[0].Ops[i].Lag = 1
					return
				}
			}
			p.Streams[1].Ops[1].Lag = 1
		}, "lag"},
	} {
		p := build(t, s, Options{StreamSets: 1})
		it := *p.Iteration
		it.Slots = append([]int(nil), it.Slots...)
		p.Iteration = &it
		for i := range p.Streams {
			p.Streams[i].Ops = append([]plan.Op(nil), p.Streams[i].Ops...)
		}
		c.edit(p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want %q", c.name, err, c.want)
		}
	}
}

// Manual specs keep their own waits; their iterations are separated by the
// barrier form, which the plan says in a note, and which Verify accepts
// over several iterations.
func TestIterateManualBarrier(t *testing.T) {
	s := manual(spec(stage("a", writes("x"), on("s0")), stage("b", reads("x"), on("s1"), waits("a"))))
	p := build(t, s, Options{})
	if p.Iteration == nil || !p.Iteration.Barrier || p.Iteration.InFlight != 1 {
		t.Fatalf("manual plan: iteration %+v, want the barrier form", p.Iteration)
	}
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "iterations do not overlap: the spec's waits order one iteration only") {
		t.Errorf("notes %q", p.Notes)
	}
	if plan.UnrollIterations(p) < 2 {
		t.Errorf("Verify unrolls %d iterations", plan.UnrollIterations(p))
	}
	// Stream sets are the planner's, not a manual spec's: asked for, an error.
	if _, err := Build(s, Options{StreamSets: 2}); err == nil || !strings.Contains(err.Error(), "2 stream sets with a manual spec") {
		t.Errorf("manual spec, 2 stream sets: Build = %v, want the conflict", err)
	}
	// One stream and one copy: stream order is the barrier, nothing to say.
	one := build(t, manual(spec(stage("a", writes("x"), on("s0")), stage("b", reads("x"), on("s0")))), Options{})
	if one.Iteration == nil || !one.Iteration.Barrier || one.Iteration.CrossWaits != 0 || len(one.Notes) != 0 {
		t.Errorf("one stream: iteration %+v, notes %q", one.Iteration, one.Notes)
	}
}

// Host streams (one host thread) are not replicated by stream sets.
func TestPhysicalStreamsHost(t *testing.T) {
	p := &plan.Plan{Streams: []plan.Stream{{ID: 0, Name: "a"}, {ID: 1, Name: "host", Host: true}, {ID: 2, Name: "b"}},
		Iteration: &plan.Iteration{StreamSets: 3}}
	m, total := p.PhysicalStreams()
	if total != 7 || m[1][1] != 1 || m[2][1] != 1 || m[1][0] != 3 || m[1][2] != 4 || m[2][0] != 5 || m[2][2] != 6 {
		t.Errorf("physical streams %v (%d), want host 1 in every set and 7 in all", m, total)
	}
}

// Beyond the iterate pass's cost bounds a plan gets the barrier form, which
// verifies over several iterations, and a note naming the bound, the
// plan's size and what cross-iteration waits would have given.
func TestIterateBounds(t *testing.T) {
	ring := withCopies(ioPipe(), 2, "frame", "x", "out", "res")
	self := withCopies(spec(stage("a", writes("x"))), 1, "x") // only cross-iteration conflicts
	for _, c := range []struct {
		name string
		s    *dag.Spec
		o    Options
		v    *int
		to   int
		want []string
	}{
		{"clock", ring, Options{}, &iterMaxClock, 10, []string{"bounded at 10 vector-clock entries read (this plan could need", "physical streams", "a barrier separates them (4 waits and 3 records per iteration)", "up to 2 at once"}},
		{"walk", self, Options{StreamSets: 2}, &iterMaxClock, 3, []string{"bounded at 3 vector-clock entries read, and its walk over", "passed that in iteration 3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			saved := *c.v
			*c.v = c.to
			p := build(t, c.s, c.o)
			*c.v = saved
			if p.Iteration == nil || !p.Iteration.Barrier {
				t.Fatalf("iteration %+v, want the barrier form", p.Iteration)
			}
			if len(p.Notes) != 1 || !strings.HasPrefix(p.Notes[0], "iterations do not overlap: the iterate pass is bounded") {
				t.Fatalf("notes %q", p.Notes)
			}
			for _, w := range c.want {
				if !strings.Contains(p.Notes[0], w) {
					t.Errorf("note %q lacks %q", p.Notes[0], w)
				}
			}
			var b strings.Builder
			p.WriteTable(&b)
			if !strings.Contains(b.String(), "\nnote: iterations do not overlap") {
				t.Errorf("table does not print the note:\n%s", b.String())
			}
			// Within the bounds the same spec gets cross-iteration waits.
			if q := build(t, c.s, c.o); q.Iteration.Barrier || len(q.Notes) != 0 {
				t.Errorf("within the bounds: iteration %+v, notes %q", *q.Iteration, q.Notes)
			}
		})
	}
	// Pruning bounded: the placed waits stay, and the plan says so.
	saved := iterMaxPrune
	iterMaxPrune = 0
	p := build(t, ioPipe(), Options{Arena: dag.ArenaOff})
	iterMaxPrune = saved
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "cross-iteration waits are not minimized") || p.Iteration.CrossWaits < 2 {
		t.Errorf("prune bound: notes %q, %d cross waits", p.Notes, p.Iteration.CrossWaits)
	}
	// The steps of the tries bounded: the first try stops, the waits stay.
	saved = iterMaxPruneWork
	iterMaxPruneWork = 1
	p = build(t, ioPipe(), Options{Arena: dag.ArenaOff})
	iterMaxPruneWork = saved
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "spends at most 1 steps") || !strings.Contains(p.Notes[0], "tried 0 of this plan's 2") || p.Iteration.CrossWaits != 2 {
		t.Errorf("prune work bound: notes %q, %d cross waits", p.Notes, p.Iteration.CrossWaits)
	}
}

// nasnetalarge with a ring of two on its input runs 318 physical streams:
// the iterate pass plans its cross-iteration waits (no barrier), and the
// plan verifies across iterations.
func TestIterateManyStreams(t *testing.T) {
	s := loadGraph(t, "nasnetalarge")
	for i := range s.Buffers {
		if s.Buffers[i].Init.Kind == dag.InitRandom {
			s.Buffers[i].Copies = 2
		}
	}
	p, err := Build(s, Options{MaxStreams: Uncapped})
	if err != nil {
		t.Fatal(err)
	}
	if _, P := p.PhysicalStreams(); P <= 256 || p.Iteration.Barrier || len(p.Notes) != 0 {
		t.Fatalf("%d physical streams, iteration barrier %v, notes %q: want planned cross-iteration waits", P, p.Iteration.Barrier, p.Notes)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s; planned in %.0f ms", p.StatsLine(), p.Stats.PlanningMS)
}

// More stream sets than MaxStreamSetStreams device streams hold are
// refused with the most that fit; where the default (one set per copy of
// the largest ring) is what passed it, the message names that buffer and
// does not offer the default as the way out.
func TestStreamSetsBound(t *testing.T) {
	two := func(k int) *dag.Spec { // two device streams; x has k copies
		s := spec(stage("a", writes("x")), stage("b", writes("y")))
		if k > 1 {
			s = withCopies(s, k, "x")
		}
		return s
	}
	most := plan.MaxStreamSetStreams / 2
	for _, c := range []struct {
		name     string
		k, sets  int
		want     []string
		wantNot  string
		accepted bool
	}{
		{"default at the bound", most, 0, nil, "", true},
		{"default past the bound", most + 1, 0, []string{fmt.Sprintf("stream sets %d (the default, one per copy of buffer x)", most+1), fmt.Sprintf("--stream-sets %d or fewer", most)}, "or 0", false},
		{"given, rings fit", 2, most + 1, []string{fmt.Sprintf("stream sets %d:", most+1), "or 0 (one set per copy of buffer x: 2)"}, "", false},
		{"given, no rings", 1, most + 1, []string{"or 0 (one stream set: every buffer has one copy)"}, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(two(c.k), Options{StreamSets: c.sets})
			if c.accepted {
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Build accepted it")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			if c.wantNot != "" && strings.Contains(err.Error(), c.wantNot) {
				t.Errorf("error %q\nsays %q", err, c.wantNot)
			}
		})
	}
}
