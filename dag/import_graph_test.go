package dag

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A node's stream becomes its stage's pin; nodes without one stay free.
func TestImportGraphStreamPins(t *testing.T) {
	src := `{"model": "pins", "tensors": [{"id": "x", "bytes": 16, "kind": "input"},
	  {"id": "a", "bytes": 16, "kind": "activation"}, {"id": "b", "bytes": 16, "kind": "activation"}],
	 "nodes": [{"id": "n1", "op": "relu", "reads": ["x"], "writes": ["a"], "duration_us": 3, "stream": "g1"},
	  {"id": "n2", "op": "relu", "reads": ["x"], "writes": ["b"], "duration_us": 4}]}`
	g, err := ReadGraph(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ImportGraph(g, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{s.Stages[0].Stream, s.Stages[1].Stream}; got[0] != "g1" || got[1] != "" {
		t.Fatalf("stage pins %q, want [g1 \"\"]", got)
	}
	var b strings.Builder
	if err := WriteYAML(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "stream: g1") {
		t.Errorf("the written spec does not pin n1:\n%s", b.String())
	}
}

// TestGraphErrorPositions: errors in a graph file name file:line:col of
// the value at fault, in the graph's terms: bad JSON, a value of the wrong
// type (with its path), and the importer's own checks.
func TestGraphErrorPositions(t *testing.T) {
	const head = "{\"model\": \"m\",\n \"tensors\": [{\"id\": \"x\", \"bytes\": 16, \"kind\": \"input\"},\n  {\"id\": \"a\", \"bytes\": 16, \"kind\": \"activation\"}],\n"
	for _, c := range []struct{ name, src, want string }{
		{"syntax", head + " \"nodes\": [{\"id\": \"n\",}]}", "g.json:4:23: not an operator graph: JSON syntax error: a ',' before '}'"},
		{"type", head + " \"nodes\": [{\"id\": \"n\", \"reads\": [\"x\", 7], \"writes\": [\"a\"]}]}", "g.json:4:39: not an operator graph: nodes[0].reads[1]: want a string, got a JSON number"},
		{"bytes", "{\"model\": \"m\",\n \"tensors\": [{\"id\": \"x\", \"bytes\": -4}],\n \"nodes\": [{\"id\": \"n\"}]}", `g.json:2:35: tensor "x" has -4 bytes`},
		{"unknown tensor", head + " \"nodes\": [{\"id\": \"n\", \"reads\": [\"x\"], \"writes\": [\"b\"]}]}", `g.json:4:51: node "n" writes unknown tensor "b"`},
		{"duration", head + " \"nodes\": [{\"id\": \"n\", \"reads\": [\"x\"],\n   \"writes\": [\"a\"], \"duration_us\": 1e300}]}", `g.json:5:36: node "n" has duration_us 1e+300: more than 6e+07 µs (60 s)`},
		{"kind", "{\"model\": \"m\",\n \"tensors\": [{\"id\": \"x\", \"bytes\": 16, \"kind\": \"Input\"}],\n \"nodes\": [{\"id\": \"n\", \"reads\": [\"x\"]}]}", `g.json:2:47: tensor "x" has kind "Input": want input, activation or param`},
		{"no nodes", head + " \"nodes\": []}", `g.json:4:11: graph "m" has no nodes`},
		{"alloc", "{\"model\": \"m\",\n \"tensors\": [{\"id\": \"x\", \"bytes\": 16, \"alloc\": \"eager\"}],\n \"nodes\": [{\"id\": \"n\", \"writes\": [\"x\"]}]}", `g.json:2:48: tensor "x" has alloc "eager": want "producer"`},
	} {
		path := filepath.Join(t.TempDir(), "g.json")
		if err := os.WriteFile(path, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := ReadGraphFile(path)
		if err == nil {
			_, err = ImportGraph(g, ImportOptions{})
		}
		if err == nil || !strings.HasPrefix(strings.TrimPrefix(err.Error(), filepath.Dir(path)+string(filepath.Separator)), c.want) {
			t.Errorf("%s: error %v, want %s", c.name, err, c.want)
		}
	}
}

// The import header names what the graph gives and leaves out what it
// does not: no empty parentheses or op list for a bare graph.
func TestGraphSummary(t *testing.T) {
	for _, c := range []struct {
		g    Graph
		want string
	}{
		{Graph{Model: "m", Source: "torch.fx", Tracer: "t", Nodes: []GraphNode{{Op: "conv"}, {Op: "conv"}, {Op: "relu"}}, Tensors: make([]GraphTensor, 2)},
			"m (torch.fx, t): 3 nodes, 2 tensors; top ops conv×2 relu×1"},
		{Graph{Nodes: []GraphNode{{ID: "n"}}}, "unnamed graph: 1 node, 0 tensors"},
		{Graph{Model: "m", Tracer: "t\nx", Nodes: []GraphNode{{Op: "add"}}}, "m (t x): 1 node, 0 tensors; top ops add×1"},
	} {
		if got := GraphSummary(&c.g); got != c.want {
			t.Errorf("GraphSummary = %q, want %q", got, c.want)
		}
	}
}

// A graph file that is not a plain file (a device would be read until the
// memory runs out, a fifo would block for ever) or is not there is refused
// before anything is read, with what to do.
func TestReadGraphFileRefusesWhatIsNoFile(t *testing.T) {
	if _, err := ReadGraphFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("/dev/zero: %v", err)
	}
	path := filepath.Join(t.TempDir(), "g.json")
	_, err := ReadGraphFile(path)
	want := path + ": cannot read graph file: no such file or directory (check the path; python3 -m dagrun_torch export writes one)"
	if err == nil || err.Error() != want || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v\nwant %s", err, want)
	}
}

// A graph tensor with alloc "producer" becomes an `alloc: producer` temp;
// an output drops the mark. The written spec loads back with it and writes
// the same text again.
func TestImportGraphAllocProducer(t *testing.T) {
	src := `{"model": "producer", "tensors": [{"id": "x", "bytes": 16, "kind": "input"},
	  {"id": "w", "bytes": 16, "kind": "param"},
	  {"id": "a", "bytes": 16, "kind": "activation", "alloc": "producer"}, {"id": "c", "bytes": 16, "kind": "activation"},
	  {"id": "out", "bytes": 16, "kind": "activation", "alloc": "producer"}],
	 "nodes": [{"id": "n1", "op": "conv", "reads": ["x", "w"], "writes": ["a"], "duration_us": 3},
	  {"id": "n2", "op": "relu", "reads": ["a"], "writes": ["c"], "duration_us": 1},
	  {"id": "n3", "op": "conv", "reads": ["c", "w"], "writes": ["out"], "duration_us": 3}]}`
	g, err := ReadGraph(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ImportGraph(g, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"x": "", "w": "", "a": AllocProducer, "c": "", "out": ""}
	for _, b := range s.Buffers {
		if b.Alloc != want[b.Name] {
			t.Errorf("buffer %s (%s): alloc %q, want %q", b.Name, b.Role, b.Alloc, want[b.Name])
		}
	}
	var text strings.Builder
	if err := WriteYAML(&text, s); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(text.String(), "alloc: producer"); n != 1 {
		t.Fatalf("the written spec has %d alloc: producer, want 1:\n%s", n, text.String())
	}
	back, err := Load([]byte(text.String()), "p.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range back.Buffers {
		if b.Alloc != want[b.Name] {
			t.Errorf("loaded back: buffer %s: alloc %q, want %q", b.Name, b.Alloc, want[b.Name])
		}
	}
	var again strings.Builder
	if err := WriteYAML(&again, back); err != nil {
		t.Fatal(err)
	}
	if again.String() != text.String() {
		t.Errorf("written again:\n%s\nwant:\n%s", again.String(), text.String())
	}
}

// alloc: producer is for temps without initial contents (zeros, the
// default, aside): on an input or output it is an error at the alloc, with
// init fill, file or random one at the init, on a host buffer one at the
// alloc value; an unknown mode names the modes.
func TestAllocProducerOnlyTemps(t *testing.T) {
	for _, c := range []struct{ buf, want string }{
		{"{name: x, bytes: 16, role: input, alloc: producer}", "p.yaml:3:46: buffer x: alloc producer is for temps; an input's bytes are the caller's"},
		{"{name: x, bytes: 16, role: output, alloc: producer}", "p.yaml:3:47: buffer x: alloc producer is for temps; an output's bytes are the caller's"},
		{"{name: x, bytes: 16, alloc: eager}", "p.yaml:3:33: buffer x: alloc: unknown value \"eager\""},
		{"{name: x, bytes: 16, role: temp, alloc: producer}", ""},
		{"{name: x, bytes: 16, alloc: producer, init: zeros}", ""},
		{"{name: x, bytes: 16, alloc: producer, init: {fill: 1.0}}", "p.yaml:3:49: buffer x: init fill with alloc producer: its first writer allocates it, so nothing is in it before that write"},
		{"{name: x, bytes: 16, alloc: producer, init: {random: 3}}", "p.yaml:3:49: buffer x: init random with alloc producer"},
		// the host's buffers are allocated before the run: producer means nothing there
		{"{name: x, bytes: 16, where: host_pinned, alloc: producer}", "p.yaml:3:53: buffer x: alloc producer on a host_pinned buffer: only device temps are allocated by their producer"},
		{"{name: x, bytes: 16, where: host_pageable, alloc: producer}", "p.yaml:3:55: buffer x: alloc producer on a host_pageable buffer"},
		{"{name: x, bytes: 16, where: device, alloc: producer}", ""},
	} {
		text := "version: 1\nbuffers:\n  - " + c.buf + "\nstages:\n  - {name: s, kernel: fill, args: {value: 1.0}, writes: [x]}\n"
		_, err := Load([]byte(text), "p.yaml", t.TempDir())
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.buf, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %s", c.buf, err, c.want)
		}
	}
}

// An alloc: producer buffer's contents before its first write are
// undefined: a read (in declaration order) of bytes no earlier stage
// writes is an error at that read, once per buffer; a read after a write
// of the bytes, or a host buffer without producer, is accepted.
func TestAllocProducerReadBeforeWrite(t *testing.T) {
	const head = "version: 1\nbuffers:\n  - {name: x, bytes: 16, alloc: producer}\n  - {name: o, bytes: 16, role: output}\nstages:\n"
	for _, c := range []struct{ name, stages, want string }{
		{"write first", "  - {name: w, kernel: fill, args: {value: 1.0}, writes: [x]}\n  - {name: r, kernel: copy, reads: [x], writes: [o]}\n", ""},
		{"read first", "  - {name: r, kernel: copy, reads: [x], writes: [o]}\n  - {name: w, kernel: fill, args: {value: 1.0}, writes: [x]}\n",
			"p.yaml:6:37: stage r reads x[0:16] before any stage writes it: buffer x has alloc producer"},
		{"never written", "  - {name: r, kernel: copy, reads: [x], writes: [o]}\n  - {name: r2, kernel: copy, reads: [x], writes: [o]}\n",
			"p.yaml:6:37: stage r reads x[0:16] before any stage writes it"},
		{"partly written", "  - {name: w, kernel: fill, args: {value: 1.0}, writes: [{buffer: x, offset: 0, bytes: 8}]}\n  - {name: r, kernel: copy, reads: [x], writes: [o]}\n",
			"p.yaml:7:37: stage r reads x[0:16] before any stage writes bytes [8:16] of it"},
		{"two halves", "  - {name: w, kernel: fill, args: {value: 1.0}, writes: [{buffer: x, offset: 8, bytes: 8}]}\n  - {name: w2, kernel: fill, args: {value: 1.0}, writes: [{buffer: x, offset: 0, bytes: 8}]}\n  - {name: r, kernel: copy, reads: [x], writes: [o]}\n", ""},
	} {
		_, err := Load([]byte(head+c.stages), "p.yaml", t.TempDir())
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Count(err.Error(), "alloc producer") != 1):
			t.Errorf("%s: error %v, want one, %s", c.name, err, c.want)
		}
	}
}

// alloc "producer" on an input or param tensor is an error at the value;
// a read of a producer-allocated temp at or before its first writer, or of
// one no node writes, is an error at the read.
func TestImportGraphAllocProducerErrors(t *testing.T) {
	const tail = `], "nodes": [`
	for _, c := range []struct{ name, tensors, nodes, want string }{
		{"input", `{"id": "x", "bytes": 16, "kind": "input", "alloc": "producer"}, {"id": "a", "bytes": 16}`,
			`{"id": "n1", "op": "relu", "reads": ["x"], "writes": ["a"]}`,
			`g.json:1:79: tensor "x" is an input with alloc "producer": an input's bytes are the caller's, no operator allocates them; drop alloc`},
		{"param", `{"id": "x", "bytes": 16, "kind": "param", "alloc": "producer"}, {"id": "a", "bytes": 16}`,
			`{"id": "n1", "op": "relu", "reads": ["x"], "writes": ["a"]}`,
			`g.json:1:79: tensor "x" is a param with alloc "producer"`},
		{"read first", `{"id": "t", "bytes": 16, "alloc": "producer"}, {"id": "a", "bytes": 16}, {"id": "b", "bytes": 16}`,
			`{"id": "n1", "op": "relu", "reads": ["t"], "writes": ["a"]}, {"id": "n2", "op": "relu", "reads": ["a"], "writes": ["t"]}, {"id": "n3", "op": "relu", "reads": ["t"], "writes": ["b"]}`,
			`g.json:1:175: node "n1" reads tensor "t" before node "n2" writes it, and it has alloc "producer"`},
		{"in place", `{"id": "t", "bytes": 16, "alloc": "producer"}, {"id": "b", "bytes": 16}`,
			`{"id": "n1", "op": "relu_", "reads": ["t"], "writes": ["t"]}, {"id": "n2", "op": "relu", "reads": ["t"], "writes": ["b"]}`,
			`node "n1" reads tensor "t" before node "n1" writes it`},
		{"never written", `{"id": "t", "bytes": 16, "alloc": "producer"}, {"id": "a", "bytes": 16}`,
			`{"id": "n1", "op": "relu", "reads": ["t"], "writes": ["a"]}`,
			`node "n1" reads tensor "t", which has alloc "producer" and no node writes`},
		{"output read first", `{"id": "t", "bytes": 16, "alloc": "producer"}, {"id": "a", "bytes": 16}`,
			`{"id": "n1", "op": "relu", "reads": ["t"], "writes": ["a"]}, {"id": "n2", "op": "relu", "reads": ["a"], "writes": ["t"]}`, ""},
		{"written first", `{"id": "t", "bytes": 16, "alloc": "producer"}, {"id": "a", "bytes": 16}, {"id": "b", "bytes": 16}`,
			`{"id": "n1", "op": "relu", "reads": ["a"], "writes": ["t"]}, {"id": "n2", "op": "relu", "reads": ["t"], "writes": ["b"]}`, ""},
	} {
		src := `{"model": "m", "tensors": [` + c.tensors + tail + c.nodes + `]}`
		path := filepath.Join(t.TempDir(), "g.json")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := ReadGraphFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ImportGraph(g, ImportOptions{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %s", c.name, err, c.want)
		}
	}
}
