package verify_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

func TestSiteOf(t *testing.T) {
	for _, c := range [][2]string{
		{"k12:copy_.default:cam.py:23", "cam.py:23"},
		{"h7:synchronize:a/b.py:9", "a/b.py:9"},
		{"pre@3", "pre"},
		{"k12:copy_.default:cam.py:23@2", "cam.py:23"},
		{"k1:x", "k1:x"},                 // no FILE:LINE
		{"kx:op:f.py:1", "kx:op:f.py:1"}, // no number after k
		{"k1:op:f.py:x", "k1:op:f.py:x"}, // no line number
		{"load", "load"},
	} {
		if got := verify.SiteOf(c[0]); got != c[1] {
			t.Errorf("SiteOf(%q) = %q, want %q", c[0], got, c[1])
		}
	}
	for _, c := range [][2]string{
		{"mem3:cam.py:12", "cam.py:12"},
		{"pinned0", "pinned0"},
		{"frame#1", "frame"},
		{"staging@2", "staging"},
		{"frame#1@3", "frame"},
		{"memory", "memory"},
		{"mem:cam.py:12", "mem:cam.py:12"},
	} {
		if got := verify.BufferSiteOf(c[0]); got != c[1] {
			t.Errorf("BufferSiteOf(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}

// loop is a recorded trace of n runs of a loop body: line 5 writes x on
// s1, line 7 reads x on the default stream and writes y, with no wait.
func loop(n int) *dag.Spec {
	var stages []dag.StageSpec
	for i := range n {
		stages = append(stages,
			stage(fmt.Sprintf("k%d:fill_.Scalar:p.py:5", 2*i), on("s1"), writes("x")),
			stage(fmt.Sprintf("k%d:sum.default:p.py:7", 2*i+1), on("default"), reads("x"), writes("y")))
	}
	return manual(spec(stages...))
}

// TestFixesOnePerLine: the races of every run of a loop are one site
// each, and each fix is one wait in the program's source made at every
// run of its line; applied there, the plan verifies.
func TestFixesOnePerLine(t *testing.T) {
	const n = 6
	p, err := planner.Build(loop(n), planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	re, ok := verify.Verify(p).(*verify.RaceError)
	if !ok {
		t.Fatalf("want races, got %v", verify.Verify(p))
	}
	// RAW: line 5's write of run i before line 7's read of runs ≥ i; WAR:
	// line 7's read of run i before line 5's write of runs > i.
	if len(re.Sites) != 2 || len(re.Races) != n*(n+1)/2+n*(n-1)/2 {
		t.Fatalf("%d races at %d sites, want %d at 2:\n%v", len(re.Races), len(re.Sites), n*n, re)
	}
	for _, s := range re.Sites {
		if s.First == s.Second || s.Count < n-1 || s.Buffer != "x" {
			t.Errorf("site %+v", s)
		}
	}
	if len(re.Fixes) != 2 || len(re.Unfixed) != 0 || !re.FixesMinimal {
		t.Fatalf("want 2 fixes, proven fewest:\n%v", re)
	}
	sw := verify.NewSiteWaits(p, plan.LaunchPositions(p))
	q := verify.ClonePlan(p)
	places := 0
	for _, f := range re.Fixes {
		if f.RecordStream == f.WaitStream {
			t.Errorf("a self-wait: %+v", f)
		}
		at := sw.Places(p, [2]int{f.After, f.Before})
		if len(at) != f.Places {
			t.Errorf("fix %s: %d places, reported %d", f, len(at), f.Places)
		}
		places += f.Places
		for _, w := range at {
			verify.AddWait(q, w[0], w[1])
		}
	}
	// Line 7 waits at each of its n runs, line 5 at each run after the first.
	if places != 2*n-1 {
		t.Errorf("%d places, want %d:\n%v", places, 2*n-1, re)
	}
	if err := verify.Verify(q); err != nil {
		t.Errorf("the fixes applied at their places: %v", err)
	}
	want := fmt.Sprintf("fix 1 (at %d places: each run of p.py:", n)
	if s := re.Error(); !contains(s, want) || !contains(s, "at 2 sites") {
		t.Errorf("report:\n%s\nwant %q", s, want)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestFixForms: a fix is the edit its source takes: a sync: manual
// spec's waits, a sync: auto spec's after: (dagrun places the wait), a
// plan file's ops (a record and a wait to add).
func TestFixForms(t *testing.T) {
	s := manual(spec(stage("w1", on("a"), writes("x")), stage("w2", on("b"), writes("x"))))
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	edit := func(q *plan.Plan) string {
		re, ok := verify.Verify(q).(*verify.RaceError)
		if !ok || len(re.Fixes) != 1 {
			t.Fatalf("want one fix, got %v", verify.Verify(q))
		}
		return re.Fixes[0].Edit
	}
	if e := edit(p); !contains(e, "w2: add w1 to waits (stream b waits") {
		t.Errorf("manual spec: %s", e)
	}
	auto := *p
	auto.Strategy = "chain"
	if e := edit(&auto); !contains(e, "w2: add w1 to after (dagrun then places the wait") || contains(e, "to waits") {
		t.Errorf("auto spec: %s", e)
	}
	b, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var file plan.Plan
	if err := file.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	if e := edit(&file); !contains(e, "in the plan file, add a record of a new event to stream a's ops right after the launch of w1") || contains(e, "to waits") {
		t.Errorf("plan file: %s", e)
	}
}

// TestHandoffOnce: races between two host threads that no device wait
// orders get one handoff: after the latest first stage on each of the
// first thread's streams, before the earliest second stage.
func TestHandoffOnce(t *testing.T) {
	s := manual(spec(
		stage("p1", on("a1"), writes("x1")), stage("p2", on("a2"), writes("x2")), stage("p3", on("a1"), writes("x3")),
		stage("q1", on("c"), reads("x1"), writes("y")), stage("q2", on("c"), reads("x2"), writes("y")), stage("q3", on("c"), reads("x3"), writes("y"))))
	s.Streams = []dag.StreamSpec{{Name: "a1"}, {Name: "a2"}, {Name: "c", Thread: "consumer"}}
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	re, ok := verify.Verify(p).(*verify.RaceError)
	if !ok {
		t.Fatalf("want races, got %v", verify.Verify(p))
	}
	if len(re.Handoffs) != 1 {
		t.Fatalf("want one handoff:\n%v", re)
	}
	h := re.Handoffs[0]
	if h.From != "main" || h.To != "consumer" || fmt.Sprint(h.After) != "[p3 p2]" || h.Before != "q1" || len(h.Races) != 3 {
		t.Errorf("handoff %+v", h)
	}
	if r := re.Error(); !contains(r, "1 host handoff orders 3 of them") || !contains(r, "before q1") {
		t.Errorf("report:\n%s", r)
	}
}

// TestFixOfAWaitItHas: a fix that is a wait the stage already has is
// said as the change to make: a lag to drop, or a wait that takes another
// record of its event.
func TestFixOfAWaitItHas(t *testing.T) {
	edit := func(src string) string {
		t.Helper()
		p, err := planner.Build(loadSpec(t, src), planner.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var re *verify.RaceError
		if err := verify.Verify(p); !errors.As(err, &re) || len(re.Fixes) != 1 {
			t.Fatalf("want one fix, got %v", err)
		}
		return re.Fixes[0].Edit
	}
	lagged := edit(`version: 1
sync: manual
streams: [{name: a}, {name: b}]
buffers: [{name: x, bytes: 4096}]
stages:
  - {name: w1, kernel: spin, writes: [x], stream: a}
  - {name: w2, kernel: spin, writes: [x], stream: b, waits: [{stage: w1, lag: 1}]}
`)
	if !strings.Contains(lagged, "w2 (test.yaml:7:5): change {stage: w1, lag: 1} in waits to w1 (lag 0") {
		t.Errorf("lagged: %s", lagged)
	}
	taken := edit(`version: 1
sync: manual
streams: [{name: a}, {name: b}, {name: c}]
buffers: [{name: x, bytes: 4096}]
stages:
  - {name: w1, kernel: spin, writes: [x], stream: a, event: e}
  - {name: w0, kernel: spin, stream: c, event: e}
  - {name: w2, kernel: spin, writes: [x], stream: b, waits: [{event: e}]}
`)
	if !strings.Contains(taken, "it already waits on the event recorded after w1, but a wait takes the event's latest record issued before it, the one after w0") {
		t.Errorf("taken: %s", taken)
	}
}

// TestUnrolledBufferOneSite: the races of an unrolled plan between one
// iteration's read of a buffer and the next one's write are one site,
// with the example's fix.
func TestUnrolledBufferOneSite(t *testing.T) {
	p, err := planner.Build(loadSpec(t, `version: 1
sync: manual
streams: [{name: up}, {name: comp}]
buffers: [{name: staging, bytes: 4096}, {name: act, bytes: 4096}]
stages:
  - {name: upload, kernel: spin, writes: [staging], stream: up, waits: [{stage: layers, lag: 2}]}
  - {name: embed, kernel: spin, reads: [staging], writes: [act], stream: comp, waits: [upload]}
  - {name: layers, kernel: spin, reads: [act], writes: [act], stream: comp}
`), planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var re *verify.RaceError
	if err := verify.Verify(p); !errors.As(err, &re) || len(re.Races) < 2 || len(re.Sites) != 1 {
		t.Fatalf("want races at one site, got %v", err)
	}
	if s := re.Error(); !strings.Contains(s, fmt.Sprintf("WAR on staging: embed (stream comp) → upload (stream up): %d races, e.g. staging@0", len(re.Races))) ||
		!strings.Contains(s, "; fix, for the example: ") {
		t.Errorf("report:\n%s", s)
	}
}

// TestFixAcrossIterationsWaitsOnTheProducer: the next step's upload into a
// staging ring must wait for the step that reads it (embed), not for the
// whole step after it (head, the wait the spec has): the fix's record is
// the producer's own, the least order that fixes the races.
func TestFixAcrossIterationsWaitsOnTheProducer(t *testing.T) {
	p, err := planner.Build(loadSpec(t, `version: 1
sync: manual
streams: [{name: up}, {name: comp}]
buffers: [{name: staging, bytes: 4096, copies: 2}, {name: act, bytes: 4096}]
stages:
  - {name: upload, kernel: spin, writes: [staging], stream: up, waits: [{stage: head, lag: 3}]}
  - {name: embed, kernel: spin, reads: [staging], writes: [act], stream: comp, waits: [upload]}
  - {name: layers, kernel: spin, reads: [act], writes: [act], stream: comp}
  - {name: head, kernel: spin, reads: [act], writes: [act], stream: comp}
`), planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var re *verify.RaceError
	if err := verify.Verify(p); !errors.As(err, &re) || len(re.Fixes) != 1 {
		t.Fatalf("want one fix, got %v", err)
	}
	if e := re.Fixes[0].Edit; !strings.HasPrefix(e, "upload (test.yaml:6:5): add {stage: embed, lag: 2} to waits") ||
		!strings.Contains(e, "or instead give buffer staging copies: 3") {
		t.Errorf("edit: %s", e)
	}
}

// TestSiteFixesOrderEveryRace: on random hand-synchronized plans whose
// stages repeat a few source lines (a recorded program's names), every
// race gets a fix, and the fixes applied at all their places leave none.
func TestSiteFixesOrderEveryRace(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 12).Draw(t, "stages")
		lines := rapid.IntRange(1, 3).Draw(t, "lines")
		streams := []string{"a", "b", "c"}[:rapid.IntRange(2, 3).Draw(t, "streams")]
		var stages []dag.StageSpec
		for i := range n {
			line := rapid.IntRange(1, lines).Draw(t, "line")
			opts := []stageOpt{on(streams[(line+rapid.IntRange(0, 1).Draw(t, "shift"))%len(streams)])}
			buf := fmt.Sprint("x", rapid.IntRange(0, 1).Draw(t, "buf"))
			if rapid.Bool().Draw(t, "writes") {
				opts = append(opts, writes(buf))
			} else {
				opts = append(opts, reads(buf))
			}
			stages = append(stages, stage(fmt.Sprintf("k%d:op:p.py:%d", i, line), opts...))
		}
		p, err := planner.Build(manual(spec(stages...)), planner.Options{})
		if err != nil {
			t.Fatalf("%v", err)
		}
		re, ok := verify.Verify(p).(*verify.RaceError)
		if !ok {
			return
		}
		for _, k := range re.Unfixed {
			if r := re.Races[k]; !r.Reversed && r.FirstStream != r.SecondStream && r.Shared == "" && !re.FixesPartial {
				t.Fatalf("race %v left without a fix:\n%v", r, re)
			}
		}
		if len(re.Unfixed) > 0 {
			return
		}
		sw := verify.NewSiteWaits(p, plan.LaunchPositions(p))
		q := verify.ClonePlan(p)
		covered := 0
		for _, f := range re.Fixes {
			at := sw.Places(p, [2]int{f.After, f.Before})
			if len(at) != f.Places || f.Places < 1 || f.RecordStream == f.WaitStream {
				t.Fatalf("fix %s: %d places, reported %d", f, len(at), f.Places)
			}
			for _, w := range at {
				verify.AddWait(q, w[0], w[1])
			}
			covered += len(f.Races)
		}
		if err := verify.Verify(q); err != nil || covered != len(re.Races) {
			t.Fatalf("the fixes at their places: %v; they list %d of %d races\n%v", err, covered, len(re.Races), re)
		}
	})
}
