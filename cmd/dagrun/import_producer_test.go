package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportAllocProducer: a graph tensor with "alloc": "producer" becomes
// an alloc: producer temp, which the plan file gives no arena offset while
// the other temps keep theirs (without it the
// arena would hold a, b and c, all live together); a bad value is an error at its position.
func TestImportAllocProducer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	g := filepath.Join(dir, "g.json")
	os.WriteFile(g, []byte(`{"model": "conv", "tensors": [
  {"id": "x", "bytes": 65536, "kind": "input"},
  {"id": "a", "bytes": 65536, "kind": "activation", "alloc": "producer"},
  {"id": "b", "bytes": 65536, "kind": "activation"},
  {"id": "c", "bytes": 65536, "kind": "activation"},
  {"id": "out", "bytes": 65536, "kind": "activation"}],
 "nodes": [{"id": "conv1", "op": "convolution", "reads": ["x"], "writes": ["a"], "duration_us": 5},
  {"id": "relu1", "op": "relu", "reads": ["a"], "writes": ["b"], "duration_us": 1},
  {"id": "add", "op": "add", "reads": ["a", "b"], "writes": ["c"], "duration_us": 1},
  {"id": "relu3", "op": "relu", "reads": ["c"], "writes": ["out"], "duration_us": 1}]}
`), 0o644)
	spec := filepath.Join(dir, "g.yaml")
	if _, errs, code := cli(t, "import", g, "-o", spec); code != 0 {
		t.Fatalf("import: exit %d: %s", code, errs)
	}
	js, errs, code := cli(t, "plan", "--json", spec)
	if code != 0 {
		t.Fatalf("plan --json: exit %d: %s", code, errs)
	}
	// The plan file's fields this test reads.
	var p struct {
		Buffers []struct {
			Name        string `json:"name"`
			Alloc       string `json:"alloc"`
			ArenaOffset *int64 `json:"arena_offset"`
		} `json:"buffers"`
		Stats struct {
			ArenaBytes int64 `json:"arena_bytes"`
		} `json:"stats"`
	}
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Buffers {
		switch b.Name {
		case "a":
			if b.Alloc != "producer" || b.ArenaOffset != nil {
				t.Errorf("a: alloc %q, arena offset %v; want producer and none", b.Alloc, b.ArenaOffset)
			}
		case "b", "c":
			if b.Alloc != "" || b.ArenaOffset == nil {
				t.Errorf("%s: alloc %q, arena offset %v; want none and an offset", b.Name, b.Alloc, b.ArenaOffset)
			}
		}
	}
	if p.Stats.ArenaBytes != 2*65536 {
		t.Errorf("arena %d bytes, want %d (b and c)", p.Stats.ArenaBytes, 2*65536)
	}
	if strings.Count(js, `"arena_offset"`) != 2 {
		t.Errorf("plan file has %d arena offsets, want 2 (b and c)", strings.Count(js, `"arena_offset"`))
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{\"model\": \"m\",\n \"tensors\": [{\"id\": \"x\", \"bytes\": 16, \"alloc\": \"Producer\"}],\n \"nodes\": [{\"id\": \"n\", \"writes\": [\"x\"]}]}\n"), 0o644)
	out, errs, code := cli(t, "import", bad, "-o", filepath.Join(dir, "bad.yaml"))
	if code == 0 || out != "" || !strings.Contains(errs, `bad.json:2:48: tensor "x" has alloc "Producer": want "producer"`) {
		t.Errorf("bad alloc: exit %d, stdout %q, stderr %q; want an error at bad.json:2:48", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.yaml")); err == nil {
		t.Error("a refused graph wrote its spec")
	}
}
