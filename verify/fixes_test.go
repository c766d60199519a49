package verify_test

import (
	"errors"
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

// genManual draws a small hand-synchronized spec: stages on 2 or 3
// streams touching a few buffers, with some waits (right or wrong).
func genManual(t *rapid.T) *dag.Spec {
	n := rapid.IntRange(2, 6).Draw(t, "stages")
	nb := rapid.IntRange(1, 3).Draw(t, "buffers")
	streams := []string{"a", "b", "c"}[:rapid.IntRange(2, 3).Draw(t, "streams")]
	var stages []dag.StageSpec
	for i := range n {
		opts := []stageOpt{on(rapid.SampledFrom(streams).Draw(t, "stream"))}
		buf := fmt.Sprint("x", rapid.IntRange(0, nb-1).Draw(t, "buf"))
		if rapid.Bool().Draw(t, "writes") {
			opts = append(opts, writes(buf))
		} else {
			opts = append(opts, reads(buf))
		}
		if i > 0 && rapid.IntRange(0, 3).Draw(t, "wait?") == 0 {
			opts = append(opts, waits(fmt.Sprint("v", rapid.IntRange(0, i-1).Draw(t, "waits"))))
		}
		stages = append(stages, stage(fmt.Sprint("v", i), opts...))
	}
	return manual(spec(stages...))
}

// candidates are every wait a fix could add: x's stream records after x,
// y's stream waits before y, x issued before y, different streams.
func candidates(p *plan.Plan) [][2]int {
	var out [][2]int
	for x := range p.Stages {
		for y := x + 1; y < len(p.Stages); y++ {
			if p.Stages[x].Stream != p.Stages[y].Stream {
				out = append(out, [2]int{x, y})
			}
		}
	}
	return out
}

// fixedBy reports whether p with waits ws added verifies.
func fixedBy(p *plan.Plan, ws [][2]int) bool {
	q := verify.ClonePlan(p)
	for _, w := range ws {
		verify.AddWait(q, w[0], w[1])
	}
	return verify.Verify(q) == nil
}

// anySubset reports whether some k of cands fix p.
func anySubset(p *plan.Plan, cands [][2]int, k int, chosen [][2]int, from int) bool {
	if len(chosen) == k {
		return fixedBy(p, chosen)
	}
	for i := from; i < len(cands); i++ {
		if anySubset(p, cands, k, append(chosen, cands[i]), i+1) {
			return true
		}
	}
	return false
}

// TestFixesMinimal: on random racy hand-synchronized specs, the reported
// fixes make the plan verify, and no smaller set of added waits does
// (brute force over every candidate wait).
func TestFixesMinimal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genManual(t)
		p, err := planner.Build(s, planner.Options{})
		if err != nil {
			t.Fatalf("%v", err)
		}
		err = verify.Verify(p)
		if err == nil {
			return
		}
		re, ok := err.(*verify.RaceError)
		if !ok {
			t.Fatalf("%v", err)
		}
		for _, k := range re.Unfixed {
			if r := re.Races[k]; !r.Reversed && r.FirstStream != r.SecondStream {
				t.Fatalf("race %v left without a fix", r)
			}
		}
		if len(re.Unfixed) > 0 {
			return
		}
		var ws [][2]int
		for _, f := range re.Fixes {
			ws = append(ws, [2]int{f.After, f.Before})
		}
		if !fixedBy(p, ws) {
			t.Fatalf("applying the fixes %v leaves races:\n%v", ws, err)
		}
		// The same fixes as edits of the spec: add After to Before's waits.
		fixed := *s
		fixed.Stages = append([]dag.StageSpec(nil), s.Stages...)
		for _, f := range re.Fixes {
			st := &fixed.Stages[f.Before]
			st.Waits = append(append([]string(nil), st.Waits...), f.AfterName)
		}
		if q, err := planner.Build(&fixed, planner.Options{}); err != nil || verify.Verify(q) != nil {
			t.Fatalf("the spec with the fixes applied: build %v, verify %v", err, verify.Verify(q))
		}
		if len(ws) > 0 && anySubset(p, candidates(p), len(ws)-1, nil, 0) {
			t.Fatalf("%d waits reported, fewer fix it:\n%v", len(ws), err)
		}
		covered := 0
		for _, f := range re.Fixes {
			covered += len(f.Races)
		}
		if covered != len(re.Races) {
			t.Fatalf("the fixes list %d of %d races", covered, len(re.Races))
		}
	})
}

// TestFixesMinimalAtGreedyBound: the exact fix search at both sides of
// the greedy set's size. A writer of x, readers on two other streams, then
// the writer overwrites x: the greedy search waits for each reader before
// the overwrite (5 waits), and 4 do it (the second reader waits for the
// first, the overwrite for the second), one fewer than greedy: the
// report has 4 fixes and claims them minimal. With one reader the greedy
// set (3) is minimal. In both, the fixes make the plan verify and no set
// of one fewer candidate waits does (brute force).
func TestFixesMinimalAtGreedyBound(t *testing.T) {
	for _, c := range []struct {
		name string
		s    *dag.Spec
		want int
	}{
		{"two readers between writes", manual(spec(stage("v0", on("c"), reads("x")), stage("v1", on("b"), writes("x")),
			stage("v2", on("a"), reads("x")), stage("v3", on("d"), reads("x")), stage("v4", on("b"), writes("x")))), 4},
		{"one reader between writes", manual(spec(stage("v0", on("c"), reads("x")), stage("v1", on("b"), writes("x")),
			stage("v2", on("a"), reads("x")), stage("v4", on("b"), writes("x")))), 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := planner.Build(c.s, planner.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var re *verify.RaceError
			if err := verify.Verify(p); !errors.As(err, &re) {
				t.Fatalf("want a race report, got %v", err)
			}
			var ws [][2]int
			for _, f := range re.Fixes {
				ws = append(ws, [2]int{f.After, f.Before})
			}
			if len(ws) != c.want || !re.FixesMinimal || len(re.Unfixed) > 0 {
				t.Fatalf("%d fixes (minimal %v, %d races unfixed), want %d proven minimal:\n%v", len(ws), re.FixesMinimal, len(re.Unfixed), c.want, re)
			}
			if !fixedBy(p, ws) {
				t.Fatalf("the fixes %v leave races", ws)
			}
			if anySubset(p, candidates(p), c.want-1, nil, 0) {
				t.Fatalf("%d waits fix the plan; the test's minimum %d is wrong", c.want-1, c.want)
			}
		})
	}
}

// TestLifetimeCutShort: a lifetime record that ends before a stream's last
// use of its buffer — its event moved to an earlier record on that stream,
// or its stream's entry dropped — is reported by Verify, naming the buffer
// and the stream; the plan as built has none.
func TestLifetimeCutShort(t *testing.T) {
	s, err := dag.LoadFile("../specs/shared-io/shared-io.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := build(t, s, planner.Options{})
	if gaps := verify.LifetimeGaps(p); len(gaps) != 0 {
		t.Fatalf("planned lifetimes have gaps: %v", gaps)
	}
	mutated := 0
	for i, l := range p.Lifetimes {
		for k, d := range l.Done {
			q := *p
			q.Lifetimes = append([]plan.Lifetime(nil), p.Lifetimes...)
			done := append([]plan.StreamAt(nil), l.Done...)
			// A record on the same stream before its last use of the
			// buffer, else no entry at all.
			ops := p.Streams[d.Stream].Ops
			last := -1
			for j, o := range ops {
				if o.Kind != plan.OpLaunch {
					continue
				}
				for _, a := range append(append([]plan.Access(nil), p.Stages[o.Stage].Reads...), p.Stages[o.Stage].Writes...) {
					if a.Buffer == l.Buffer {
						last = j
					}
				}
			}
			earlier := -1
			for j := 0; j < last; j++ {
				if ops[j].Kind == plan.OpRecord {
					earlier = ops[j].Event
				}
			}
			if earlier >= 0 {
				done[k].Event = earlier
			} else {
				done = append(done[:k], done[k+1:]...)
			}
			q.Lifetimes[i].Done = done
			err := verify.Verify(&q)
			re, ok := err.(*verify.RaceError)
			if !ok || len(re.Lifetimes) != 1 || re.Lifetimes[0].Buffer != l.Buffer || re.Lifetimes[0].Stream != p.Streams[d.Stream].Name {
				t.Errorf("lifetime of %s cut on stream %d: Verify = %v", l.Buffer, d.Stream, err)
			}
			// The same with the lifetimes not in the buffers' order (found
			// by name).
			r := q
			r.Lifetimes = slices.Clone(q.Lifetimes)
			slices.Reverse(r.Lifetimes)
			if gaps := verify.LifetimeGaps(&r); len(gaps) != 1 || gaps[0] != re.Lifetimes[0] {
				t.Errorf("lifetime of %s cut on stream %d, lifetimes reversed: gaps %v", l.Buffer, d.Stream, gaps)
			}
			mutated++
		}
	}
	if mutated == 0 {
		t.Fatal("no lifetime to cut")
	}
}

// TestWarnings: a redundant wait names what implies it, a wait on an event
// recorded twice names both records, a wait before its record waits for
// nothing; a planned plan has no warning.
func TestWarnings(t *testing.T) {
	s := manual(spec(
		stage("a", on("s0"), writes("x")),
		stage("b", on("s1"), reads("x"), writes("y"), waits("a")),
		stage("c", on("s2"), reads("x", "y"), waits("b", "a")),
		stage("d", on("s2"), reads("x"), waits("e")),
		stage("e", on("s0"), reads("y")),
	))
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := verify.Warnings(p)
	want := []string{
		"c: the wait for the record after a on stream s0 is redundant: the earlier wait for the record after b on stream s1 already orders it",
		"d: a wait on stream s2 waits for nothing: its event is recorded after e on stream s0, but only later in the issue order (wait-before-record)",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("warnings:\n%q\nwant\n%q", got, want)
	}
	s2 := manual(spec(stage("a", on("s0"), writes("x")), stage("b", on("s1"), reads("x"))))
	s2.Stages[0].Event = "ev"
	s2.Stages = append(s2.Stages, dag.StageSpec{Name: "a2", Kernel: dag.BuiltinSpin, Stream: "s0", Event: "ev"})
	s2.Stages[1].WaitFor = []dag.WaitSpec{{Event: "ev"}}
	s2.Stages[1], s2.Stages[2] = s2.Stages[2], s2.Stages[1]
	p2, err := planner.Build(s2, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if w := verify.Warnings(p2); len(w) != 1 || !strings.Contains(w[0], "waits for its event's latest record, after a2 on stream s0, not the earlier one after a on stream s0") {
		t.Errorf("re-recorded event: %q", w)
	}
	sp, err := dag.LoadFile("../specs/shared-io/shared-io.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w := verify.Warnings(build(t, sp, planner.Options{})); len(w) != 0 {
		t.Errorf("planned plan: %q", w)
	}
	// A wait made redundant by a later wait of the same launch: b waits on
	// a, then on x, which follows a on its stream.
	s3 := manual(spec(stage("a", on("s0"), writes("x")), stage("x", on("s0"), writes("z")), stage("b", on("s1"), reads("x", "z"), waits("a", "x"))))
	p3, err := planner.Build(s3, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if w := verify.Warnings(p3); len(w) != 1 || !strings.Contains(w[0], "b: the wait for the record after a on stream s0 is redundant: the later wait for the record after x on stream s0 already orders it") {
		t.Errorf("later wait: %q", w)
	}
}

// TestWarnUnwrittenOutput: an output buffer no stage writes and nothing
// initialises is named; once a stage writes it, or an init fills it, not.
func TestWarnUnwrittenOutput(t *testing.T) {
	warned := func(s *dag.Spec) bool {
		p, err := planner.Build(s, planner.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range verify.Warnings(p) {
			if strings.HasPrefix(w, "output buffer y: no stage writes it") {
				return true
			}
		}
		return false
	}
	s := spec(stage("a", writes("x")), stage("b", reads("x")))
	s.Buffers = append(s.Buffers, dag.BufferSpec{Name: "y", Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleOutput})
	if !warned(s) {
		t.Error("no warning for output y that no stage writes")
	}
	s.Buffers[len(s.Buffers)-1].Init = dag.Init{Kind: dag.InitFill, Value: 1}
	if warned(s) {
		t.Error("warning for output y filled by its init")
	}
	s = outputs(spec(stage("a", writes("x")), stage("b", reads("x"), writes("y"))), "y")
	if warned(s) {
		t.Error("warning for output y written by b")
	}
}

// TestFixNamesCollective: a fix whose wait is for, or before, a rank of a
// collective names the collective as the spec does (reduce, not
// reduce/0) in its edit; its CUDA form names the rank, the plan's stage.
func TestFixNamesCollective(t *testing.T) {
	p := build(t, loadSpec(t, `version: 1
devices: 2
buffers:
  - {name: g0, dtype: f32, shape: [1024], init: {fill: 1.0}, device: 0}
  - {name: g1, dtype: f32, shape: [1024], init: {fill: 2.0}, device: 1}
  - {name: out, dtype: f32, shape: [1024], role: output, device: 0}
stages:
  - {name: pre, kernel: scale, args: {a: 2.0}, reads: [g0], writes: [g0], stream: main, device: 0}
  - {name: reduce, kernel: all_reduce, args: {op: sum}, reads: [g0, g1], writes: [g0, g1]}
  - {name: pull, kernel: copy, reads: [g0], writes: [out], stream: side, device: 0}
`), planner.Options{})
	id := map[string]int{}
	for i, s := range p.Stages {
		id[s.Name] = i
	}
	side := p.Stages[id["pull"]].Stream
	q := p.WithoutOps(func(s, _ int, o plan.Op) bool { return s == side && o.Kind == plan.OpWait && o.Lag == 0 })
	var re *verify.RaceError
	if err := verify.Verify(q); !errors.As(err, &re) || len(re.Fixes) != 1 {
		t.Fatalf("want one fix, got %v", err)
	}
	// A sync: auto spec: the edit is to after:, dagrun places the wait.
	want := "pull (test.yaml:10:5): add reduce to after (dagrun then places the wait: stream side waits, before pull, on an event recorded on stream main after reduce/0)"
	if got := re.Fixes[0].Edit; got != want {
		t.Errorf("edit\n%s\nwant\n%s", got, want)
	}
	f := verify.NewFix(p, id["pull"], id["reduce/1"])
	if got := f.String(); !strings.HasPrefix(got, "reduce (test.yaml:9:5): add pull to after (dagrun then places the wait: stream s1 waits, before reduce/1, ") {
		t.Errorf("a fix before a rank: %s", got)
	}
	// A stage whose name only looks like a rank's keeps it.
	if got := verify.SpecStageName(&plan.Stage{Name: "a/0"}); got != "a/0" {
		t.Errorf("specStageName(a/0, no collective) = %s", got)
	}
}

// TestWarningRedundantByHostWait: a wait that a host stage's wait made
// redundant (the host waited for the record before it issued the wait)
// names the host stage, not an earlier wait of the same launch that does
// not order the record.
func TestWarningRedundantByHostWait(t *testing.T) {
	s := loadSpec(t, `version: 1
sync: manual
buffers:
  - {name: x, bytes: 64}
  - {name: y, bytes: 64}
  - {name: out, bytes: 64, role: output}
stages:
  - {name: a, kernel: fill, args: {value: 1.0}, writes: [x], stream: s0}
  - {name: b, kernel: fill, args: {value: 2.0}, writes: [y], stream: s1}
  - {name: h, kernel: spin, args: {us: 1}, stream: host, waits: [b]}
  - {name: c, kernel: mix, reads: [x, y], writes: [out], stream: s2, waits: [a, b]}
`)
	got := verify.Warnings(build(t, s, planner.Options{}))
	want := "c (test.yaml:11:5): the wait for the record after b on stream s1 is redundant: host stage h (test.yaml:10:5), which waits for it before this wait is issued, already orders it"
	if len(got) != 1 || got[0] != want {
		t.Errorf("warnings:\n%q\nwant\n%q", got, want)
	}
	// With the host stage after c, both waits are needed: no warning.
	s.Stages[2], s.Stages[3] = s.Stages[3], s.Stages[2]
	if got := verify.Warnings(build(t, s, planner.Options{})); len(got) != 0 {
		t.Errorf("host stage after c: %q", got)
	}
}

// TestNoRedundantWaitWarningsForDeviceSynchronize: a recorded trace's
// torch.cuda.synchronize() is one host stage that waits for every stream's
// latest op; that some of those waits imply others is the call's nature,
// not a line the user could delete, so it gets no warning. A recorded
// kernel's redundant wait (a wait_stream the user wrote) still does.
func TestNoRedundantWaitWarningsForDeviceSynchronize(t *testing.T) {
	s := loadSpec(t, `version: 1
sync: manual
buffers:
  - {name: x, bytes: 64}
  - {name: y, bytes: 64}
stages:
  - {name: "k0:fill_.Scalar:p.py:1", kernel: fill, args: {value: 1.0}, writes: [x], stream: s0}
  - {name: "k1:fill_.Scalar:p.py:2", kernel: fill, args: {value: 2.0}, writes: [y], stream: s1, waits: ["k0:fill_.Scalar:p.py:1"]}
  - {name: "h2:synchronize:p.py:3", kernel: spin, args: {us: 1}, stream: host, waits: ["k0:fill_.Scalar:p.py:1", "k1:fill_.Scalar:p.py:2"]}
`)
	if got := verify.Warnings(build(t, s, planner.Options{})); len(got) != 0 {
		t.Errorf("device synchronize: %q", got)
	}
	// A stream synchronize of the trace is one wait the user wrote: judged.
	s.Stages[2].Name = "h2:stream-synchronize:p.py:3"
	if got := verify.Warnings(build(t, s, planner.Options{})); len(got) != 1 || !strings.Contains(got[0], "is redundant") {
		t.Errorf("stream synchronize: %q", got)
	}
}
