package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Conflicting flags are usage errors found before anything is loaded (the
// spec does not exist, and the error is the conflict), with nothing written:
// no stdout, no trace file.
func TestRunConflictsRejectedFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "does-not-exist.yaml")
	trace := filepath.Join(dir, "trace.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--mode", "graph", "--sync-each", missing}, "--mode graph conflicts with --sync-each"},
		{[]string{"run", "--alloc", "dynamic", "--mode", "graph", missing}, "--alloc dynamic conflicts with --mode graph"},
		{[]string{"run", "--mode=graph", "--alloc=dynamic", missing}, "--alloc dynamic conflicts with --mode graph"},
		{[]string{"run", "--frames", dir, "--mode", "graph", missing}, "--frames conflicts with --mode graph"},
		{[]string{"run", "--frames", dir, "--json", missing}, "--frames conflicts with --json"},
		{[]string{"run", "--alloc", "dynamic", "--arena", "planned", missing}, "--alloc dynamic conflicts with --arena planned"},
		{[]string{"run", "--alloc", "dynamic", "--arena", "stream-order", missing}, "--alloc dynamic conflicts with --arena stream-order"},
		{[]string{"run", "--seed", "3", "--backend", "cuda", missing}, "--seed conflicts with --backend cuda"},
		{[]string{"run", "--devices", "0,0", "--backend", "sim", missing}, "--devices conflicts with --backend sim"},
		{[]string{"run", "--plan", missing, "--strategy", "single"}, "--plan conflicts with --strategy"},
		{[]string{"run", "--plan", missing, "--memory-budget", "auto"}, "--plan conflicts with --memory-budget"},
		{[]string{"check", "--plan", missing, "--arena", "off"}, "--plan conflicts with --arena"},
		{[]string{"check", "--plan", missing, "--stream-sets", "1"}, "--plan conflicts with --stream-sets"},
	} {
		args := append(c.args, "--trace", trace)
		if c.args[0] == "check" {
			args = c.args
		}
		out, errs, code := cli(t, args...)
		if code != exitUsage || !strings.Contains(errs, c.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, no output and %q", c.args, code, out, errs, c.want)
		}
		if _, err := os.Stat(trace); err == nil {
			t.Fatalf("%v: wrote %s", c.args, trace)
		}
	}
	// Flags that agree are no conflict: the same flags one at a time run.
	for _, args := range [][]string{
		{"run", "--backend", "sim", "--mode", "graph", specPath("seed/three-stage.yaml")},
		{"run", "--backend", "sim", "--alloc", "dynamic", "--arena", "off", specPath("seed/three-stage.yaml")},
		{"run", "--backend", "sim", "--sync-each", "--mode", "streams", specPath("seed/three-stage.yaml")},
	} {
		if out, errs, code := cli(t, args...); code != exitOK {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
}

// cmd/dagrun reaches dagrun only through the root package, the API every
// embedding program has, and internal/..., the helpers only the command
// line needs (and the video demo, for its kernels and its frame check):
// never through the packages below the root.
func TestOnlyRootImports(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if !allowedImport(path) {
				t.Errorf("%s imports %s: call the root package dagrun instead, or a helper under internal/", f, path)
			}
		}
	}
}

// allowedImport reports whether cmd/dagrun may import path: any package
// outside this module, the root package, one under internal/, and the
// video demo.
func allowedImport(path string) bool {
	const mod = "github.com/dagrun/dagrun"
	return !strings.HasPrefix(path, mod+"/") || strings.HasPrefix(path, mod+"/internal/") || path == mod+"/specs/video"
}

func TestAllowedImport(t *testing.T) {
	for path, want := range map[string]bool{
		"github.com/spf13/cobra":                   true,
		"github.com/dagrun/dagrun":                 true,
		"github.com/dagrun/dagrun/internal/report": true,
		"github.com/dagrun/dagrun/specs/video":     true,
		"github.com/dagrun/dagrun/planner":         false,
		"github.com/dagrun/dagrun/executor/sim":    false,
		"github.com/dagrun/dagrun/internalx":       false,
		"github.com/dagrun/dagrun/specs/video/x":   false,
	} {
		if got := allowedImport(path); got != want {
			t.Errorf("allowedImport(%q) = %v, want %v", path, got, want)
		}
	}
}

// A flag cobra refuses is bad usage (exit 2, nothing on stdout) and says
// where the flags are listed; `plan -o FILE` says how to write the plan to
// a file.
func TestFlagErrors(t *testing.T) {
	spec := specPath("seed/two-writers.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--jsn", spec}, "unknown flag: --jsn (`dagrun plan --help` lists its flags)"},
		{[]string{"run", "--iterations", "x", spec}, "(`dagrun run --help` lists its flags)"},
		{[]string{"plan", "-o", "p.json", spec}, "dagrun plan prints the plan to stdout; redirect it to a file: dagrun plan --json SPEC > FILE"},
		{[]string{"plan", "--out", "p.json", spec}, "dagrun plan prints the plan to stdout; redirect it"},
		{[]string{"plan", "-o=p.json", spec}, "dagrun plan prints the plan to stdout; redirect it"},
		{[]string{"plan", "-op.json", spec}, "dagrun plan prints the plan to stdout; redirect it"},
	} {
		out, errs, code := cli(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errs, c.want)
		}
	}
}

// bench scale reads every --graphs file before it makes or plans a spec:
// a bad one is bad input (exit 2) with nothing on stdout, not a table cut
// short after the specs made before it.
func TestBenchScaleBadGraphPrintsNothing(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"nodes": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := cli(t, "bench", "scale", "--shapes", "layered", "--stages", "100", "--graphs", bad, "--copies", "1")
	if code != exitUsage || out != "" || !strings.Contains(errs, "bad.json:1:12: not an operator graph") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, the file's error", code, out, errs)
	}
}

// A flag's word that is not one of its values is bad usage (exit 2,
// nothing on stdout) listing every value, from the table the shell
// completes from.
func TestFlagWordsListed(t *testing.T) {
	spec := specPath("seed/three-stage.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--backend", "gpu", spec}, `--backend "gpu": want auto, sim or cuda`},
		{[]string{"run", "--alloc", "lazy", spec}, `--alloc "lazy": want static or dynamic`},
		{[]string{"run", "--mode", "graphs", spec}, `--mode "graphs": want streams or graph`},
		{[]string{"plan", "--strategy", "fastest", spec}, `--strategy "fastest": want default, single, round-robin, naive or hazard-dag`},
		{[]string{"plan", "--arena", "on", spec}, `--arena "on": want planned, off or stream-order`},
	} {
		out, errs, code := cli(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errs, c.want)
		}
	}
}
