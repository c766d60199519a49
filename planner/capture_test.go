package planner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

func TestCaptureRules(t *testing.T) {
	for _, c := range []struct {
		name    string
		spec    *dag.Spec
		kinds   map[string]string
		threads map[string]string // stream → host thread
		lazy    string            // a buffer allocated lazily
		pinned  string            // a host_pinned buffer
		mode    string
		want    string // the broken rule, "" for none
		stage   string // the stage named
		fixWord string // a word of the fix
	}{
		{name: "fork not joined", want: verify.CaptureUnjoined, stage: "f", fixWord: "add f to the waits of z",
			spec: manual(spec(stage("a", on("s0"), writes("x")), stage("f", on("s1"), waits("a"), writes("y")), stage("z", on("s0"), writes("x"))))},
		{name: "fork joined",
			spec: manual(spec(stage("a", on("s0"), writes("x")), stage("f", on("s1"), waits("a"), writes("y")), stage("z", on("s0"), waits("f"), writes("x"))))},
		{name: "fork joined through another forked stream",
			spec: manual(spec(stage("a", on("s0"), writes("x")), stage("f", on("s1"), waits("a"), writes("y")),
				stage("g", on("s2"), waits("f"), writes("w")), stage("z", on("s0"), waits("g"), writes("x"))))},
		{name: "host waits for captured work", want: verify.CaptureSync, stage: "h",
			spec: manual(spec(stage("a", on("s0"), writes("x")), stage("h", on(dag.HostStream), waits("a")), stage("z", on("s0"), writes("x"))))},
		{name: "host waits for work outside the capture, global mode", want: verify.CaptureSync, stage: "h", fixWord: "mode: relaxed",
			spec: manual(spec(stage("a", on("s0"), writes("x")), stage("b", on("s1"), writes("y")), stage("h", on(dag.HostStream), waits("b")), stage("z", on("s0"), writes("x"))))},
		{name: "host waits for work outside the capture, thread-local mode, capturing thread", want: verify.CaptureSync, stage: "h", mode: plan.CaptureThreadLocal,
			spec: manual(spec(stage("a", on("s0"), writes("x")), stage("b", on("s1"), writes("y")), stage("h", on(dag.HostStream), waits("b")), stage("z", on("s0"), writes("x"))))},
		{name: "host waits for work outside the capture, relaxed mode", mode: plan.CaptureRelaxed,
			spec: manual(spec(stage("a", on("s0"), writes("x")), stage("b", on("s1"), writes("y")), stage("h", on(dag.HostStream), waits("b")), stage("z", on("s0"), writes("x"))))},
		// b is issued after a: a cannot wait for it, so the fix moves b
		// before the capture or captures it.
		{name: "captured stream waits for work outside the capture", want: verify.CaptureIsolation, stage: "z",
			fixWord: "issue b before the capture begins (above a, the capture's first stage) and add b to the waits of a, or let stream s1 join the capture: add a to the waits of b",
			spec:    manual(spec(stage("a", on("s0"), writes("x")), stage("b", on("s1"), writes("y")), stage("z", on("s0"), waits("b"), reads("y"), writes("x"))))},
		{name: "captured stream waits for work before the capture, in a later stage", want: verify.CaptureIsolation, stage: "z", fixWord: "a wait of a, the capture's first stage",
			spec: manual(spec(stage("b", on("s1"), writes("y")), stage("a", on("s0"), writes("x")), stage("z", on("s0"), waits("b"), reads("y"), writes("x"))))},
		{name: "the capture's first stage waits for work before the capture",
			spec: manual(spec(stage("b", on("s1"), writes("y")), stage("a", on("s0"), waits("b"), writes("x")), stage("z", on("s0"), reads("y"), writes("x"))))},
		{name: "a forked stream waits for work outside the capture", want: verify.CaptureIsolation, stage: "g",
			spec: manual(spec(stage("a", on("s0"), writes("x")), stage("b", on("s2"), writes("y")), stage("f", on("s1"), waits("a"), writes("w")),
				stage("g", on("s1"), waits("b"), reads("y"), writes("w")), stage("z", on("s0"), waits("g"), writes("x"))))},
		{name: "host reads what captured work writes", want: verify.CaptureHostAccess, stage: "h", pinned: "p",
			spec: manual(spec(stage("a", kernel("fill"), on("s0"), writes("p")), stage("h", kernel("checksum"), on(dag.HostStream), reads("p"), writes("q")), stage("z", on("s0"), writes("x"))))},
		{name: "lazy workspace first used in the capture", want: verify.CaptureAlloc, stage: "a", lazy: "ws", fixWord: "warm up on stream s0",
			spec: manual(spec(stage("warm", on("s1"), writes("ws")), stage("a", on("s0"), waits("warm"), writes("ws")), stage("z", on("s0"), writes("x"))))},
		{name: "lazy workspace warmed up on the capture stream", lazy: "ws",
			spec: manual(spec(stage("warm", on("s0"), writes("ws")), stage("a", on("s0"), writes("ws")), stage("z", on("s0"), writes("x"))))},
		{name: "lazy workspace, relaxed mode", lazy: "ws", mode: plan.CaptureRelaxed,
			spec: manual(spec(stage("a", on("s0"), writes("ws")), stage("z", on("s0"), writes("x"))))},
		{name: "lazy workspace first used on a stream not captured, global mode", want: verify.CaptureAlloc, stage: "b", lazy: "ws", fixWord: "warm up on stream s1",
			spec: manual(spec(stage("a", on("s0"), writes("x")), stage("b", on("s1"), writes("ws")), stage("z", on("s0"), writes("x"))))},
		{name: "lazy workspace first used on a stream not captured, thread-local mode, same thread", want: verify.CaptureAlloc, stage: "b", lazy: "ws", mode: plan.CaptureThreadLocal,
			spec: manual(spec(stage("a", on("s0"), writes("x")), stage("b", on("s1"), writes("ws")), stage("z", on("s0"), writes("x"))))},
		{name: "lazy workspace first used on a stream not captured, thread-local mode, other thread", lazy: "ws", mode: plan.CaptureThreadLocal,
			threads: map[string]string{"s1": "t2"},
			spec:    manual(spec(stage("a", on("s0"), writes("x")), stage("b", on("s1"), writes("ws")), stage("z", on("s0"), writes("x"))))},
		{name: "lazy workspace first used on a stream not captured, relaxed mode", lazy: "ws", mode: plan.CaptureRelaxed,
			spec: manual(spec(stage("a", on("s0"), writes("x")), stage("b", on("s1"), writes("ws")), stage("z", on("s0"), writes("x"))))},
		{name: "legacy stream while a blocking stream is captured", want: verify.CaptureLegacy, stage: "l",
			kinds: map[string]string{"s0": plan.StreamBlocking, "L": plan.StreamLegacy},
			spec:  manual(spec(stage("a", on("s0"), writes("x")), stage("l", on("L"), writes("y")), stage("z", on("s0"), writes("x"))))},
		{name: "legacy stream while a blocking stream is captured, relaxed mode", want: verify.CaptureLegacy, stage: "l", mode: plan.CaptureRelaxed,
			kinds: map[string]string{"s0": plan.StreamBlocking, "L": plan.StreamLegacy},
			spec:  manual(spec(stage("a", on("s0"), writes("x")), stage("l", on("L"), writes("y")), stage("z", on("s0"), writes("x"))))},
		{name: "legacy stream while a blocking stream is captured, thread-local mode, other thread", want: verify.CaptureLegacy, stage: "l", mode: plan.CaptureThreadLocal,
			kinds: map[string]string{"s0": plan.StreamBlocking, "L": plan.StreamLegacy}, threads: map[string]string{"L": "t2"},
			spec: manual(spec(stage("a", on("s0"), writes("x")), stage("l", on("L"), writes("y")), stage("z", on("s0"), writes("x"))))},
		{name: "legacy stream while a non-blocking stream is captured",
			kinds: map[string]string{"L": plan.StreamLegacy},
			spec:  manual(spec(stage("a", on("s0"), writes("x")), stage("l", on("L"), writes("y")), stage("z", on("s0"), writes("x"))))},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.spec.Buffers {
				if c.spec.Buffers[i].Name == c.pinned || c.spec.Buffers[i].Name == "q" {
					c.spec.Buffers[i].Where = dag.WhereHostPinned
				}
				if c.spec.Buffers[i].Name == c.lazy {
					c.spec.Buffers[i].Alloc = dag.AllocLazy
				}
			}
			p, err := Build(c.spec, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range p.Streams {
				p.Streams[i].Kind = c.kinds[p.Streams[i].Name]
				p.Streams[i].Thread = c.threads[p.Streams[i].Name]
			}
			first := "a"
			p.Captures = []plan.Capture{{Stream: p.Stages[p.StageIndex(first)].Stream, First: first, Last: "z", Mode: c.mode}}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			got := verify.CheckCaptures(p)
			if c.want == "" {
				if len(got) != 0 {
					t.Fatalf("want no violation, got %v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Rule != c.want || got[0].Stage != c.stage || !strings.Contains(got[0].Fix, c.fixWord) {
				t.Fatalf("want rule %q at %s (fix with %q), got %v", c.want, c.stage, c.fixWord, got)
			}
			// Verify reports it through the race report.
			var re *verify.RaceError
			if err := verify.Verify(p); !errors.As(err, &re) || len(re.Captures) != 1 || !strings.Contains(err.Error(), `capture rule "`+c.want+`"`) {
				t.Errorf("Verify = %v", err)
			}
		})
	}
}

// Two captures on one stream whose regions share a stage: the plan is
// invalid (a stream has one capture at a time); disjoint ones are valid.
func TestCapturesOverlap(t *testing.T) {
	p := build(t, manual(spec(stage("a", on("s0"), writes("x")), stage("b", on("s0"), writes("x")), stage("c", on("s0"), writes("x")))), Options{})
	p.Captures = []plan.Capture{{Stream: 0, First: "a", Last: "a"}, {Stream: 0, First: "b", Last: "c"}}
	if err := p.Validate(); err != nil {
		t.Fatalf("disjoint captures: %v", err)
	}
	// A capture begun on a stream that has joined another capture.
	q := build(t, manual(spec(stage("a", on("s0"), writes("x")), stage("f", on("s1"), waits("a"), writes("y")), stage("g", on("s1"), writes("y")), stage("z", on("s0"), waits("g"), writes("x")))), Options{})
	q.Captures = []plan.Capture{{Stream: 0, First: "a", Last: "z"}, {Stream: 1, First: "g", Last: "g"}}
	if err := q.Validate(); err == nil || !strings.Contains(err.Error(), "begins on stream s1, which joined capture 0") {
		t.Fatalf("capture on a joined stream: Validate = %v", err)
	}
	p.Captures = []plan.Capture{{Stream: 0, First: "a", Last: "b"}, {Stream: 0, First: "b", Last: "c", Source: "t.yaml:12:5"}}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "capture 1 (t.yaml:12:5) of b…c on stream s0 overlaps capture 0") {
		t.Fatalf("overlapping captures: Validate = %v", err)
	}
}

// A stream that one capture takes waits on an event recorded in another
// capture: the merge rule (not unjoined), and its fix, one capture with
// the stream joined back, keeps every rule.
func TestCaptureMerge(t *testing.T) {
	const racy = `version: 1
sync: manual
buffers:
  - {name: x, bytes: 4096, init: {random: 1}}
  - {name: y, bytes: 4096}
  - {name: z, bytes: 4096, role: output}
stages:
  - {name: a1, kernel: scale, args: {a: 2.0}, reads: [x], writes: [y], stream: s1}
  - {name: b1, kernel: spin, stream: s2}
  - {name: b2, kernel: scale, args: {a: 2.0}, reads: [y], writes: [z], stream: s2, waits: [a1]}
  - {name: a2, kernel: spin, stream: s1}
captures:
  - {stream: s1, first: a1, last: a2}
  - {stream: s2, first: b1, last: b2}
`
	p, err := Build(loadSpec(t, racy), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := verify.CheckCaptures(p)
	if len(got) != 1 || got[0].Rule != "merge" || got[0].Stage != "b2" || got[0].Error != "CUDA_ERROR_STREAM_CAPTURE_MERGE" {
		t.Fatalf("want one merge violation at b2, got %v", got)
	}
	const want = "remove the capture of b1…b2 on stream s2 (test.yaml:14:5) and join stream s2 back before the capture on s1 ends: add b2 to the waits of a2"
	if !strings.Contains(got[0].Fix, want) {
		t.Fatalf("fix %q, want %q", got[0].Fix, want)
	}
	// Stream s2 already joined back (a2 waits for b2): the fix only
	// removes the second capture, it does not ask for the wait again.
	joined := strings.Replace(racy, "{name: a2, kernel: spin, stream: s1}", "{name: a2, kernel: spin, stream: s1, waits: [b2]}", 1)
	pj, err := Build(loadSpec(t, joined), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got = verify.CheckCaptures(pj)
	if len(got) == 0 || got[0].Rule != "merge" || strings.Contains(got[0].Fix, "add b2 to the waits") || !strings.Contains(got[0].Fix, "remove the capture of b1…b2") {
		t.Fatalf("joined: want a merge violation whose fix only removes the capture, got %v", got)
	}
	fixed := strings.Replace(racy, "  - {stream: s2, first: b1, last: b2}\n", "", 1)
	fixed = strings.Replace(fixed, "{name: a2, kernel: spin, stream: s1}", "{name: a2, kernel: spin, stream: s1, waits: [b2]}", 1)
	if err := verify.Verify(build(t, loadSpec(t, fixed), Options{})); err != nil {
		t.Fatalf("the suggested fix: %v", err)
	}
}

// An automatically synchronized spec keeps the join rule by construction:
// the planner joins the forked stream back into the capture's stream
// before its last stage, with one wait more than the hazards need.
func TestCaptureAutoJoin(t *testing.T) {
	s := loadSpec(t, `version: 1
buffers:
  - {name: a, bytes: 4096}
  - {name: b, bytes: 4096}
  - {name: out, bytes: 4096, role: output}
stages:
  - {name: fork, kernel: fill, args: {value: 1.0}, writes: [a], stream: main}
  - {name: branch, kernel: scale, args: {a: 2.0}, reads: [a], writes: [b], stream: side}
  - {name: tail, kernel: scale, args: {a: 3.0}, reads: [a], writes: [out], stream: main}
captures:
  - {stream: main, first: fork, last: tail}
`)
	p, err := Build(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got, want := ops(p), "main: fork rec0 wait1 tail rec2\nside: wait0 branch rec1\n"; got != want {
		t.Errorf("ops\n%swant\n%s", got, want)
	}
	if p.Stats.Waits != 2 {
		t.Errorf("%d waits, want 2 (the fork and the join)", p.Stats.Waits)
	}
}

// Two streams forked into a capture and neither joined back: CheckCaptures
// reports both, always in the same order (the report of a plan must not
// change from run to run).
func TestCaptureUnjoinedOrderStable(t *testing.T) {
	const racy = `version: 1
sync: manual
buffers:
  - {name: a, bytes: 64}
  - {name: b, bytes: 64}
  - {name: c, bytes: 64}
  - {name: d, bytes: 64}
stages:
  - {name: fork, kernel: fill, args: {value: 1.0}, writes: [a], stream: s0}
  - {name: left, kernel: mix, reads: [a], writes: [b], stream: s1, waits: [fork]}
  - {name: mid, kernel: mix, reads: [a], writes: [c], stream: s2, waits: [fork]}
  - {name: right, kernel: mix, reads: [a], writes: [d], stream: s3, waits: [fork]}
  - {name: join, kernel: spin, stream: s0}
captures:
  - {stream: s0, first: fork, last: join}
`
	p, err := Build(loadSpec(t, racy), Options{})
	if err != nil {
		t.Fatal(err)
	}
	stages := func() string {
		var b strings.Builder
		for _, v := range verify.CheckCaptures(p) {
			b.WriteString(v.Rule + ":" + v.Stage + " ")
		}
		return b.String()
	}
	want := stages()
	if strings.Count(want, verify.CaptureUnjoined+":") != 3 {
		t.Fatalf("CheckCaptures = %s, want the unjoined rule broken by left, mid and right", want)
	}
	for range 50 {
		if got := stages(); got != want {
			t.Fatalf("CheckCaptures gave %s, then %s: the order changes from call to call", want, got)
		}
	}
}

// TestFixBreakingIsolationSaysSo: a race between work a capture does not
// take and a captured stage is fixed by no wait of the captured stage (the
// driver refuses a captured wait on a record the capture does not make):
// the fix says the wait breaks capture isolation and gives the edit that
// works instead; a fix of a plan without such a wait says nothing of it.
func TestFixBreakingIsolationSaysSo(t *testing.T) {
	for _, c := range []struct {
		name, src, want string
	}{
		{"record in the region", `version: 1
sync: manual
buffers:
  - {name: x, bytes: 64}
  - {name: y, bytes: 64}
  - {name: out, bytes: 64, role: output}
stages:
  - {name: a, kernel: fill, args: {value: 2.0}, writes: [x], stream: cap}
  - {name: s, kernel: fill, args: {value: 5.0}, writes: [y], stream: side}
  - {name: b, kernel: mix, reads: [x, y], writes: [out], stream: cap}
captures:
  - {stream: cap, first: a, last: b}
`, "but the wait breaks capture isolation (CUDA_ERROR_STREAM_CAPTURE_ISOLATION): b is captured and the record after s is not made in the capture: issue s before the capture begins (above a, the capture's first stage) and add s to the waits of a, or let stream side join the capture: add a to the waits of s"},
		{"record before the capture", `version: 1
sync: manual
buffers:
  - {name: x, bytes: 64}
  - {name: y, bytes: 64}
  - {name: out, bytes: 64, role: output}
stages:
  - {name: s, kernel: fill, args: {value: 5.0}, writes: [y], stream: side}
  - {name: a, kernel: fill, args: {value: 2.0}, writes: [x], stream: cap}
  - {name: b, kernel: mix, reads: [x, y], writes: [out], stream: cap}
captures:
  - {stream: cap, first: a, last: b}
`, "but the wait breaks capture isolation (CUDA_ERROR_STREAM_CAPTURE_ISOLATION): b is captured and the record after s is not made in the capture: wait before the capture begins instead (a wait of a, the capture's first stage"},
		{"no capture", `version: 1
sync: manual
buffers:
  - {name: x, bytes: 64}
  - {name: y, bytes: 64}
  - {name: out, bytes: 64, role: output}
stages:
  - {name: a, kernel: fill, args: {value: 2.0}, writes: [x], stream: cap}
  - {name: s, kernel: fill, args: {value: 5.0}, writes: [y], stream: side}
  - {name: b, kernel: mix, reads: [x, y], writes: [out], stream: cap}
`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Build(loadSpec(t, c.src), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var re *verify.RaceError
			if err := verify.Verify(p); !errors.As(err, &re) || len(re.Fixes) != 1 {
				t.Fatalf("Verify = %v, want one fix", err)
			}
			f := re.Fixes[0]
			if f.BeforeName != "b" || f.AfterName != "s" {
				t.Fatalf("fix %+v, want b waiting for s", f)
			}
			if c.want == "" {
				if strings.Contains(f.Edit, "isolation") {
					t.Errorf("fix without a capture: %s", f.Edit)
				}
				return
			}
			if !strings.Contains(f.Edit, c.want) {
				t.Errorf("fix:\n%s\nwant it to hold\n%s", f.Edit, c.want)
			}
		})
	}
}

// TestReplayOrderCaptureStreamStageAndLaterWork: a stream that joined a
// capture (side, by a wait for k1) runs work after the capture ends (k5)
// that reads what a stage on the capture's own stream (k1) wrote; in
// stream mode the joining wait orders it, in a replay that wait is a
// graph edge that side's later work does not follow, so the replay races:
// the replay order rule names the race and the fix (k5 waits for the
// capture's last stage), and with that fix it holds.
func TestReplayOrderCaptureStreamStageAndLaterWork(t *testing.T) {
	src := `version: 1
sync: manual
buffers:
  - {name: b0, bytes: 256}
  - {name: b2, bytes: 256}
  - {name: b3, bytes: 256, role: output}
  - {name: o, bytes: 256, role: output}
  - {name: hp, bytes: 256, where: host_pinned}
stages:
  - {name: k1, kernel: copy, reads: [hp], writes: [b2], stream: s0}
  - {name: k2, kernel: mix, reads: [b2], writes: [b0], stream: side, waits: [k1]}
  - {name: k3, kernel: mix, reads: [b2], writes: [b0], stream: s0, waits: [k2]}
  - {name: k4, kernel: mix, reads: [b0], writes: [b3], stream: s0}
  - {name: k5, kernel: mix, reads: [b2], writes: [o], stream: side WAITS}
captures:
  - {stream: s0, first: k1, last: k4}
`
	p, err := Build(loadSpec(t, strings.Replace(src, " WAITS", "", 1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var re *verify.RaceError
	if err := verify.Verify(p); !errors.As(err, &re) || len(re.Captures) == 0 || re.Captures[0].Rule != verify.CaptureReplayOrder ||
		!strings.Contains(re.Captures[0].Fix, "add k4 to the waits of k5") {
		t.Fatalf("Verify = %v, want the replay order rule with k5 waiting for k4", err)
	}
	p, err = Build(loadSpec(t, strings.Replace(src, " WAITS", ", waits: [k4]", 1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(p); err != nil {
		t.Errorf("with k5 waiting for k4: %v", err)
	}
}

// TestReplayOrderThroughBranch: stream s1 reads b1 (k2) before it joins
// the capture, and the next iteration's k0 overwrites b1 after the
// capture's end, ordered in stream mode only through s1's captured k4
// (k2 → k4 by s1's order, k4 → k5 → next k0). A replay runs k4 as a
// graph branch that does not follow k2, so the pair races: the replay
// order rule names k4 and the fix (k3, the first stage, waits for k2),
// which holds.
func TestReplayOrderThroughBranch(t *testing.T) {
	src := `version: 1
sync: manual
buffers:
  - {name: b0, bytes: 256}
  - {name: b1, bytes: 256}
  - {name: out, bytes: 256, role: output}
  - {name: hp, bytes: 256, where: host_pinned}
stages:
  - {name: k0, kernel: copy, reads: [hp], writes: [b1], stream: s0}
  - {name: k1, kernel: mix, reads: [b0], writes: [out], stream: s1, waits: [{stage: k5, lag: 1}]}
  - {name: k2, kernel: mix, reads: [b1], writes: [out], stream: s1, waits: [k0]}
  - {name: k3, kernel: mix, reads: [b1], writes: [b0], stream: s0, waits: [k1 WAITS]}
  - {name: k4, kernel: mix, reads: [b1], writes: [b0], stream: s1, waits: [k3]}
  - {name: k5, kernel: mix, reads: [b1], writes: [b0], stream: s0, waits: [k4]}
captures:
  - {stream: s0, first: k3, last: k5}
`
	p, err := Build(loadSpec(t, strings.Replace(src, " WAITS", "", 1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var re *verify.RaceError
	if err := verify.Verify(p); !errors.As(err, &re) || len(re.Captures) == 0 || re.Captures[0].Rule != verify.CaptureReplayOrder ||
		re.Captures[0].Stage != "k4" || !strings.Contains(re.Captures[0].Fix, "add it to the waits of k3") {
		t.Fatalf("Verify = %v, want the replay order rule at k4, fixed by a wait of k3 for k2", err)
	}
	p, err = Build(loadSpec(t, strings.Replace(src, " WAITS", ", k2", 1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(p); err != nil {
		t.Errorf("with k3 waiting for k2: %v", err)
	}
}

// TestAutoReplayOrderAcrossIterations: in this automatically synchronized
// plan, stream s1 joins the capture (k1…k4) and works after it (k7…k13);
// the next iteration's s0 work is ordered after that later work only
// through s1's branch of the next replay. The planner orders it so that a
// replay has no race stream mode lacks (Verify of ReplayPlan).
func TestAutoReplayOrderAcrossIterations(t *testing.T) {
	src := "version: 1\nbuffers:\n"
	for _, b := range []string{"b0", "b1", "b2", "b3", "b4", "out"} {
		src += "  - {name: " + b + ", bytes: 256}\n"
	}
	src += "  - {name: hp, bytes: 256, where: host_pinned}\nstages:\n"
	for i, st := range [][3]string{{"b2", "b0", "s0"}, {"b0", "b2", "s1"}, {"b0", "out", "s1"}, {"b3", "b0", "s1"}, {"b3", "out", "s1"},
		{"b2", "out", "s0"}, {"b1", "b4", "s0"}, {"b0", "out", "s1"}, {"b4", "b4", "s1"}, {"b4", "b2", "s0"}, {"b1", "b0", "s1"},
		{"b4", "b1", "s1"}, {"b2", "b3", "s0"}, {"hp", "b4", "s1"}} {
		kernel := "mix"
		if st[0] == "hp" {
			kernel = "copy"
		}
		src += fmt.Sprintf("  - {name: k%d, kernel: %s, reads: [%s], writes: [%s], stream: %s}\n", i, kernel, st[0], st[1], st[2])
	}
	src += "captures:\n  - {stream: s0, first: k0, last: k5, mode: relaxed}\n"
	p, err := Build(loadSpec(t, src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatal(err)
	}
	if err := verify.Races(verify.ReplayPlan(p)); err != nil {
		t.Errorf("a replay of the plan races:\n%v", err)
	}
}

// A stage of a joined stream issued before it joins (pre, on s1) and a
// stage of another joined stream issued after the capture (post, on s2)
// are ordered in stream mode only through the branches (pre → j1 by s1's
// order, j1 → j2, j2 → post by s2's order). A replay needs both sides:
// the first stage waits for pre (the launch follows it), and post waits
// for the last stage (it follows the whole replay); neither alone orders
// the pair. Every strategy's plan keeps the rule; a manual plan with the
// first side only is told the other side, not the one it has.
func TestReplayOrderBothSidesOfTheBranch(t *testing.T) {
	const src = `version: 1
buffers:
  - {name: a, bytes: 4096}
  - {name: b, bytes: 4096}
  - {name: c, bytes: 4096}
  - {name: x, bytes: 4096}
  - {name: out, bytes: 4096, role: output}
  - {name: y, bytes: 4096, role: output}
stages:
  - {name: pre, kernel: mix, reads: [x], writes: [y], stream: s1}
  - {name: fill, kernel: fill, args: {value: 1.0}, writes: [a], stream: main}
  - {name: j1, kernel: mix, reads: [a], writes: [b], stream: s1}
  - {name: j2, kernel: mix, reads: [b], writes: [c], stream: s2}
  - {name: tail, kernel: mix, reads: [c], writes: [out], stream: main}
  - {name: post, kernel: fill, args: {value: 3.0}, writes: [x], stream: s2}
captures:
  - {stream: main, first: fill, last: tail}
`
	for _, strategy := range []Strategy{StrategyDefault, StrategyNaive, StrategyRoundRobin, StrategyHazardDAG} {
		p, err := Build(loadSpec(t, src), Options{Check: true, Strategy: strategy})
		if err != nil {
			t.Fatalf("%s: %v", strategy, err)
		}
		if err := verify.Verify(p); err != nil {
			t.Fatalf("%s: Verify: %v\n%s", strategy, err, ops(p))
		}
		if err := verify.Races(verify.ReplayPlan(p)); err != nil {
			t.Errorf("%s: a replay of the plan races:\n%v", strategy, err)
		}
		if want := "s1: wait5@-1 pre rec3 wait0 j1 rec1\nmain: wait3 fill rec0 wait2 tail rec4\ns2: wait1 j2 rec2 wait4 post rec5\n"; strategy == StrategyDefault && ops(p) != want {
			t.Errorf("ops\n%swant\n%s", ops(p), want)
		}
	}
	const manual = `version: 1
sync: manual
buffers:
  - {name: a, bytes: 4096}
  - {name: b, bytes: 4096}
  - {name: c, bytes: 4096}
  - {name: x, bytes: 4096}
  - {name: out, bytes: 4096, role: output}
  - {name: y, bytes: 4096, role: output}
stages:
  - {name: pre, kernel: mix, reads: [x], writes: [y], stream: s1, waits: [{stage: post, lag: 1}]}
  - {name: fill, kernel: fill, args: {value: 1.0}, writes: [a], stream: main, waits: [pre]}
  - {name: j1, kernel: mix, reads: [a], writes: [b], stream: s1, waits: [fill]}
  - {name: j2, kernel: mix, reads: [b], writes: [c], stream: s2, waits: [j1]}
  - {name: tail, kernel: mix, reads: [c], writes: [out], stream: main, waits: [j2]}
  - {name: post, kernel: fill, args: {value: 3.0}, writes: [x], stream: s2WAITS}
captures:
  - {stream: main, first: fill, last: tail}
`
	p, err := Build(loadSpec(t, strings.Replace(manual, "WAITS", "", 1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var re *verify.RaceError
	if err := verify.Verify(p); !errors.As(err, &re) || len(re.Captures) == 0 {
		t.Fatalf("Verify = %v, want the replay order rule", err)
	}
	for _, v := range re.Captures {
		if v.Rule != verify.CaptureReplayOrder || !strings.Contains(v.Fix, "add tail to the waits of post") {
			t.Errorf("violation %v, want the replay order rule fixed by a wait of post for tail", v)
		}
	}
	p, err = Build(loadSpec(t, strings.Replace(manual, "WAITS", ", waits: [tail]", 1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(p); err != nil {
		t.Errorf("with post waiting for tail: %v", err)
	}
}

// A wait that orderReplays adds across iterations on an event the plan
// already records gets the ring slots its lag needs (crossSlots): with
// one slot, the wait on iteration t−2's record would take a later
// iteration's, an order the plan then lacks once its slots are counted.
func TestAddWaitAcrossIterationsGetsSlots(t *testing.T) {
	const src = `version: 1
buffers:
  - {name: a, bytes: 4096}
  - {name: out, bytes: 4096, role: output}
stages:
  - {name: head, kernel: fill, args: {value: 1.0}, writes: [a], stream: s0}
  - {name: tail, kernel: mix, reads: [a], writes: [out], stream: s1}
`
	p, err := Build(loadSpec(t, src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Iteration == nil {
		t.Fatal("no iteration info")
	}
	head, tail := p.StageIndex("head"), p.StageIndex("tail")
	addReplayWait(p, tail, head, 2)
	if !plan.HasWait(p, tail, head, 2) || plan.HasWait(p, tail, head, 3) {
		t.Fatalf("hasWait does not find the wait addWait made:\n%s", ops(p))
	}
	want := crossSlots(p)
	if !slices.Equal(p.Iteration.Slots, want) {
		t.Errorf("slots %v, want %v\n%s", p.Iteration.Slots, want, ops(p))
	}
	if err := verify.Verify(p); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

// A replay race of two uncaptured stages whose branch side already has its
// wait: st28 (iteration t) reaches p1's branch of a later replay only
// through a wait p1 issues before it joins the capture, so the wait of
// st0 (p1, before it joins) for the capture's last stage does not order
// st0 after st28 two iterations on; st0 waits for st28 itself. A case
// the property test TestAutoCapturesKeepRules found (naive strategy, one
// stream set, rings of two on b0 and b1).
func TestAutoReplayOrderThroughJoiningWait(t *testing.T) {
	rows := [][4]string{ // reads, writes, after, stream of st0, st1, …
		{"b1[4:60] b2[8:44]", "", "", "p1"},
		{"b0[8:48] b1[0:64]", "", "", "p0"},
		{"b0[0:64]", "b0[0:64]", "st1", ""},
		{"b2[0:64] b0[0:64]", "b1[52:56]", "st0", ""},
		{"b2[16:24] b0[16:36]", "", "", ""},
		{"b2[0:64]", "b0[12:28]", "", ""},
		{"b1[0:64] b2[0:20]", "b0[0:64]", "", ""},
		{"b2[0:64]", "b2[12:36] b0[0:64]", "", "p1"},
		{"b1[0:64] b2[0:64]", "b1[0:4]", "", ""},
		{"b1[52:56] b0[32:40]", "b2[24:32] b0[52:64]", "", ""},
		{"b1[0:64]", "b1[8:40] b0[4:44]", "", ""},
		{"b0[0:64] b0[12:20]", "b1[0:64]", "", ""},
		{"b1[52:56] b1[0:64]", "", "", "p2"},
		{"b0[0:64] b1[0:64]", "b1[0:16] b2[0:64]", "", "p0"},
		{"b0[4:8]", "b0[4:48]", "", "p0"},
		{"", "", "st14", ""},
		{"", "b0[0:64]", "", ""},
		{"b2[8:32]", "b1[0:64]", "st10", ""},
		{"", "", "", ""},
		{"", "b2[40:44]", "", ""},
		{"", "b1[0:64]", "", ""},
		{"b1[0:64]", "", "", "p1"},
		{"b0[0:64]", "b2[0:64] b2[0:64]", "", ""},
		{"", "b2[56:64]", "", "p1"},
		{"b0[0:64]", "", "", ""},
		{"b1[0:64] b0[0:64]", "b0[52:64] b2[0:8]", "", "p0"},
		{"", "", "", "p2"},
		{"b2[0:64]", "b1[24:44]", "", ""},
		{"", "b1[52:56]", "", ""},
		{"", "", "", "p2"},
		{"b0[24:60] b1[60:64]", "b0[60:64] b1[0:4]", "st2", ""},
		{"", "b2[60:64] b0[0:64]", "", "p0"},
		{"b1[0:64]", "", "", "p2"},
		{"b2[0:64]", "b0[0:64]", "", ""},
		{"b1[8:20] b0[24:28]", "b2[24:36]", "", ""},
		{"", "b0[0:64] b0[8:16]", "st0", ""},
	}
	s := &dag.Spec{Name: "prop", Sync: dag.SyncAuto}
	for b, copies := range []int{2, 2, 1} {
		s.Buffers = append(s.Buffers, dag.BufferSpec{Name: fmt.Sprintf("b%d", b), Bytes: 64, Copies: copies})
	}
	access := func(list string) []dag.Access {
		var out []dag.Access
		for _, f := range strings.Fields(list) {
			var b, lo, hi int
			if _, err := fmt.Sscanf(f, "b%d[%d:%d]", &b, &lo, &hi); err != nil {
				t.Fatal(err)
			}
			out = append(out, dag.Access{Buffer: fmt.Sprintf("b%d", b), Offset: int64(lo), Bytes: int64(hi - lo)})
		}
		return out
	}
	for i, r := range rows {
		st := dag.StageSpec{Name: fmt.Sprintf("st%d", i), Kernel: dag.BuiltinMix, Reads: access(r[0]), Writes: access(r[1]), Stream: r[3]}
		if r[2] != "" {
			st.After = []string{r[2]}
		}
		s.Stages = append(s.Stages, st)
	}
	s.Captures = []dag.CaptureSpec{{Stream: "p0", First: "st1", Last: "st25", Mode: dag.CaptureRelaxed}}
	p, err := Build(s, Options{Strategy: StrategyNaive, StreamSets: 1, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	if !plan.HasWait(p, 28, 0, 2) {
		t.Errorf("st0 does not wait for st28 of two iterations back\n%s", ops(p))
	}
	if err := verify.Verify(p); err != nil {
		t.Fatalf("Verify: %v\n%s", err, ops(p))
	}
	if err := verify.Races(verify.ReplayPlan(p)); err != nil {
		t.Errorf("a replay of the plan races:\n%v", err)
	}
}

// Temps share arena bytes by stream mode's happens-before: here z (last
// read by p1 on s1 before s1 joins the capture) and g (written by j1,
// captured on s1) may share bytes because s1's order puts p1 before j1.
// A replay runs j1 as a graph branch that does not follow p1, so the
// arena pass gives the plan the wait that keeps that order in a replay
// (the capture's first stage waits for p1).
func TestArenaKeepsReplayOrder(t *testing.T) {
	const src = `version: 1
buffers:
  - {name: f, bytes: 4096}
  - {name: g, bytes: 4096}
  - {name: h, bytes: 4096}
  - {name: x, bytes: 4096, role: output}
  - {name: z, bytes: 4096}
  - {name: u, bytes: 4096, role: output}
  - {name: out, bytes: 4096, role: output}
stages:
  - {name: a0, kernel: fill, args: {value: 1.0}, writes: [f], stream: s3}
  - {name: a, kernel: mix, reads: [f], writes: [x, z], stream: s3}
  - {name: p1, kernel: mix, reads: [z], writes: [u], stream: s1}
  - {name: fill, kernel: fill, args: {value: 1.0}, writes: [f], stream: main}
  - {name: j1, kernel: mix, reads: [f], writes: [g], stream: s1}
  - {name: j2, kernel: mix, reads: [g], writes: [h], stream: s2}
  - {name: tail, kernel: mix, reads: [h], writes: [out], stream: main}
  - {name: b, kernel: fill, args: {value: 3.0}, writes: [x], stream: s2}
captures:
  - {stream: main, first: fill, last: tail}
`
	p, err := Build(loadSpec(t, src), Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatalf("Verify: %v\n%s", err, ops(p))
	}
	if err := verify.Races(verify.ReplayPlan(p)); err != nil {
		t.Errorf("a replay of the plan races:\n%v", err)
	}
	if !plan.HasWait(p, p.StageIndex("p1"), p.StageIndex("fill"), 0) {
		t.Errorf("fill does not wait for p1\n%s", ops(p))
	}
}
