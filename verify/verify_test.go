package verify

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/plan"
	"pgregory.net/rapid"
)

// verifyB builds plans by hand for the verifier's tests: ops are appended
// to their stream and to the issue order in call order.
type verifyB struct{ p *plan.Plan }

func newVerifyB(streams int) *verifyB {
	p := &plan.Plan{Version: plan.PlanVersion}
	for s := range streams {
		p.Streams = append(p.Streams, plan.Stream{ID: s, Name: fmt.Sprintf("s%d", s)})
	}
	return &verifyB{p: p}
}

func (b *verifyB) op(stream int, o plan.Op) *verifyB {
	p := b.p
	p.IssueOrder = append(p.IssueOrder, [2]int{stream, len(p.Streams[stream].Ops)})
	p.Streams[stream].Ops = append(p.Streams[stream].Ops, o)
	if o.Kind != plan.OpLaunch && o.Event >= p.Events {
		p.Events = o.Event + 1
	}
	return b
}

// verifyIO is a read or write for verifyB.stage.
type verifyIO struct {
	write bool
	a     plan.Access
}

var verifyRange = regexp.MustCompile(`^(\w+)(?:\[(\d+):(\d+)\])?$`)

// verifyAcc parses "buf" (bytes [0:4096]) or "buf[lo:hi]".
func verifyAcc(s string) plan.Access {
	m := verifyRange.FindStringSubmatch(s)
	if m == nil {
		panic("bad access " + s)
	}
	if m[2] == "" {
		return plan.Access{Buffer: m[1], Offset: 0, Bytes: 4096}
	}
	lo, _ := strconv.ParseInt(m[2], 10, 64)
	hi, _ := strconv.ParseInt(m[3], 10, 64)
	return plan.Access{Buffer: m[1], Offset: lo, Bytes: hi - lo}
}

func rd(s string) verifyIO { return verifyIO{false, verifyAcc(s)} }
func wr(s string) verifyIO { return verifyIO{true, verifyAcc(s)} }

// stage declares a stage (declaration order = call order) and issues its
// launch on stream.
func (b *verifyB) stage(name string, stream int, io ...verifyIO) *verifyB {
	st := plan.Stage{Name: name, Stream: stream, Kernel: "mix"}
	for _, x := range io {
		if x.write {
			st.Writes = append(st.Writes, x.a)
		} else {
			st.Reads = append(st.Reads, x.a)
		}
	}
	b.p.Stages = append(b.p.Stages, st)
	return b.op(stream, plan.Op{Kind: plan.OpLaunch, Stage: len(b.p.Stages) - 1})
}

func (b *verifyB) record(stream, event int) *verifyB {
	return b.op(stream, plan.Op{Kind: plan.OpRecord, Event: event})
}

func (b *verifyB) wait(stream, event int) *verifyB {
	return b.op(stream, plan.Op{Kind: plan.OpWait, Event: event})
}

// verifyRaces runs Verify and returns its races (nil if none); other errors fail the test.
func verifyRaces(t interface {
	Helper()
	Fatalf(string, ...any)
}, p *plan.Plan) []Race {
	t.Helper()
	err := Verify(p)
	if err == nil {
		return nil
	}
	var re *RaceError
	if !errors.As(err, &re) {
		t.Fatalf("Verify: %v, want nil or *RaceError", err)
	}
	if len(re.Races) == 0 {
		t.Fatalf("Verify returned a RaceError with no races")
	}
	return re.Races
}

func TestVerifyHandBuilt(t *testing.T) {
	type want struct {
		first, second string
		kind          string
		buf           string
		off, bytes    int64
		reversed      bool
		fix           string // substring of Race.String()
	}
	tests := []struct {
		name string
		b    *verifyB
		want []want
	}{
		{
			name: "two writers, no wait",
			b:    newVerifyB(2).stage("w1", 0, wr("out")).stage("w2", 1, wr("out")),
			want: []want{{first: "w1", second: "w2", kind: "WAW", buf: "out", off: 0, bytes: 4096,
				fix: "race (WAW) on out[0:4096]: stage w1 (stream s0) and stage w2 (stream s1) are not ordered; fix: record an event on stream s0 after w1 and wait on it on stream s1 before w2"}},
		},
		{
			name: "two writers, record then wait",
			b:    newVerifyB(2).stage("w1", 0, wr("out")).record(0, 0).wait(1, 0).stage("w2", 1, wr("out")),
		},
		{
			name: "wait issued before its record",
			b:    newVerifyB(2).stage("w1", 0, wr("out")).wait(1, 0).record(0, 0).stage("w2", 1, wr("out")),
			want: []want{{first: "w1", second: "w2", kind: "WAW", buf: "out", bytes: 4096,
				fix: "fix: the wait on e0 (stream s1) is issued before its record (stream s0, after w1): move the record earlier in the issue order"}},
		},
		{
			name: "wait placed after the launch it should guard",
			b:    newVerifyB(2).stage("w1", 0, wr("out")).record(0, 0).stage("w2", 1, wr("out")).wait(1, 0),
			want: []want{{first: "w1", second: "w2", kind: "WAW", buf: "out", bytes: 4096,
				fix: "fix: the wait on e0 on stream s1 comes after w2: move it before w2's launch"}},
		},
		{
			name: "wait on the wrong event",
			b:    newVerifyB(2).stage("w1", 0, wr("out")).record(0, 0).record(0, 1).wait(1, 2).stage("w2", 1, wr("out")),
			want: []want{{first: "w1", second: "w2", kind: "WAW", buf: "out", bytes: 4096, fix: "fix: record an event on stream s0 after w1"}},
		},
		{
			name: "RAW",
			b:    newVerifyB(2).stage("prod", 0, wr("x")).stage("cons", 1, rd("x"), wr("y")),
			want: []want{{first: "prod", second: "cons", kind: "RAW", buf: "x", bytes: 4096}},
		},
		{
			name: "WAR",
			b:    newVerifyB(2).stage("use", 0, rd("x"), wr("y")).stage("over", 1, wr("x")),
			want: []want{{first: "use", second: "over", kind: "WAR", buf: "x", bytes: 4096}},
		},
		{
			name: "read/read does not conflict",
			b:    newVerifyB(2).stage("a", 0, rd("x"), wr("y")).stage("b", 1, rd("x"), wr("z")),
		},
		{
			name: "in-place stages: one race, kind WAW",
			b:    newVerifyB(2).stage("a", 0, rd("x"), wr("x")).stage("b", 1, rd("x"), wr("x")),
			want: []want{{first: "a", second: "b", kind: "WAW", buf: "x", bytes: 4096}},
		},
		{
			name: "disjoint halves of one buffer",
			b:    newVerifyB(2).stage("lo", 0, wr("out[0:2048]")).stage("hi", 1, wr("out[2048:4096]")),
		},
		{
			name: "overlapping partial ranges",
			b:    newVerifyB(2).stage("a", 0, wr("out[0:100]")).stage("b", 1, wr("out[50:200]")),
			want: []want{{first: "a", second: "b", kind: "WAW", buf: "out", off: 50, bytes: 50, fix: "on out[50:100]"}},
		},
		{
			name: "overlap hull over two ranges",
			b:    newVerifyB(2).stage("a", 0, wr("out[0:10]"), wr("out[90:100]")).stage("b", 1, rd("out[5:95]"), wr("z")),
			want: []want{{first: "a", second: "b", kind: "RAW", buf: "out", off: 5, bytes: 90}},
		},
		{
			name: "transitive through a third stream",
			b: newVerifyB(3).
				stage("a", 0, wr("x")).record(0, 0).
				wait(1, 0).stage("b", 1, wr("y")).record(1, 1).
				wait(2, 1).stage("c", 2, rd("x"), wr("z")),
		},
		{
			name: "same stream",
			b:    newVerifyB(1).stage("a", 0, wr("x")).stage("b", 0, rd("x"), wr("x")).stage("c", 0, wr("x")),
		},
		{
			name: "reversed on one stream",
			b: func() *verifyB {
				b := newVerifyB(1).stage("a", 0, wr("x")).stage("b", 0, rd("x"), wr("y"))
				b.p.Streams[0].Ops[0], b.p.Streams[0].Ops[1] = b.p.Streams[0].Ops[1], b.p.Streams[0].Ops[0]
				return b
			}(),
			want: []want{{first: "a", second: "b", kind: "RAW", buf: "x", bytes: 4096, reversed: true,
				fix: "stage b (stream s0) runs before stage a (stream s0), the reverse of declaration order; fix: launch a before b on stream s0"}},
		},
		{
			name: "reversed across streams",
			// b is declared after a but launched first, and a's stream waits for it.
			b: func() *verifyB {
				b := newVerifyB(2)
				b.p.Stages = []plan.Stage{{Name: "a", Stream: 0, Writes: []plan.Access{verifyAcc("x")}}, {Name: "b", Stream: 1, Writes: []plan.Access{verifyAcc("x")}}}
				return b.op(1, plan.Op{Kind: plan.OpLaunch, Stage: 1}).record(1, 0).wait(0, 0).op(0, plan.Op{Kind: plan.OpLaunch, Stage: 0})
			}(),
			want: []want{{first: "a", second: "b", kind: "WAW", buf: "x", bytes: 4096, reversed: true,
				fix: "fix: stream s0 waits on e0 before a, which orders it after b"}},
		},
		{
			name: "reads launched out of declaration order, then an unordered write",
			b: func() *verifyB {
				b := newVerifyB(2)
				b.p.Stages = []plan.Stage{
					{Name: "r1", Stream: 1, Reads: []plan.Access{verifyAcc("x")}},
					{Name: "r2", Stream: 1, Reads: []plan.Access{verifyAcc("x")}},
					{Name: "w", Stream: 0, Writes: []plan.Access{verifyAcc("x")}},
				}
				return b.op(1, plan.Op{Kind: plan.OpLaunch, Stage: 1}).op(1, plan.Op{Kind: plan.OpLaunch, Stage: 0}).op(0, plan.Op{Kind: plan.OpLaunch, Stage: 2})
			}(),
			want: []want{
				{first: "r1", second: "w", kind: "WAR", buf: "x", bytes: 4096},
				{first: "r2", second: "w", kind: "WAR", buf: "x", bytes: 4096},
			},
		},
		{
			name: "a wait captures the latest record only",
			b: newVerifyB(2).
				stage("a", 0, wr("x")).record(0, 0).
				wait(1, 0). // captures the record after a only
				stage("b", 0, wr("y")).record(0, 0).
				stage("c", 1, rd("x"), rd("y"), wr("z")),
			want: []want{{first: "b", second: "c", kind: "RAW", buf: "y", bytes: 4096}},
		},
		{
			name: "re-recorded event, wait after the second record",
			b: newVerifyB(2).
				stage("a", 0, wr("x")).record(0, 0).
				stage("b", 0, wr("y")).record(0, 0).
				wait(1, 0).
				stage("c", 1, rd("x"), rd("y"), wr("z")),
		},
		{
			name: "wait on the own stream's event orders nothing across",
			b:    newVerifyB(2).stage("a", 0, wr("x")).record(1, 0).wait(1, 0).stage("b", 1, wr("x")),
			want: []want{{first: "a", second: "b", kind: "WAW", buf: "x", bytes: 4096}},
		},
		{
			name: "reader since a write still checked by the next write",
			b: newVerifyB(3).
				stage("w", 0, wr("x")).record(0, 0).
				wait(1, 0).stage("r1", 1, rd("x"), wr("y")).
				wait(2, 0).stage("w2", 2, wr("x")),
			want: []want{{first: "r1", second: "w2", kind: "WAR", buf: "x", bytes: 4096}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := verifyRaces(t, tc.b.p)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d races, want %d: %v", len(got), len(tc.want), got)
			}
			for k, w := range tc.want {
				r := got[k]
				if r.FirstName != w.first || r.SecondName != w.second || r.Kind != w.kind || r.Buffer != w.buf ||
					r.Offset != w.off || r.Bytes != w.bytes || r.Reversed != w.reversed {
					t.Errorf("race %d = %+v, want %+v", k, r, w)
				}
				if !strings.Contains(r.String(), w.fix) {
					t.Errorf("race %d: %q does not contain %q", k, r.String(), w.fix)
				}
				if r.FirstStream != tc.b.p.Stages[r.First].Stream || r.SecondStream != tc.b.p.Stages[r.Second].Stream {
					t.Errorf("race %d streams %d, %d", k, r.FirstStream, r.SecondStream)
				}
			}
			// The independent reference agrees.
			if d := verifyDiff(got, verifyBrute(tc.b.p)); d != "" {
				t.Errorf("Verify and the brute-force reference disagree:\n%s", d)
			}
		})
	}
}

func TestVerifyStructuralErrors(t *testing.T) {
	if err := Verify(nil); err == nil {
		t.Error("Verify(nil) = nil")
	}
	b := newVerifyB(2).stage("a", 0, wr("x"))
	b.p.Stages[0].Stream = 1 // launched on 0
	if err := Verify(b.p); err == nil || !strings.Contains(err.Error(), "launched on stream 0") {
		t.Errorf("stage on the wrong stream: %v", err)
	}
	b = newVerifyB(1).stage("a", 0, wr("x")).record(0, 0)
	b.p.IssueOrder = b.p.IssueOrder[:1]
	if err := Verify(b.p); err == nil || !strings.Contains(err.Error(), "issue_order") {
		t.Errorf("short issue order: %v", err)
	}
	b = newVerifyB(1).stage("a", 0, wr("x[8:8]"))
	if err := Verify(b.p); err == nil || !strings.Contains(err.Error(), "stages[0].writes[0].bytes: stage a writes x: 0 bytes") {
		t.Errorf("empty access: %v", err)
	}
	b = newVerifyB(1).stage("a", 0, rd("x"))
	b.p.Stages[0].Reads[0].Offset = -4
	if err := Verify(b.p); err == nil || !strings.Contains(err.Error(), "stages[0].reads[0].offset: stage a reads x at offset -4") {
		t.Errorf("negative offset: %v", err)
	}
	// A name given twice (checked beside the race checks) is the error,
	// not the race the plan also has.
	b = newVerifyB(2).stage("a", 0, wr("x")).stage("a", 1, wr("x"))
	if err := Verify(b.p); err == nil || !strings.Contains(err.Error(), "stages[1].name: stage a is declared twice") {
		t.Errorf("a name twice and a race: %v", err)
	}
	b.p.Stages[1].Name = "b"
	if err := Verify(b.p); !errors.As(err, new(*RaceError)) {
		t.Errorf("a race: %v", err)
	}
}

func TestVerifyErrorMessage(t *testing.T) {
	b := newVerifyB(2)
	for i := range 30 {
		b.stage(fmt.Sprintf("s%d", i), i%2, wr("x"))
	}
	err := Verify(b.p)
	var re *RaceError
	if !errors.As(err, &re) {
		t.Fatalf("Verify: %v", err)
	}
	// Stream order orders same-stream pairs; each of the 15×15 cross pairs races.
	if len(re.Races) != 225 || re.Truncated {
		t.Fatalf("%d races (truncated %v), want 225", len(re.Races), re.Truncated)
	}
	msg := err.Error()
	// Alternating writers on two streams: each of the 29 hand-overs needs
	// its own wait.
	if !strings.HasPrefix(msg, "225 races; 29 waits fix them") || !strings.Contains(msg, "\nfix 1: s1: add s0 to waits (stream s1 waits, before s1, on an event recorded on stream s0 after s0)\n  orders:\n    WAW on x[0:4096]: s0 (stream s0) → s1 (stream s1)") {
		t.Errorf("message starts %q", msg[:min(len(msg), 300)])
	}
	if n := strings.Count(msg, "\n    WAW on "); n != verifyMaxPrinted {
		t.Errorf("printed %d races, want %d", n, verifyMaxPrinted)
	}
	if n := strings.Count(msg, "\nfix "); n != 29 {
		t.Errorf("printed %d fixes, want 29", n)
	}
}

func TestVerifyTruncates(t *testing.T) {
	b := newVerifyB(2)
	for i := range 400 { // 200×200 = 40000 cross-stream races
		b.stage(fmt.Sprintf("s%d", i), i%2, wr("x"))
	}
	var re *RaceError
	if err := Verify(b.p); !errors.As(err, &re) {
		t.Fatalf("Verify: %v", err)
	}
	if !re.Truncated || len(re.Races) < verifyMaxRaces || len(re.Races) > verifyMaxRaces+200 {
		t.Errorf("%d races, truncated %v", len(re.Races), re.Truncated)
	}
	if !strings.Contains(re.Error(), "or more races") {
		t.Errorf("message does not say there are more: %.60s", re.Error())
	}
}

// verifyBrute is the O(n²) reference: happens-before as reachability in
// the graph of ops (stream order edges, and record → wait edges from the
// latest record issued before each wait), every pair of accesses compared.
func verifyBrute(p *plan.Plan) []Race {
	base := make([]int, len(p.Streams)+1)
	for s := range p.Streams {
		base[s+1] = base[s] + len(p.Streams[s].Ops)
	}
	n := base[len(p.Streams)]
	succ := make([][]int, n)
	launch := make([]int, len(p.Stages))
	for s, st := range p.Streams {
		for j, o := range st.Ops {
			if j+1 < len(st.Ops) {
				succ[base[s]+j] = append(succ[base[s]+j], base[s]+j+1)
			}
			if o.Kind == plan.OpLaunch {
				launch[o.Stage] = base[s] + j
			}
		}
	}
	last := map[int]int{}
	for _, so := range p.IssueOrder {
		g := base[so[0]] + so[1]
		switch o := p.Streams[so[0]].Ops[so[1]]; o.Kind {
		case plan.OpRecord:
			last[o.Event] = g
		case plan.OpWait:
			if r, ok := last[o.Event]; ok {
				succ[r] = append(succ[r], g)
			}
		}
	}
	reach := func(from int) []bool {
		seen := make([]bool, n)
		stack := []int{from}
		seen[from] = true
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, y := range succ[x] {
				if !seen[y] {
					seen[y] = true
					stack = append(stack, y)
				}
			}
		}
		return seen
	}
	hb := make([][]bool, len(p.Stages))
	for i := range p.Stages {
		hb[i] = reach(launch[i])
	}
	var races []Race
	for j := range p.Stages {
		for i := range j {
			si, sj := &p.Stages[i], &p.Stages[j]
			if hb[i][launch[j]] {
				continue
			}
			var r *Race
			bufs := map[string]*Race{}
			for _, ai := range verifyAllAccesses(si) {
				for _, aj := range verifyAllAccesses(sj) {
					if ai.a.Buffer != aj.a.Buffer || !(ai.write || aj.write) {
						continue
					}
					lo := max(ai.a.Offset, aj.a.Offset)
					hi := min(ai.a.Offset+ai.a.Bytes, aj.a.Offset+aj.a.Bytes)
					if lo >= hi {
						continue
					}
					kind := plan.RaceWAR
					switch {
					case ai.write && aj.write:
						kind = plan.RaceWAW
					case ai.write:
						kind = plan.RaceRAW
					}
					if r = bufs[ai.a.Buffer]; r == nil {
						r = &Race{First: i, Second: j, FirstName: si.Name, SecondName: sj.Name,
							FirstStream: si.Stream, SecondStream: sj.Stream, Buffer: ai.a.Buffer,
							FirstStreamName: p.Streams[si.Stream].Name, SecondStreamName: p.Streams[sj.Stream].Name,
							Offset: lo, Bytes: hi - lo, Kind: kind, Reversed: hb[j][launch[i]]}
						bufs[ai.a.Buffer] = r
						continue
					}
					if verifyKindRank(kind) > verifyKindRank(r.Kind) {
						r.Kind = kind
					}
					end := max(r.Offset+r.Bytes, hi)
					r.Offset = min(r.Offset, lo)
					r.Bytes = end - r.Offset
				}
			}
			for _, r := range bufs {
				races = append(races, *r)
			}
		}
	}
	slices.SortFunc(races, func(a, b Race) int {
		if a.First != b.First {
			return a.First - b.First
		}
		if a.Second != b.Second {
			return a.Second - b.Second
		}
		return strings.Compare(a.Buffer, b.Buffer)
	})
	return races
}

func verifyAllAccesses(s *plan.Stage) []verifyIO {
	var out []verifyIO
	for _, a := range s.Reads {
		out = append(out, verifyIO{false, a})
	}
	for _, a := range s.Writes {
		out = append(out, verifyIO{true, a})
	}
	return out
}

// verifyDiff compares races, ignoring Fix; "" if they agree.
func verifyDiff(got, want []Race) string {
	var b strings.Builder
	strip := func(rs []Race) []string {
		var out []string
		for _, r := range rs {
			r.Fix = ""
			out = append(out, fmt.Sprintf("%+v", r))
		}
		return out
	}
	g, w := strip(got), strip(want)
	if slices.Equal(g, w) {
		return ""
	}
	fmt.Fprintf(&b, "Verify (%d):\n", len(g))
	for _, s := range g {
		fmt.Fprintf(&b, "\t%s\n", s)
	}
	fmt.Fprintf(&b, "reference (%d):\n", len(w))
	for _, s := range w {
		fmt.Fprintf(&b, "\t%s\n", s)
	}
	return b.String()
}

// verifyGenStages draws n stages with random byte ranges of a few 16-byte buffers.
func verifyGenStages(t *rapid.T, n, streams int) []plan.Stage {
	nb := rapid.IntRange(1, 3).Draw(t, "buffers")
	acc := func(label string) []plan.Access {
		var out []plan.Access
		for range rapid.IntRange(0, 2).Draw(t, label) {
			off := rapid.Int64Range(0, 15).Draw(t, "off")
			out = append(out, plan.Access{
				Buffer: fmt.Sprintf("b%d", rapid.IntRange(0, nb-1).Draw(t, "buf")),
				Offset: off,
				Bytes:  rapid.Int64Range(1, 16-off).Draw(t, "bytes"),
			})
		}
		return out
	}
	stages := make([]plan.Stage, n)
	for i := range stages {
		stages[i] = plan.Stage{
			Name:   fmt.Sprintf("s%d", i),
			Stream: rapid.IntRange(0, streams-1).Draw(t, "stream"),
			Reads:  acc("reads"),
			Writes: acc("writes"),
		}
	}
	return stages
}

// verifyGenPlan draws an arbitrary small plan: random stages, launches in
// declaration order or shuffled within a stream, random records and waits,
// and a random issue order that keeps each stream's order.
func verifyGenPlan(t *rapid.T) *plan.Plan {
	S := rapid.IntRange(1, 4).Draw(t, "streams")
	n := rapid.IntRange(1, 9).Draw(t, "stages")
	E := rapid.IntRange(0, 4).Draw(t, "events")
	p := &plan.Plan{Version: plan.PlanVersion, Events: E, Stages: verifyGenStages(t, n, S)}
	p.Streams = make([]plan.Stream, S)
	for s := range p.Streams {
		p.Streams[s].ID = s
	}
	for i, st := range p.Stages {
		p.Streams[st.Stream].Ops = append(p.Streams[st.Stream].Ops, plan.Op{Kind: plan.OpLaunch, Stage: i})
	}
	for s := range p.Streams {
		if rapid.Bool().Draw(t, "shuffle") {
			p.Streams[s].Ops = rapid.Permutation(p.Streams[s].Ops).Draw(t, "perm")
		}
	}
	if E > 0 {
		for range rapid.IntRange(0, 3*n).Draw(t, "syncops") {
			s := rapid.IntRange(0, S-1).Draw(t, "syncstream")
			o := plan.Op{Kind: plan.OpRecord, Event: rapid.IntRange(0, E-1).Draw(t, "event")}
			if rapid.Bool().Draw(t, "wait") {
				o.Kind = plan.OpWait
			}
			ops := p.Streams[s].Ops
			at := rapid.IntRange(0, len(ops)).Draw(t, "at")
			p.Streams[s].Ops = slices.Insert(ops, at, o)
		}
	}
	next := make([]int, S)
	for {
		var open []int
		for s := range S {
			if next[s] < len(p.Streams[s].Ops) {
				open = append(open, s)
			}
		}
		if len(open) == 0 {
			break
		}
		s := open[rapid.IntRange(0, len(open)-1).Draw(t, "issue")]
		p.IssueOrder = append(p.IssueOrder, [2]int{s, next[s]})
		next[s]++
	}
	return p
}

// Verify and the brute-force reference agree exactly on arbitrary plans:
// same races, kinds, byte ranges and directions.
func TestVerifyMatchesBruteForce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := verifyGenPlan(t)
		if d := verifyDiff(verifyRaces(t, p), verifyBrute(p)); d != "" {
			t.Fatalf("disagree:\n%s", d)
		}
	})
}

// verifySafe builds the reference construction: stage i records event i
// right after its launch, and before stage j its stream waits on every
// earlier conflicting stage on another stream, except the pairs for which
// drop (if not nil) says true; everything is issued in declaration order.
// It returns the plan and the pairs it waited for.
func verifySafe(stages []plan.Stage, streams int, drop func(i, j int) bool) (p *plan.Plan, waits [][2]int) {
	b := newVerifyB(streams)
	b.p.Events = len(stages)
	conflict := func(x, y *plan.Stage) bool {
		for _, a := range verifyAllAccesses(x) {
			for _, c := range verifyAllAccesses(y) {
				if (a.write || c.write) && a.a.Overlaps(c.a) {
					return true
				}
			}
		}
		return false
	}
	for j := range stages {
		sj := &stages[j]
		for i := range j {
			if stages[i].Stream != sj.Stream && conflict(&stages[i], sj) {
				if drop == nil || !drop(i, j) {
					b.wait(sj.Stream, i)
				}
				waits = append(waits, [2]int{i, j})
			}
		}
		b.p.Stages = append(b.p.Stages, *sj)
		b.op(sj.Stream, plan.Op{Kind: plan.OpLaunch, Stage: j}).record(sj.Stream, j)
	}
	return b.p, waits
}

func TestVerifySafeConstructions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		S := rapid.IntRange(1, 4).Draw(t, "streams")
		n := rapid.IntRange(1, 10).Draw(t, "stages")
		stages := verifyGenStages(t, n, S)

		one := slices.Clone(stages)
		for i := range one {
			one[i].Stream = 0
		}
		if p, _ := verifySafe(one, 1, nil); Verify(p) != nil {
			t.Fatalf("one stream: %v", Verify(p))
		}
		p, waits := verifySafe(stages, S, nil)
		if err := Verify(p); err != nil {
			t.Fatalf("full waits: %v", err)
		}
		if len(waits) == 0 {
			return
		}
		w := waits[rapid.IntRange(0, len(waits)-1).Draw(t, "drop")]
		p, _ = verifySafe(stages, S, func(i, j int) bool { return [2]int{i, j} == w })
		if d := verifyDiff(verifyRaces(t, p), verifyBrute(p)); d != "" {
			t.Fatalf("dropped wait %v: disagree:\n%s", w, d)
		}
	})
}

// Dropping the only wait that orders a conflicting pair is always caught,
// with that pair named.
func TestVerifyDropNeededWait(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 10).Draw(t, "stages")
		stages := verifyGenStages(t, n, 3)
		// The last stage, alone on stream 1, conflicts only with stage 0.
		for k := range n - 1 {
			if stages[k].Stream == 1 {
				stages[k].Stream = 2
			}
		}
		stages[0].Writes = append(stages[0].Writes, plan.Access{Buffer: "only", Bytes: 8})
		stages[n-1] = plan.Stage{Name: stages[n-1].Name, Stream: 1, Reads: []plan.Access{{Buffer: "only", Offset: 4, Bytes: 8}}}
		p, _ := verifySafe(stages, 3, func(i, j int) bool { return i == 0 && j == n-1 })
		races := verifyRaces(t, p)
		want := Race{First: 0, Second: n - 1, FirstName: "s0", SecondName: stages[n-1].Name, FirstStream: stages[0].Stream,
			SecondStream: 1, FirstStreamName: p.Streams[stages[0].Stream].Name, SecondStreamName: p.Streams[1].Name, Buffer: "only", Offset: 4, Bytes: 4, Kind: plan.RaceRAW}
		if len(races) != 1 || verifyDiff(races, []Race{want}) != "" {
			t.Fatalf("got %v, want %v", races, want)
		}
	})
}

// verifyBig builds a safe plan of n stages on S streams: each stage reads
// two of the recent buffers and writes a new one or overwrites a recent one
// (whole buffer or one half), waiting on the last writer and on the readers
// since (the frontier) where they run on another stream.
func verifyBig(n, S int, seed uint64) *plan.Plan {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := newVerifyB(S)
	b.p.Events = n
	type front struct {
		w     int
		reads []int
	}
	var bufs []string
	fr := map[string]*[2]front{} // per buffer half
	const size = 1 << 20
	pick := func() string {
		k := len(bufs) - 1 - rng.IntN(min(len(bufs), 16))
		return bufs[k]
	}
	for j := range n {
		s := rng.IntN(S)
		st := plan.Stage{Name: fmt.Sprintf("s%d", j), Stream: s, Kernel: "mix"}
		var deps []int
		dep := func(i int) {
			if i >= 0 && b.p.Stages[i].Stream != s && !slices.Contains(deps, i) {
				deps = append(deps, i)
			}
		}
		for r := 0; r < 2 && len(bufs) > 0; r++ {
			name := pick()
			st.Reads = append(st.Reads, plan.Access{Buffer: name, Bytes: size})
			for h := range 2 {
				f := &fr[name][h]
				dep(f.w)
				f.reads = append(f.reads, j)
			}
		}
		var name string
		if len(bufs) < 8 || rng.IntN(3) > 0 {
			name = fmt.Sprintf("b%d", len(bufs))
			bufs = append(bufs, name)
			fr[name] = &[2]front{{w: -1}, {w: -1}}
		} else {
			name = pick()
		}
		halves := []int{0, 1}
		if h := rng.IntN(4); h < 2 {
			halves = []int{h}
			st.Writes = append(st.Writes, plan.Access{Buffer: name, Offset: int64(h) * size / 2, Bytes: size / 2})
		} else {
			st.Writes = append(st.Writes, plan.Access{Buffer: name, Bytes: size})
		}
		for _, h := range halves {
			f := &fr[name][h]
			dep(f.w)
			for _, r := range f.reads {
				if r != j {
					dep(r)
				}
			}
			*f = front{w: j}
		}
		for _, i := range deps {
			b.wait(s, i)
		}
		b.p.Stages = append(b.p.Stages, st)
		b.op(s, plan.Op{Kind: plan.OpLaunch, Stage: j}).record(s, j)
	}
	return b.p
}

func TestVerifyBig(t *testing.T) {
	p := verifyBig(20000, 8, 1)
	if err := Verify(p); err != nil {
		t.Fatalf("Verify: %.500v", err)
	}
	// Drop every wait of one stage that has waits: each was on a frontier
	// predecessor on another stream; compare with the reference on a small one.
	small := verifyBig(300, 4, 2)
	for j := 250; j < 300; j++ {
		s := small.Stages[j].Stream
		ops := small.Streams[s].Ops
		k := slices.IndexFunc(ops, func(o plan.Op) bool { return o.Kind == plan.OpLaunch && o.Stage == j })
		if k == 0 || ops[k-1].Kind != plan.OpWait {
			continue
		}
		q := verifyDropOp(small, s, k-1)
		got, want := verifyRaces(t, q), verifyBrute(q)
		if d := verifyDiff(got, want); d != "" {
			t.Fatalf("dropping the wait before s%d: disagree:\n%s", j, d)
		}
		if len(want) == 0 {
			continue
		}
		return
	}
	t.Fatal("no dropped wait made a race")
}

// verifyDropOp returns a copy of p without op k of stream s.
func verifyDropOp(p *plan.Plan, s, k int) *plan.Plan {
	return p.WithoutOps(func(s2, j int, _ plan.Op) bool { return s2 == s && j == k })
}

func BenchmarkVerify(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("stages=%d", n), func(b *testing.B) {
			p := verifyBig(n, 8, 1)
			b.ResetTimer()
			for b.Loop() {
				if err := Verify(p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/stage")
		})
	}
}

// A hand-synchronized plan whose second writer forgot to wait.
func ExampleVerify() {
	p := &plan.Plan{
		Version: plan.PlanVersion,
		Stages: []plan.Stage{
			{Name: "w1", Stream: 0, Kernel: "fill", Writes: []plan.Access{{Buffer: "out", Bytes: 4096}}},
			{Name: "w2", Stream: 1, Kernel: "fill", Writes: []plan.Access{{Buffer: "out", Bytes: 4096}}},
		},
		Streams: []plan.Stream{
			{ID: 0, Ops: []plan.Op{{Kind: plan.OpLaunch, Stage: 0}, {Kind: plan.OpRecord, Event: 0}}},
			{ID: 1, Ops: []plan.Op{{Kind: plan.OpLaunch, Stage: 1}}},
		},
		IssueOrder: [][2]int{{0, 0}, {0, 1}, {1, 0}},
		Events:     1,
	}
	fmt.Println(Verify(p))
	// Output:
	// 1 race; 1 wait fixes it
	// fix 1: w2: add w1 to waits (stream 1 waits, before w2, on an event recorded on stream 0 after w1)
	//   orders:
	//     WAW on out[0:4096]: w1 (stream 0) → w2 (stream 1)
}
