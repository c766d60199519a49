package dag

import (
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

// TestImportGraphPositions: the errors about a graph file's tensors and
// nodes, and its JSON errors, name file:line:column.
func TestImportGraphPositions(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ src, want string }{
		{`{"model": "m", "tensors": [{"id": "x", "bytes": 16, "kind": "input"}],
 "nodes": [{"id": "n1", "op": "relu", "reads": ["x"], "writes": []},
   {"id": "n2", "op": "relu", "reads": ["y"], "writes": []}]}`, "g.json:3:4: node \"n2\" reads unknown tensor \"y\""},
		{`{"model": "m", "source": "s",
 "tensors": [{"id": "x", "bytes": 16, "kind": "input"}, {"id": "z", "bytes": 6, "kind": "activation"}],
 "nodes": [{"id": "n1", "op": "relu", "reads": ["x"], "writes": ["z"]}]}`, "g.json:2:57: tensor \"z\" has 6 bytes"},
		{"{\"model\": \"m\",\n \"nodes\": [}", "g.json:2:12: not an operator graph"},
		{`{"model": "m", "nodes": []}`, `g.json: graph "m" has no nodes`},
	} {
		path := filepath.Join(dir, "g.json")
		if err := os.WriteFile(path, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := ReadGraphFile(path)
		if err == nil {
			_, err = ImportGraph(g, ImportOptions{})
		}
		if err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, c.want)) {
			t.Errorf("got %v, want %s", err, c.want)
		}
	}
}
