package executor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// capStage is one stage of a generated capture spec.
type capStage struct {
	name, stream, kernel string
	args                 string
	reads, writes        []string
	waits                []string
}

// genCaptureSpec draws a hand-synchronized spec with one or two capture
// regions on stream cap (blocking or not; each region in a capture mode),
// in issue order: stages before,
// between and after the regions, and inside each region the captured
// stages on cap, eager work on side streams s1 and s2 (copies from and to
// pinned host memory, copies from pageable memory, kernels), and host
// stages on that memory, some of
// which wait for the side work. Each stage waits for most of the earlier
// stages it conflicts with, and now and then for another: many plans are
// race-free, the others have races or break capture rules.
func genCaptureSpec(t *rapid.T) string {
	devs := []string{"d0", "d1", "d2"}
	var stages []capStage
	n := 0
	add := func(stream string, label string) {
		st := capStage{name: fmt.Sprintf("st%d", n), stream: stream}
		n++
		if stream == dag.HostStream {
			switch rapid.IntRange(0, 3).Draw(t, label+" host kernel") {
			case 0:
				st.kernel, st.args, st.writes = dag.BuiltinFill, fmt.Sprintf("{value: %d.0}", n), []string{"h0"}
			case 3:
				st.kernel, st.args, st.writes = dag.BuiltinFill, fmt.Sprintf("{value: %d.0}", n), []string{"hp"}
			case 1:
				st.kernel, st.reads, st.writes = dag.BuiltinChecksum, []string{"h0"}, []string{"hs"}
			default:
				st.kernel, st.args = dag.BuiltinSpin, "{us: 1}"
			}
		} else {
			d := devs[rapid.IntRange(0, 2).Draw(t, label+" buffer")]
			switch rapid.IntRange(0, 4).Draw(t, label+" kernel") {
			case 0:
				st.kernel, st.reads, st.writes = dag.BuiltinCopy, []string{"h0"}, []string{d}
			case 4:
				st.kernel, st.reads, st.writes = dag.BuiltinCopy, []string{"hp"}, []string{d}
			case 1:
				st.kernel, st.reads, st.writes = dag.BuiltinCopy, []string{d}, []string{"h0"}
			default:
				st.kernel, st.writes = dag.BuiltinMix, []string{d}
				for _, r := range devs {
					if r != d && rapid.Bool().Draw(t, label+" read "+r) {
						st.reads = append(st.reads, r)
					}
				}
			}
		}
		touches := func(a capStage, b string) (w, r bool) {
			return slices.Contains(a.writes, b), slices.Contains(a.reads, b)
		}
		for _, e := range stages {
			conflict := false
			for _, b := range append(slices.Clone(st.reads), st.writes...) {
				ew, er := touches(e, b)
				sw, _ := touches(st, b)
				if ew || (er && sw) {
					conflict = true
				}
			}
			keep := conflict && rapid.IntRange(0, 9).Draw(t, label+" keep wait") > 0 ||
				!conflict && rapid.IntRange(0, 14).Draw(t, label+" extra wait") == 0
			if keep && e.stream != st.stream {
				st.waits = append(st.waits, e.name)
			}
		}
		stages = append(stages, st)
	}
	sides := []string{"s1", "s2", dag.HostStream}
	some := func(label string, max int) {
		for k := rapid.IntRange(0, max).Draw(t, label); k > 0; k-- {
			add([]string{"cap", "s1", "s2", dag.HostStream}[rapid.IntRange(0, 3).Draw(t, label+" stream")], label)
		}
	}
	var caps []string
	some("before", 2)
	for r := rapid.IntRange(1, 2).Draw(t, "regions"); r > 0; r-- {
		first := n
		add("cap", "first")
		for k := rapid.IntRange(0, 5).Draw(t, "inside"); k > 0; k-- {
			if rapid.IntRange(0, 2).Draw(t, "captured?") == 0 {
				add("cap", "inside")
			} else {
				add(sides[rapid.IntRange(0, 2).Draw(t, "side")], "inside")
			}
		}
		add("cap", "last")
		mode := []string{"global", "thread_local", "relaxed", "relaxed"}[rapid.IntRange(0, 3).Draw(t, "mode")]
		caps = append(caps, fmt.Sprintf("  - {stream: cap, first: st%d, last: st%d, mode: %s}\n", first, n-1, mode))
		some("between", 2)
	}
	var b strings.Builder
	b.WriteString("version: 1\nname: capture-prop\nsync: manual\nstreams:\n")
	fmt.Fprintf(&b, "  - {name: cap, kind: %s}\n", []string{dag.KindBlocking, dag.KindNonBlocking}[rapid.IntRange(0, 1).Draw(t, "cap kind")])
	b.WriteString("buffers:\n")
	for _, d := range devs {
		fmt.Fprintf(&b, "  - {name: %s, bytes: 256, role: output}\n", d)
	}
	b.WriteString("  - {name: h0, bytes: 256, where: host_pinned, init: {random: 3}, role: output}\n")
	b.WriteString("  - {name: hs, bytes: 8, where: host_pinned, role: output}\n")
	b.WriteString("  - {name: hp, bytes: 256, where: host_pageable, init: {random: 4}}\n")
	b.WriteString("stages:\n")
	list := func(xs []string) string { return "[" + strings.Join(xs, ", ") + "]" }
	for _, st := range stages {
		fmt.Fprintf(&b, "  - {name: %s, kernel: %s, stream: %s", st.name, st.kernel, st.stream)
		if st.args != "" {
			fmt.Fprintf(&b, ", args: %s", st.args)
		}
		if len(st.reads) > 0 {
			fmt.Fprintf(&b, ", reads: %s", list(st.reads))
		}
		if len(st.writes) > 0 {
			fmt.Fprintf(&b, ", writes: %s", list(st.writes))
		}
		if len(st.waits) > 0 {
			fmt.Fprintf(&b, ", waits: %s", list(st.waits))
		}
		b.WriteString("}\n")
	}
	b.WriteString("captures:\n")
	for _, c := range caps {
		b.WriteString(c)
	}
	return b.String()
}

// TestCaptureRegionsProperty: for random hand-synchronized plans with
// capture regions (eager side work and host stages inside the regions,
// several iterations), graph mode on the simulator (emulated capture,
// whose race detector checks the replays) gives what stream mode gives
// and what `check --mode graph` says: a plan it passes runs in both modes
// without a race, with the same outputs; a plan it finds racy is racy in
// stream mode (a replay orders more than stream mode: the events recorded
// in a region are recorded again after the whole graph, so graph mode may
// run such a plan clean); a plan whose only faults are
// capture rules runs clean in stream mode and fails in graph mode; a plan
// graph mode refuses is refused by the run with the same reason, before
// any work; a plan whose only fault is a replay's order (a stream's work
// before it joined a capture, verify.CaptureReplayOrder) races in graph
// mode on the simulator, whose emulated replays run the joined streams'
// captured work as a graph's branches.
func TestCaptureRegionsProperty(t *testing.T) {
	var clean, racy, rules, refused, replay int
	rapid.Check(t, func(t *rapid.T) {
		src := genCaptureSpec(t)
		s, err := dag.Load([]byte(src), "prop.yaml", ".")
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		p, err := planner.Build(s, planner.Options{})
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		iters := rapid.IntRange(1, 4).Draw(t, "iterations")
		seed := rapid.Int64Range(0, 99).Draw(t, "seed")
		verdict := verify.Verify(p)
		var re *verify.RaceError
		if verdict != nil && !errors.As(verdict, &re) {
			t.Fatalf("Verify: %v\n%s", verdict, src)
		}
		refusal := executor.CheckRun(p, executor.Options{Mode: executor.ModeGraph, Iterations: iters})

		stream, serr := executor.Run(context.Background(), p, quickSim(seed), executor.Options{Iterations: iters})
		gb := executor.EmulateGraphs(quickSim(seed))
		graph, gerr := executor.Run(context.Background(), p, gb, executor.Options{Mode: executor.ModeGraph, Iterations: iters})
		if cerr := gb.Close(); cerr != nil && gerr == nil {
			t.Fatalf("graph backend Close: %v\n%s", cerr, src)
		}
		var sre *executor.RaceError
		streamRacy := errors.As(serr, &sre)
		if serr != nil && !streamRacy {
			t.Fatalf("stream mode: %v\n%s", serr, src)
		}
		hasRaces := re != nil && len(re.Races) > 0
		if streamRacy != hasRaces {
			t.Fatalf("stream mode race %v, check's races %v\nstream: %v\ncheck: %v\n%s", streamRacy, hasRaces, serr, verdict, src)
		}
		switch {
		case refusal != nil:
			refused++
			if gerr == nil || !strings.Contains(gerr.Error(), refusal.Error()) {
				t.Fatalf("check --mode graph refuses: %v\nbut graph mode: %v\n%s", refusal, gerr, src)
			}
		case verdict == nil:
			clean++
			if gerr != nil {
				t.Fatalf("check --mode graph says ok, graph mode: %v\n%s", gerr, src)
			}
			if sums(graph.Outputs) != sums(stream.Outputs) {
				t.Fatalf("graph mode %s\nstream mode %s\n%s", sums(graph.Outputs), sums(stream.Outputs), src)
			}
		case hasRaces:
			// A replay orders more than stream mode (the events
			// recorded in a region are recorded again after the whole
			// graph), so graph mode may miss a race of the plan: the
			// verdict is check's.
			racy++
		default:
			rules++
			if gerr == nil {
				t.Fatalf("check finds capture faults, graph mode runs clean: %v\n%s", verdict, src)
			}
			// A replay's order (verify.CaptureReplayOrder) is no
			// driver's error: the emulated replay races, and the
			// simulator's race detector must see it.
			if !slices.ContainsFunc(re.Captures, func(v verify.CaptureViolation) bool { return v.Rule != verify.CaptureReplayOrder }) {
				replay++
				if _, ok := errors.AsType[*executor.RaceError](gerr); !ok {
					t.Fatalf("check finds only replay-order faults, graph mode on the simulator: %v, want its race detector's report\n%s", gerr, src)
				}
			}
		}
	})
	t.Logf("plans: %d race-free, %d racy, %d breaking capture rules only (%d of them the replay's order only), %d refused by graph mode", clean, racy, rules, replay, refused)
	if clean == 0 || racy == 0 || rules == 0 {
		t.Errorf("the generator should give every kind of plan")
	}
}

// TestCaptureRegionReorderRefused: graph mode refuses, before any work, a
// region it could only lower by moving a wait in front of its record (a
// captured stage waits for eager work issued inside the region, which
// CUDA refuses in a capture) or a captured record behind an eager record
// of the same event, naming the stages.
func TestCaptureRegionReorderRefused(t *testing.T) {
	const spec = `version: 1
sync: manual
streams: [{name: cap, kind: blocking}]
buffers: [{name: x, bytes: 64}, {name: y, bytes: 64}, {name: z, bytes: 64}, {name: out, bytes: 64, role: output}]
stages:
  - {name: pre, kernel: fill, args: {value: 1.0}, writes: [x], stream: cap}
  - {name: other, kernel: fill, args: {value: 2.0}, writes: [y], stream: side}
  - {name: last, kernel: mix, reads: [x, y], writes: [out], stream: cap%s}
  - {name: after, kernel: mix, reads: [x], writes: [z], stream: late, waits: [pre, other]}
captures: [{stream: cap, first: pre, last: last}]
`
	o := executor.Options{Mode: executor.ModeGraph, Iterations: 2}
	err := executor.CheckRun(yamlPlan(t, fmt.Sprintf(spec, ", waits: [other]")), o)
	for _, w := range []string{"stage last (stream cap) waits for the record of stage other (stream side)", "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "before the capture begins"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("a captured wait on eager work in the region: %v, want %q", err, w)
		}
	}
	// A wait inside the capture on a record issued before it
	// (specs/rules/isolation-racy.yaml): refused too, not moved in front
	// of the capture; its fixed twin, which waits before the capture
	// begins, runs.
	err = executor.CheckRun(rulesPlan(t, "isolation-racy"), o)
	for _, w := range []string{"stage attention (stream cap) waits for the record of stage prefetch (stream side)", "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "does not move a wait in front of its capture", "a wait of stage norm"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("isolation-racy: %v, want %q", err, w)
		}
	}
	if err := executor.CheckRun(rulesPlan(t, "isolation-fixed"), o); err != nil {
		t.Errorf("isolation-fixed: %v", err)
	}
	// The same event recorded after pre (captured) and after other (eager).
	p := yamlPlan(t, fmt.Sprintf(spec, ""))
	if err := executor.CheckRun(p, o); err != nil {
		t.Fatalf("without the wait: %v", err)
	}
	recordAfter := func(stage string) *plan.Op {
		for s := range p.Streams {
			ops := p.Streams[s].Ops
			for j := 1; j < len(ops); j++ {
				if ops[j].Kind == plan.OpRecord && ops[j-1].Kind == plan.OpLaunch && p.Stages[ops[j-1].Stage].Name == stage {
					return &ops[j]
				}
			}
		}
		t.Fatalf("no record after %s", stage)
		return nil
	}
	recordAfter("other").Event = recordAfter("pre").Event
	err = executor.CheckRun(p, o)
	if err == nil || !strings.Contains(err.Error(), "stage other (stream side) records an event that stage pre (stream cap) recorded earlier") {
		t.Errorf("an eager record after a captured one of the same event: %v", err)
	}
}

// TestCaptureReplayOrder: graph mode on the simulator replays a joined
// stream's captured work as a graph's branch, after captured work and the
// launch only, so the race detector sees what a replay does on the GPU:
// specs/rules/replay-eager-racy.yaml (side's own write before it joined)
// and replay-wait-racy.yaml (a wait side issued before the joining one)
// race in graph mode, over several iterations, and not in stream mode;
// their fixed twins, which wait before the capture begins, run clean with
// stream mode's outputs.
func TestCaptureReplayOrder(t *testing.T) {
	for _, name := range []string{"replay-eager", "replay-wait"} {
		for _, iters := range []int{1, 3} {
			racy, fixed := rulesPlan(t, name+"-racy"), rulesPlan(t, name+"-fixed")
			o := executor.Options{Mode: executor.ModeGraph, Iterations: iters}
			if err := executor.CheckRun(racy, o); err != nil {
				t.Fatalf("%s-racy: graph mode refuses it: %v", name, err)
			}
			if _, err := executor.Run(context.Background(), racy, quickSim(1), executor.Options{Iterations: iters}); err != nil {
				t.Errorf("%s-racy, %d iteration(s), stream mode: %v", name, iters, err)
			}
			gb := executor.EmulateGraphs(quickSim(1))
			_, err := executor.Run(context.Background(), racy, gb, o)
			gb.Close()
			if re, ok := errors.AsType[*executor.RaceError](err); !ok || !strings.Contains(re.Error(), "with no happens-before path") {
				t.Errorf("%s-racy, %d iteration(s), graph mode: %v, want the race detector's report", name, iters, err)
			}
			stream, err := executor.Run(context.Background(), fixed, quickSim(1), executor.Options{Iterations: iters})
			if err != nil {
				t.Fatalf("%s-fixed, stream mode: %v", name, err)
			}
			gb = executor.EmulateGraphs(quickSim(1))
			graph, err := executor.Run(context.Background(), fixed, gb, o)
			if cerr := gb.Close(); err == nil {
				err = cerr
			}
			if err != nil || sums(graph.Outputs) != sums(stream.Outputs) {
				t.Errorf("%s-fixed, %d iteration(s), graph mode: %v, outputs %s, stream mode's %s", name, iters, err, sums(graph.Outputs), sums(stream.Outputs))
			}
		}
	}
}
