package planner

import (
	"errors"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
	"pgregory.net/rapid"
)

// genCaptureSpec draws a genSpec with pins and a capture region on one of
// its pinned streams (device streams only: no host stage, lazy buffer or
// synchronous copy, whose capture rules are the spec's to keep), with
// rings on some buffers so that iterations overlap through cross waits.
func genCaptureSpec(t *rapid.T) *dag.Spec {
	s := genSpec(t, true, true)
	for i := range s.Buffers {
		s.Buffers[i].Copies = rapid.IntRange(0, 2).Draw(t, "copies")
	}
	on := map[string][]string{}
	var streams []string
	for _, st := range s.Stages {
		if st.Stream == "" {
			continue
		}
		if len(on[st.Stream]) == 0 {
			streams = append(streams, st.Stream)
		}
		on[st.Stream] = append(on[st.Stream], st.Name)
	}
	if len(streams) == 0 {
		t.Skip("no stream to capture")
	}
	cs := streams[rapid.IntRange(0, len(streams)-1).Draw(t, "capture stream")]
	names := on[cs]
	f := rapid.IntRange(0, len(names)-1).Draw(t, "first")
	l := rapid.IntRange(f, len(names)-1).Draw(t, "last")
	mode := []string{dag.CaptureGlobal, dag.CaptureThreadLocal, dag.CaptureRelaxed}[rapid.IntRange(0, 2).Draw(t, "mode")]
	s.Captures = []dag.CaptureSpec{{Stream: cs, First: names[f], Last: names[l], Mode: mode}}
	return s
}

// TestAutoCapturesKeepRules: the planner's own plan of a `sync: auto` spec
// with a capture region keeps every capture rule (isolation and join
// included) for every strategy, stream cap and stream sets: Build in check
// mode passes, and Verify, capture rules included, finds nothing.
func TestAutoCapturesKeepRules(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genCaptureSpec(t)
		o := Options{
			Strategy:   rapid.SampledFrom([]Strategy{StrategyDefault, StrategyNaive, StrategyRoundRobin, StrategyHazardDAG}).Draw(t, "strategy"),
			MaxStreams: drawCap(t, 4),
			StreamSets: rapid.IntRange(0, 2).Draw(t, "sets"),
			Check:      true,
		}
		p, err := Build(s, o)
		if err != nil {
			t.Fatalf("Build(%+v): %v\n%s%v", o, err, describe(s), s.Captures)
		}
		if err := verify.Verify(p); err != nil {
			t.Fatalf("Verify(%+v): %v\n%s%v\n%s", o, err, describe(s), s.Captures, ops(p))
		}
		// No wait of a forked stream right before the wait by which it
		// joins the capture: the capture would not take it, and the
		// graph's work would not wait for what it waits for.
		for _, c := range p.Captures {
			begin, _ := p.CaptureRegion(c)
			pos := map[[2]int]int{}
			for k, so := range p.IssueOrder {
				pos[so] = k
			}
			for s, J := range p.CaptureJoins(c) {
				if J < 0 || s == c.Stream {
					continue
				}
				j := p.IssueOrder[J][1]
				if j > 0 && p.Streams[s].Ops[j-1].Kind == plan.OpWait && pos[[2]int{s, j - 1}] >= begin {
					t.Fatalf("stream %s waits for %v in the region right before it joins the capture\n%s", p.Streams[s].Name, p.Streams[s].Ops[j-1], ops(p))
				}
			}
		}
	})
}

// An automatically synchronized capture keeps the isolation rule: a
// captured stage that needs work outside the capture waits for it before
// the capture begins, on the capture's first stage. The independent
// prefetch is issued before the capture (it would be issued inside it, on
// a stream the capture does not take, where no captured wait may wait for
// it, and no wait before the capture could); the cross-iteration wait of
// the capture's last stage moves to its first stage too, and so does the
// wait of a forked stream issued right before it joins the capture (the
// capture does not take it, and the graph's work would not wait for it).
func TestCaptureAutoIsolation(t *testing.T) {
	const head = `version: 1
buffers:
  - {name: a, bytes: 4096}
  - {name: b, bytes: 4096}
  - {name: out, bytes: 4096, role: output}
  - {name: c, bytes: 4096, role: output}
stages:
`
	for _, c := range []struct {
		name, stages, want string
		waits, cross       int
	}{
		{name: "work declared inside the region",
			stages: `  - {name: fill, kernel: fill, args: {value: 1.0}, writes: [a], stream: main}
  - {name: prefetch, kernel: fill, args: {value: 2.0}, writes: [b], stream: side}
  - {name: tail, kernel: mix, reads: [a, b], writes: [out], stream: main}
captures:
  - {stream: main, first: fill, last: tail}
`, want: "main: wait0 fill tail rec1\nside: wait1@-1 prefetch rec0\n", waits: 1, cross: 1},
		{name: "work before the region",
			stages: `  - {name: prefetch, kernel: fill, args: {value: 2.0}, writes: [b], stream: side}
  - {name: fill, kernel: fill, args: {value: 1.0}, writes: [a], stream: main}
  - {name: tail, kernel: mix, reads: [a, b], writes: [out], stream: main}
captures:
  - {stream: main, first: fill, last: tail}
`, want: "side: wait1@-1 prefetch rec0\nmain: wait0 fill tail rec1\n", waits: 1, cross: 1},
		{name: "the previous iteration's reader",
			stages: `  - {name: fill, kernel: fill, args: {value: 1.0}, writes: [a], stream: main}
  - {name: tail, kernel: mix, reads: [a], writes: [out], stream: main}
  - {name: drain, kernel: mix, reads: [out], writes: [c], stream: side}
captures:
  - {stream: main, first: fill, last: tail}
`, want: "main: wait1@-1 fill tail rec0\nside: wait0 drain rec1\n", waits: 1, cross: 1},
		{name: "a forked stream's wait right before it joins",
			stages: `  - {name: prefetch, kernel: fill, args: {value: 2.0}, writes: [b], stream: pre}
  - {name: fill, kernel: fill, args: {value: 1.0}, writes: [a], stream: main}
  - {name: mid, kernel: mix, reads: [a, b], writes: [c], stream: side}
  - {name: tail, kernel: mix, reads: [a, c], writes: [out], stream: main}
captures:
  - {stream: main, first: fill, last: tail}
`, want: "pre: wait2@-1 prefetch rec0\nmain: wait0 fill rec1 wait2 tail rec3\nside: wait1 mid rec2\n", waits: 3, cross: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Build(loadSpec(t, head+c.stages), Options{Check: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := verify.Verify(p); err != nil {
				t.Fatalf("Verify: %v\n%s", err, ops(p))
			}
			if got := ops(p); got != c.want {
				t.Errorf("ops\n%swant\n%s", got, c.want)
			}
			if p.Stats.Waits != c.waits || p.Iteration.CrossWaits != c.cross {
				t.Errorf("%d waits and %d cross waits, want %d and %d", p.Stats.Waits, p.Iteration.CrossWaits, c.waits, c.cross)
			}
		})
	}
}

// A captured stage that needs work following the capture's first stage
// through a host stage has no legal wait: inside the capture the wait
// breaks isolation, before it the wait would come before its record. The
// plan fails with a spec error at the waiting stage, naming the capture,
// both stages and the host stage, and what to change.
func TestCaptureAutoIsolationNoPlan(t *testing.T) {
	const src = `version: 1
buffers:
  - {name: h, bytes: 64, where: host_pinned}
  - {name: sum, bytes: 8, where: host_pinned}
  - {name: b, bytes: 8}
  - {name: out, bytes: 8, role: output}
stages:
  - {name: cb, kernel: fill, args: {value: 1.0}, host_func: true, writes: [h], stream: main}
  - {name: total, kernel: checksum, reads: [h], writes: [sum], stream: host}
  - {name: upload, kernel: copy, reads: [sum], writes: [b], stream: side}
  - {name: tail, kernel: mix, reads: [b], writes: [out], stream: main}
captures:
  - {stream: main, first: cb, last: tail, mode: relaxed}
`
	_, err := Build(loadSpec(t, src), Options{})
	var se dag.ErrorList
	if !errors.As(err, &se) || len(se) != 1 {
		t.Fatalf("Build = %v, want one spec error", err)
	}
	for _, w := range []string{":11:5: stage tail, which the capture of cb…tail on stream main (", "must wait for stage upload on stream side", "through host stage total", "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "hint: end the capture before tail, or order total after the capture ends"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Build = %v\nwant %q", err, w)
		}
	}
}
