package dag

import (
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
