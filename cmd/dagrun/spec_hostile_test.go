package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Hostile and huge specs through the command: each is bad input (exit 2)
// with a clear message, no panic and no output, in under 5 s and well
// under 1 GiB of allocations.
func TestHostileSpecs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var bomb strings.Builder
	bomb.WriteString("version: 1\nbuffers: [{name: x, bytes: 4096}]\nstages:\n  - &s {name: s, kernel: mix, writes: [x], reads: [x")
	bomb.WriteString(strings.Repeat(", x", 2999))
	bomb.WriteString("]}\n")
	bomb.WriteString(strings.Repeat("  - *s\n", 3000))
	var wide strings.Builder
	fmt.Fprintf(&wide, "version: 1\nbuffers: [{name: x, bytes: %d}, {name: y, bytes: 64}]\nstages:\n  - {name: s, kernel: mix, reads: [y], writes: [", 400000)
	for i := range 100000 {
		if i > 0 {
			wide.WriteString(", ")
		}
		fmt.Fprintf(&wide, "\"x[%d:%d]\"", 4*i, 4*i+4)
	}
	wide.WriteString("]}\n")
	secret := write("secret.bin", strings.Repeat("s", 64))
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(sub, "outside.yaml")
	if err := os.WriteFile(outside, []byte(fmt.Sprintf("version: 1\nbuffers: [{name: a, bytes: 64, role: output, init: {file: %q}}]\nstages: [{name: s, kernel: checksum, reads: [\"a[0:32]\"], writes: [\"a[32:64]\"]}]\n", secret)), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, words string
	}{
		{"alias bomb", write("bomb.yaml", bomb.String()), "YAML aliases (*name) expand to more than 1048576 nodes"},
		{"100k writes", write("wide.yaml", wide.String()), "100000 accesses, more than the 65536 a stage may have in one list"},
		{"init file outside", outside, "init file " + secret + " is outside the spec's folder"},
		{"bad JSON", write("bad.json", `{"version": 1, "stages": [{"name": "a", "kernel": "spin"},]}`), "bad.json:1:59: JSON syntax error: a ',' before ']'"},
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o600); err == nil {
		cases = append(cases, struct{ name, path, words string }{"spec fifo", filepath.Join(dir, "fifo.yaml"), "not a regular file"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			out, errs, code := cli(t, "check", c.path)
			d := time.Since(start)
			runtime.ReadMemStats(&after)
			if code != exitUsage || out != "" || !strings.Contains(errs, c.words) || strings.Contains(errs, "panic") {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%.2000s", code, exitUsage, out, errs)
			}
			if d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			if a := after.TotalAlloc - before.TotalAlloc; a > 1<<30 {
				t.Errorf("allocated %d MB", a>>20)
			}
		})
	}
	// The user's own spec may name files anywhere with --allow-outside-paths.
	if out, errs, code := cli(t, "check", "--allow-outside-paths", outside); code != exitOK {
		t.Errorf("--allow-outside-paths: exit %d\n%s%s", code, out, errs)
	}
	// The same spec in JSON plans like its YAML.
	js := write("p.json", `{"version": 1, "buffers": [{"name": "x", "bytes": 64}], "stages": [{"name": "a", "kernel": "fill", "args": {"value": 1.5}, "writes": ["x"]}, {"name": "b", "kernel": "checksum", "reads": ["x[0:32]"], "writes": ["x[32:64]"]}]}`)
	if out, errs, code := cli(t, "check", js); code != exitOK {
		t.Errorf("JSON spec: exit %d\n%s%s", code, out, errs)
	}
}

// import never writes a spec that does not load: ids that are not names,
// a node writing a tensor twice, line breaks in the graph's text are bad
// input (exit 2), with nothing written, and named at the graph file's line:col.
func TestImportWritesOnlySpecsThatLoad(t *testing.T) {
	dir := t.TempDir()
	made := 0
	graph := func(model string, tensors [][3]any, nodes []map[string]any) string {
		var ts []map[string]any
		for _, x := range tensors {
			ts = append(ts, map[string]any{"id": x[0], "bytes": x[1], "kind": x[2]})
		}
		b, _ := json.Marshal(map[string]any{"model": model, "tensors": ts, "nodes": nodes})
		made++
		p := filepath.Join(dir, fmt.Sprintf("g%d.json", made))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	node := func(id string, reads, writes []string) map[string]any {
		return map[string]any{"id": id, "op": "add", "reads": reads, "writes": writes, "duration_us": 1.0}
	}
	tensors := [][3]any{{"in", 64, "input"}, {"t", 64, "activation"}}
	cases := []struct {
		name, path, words string
	}{
		{"id with a space", graph("m", tensors, []map[string]any{node("my node", []string{"in"}, []string{"t"})}), `.json:1:45: stage name "my node" contains a space`},
		{"tensor with a bracket", graph("m", [][3]any{{"in", 64, "input"}, {"t[0]", 64, "activation"}}, []map[string]any{node("n", []string{"in"}, []string{"t[0]"})}), `buffer name "t[0]" contains '['`},
		{"duplicate write", graph("m", tensors, []map[string]any{node("n", []string{"in"}, []string{"t", "t"})}), ".json:1:84: stage n: writes t[0:64] and t[0:64] overlap"},
		{"newline in the model", graph("m\nversion: 2", tensors, []map[string]any{node("n", []string{"in"}, []string{"t"})}), `spec name "m\nversion: 2" contains a space or control character`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := filepath.Join(dir, "out.yaml")
			out, errs, code := cli(t, "import", c.path, "-o", dst)
			if code != exitUsage || out != "" || !strings.Contains(errs, c.words) || !strings.Contains(errs, "does not make a valid spec") {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitUsage, out, errs)
			}
			if _, err := os.Stat(dst); err == nil {
				t.Errorf("import wrote %s", dst)
			}
		})
	}
}
