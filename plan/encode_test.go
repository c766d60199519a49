package plan_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/synth"
)

// TestEncodeJSONStreams: the streaming encoder writes the bytes
// encoding/json writes for the whole plan, compact and indented, for
// plans with every optional part (iteration info, lags, arena, notes,
// kernels, shared kernel arguments) and for an empty one.
func TestEncodeJSONStreams(t *testing.T) {
	plans := []*plan.Plan{{Version: plan.PlanVersion}, {Version: plan.PlanVersion, Stages: []plan.Stage{}, Streams: []plan.Stream{}, IssueOrder: [][2]int{}}}
	for _, s := range []*dag.Spec{
		spec(stage("a", writes("x")), stage("b", reads("x"), writes("y")), stage("c", reads("x"), writes("z"))),
		spec(stage("a", writes("x"), on("p")), stage("b", reads("x"), writes("y"), on("q")), stage("c", reads("y"), writes("z"), on("p"))),
	} {
		plans = append(plans, build(t, s, planner.Options{}))
	}
	plans[len(plans)-1].Notes = []string{"a note with <html> & \"quotes\""}
	plans[len(plans)-1].Kernels = []plan.Kernel{{Name: "k", PTX: "k.ptx", Entry: "k", Params: []string{"n:i64"}}}
	// One map shared by two stages (as a loaded spec's args written alike)
	// and one of its own: the encoder's cache of encoded args is by map.
	last := plans[len(plans)-1].Stages
	last[0].Args = map[string]any{"n": json.Number("9007199254740993"), "a": 0.5}
	last[1].Args = last[0].Args
	last[2].Args = map[string]any{"n": json.Number("7"), "a": 0.25}
	encodesLikeOracle(t, plans)
}

// TestEncodeJSONFields: the hand-written encoding of stages, buffers,
// lifetimes, issue order and ops is encoding/json's for every value a
// field can hold: names that need escaping (quotes, <, >, &, control
// characters, U+2028, invalid UTF-8, non-ASCII), floats in exponent form,
// every optional field, nil and empty lists; and on the plans of the
// synthetic shapes (waits with reasons, arena offsets, lags).
func TestEncodeJSONFields(t *testing.T) {
	var plans []*plan.Plan
	for _, sh := range []string{"layered", "wavefront", "shared-read", "series-parallel"} {
		s, err := synth.Shape(sh, 300)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, build(t, s, planner.Options{MaxStreams: 8}))
	}
	p := build(t, spec(stage("a", writes("x")), stage("b", reads("x"), writes("y"), on("q")), stage("c", reads("y"), writes("x"))), planner.Options{})
	names := []string{`q"uote`, "<a&b>", "tab\tnl\n\x01", "line\u2028sep", "bad\xffutf8", "é∂", ""}
	floats := []float64{0, 1, -2.5, 1e-7, 1e21, 123456789012345678901234.0, 0.000001, 1e20, 5e-324}
	for i := range p.Stages {
		st := &p.Stages[i]
		st.Name = names[i%len(names)] + st.Name
		st.DurationUS = floats[i%len(floats)]
		st.Pinned, st.Source, st.Copy = names[(i+1)%len(names)], names[(i+2)%len(names)], names[(i+3)%len(names)]
		st.Go, st.HostFunc = i%2 == 0, i%2 == 1
		st.Grid, st.Block = [3]int{i, -1, 1 << 40}, [3]int{}
	}
	p.Stages[0].Reads, p.Stages[1].Writes = nil, []plan.Access{}
	p.Stages[2].Args = map[string]any{"<k>": "v&", "n": 3}
	off := int64(64)
	p.Buffers = append(p.Buffers, plan.Buffer{Name: names[0], Bytes: 1, Where: names[1], Role: names[2], Init: names[3], InitValue: 1e-9, InitPath: names[4], InitSeed: -7, Copies: 3, ArenaOffset: &off, Alloc: names[5]})
	for i, f := range floats {
		p.Buffers = append(p.Buffers, plan.Buffer{Name: fmt.Sprint("f", i), Bytes: 4, Where: "device", Role: "temp", InitValue: f})
	}
	p.Lifetimes = append(p.Lifetimes, plan.Lifetime{Buffer: names[1]}, plan.Lifetime{Buffer: "z", Done: []plan.StreamAt{}, First: names[2]})
	p.Streams[0].Host, p.Streams[0].Kind, p.Streams[0].Thread = true, names[1], names[2]
	for i := range p.Streams {
		p.Streams[i].Name = names[i%len(names)] + p.Streams[i].Name
	}
	plans = append(plans, p)
	encodesLikeOracle(t, plans)
	// A NaN is encoding/json's error, not a plan file.
	p.Stages[0].DurationUS = math.NaN()
	_, want := plan.MarshalOracle(p)
	if err := p.EncodeJSON(io.Discard, false); err == nil || want == nil || err.Error() != want.Error() {
		t.Errorf("NaN duration: error %v, want %v", err, want)
	}
}

// BenchmarkEncodeJSON writes the plan file of a 100k-stage layered plan:
// the streaming encoder compact (also without its cache of encoded kernel
// arguments) and indented, and encoding/json's
// MarshalIndent of the whole plan (what plan files were written with),
// reporting ns/stage.
func BenchmarkEncodeJSON(b *testing.B) {
	p, err := planner.Build(synth.Layered(100_000), planner.Options{})
	if err != nil {
		b.Fatal(err)
	}
	benchEncode(b, p)
}

// BenchmarkEncodeJSONModelChain is BenchmarkEncodeJSON on 80 chained copies
// of nasnetalarge (101,360 stages with kernel arguments, which the copies'
// stages share).
func BenchmarkEncodeJSONModelChain(b *testing.B) {
	model, err := dag.LoadFile(filepath.Join("..", "specs", "models", "nasnetalarge.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	s, err := synth.Chain(model, 80)
	if err != nil {
		b.Fatal(err)
	}
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		b.Fatal(err)
	}
	benchEncode(b, p)
}

func benchEncode(b *testing.B, p *plan.Plan) {
	for _, c := range []struct {
		name string
		enc  func(io.Writer) error
	}{
		{"stream-compact", func(w io.Writer) error { return p.EncodeJSON(w, false) }},
		{"stream-compact-args-uncached", func(w io.Writer) error {
			defer func(n int) { *plan.ArgsCacheMax = n }(*plan.ArgsCacheMax)
			*plan.ArgsCacheMax = 0
			return p.EncodeJSON(w, false)
		}},
		{"stream-indent", func(w io.Writer) error { return p.EncodeJSON(w, true) }},
		{"marshal-indent", func(w io.Writer) error {
			out, err := json.MarshalIndent(p, "", "  ")
			w.Write(out)
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.enc(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(p.Stages)), "ns/stage")
		})
	}
}

// TestPlanArgsExact: kernel arguments in a plan file keep every digit
// through decoding and encoding (json.Number), so a 64-bit integer
// argument reaches the kernel as written.
func TestPlanArgsExact(t *testing.T) {
	in := `{"version":1,"stages":[{"name":"a","stream":0,"duration_us":1,"kernel":"k","args":{"n":9007199254740993,"m":-9223372036854775808},"reads":[],"writes":[]}],"issue_order":[[0,0]],"events":0,"buffers":[],"lifetimes":[],"stats":{"stages":1,"streams":1,"waits":0,"events":0,"cross_stream_edges":0,"reduced_edges":0,"lower_bound_waits":0,"critical_path_us":0,"ideal_makespan_us":0,"sum_us":0,"planning_ms":0},"streams":[{"id":0,"name":"s0","ops":[{"op":"launch","stage":"a"}]}]}`
	var p plan.Plan
	if err := p.UnmarshalJSON([]byte(in)); err != nil {
		t.Fatal(err)
	}
	if n, m := p.Stages[0].Args["n"], p.Stages[0].Args["m"]; n != json.Number("9007199254740993") || m != json.Number("-9223372036854775808") {
		t.Fatalf("args %#v, %#v: want the numbers as written", n, m)
	}
	out, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"args":{"m":-9223372036854775808,"n":9007199254740993}`)) {
		t.Errorf("written back: %s", out)
	}
}

// encodesLikeOracle checks that each plan's EncodeJSON, compact and
// indented, gives encoding/json's bytes (marshalOracle).
func encodesLikeOracle(t *testing.T, plans []*plan.Plan) {
	t.Helper()
	for i, p := range plans {
		want, err := plan.MarshalOracle(p)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := p.EncodeJSON(&got, false); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("plan %d compact:\n got %s\nwant %s", i, got.Bytes(), want)
		}
		var wantIndent bytes.Buffer
		json.Indent(&wantIndent, want, "", "  ")
		got.Reset()
		if err := p.EncodeJSON(&got, true); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), wantIndent.Bytes()) {
			t.Errorf("plan %d indented:\n got %s\nwant %s", i, got.Bytes(), wantIndent.Bytes())
		}
	}
}
