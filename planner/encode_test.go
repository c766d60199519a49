package planner

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/synth"
)

// marshalOracle is the plan file as encoding/json writes it in one piece
// (the form EncodeJSON must reproduce byte for byte).
func marshalOracle(p *Plan) ([]byte, error) {
	out := planJSON{planAlias: (*planAlias)(p), Streams: make([]streamJSON, len(p.Streams))}
	why := p.WaitReasons()
	for i := range p.Streams {
		out.Streams[i] = p.streamJSON(i, why)
	}
	return json.Marshal(out)
}

// TestEncodeJSONStreams: the streaming encoder writes the bytes
// encoding/json writes for the whole plan, compact and indented, for
// plans with every optional part (iteration info, lags, arena, notes,
// kernels) and for an empty one.
func TestEncodeJSONStreams(t *testing.T) {
	plans := []*Plan{{Version: PlanVersion}, {Version: PlanVersion, Stages: []Stage{}, Streams: []Stream{}, IssueOrder: [][2]int{}}}
	for _, s := range []*dag.Spec{
		spec(stage("a", writes("x")), stage("b", reads("x"), writes("y")), stage("c", reads("x"), writes("z"))),
		spec(stage("a", writes("x"), on("p")), stage("b", reads("x"), writes("y"), on("q")), stage("c", reads("y"), writes("z"), on("p"))),
	} {
		plans = append(plans, build(t, s, Options{}))
	}
	plans[len(plans)-1].Notes = []string{"a note with <html> & \"quotes\""}
	plans[len(plans)-1].Kernels = []Kernel{{Name: "k", PTX: "k.ptx", Entry: "k", Params: []string{"n:i64"}}}
	plans[len(plans)-1].Stages[0].Args = map[string]any{"n": json.Number("9007199254740993"), "a": 0.5}
	for i, p := range plans {
		want, err := marshalOracle(p)
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

// BenchmarkEncodeJSON writes the plan file of a 100k-stage layered plan:
// the streaming encoder compact and indented, and encoding/json's
// MarshalIndent of the whole plan (what plan files were written with),
// reporting ns/stage.
func BenchmarkEncodeJSON(b *testing.B) {
	p, err := Build(synth.Layered(100_000), Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		enc  func(io.Writer) error
	}{
		{"stream-compact", func(w io.Writer) error { return p.EncodeJSON(w, false) }},
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
	var p Plan
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
