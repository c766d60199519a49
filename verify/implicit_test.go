package verify_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// ruleCase is a manual spec, the kinds and threads of its streams, the
// placement of its buffers and its copy stages, and what Verify says.
type ruleCase struct {
	name    string
	spec    *dag.Spec
	kinds   map[string]string // stream → Kind
	threads map[string]string // stream → Thread
	where   map[string]string // buffer → Where
	sync    []string          // synchronous copy stages
	hostFn  []string          // host-function stages
	hosts   []string          // host streams besides dag.HostStream
	once    bool              // one iteration (no Iteration: the threads hand over once)
	race    string            // "" for race-free, else a substring of the report
	instead string            // a substring of the first fix's rule edit (Fix.Instead)
}

func (c ruleCase) plan(t *testing.T) *plan.Plan {
	t.Helper()
	s := c.spec
	for i := range s.Buffers {
		if w, ok := c.where[s.Buffers[i].Name]; ok {
			s.Buffers[i].Where = w
		}
	}
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		t.Fatalf("%s: Build: %v", c.name, err)
	}
	for i := range p.Streams {
		p.Streams[i].Kind = c.kinds[p.Streams[i].Name]
		p.Streams[i].Thread = c.threads[p.Streams[i].Name]
		for _, h := range c.hosts {
			if p.Streams[i].Name == h {
				p.Streams[i].Host = true
			}
		}
	}
	for i := range p.Stages {
		for _, n := range c.sync {
			if p.Stages[i].Name == n {
				p.Stages[i].Copy = plan.CopySync
			}
		}
		for _, n := range c.hostFn {
			if p.Stages[i].Name == n {
				p.Stages[i].HostFunc = true
			}
		}
	}
	if c.once {
		p = p.WithoutOps(func(_, _ int, o plan.Op) bool { return o.Lag > 0 })
		p.Iteration = nil
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("%s: Validate: %v", c.name, err)
	}
	return p
}

func event(e string) stageOpt { return func(s *dag.StageSpec) { s.Event = e } }

func waitEvent(e string) stageOpt {
	return func(s *dag.StageSpec) { s.WaitFor = append(s.WaitFor, dag.WaitSpec{Event: e}) }
}

func ruleCases() []ruleCase {
	L := map[string]string{"L": plan.StreamLegacy}
	return []ruleCase{
		{name: "legacy then non-blocking", race: verify.RuleLegacy, instead: "declare stream s with kind: blocking",
			spec:  manual(spec(stage("a", on("L"), writes("x")), stage("b", on("s"), writes("x")))),
			kinds: L},
		{name: "legacy then blocking",
			spec:  manual(spec(stage("a", on("L"), writes("x")), stage("b", on("s"), writes("x")))),
			kinds: map[string]string{"L": plan.StreamLegacy, "s": plan.StreamBlocking}},
		{name: "blocking then legacy",
			spec:  manual(spec(stage("a", on("s"), writes("x")), stage("b", on("L"), writes("x")))),
			kinds: map[string]string{"L": plan.StreamLegacy, "s": plan.StreamBlocking}},
		{name: "per-thread then legacy",
			spec:  manual(spec(stage("a", on("s"), writes("x")), stage("b", on("L"), writes("x")))),
			kinds: map[string]string{"L": plan.StreamLegacy, "s": plan.StreamPerThread}},
		{name: "non-blocking then legacy", race: verify.RuleLegacy,
			spec:  manual(spec(stage("a", on("s"), writes("x")), stage("b", on("L"), writes("x")))),
			kinds: L},
		{name: "blocking, legacy, blocking (k_1, k_2, k_3 of the CUDA docs)",
			spec:  manual(spec(stage("k1", on("s1"), writes("x")), stage("k2", on("L"), writes("y")), stage("k3", on("s2"), reads("x")))),
			kinds: map[string]string{"L": plan.StreamLegacy, "s1": plan.StreamBlocking, "s2": plan.StreamBlocking}},
		{name: "two blocking streams without the legacy stream between", race: "RAW on x",
			spec:  manual(spec(stage("k1", on("s1"), writes("x")), stage("k3", on("s2"), reads("x")))),
			kinds: map[string]string{"L": plan.StreamLegacy, "s1": plan.StreamBlocking, "s2": plan.StreamBlocking}},
		{name: "async device→host copy, host reads", race: verify.RuleAsyncCopy, instead: "make d2h a synchronous copy",
			spec:  manual(spec(stage("d2h", kernel("copy"), on("L"), reads("d"), writes("h")), stage("use", kernel("checksum"), on(dag.HostStream), reads("h"), writes("sum")))),
			kinds: L, where: map[string]string{"h": dag.WhereHostPinned, "sum": dag.WhereHostPinned}},
		{name: "sync device→host copy, host reads",
			spec:  manual(spec(stage("d2h", kernel("copy"), on("L"), reads("d"), writes("h")), stage("use", kernel("checksum"), on(dag.HostStream), reads("h"), writes("sum")))),
			kinds: L, sync: []string{"d2h"}, where: map[string]string{"h": dag.WhereHostPinned, "sum": dag.WhereHostPinned}},
		{name: "sync copy waits for the legacy stream's earlier work, not a non-blocking stream's", race: verify.RuleLegacy,
			spec: manual(spec(stage("k", on("s"), writes("d")), stage("d2h", kernel("copy"), on("L"), reads("d"), writes("h")),
				stage("use", kernel("checksum"), on(dag.HostStream), reads("h"), writes("sum")))),
			kinds: L, sync: []string{"d2h"}, where: map[string]string{"h": dag.WhereHostPinned, "sum": dag.WhereHostPinned}},
		{name: "sync copy after a blocking producer, host reads",
			spec: manual(spec(stage("k", on("s"), writes("d")), stage("d2h", kernel("copy"), on("L"), reads("d"), writes("h")),
				stage("use", kernel("checksum"), on(dag.HostStream), reads("h"), writes("sum")))),
			kinds: map[string]string{"L": plan.StreamLegacy, "s": plan.StreamBlocking}, sync: []string{"d2h"}, where: map[string]string{"h": dag.WhereHostPinned, "sum": dag.WhereHostPinned}},
		{name: "async copy from pinned, host overwrites the source", race: verify.RuleAsyncCopy,
			spec:  manual(spec(stage("h2d", kernel("copy"), on("L"), reads("h"), writes("d")), stage("next", kernel("fill"), on(dag.HostStream), writes("h")))),
			kinds: L, where: map[string]string{"h": dag.WhereHostPinned}},
		{name: "sync copy from pageable, host overwrites the source",
			spec:  manual(spec(stage("h2d", kernel("copy"), on("L"), reads("h"), writes("d")), stage("next", kernel("fill"), on(dag.HostStream), writes("h")))),
			kinds: L, sync: []string{"h2d"}, where: map[string]string{"h": dag.WhereHostPageable}},
		{name: "sync copy from pageable, a non-blocking stream reads the destination", race: verify.RuleStaged,
			spec:  manual(spec(stage("h2d", kernel("copy"), on("L"), reads("h"), writes("d")), stage("use", on("s"), reads("d")))),
			kinds: L, sync: []string{"h2d"}, where: map[string]string{"h": dag.WhereHostPageable}},
		{name: "sync copy from pageable, the host then launches on a blocking stream",
			spec:  manual(spec(stage("h2d", kernel("copy"), on("L"), reads("h"), writes("d")), stage("use", on("s"), reads("d")))),
			kinds: map[string]string{"L": plan.StreamLegacy, "s": plan.StreamBlocking}, sync: []string{"h2d"}, where: map[string]string{"h": dag.WhereHostPageable}},
		{name: "host function reads what the host writes later", race: verify.RuleHostFunc,
			spec:   manual(spec(stage("cb", kernel("checksum"), on("s"), reads("h"), writes("sum")), stage("next", kernel("fill"), on(dag.HostStream), writes("h")))),
			hostFn: []string{"cb"}, where: map[string]string{"h": dag.WhereHostPinned, "sum": dag.WhereHostPinned}},
		{name: "host function after the copy on its stream",
			spec:   manual(spec(stage("d2h", kernel("copy"), on("s"), reads("d"), writes("h")), stage("cb", kernel("checksum"), on("s"), reads("h"), writes("sum")))),
			hostFn: []string{"cb"}, where: map[string]string{"h": dag.WhereHostPinned, "sum": dag.WhereHostPinned}},
		{name: "async copy from pageable after a host function on its stream", race: verify.RulePageableSource,
			spec:   manual(spec(stage("cb", kernel("fill"), on("s"), writes("h")), stage("h2d", kernel("copy"), on("s"), reads("h"), writes("d")))),
			hostFn: []string{"cb"}, where: map[string]string{"h": dag.WhereHostPageable}},
		{name: "async copy from pinned after a host function on its stream",
			spec:   manual(spec(stage("cb", kernel("fill"), on("s"), writes("h")), stage("h2d", kernel("copy"), on("s"), reads("h"), writes("d")))),
			hostFn: []string{"cb"}, where: map[string]string{"h": dag.WhereHostPinned}},
		{name: "async copy from pageable after the host waited for the host function",
			spec: manual(spec(stage("cb", kernel("fill"), on("s"), writes("h")), stage("w", on(dag.HostStream), waits("cb")),
				stage("h2d", kernel("copy"), on("s"), reads("h"), writes("d")))),
			hostFn: []string{"cb"}, where: map[string]string{"h": dag.WhereHostPageable}},
		{name: "async copy from pageable, host overwrites the source after the call",
			spec:  manual(spec(stage("h2d", kernel("copy"), on("s"), reads("h"), writes("d")), stage("next", kernel("fill"), on(dag.HostStream), writes("h")))),
			where: map[string]string{"h": dag.WhereHostPageable}},
		{name: "one thread: a host wait orders later launches",
			spec: manual(spec(stage("a", on("sa"), writes("x")), stage("w", on(dag.HostStream), waits("a")),
				stage("b", on("sb"), writes("x")))),
		},
		{name: "two threads: a host wait orders only its own thread", race: verify.RuleThreads,
			spec: manual(spec(stage("a", on("sa"), writes("x")), stage("w", on(dag.HostStream), waits("a")),
				stage("b", on("sb"), writes("x")))),
			threads: map[string]string{"sb": "B"}},
		{name: "two threads: a host event hands over",
			spec: manual(spec(stage("a", on("sa"), writes("x")), stage("w", on(dag.HostStream), waits("a"), event("go")),
				stage("r", on("hb"), waitEvent("go")), stage("b", on("sb"), writes("x")))),
			threads: map[string]string{"sb": "B", "hb": "B"}, hosts: []string{"hb"}, once: true},
		{name: "two threads: a device wait on another thread's record, not handed over", race: verify.RuleThreads,
			spec:    manual(spec(stage("a", on("sa"), writes("x")), stage("b", on("sb"), writes("x"), waits("a")))),
			threads: map[string]string{"sb": "B"}},
		{name: "two threads: a device wait on another thread's record, handed over",
			spec: manual(spec(stage("a", on("sa"), writes("x")), stage("sig", on(dag.HostStream), event("go")),
				stage("r", on("hb"), waitEvent("go")), stage("b", on("sb"), writes("x"), waits("a")))),
			threads: map[string]string{"sb": "B", "hb": "B"}, hosts: []string{"hb"}, once: true},
		{name: "two threads: the legacy stream orders only what was issued before, across a handoff",
			spec: manual(spec(stage("a", on("s"), writes("x")), stage("sig", on(dag.HostStream), event("go")),
				stage("r", on("hb"), waitEvent("go")), stage("b", on("L"), writes("x")))),
			kinds: map[string]string{"L": plan.StreamLegacy, "s": plan.StreamBlocking}, threads: map[string]string{"L": "B", "hb": "B"}, hosts: []string{"hb"}, once: true},
		{name: "two threads: the legacy stream without a handoff", race: verify.RuleThreads,
			spec:  manual(spec(stage("a", on("s"), writes("x")), stage("b", on("L"), writes("x")))),
			kinds: map[string]string{"L": plan.StreamLegacy, "s": plan.StreamBlocking}, threads: map[string]string{"L": "B"}},
	}
}

func TestImplicitRules(t *testing.T) {
	for _, c := range ruleCases() {
		t.Run(c.name, func(t *testing.T) {
			p := c.plan(t)
			before := fmt.Sprintf("%+v %+v", p.Stages, p.Streams)
			err := verify.Verify(p)
			// Verify reads the plan: the rule edits its fixes propose
			// (Fix.Instead) are tried on a copy.
			if after := fmt.Sprintf("%+v %+v", p.Stages, p.Streams); after != before {
				t.Errorf("Verify changed the plan:\nbefore %s\nafter  %s", before, after)
			}
			if c.race == "" {
				if err != nil {
					t.Fatalf("want race-free, got %v", err)
				}
				return
			}
			var re *verify.RaceError
			if !errors.As(err, &re) || len(re.Races) == 0 {
				t.Fatalf("want a race (%s), got %v", c.race, err)
			}
			if !strings.Contains(err.Error(), c.race) {
				t.Errorf("report does not name %q:\n%v", c.race, err)
			}
			if c.instead != "" && (len(re.Fixes) == 0 || !strings.Contains(re.Fixes[0].Instead, c.instead)) {
				t.Errorf("first fix's rule edit: want %q, got %+v", c.instead, re.Fixes)
			}
			// The fixes order every race they claim (the fix search
			// verifies them through the same implicit order).
			for _, f := range re.Fixes {
				if len(f.Races) == 0 {
					t.Errorf("fix %v orders nothing", f)
				}
			}
		})
	}
}

// TestImplicitOff checks that without the implicit rules (the default
// kinds, one thread, async copies, pinned memory) the cases that the
// rules order race: the rules, not something else, order them.
func TestImplicitOff(t *testing.T) {
	for _, c := range ruleCases() {
		pageable := false
		for _, w := range c.where {
			pageable = pageable || w == dag.WhereHostPageable
		}
		if c.race != "" || (len(c.kinds) == 0 && len(c.sync) == 0 && !pageable) || strings.Contains(c.name, "host function") {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			c.kinds, c.sync = nil, nil
			where := map[string]string{}
			for b, w := range c.where {
				if w == dag.WhereHostPageable {
					w = dag.WhereHostPinned
				}
				where[b] = w
			}
			c.where = where
			if err := verify.Verify(c.plan(t)); err == nil {
				t.Fatal("race-free without the rule: the case does not test it")
			}
		})
	}
}

func TestValidateKinds(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(p *plan.Plan)
		want string
	}{
		{"two legacy streams", func(p *plan.Plan) { p.Streams[0].Kind, p.Streams[1].Kind = plan.StreamLegacy, plan.StreamLegacy }, "both the legacy default stream"},
		{"unknown kind", func(p *plan.Plan) { p.Streams[0].Kind = "fast" }, `kind "fast"`},
		{"sync copy on a non-blocking stream", func(p *plan.Plan) { p.Stages[0].Kernel, p.Stages[0].Copy = "copy", plan.CopySync }, "put it on the legacy or per-thread default stream"},
		{"sync spin", func(p *plan.Plan) { p.Stages[0].Copy = plan.CopySync }, "only copy stages"},
		{"two per-thread streams", func(p *plan.Plan) { p.Streams[0].Kind, p.Streams[1].Kind = plan.StreamPerThread, plan.StreamPerThread }, "per-thread default stream of thread main"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := planner.Build(manual(spec(stage("a", on("s"), writes("x")), stage("b", on("t"), reads("x")))), planner.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c.edit(p)
			if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate = %v, want %q", err, c.want)
			}
		})
	}
}

// TestImplicitLaterRecordOtherThread: thread main records e on SA after x,
// hands a host event over to thread t1, then records e again on SA2; t1
// waits for the host event, then on SB for e, and runs y, which reads what
// x wrote. main may record on SA2 before t1 issues its wait, which then
// takes SA2's record, so y races x, whichever order the plan issues the
// two in. Without SA2's record the handoff orders y after x.
func TestImplicitLaterRecordOtherThread(t *testing.T) {
	X := func() []plan.Access { return []plan.Access{{Buffer: "X", Bytes: 256}} }
	p := &plan.Plan{
		Version: plan.PlanVersion,
		Kernels: []plan.Kernel{{Name: "spin"}},
		Buffers: []plan.Buffer{{Name: "X", Bytes: 256, Where: "device", Role: "temp"}},
		Stages: []plan.Stage{
			{Name: "x", Stream: 1, Kernel: "spin", Reads: []plan.Access{}, Writes: X()},
			{Name: "y", Stream: 4, Kernel: "spin", Reads: X(), Writes: []plan.Access{}},
		},
		Events: 2, // 0: e, 1: the host event
		Streams: []plan.Stream{
			{ID: 0, Name: "HA", Host: true, Ops: []plan.Op{{Kind: plan.OpRecord, Event: 1}}},
			{ID: 1, Name: "SA", Ops: []plan.Op{{Kind: plan.OpLaunch, Stage: 0}, {Kind: plan.OpRecord, Event: 0}}},
			{ID: 2, Name: "SA2", Ops: []plan.Op{{Kind: plan.OpRecord, Event: 0}}},
			{ID: 3, Name: "HB", Host: true, Thread: "t1", Ops: []plan.Op{{Kind: plan.OpWait, Event: 1}}},
			{ID: 4, Name: "SB", Thread: "t1", Ops: []plan.Op{{Kind: plan.OpWait, Event: 0}, {Kind: plan.OpLaunch, Stage: 1}}},
		},
		IssueOrder: [][2]int{{1, 0}, {1, 1}, {0, 0}, {3, 0}, {4, 0}, {4, 1}, {2, 0}},
	}
	before := verify.ClonePlan(p) // SA2's record issued before the wait, in plan order
	before.Kernels, before.Version = p.Kernels, p.Version
	before.IssueOrder = [][2]int{{1, 0}, {1, 1}, {0, 0}, {2, 0}, {3, 0}, {4, 0}, {4, 1}}
	for name, q := range map[string]*plan.Plan{"SA2 records after the wait": p, "SA2 records before the wait": before} {
		if err := q.Validate(); err != nil {
			t.Fatal(err)
		}
		var re *verify.RaceError
		if err := verify.Verify(q); !errors.As(err, &re) || len(re.Races) != 1 || re.Races[0].Kind != plan.RaceRAW {
			t.Errorf("%s: Verify = %v, want the RAW race of x and y", name, err)
		}
	}
	once := p.WithoutOps(func(s, _ int, _ plan.Op) bool { return s == 2 })
	once.Version = p.Version
	if err := verify.Verify(once); err != nil {
		t.Errorf("e recorded once: Verify = %v, want race-free", err)
	}
}
