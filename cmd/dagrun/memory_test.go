package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/bench"
)

func TestParseBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"4096": 4096, "64MiB": 64 << 20, "2G": 2e9, "10K": 10e3, "3KiB": 3072, "5B": 5} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "1.5M", "x", "99999999999GiB"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q): no error", in)
		}
	}
}

func TestMemoryFlags(t *testing.T) {
	t.Parallel()
	resnet := specPath("models/resnet50.yaml")
	for _, args := range [][]string{
		{"plan", "--arena", "bogus", resnet},
		{"plan", "--memory-budget", "-5", resnet},
		{"plan", "--memory-budget", "lots", resnet},
		{"run", "--alloc", "lazy", specPath("memory/a-stream-reuse.yaml")},
		{"run", "--alloc", "dynamic", "--mode", "graph", specPath("memory/a-stream-reuse.yaml")},
	} {
		if _, errs, code := cli(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, errs)
		}
	}
	out, errs, code := cli(t, "plan", "--memory-budget", "auto", resnet)
	if code != exitOK || !strings.Contains(out, "budget step 1: reuse") || !strings.Contains(out, "arena: 9633792 bytes") {
		t.Errorf("plan --memory-budget auto: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = cli(t, "plan", "--arena", "off", "--json", resnet)
	if code != exitOK || strings.Contains(out, "arena_offset") {
		t.Errorf("plan --arena off --json: exit %d, arena offsets in the plan", code)
	}
	// A budget that cannot be met is bad input, with the shortfall.
	if _, errs, code := cli(t, "plan", "--memory-budget", "1MiB", specPath("models/squeezenet1_1.yaml")); code != exitUsage || !strings.Contains(errs, "cannot be met") || !strings.Contains(errs, "bytes (") {
		t.Errorf("unmeetable budget: exit %d\n%s", code, errs)
	}
	// The stream-order arena is the record_stream bug: check reports it.
	if out, _, code := cli(t, "check", "--arena", "stream-order", specPath("memory/b-bucket-reuse.yaml")); code != exitFailure || !strings.Contains(out, "arena bytes shared with") {
		t.Errorf("check --arena stream-order: exit %d\n%s", code, out)
	}
}

// TestRunAllocDynamic: --alloc dynamic prints the same checksums as static.
func TestRunAllocDynamic(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"memory/a-stream-reuse.yaml", "memory/b-bucket-reuse.yaml", "memory/c-pinned-refill.yaml", "models/squeezenet1_1.yaml"} {
		static, _, c1 := cli(t, "run", "--backend", "sim", specPath(spec))
		dynamic, errs, c2 := cli(t, "run", "--backend", "sim", "--alloc", "dynamic", specPath(spec))
		if c1 != exitOK || c2 != exitOK {
			t.Fatalf("%s: exit %d / %d\n%s", spec, c1, c2, errs)
		}
		if outLines(static) != outLines(dynamic) {
			t.Errorf("%s: static\n%s\ndynamic\n%s", spec, static, dynamic)
		}
	}
}

func outLines(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "output ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func TestBenchMemory(t *testing.T) {
	t.Parallel()
	png := filepath.Join(t.TempDir(), "curve.png")
	out, errs, code := cli(t, "bench", "memory", "--plot", png, specPath("models/squeezenet1_1.yaml"), specPath("models/resnet50.yaml"))
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	for _, want := range []string{"| squeezenet1_1 | 65 | 8 | 3.7 | 17.0 | 3.7 | 3.7 | 1.000 |", "| resnet50 |", "| 0 | 0, true |"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if st, err := os.Stat(png); err != nil || st.Size() < 1000 {
		t.Errorf("plot: %v", err)
	}
}

// The budget plot draws a line, with a legend entry, only for specs whose
// budget loop took steps; the others (a single point under every curve's
// start) are named in the title instead of an entry with nothing to see.
func TestBudgetPlotEveryEntryVisible(t *testing.T) {
	var curves []memCurve
	for _, f := range []string{"seed/three-stage.yaml", "models/resnet50.yaml"} {
		s, err := dagrun.Load(specPath(f))
		if err != nil {
			t.Fatal(err)
		}
		m, err := bench.Memory(context.Background(), s, false)
		if err != nil {
			t.Fatal(err)
		}
		curves = append(curves, memCurve{name: f, m: m})
	}
	drawn, none := curvesToDraw(curves)
	for _, c := range drawn {
		if len(c.m.BudgetSteps) == 0 {
			t.Errorf("%s drawn with no step", c.name)
		}
	}
	if len(drawn)+len(none) != len(curves) || len(drawn) == 0 {
		t.Fatalf("drawn %d, named %v, of %d", len(drawn), none, len(curves))
	}
	path := filepath.Join(t.TempDir(), "b.png")
	if err := plotCurves(curves, path); err != nil {
		t.Fatal(err)
	}
}

// TestBenchFailedRow: bench plan and bench memory print a row for every
// spec, the one that fails marked with its error (also on stderr), and
// exit 1 after the table; a spec that does not load fails before any table.
func TestBenchFailedRow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Over its budget under every strategy: each of bench plan's plans fails.
	budget := write("budget.yaml", `version: 1
options: {memory_budget: 64}
buffers:
  - {name: a, bytes: 4096}
  - {name: b, bytes: 4096}
  - {name: out, bytes: 4096, role: output}
stages:
  - {name: s1, kernel: mix, writes: [a]}
  - {name: s2, kernel: mix, reads: [a], writes: [b]}
  - {name: s3, kernel: mix, reads: [b], writes: [out]}
`)
	// A Go function bench memory's simulator runs do not bind.
	gofn := write("gofn.yaml", `version: 1
buffers:
  - {name: a, bytes: 4096}
  - {name: out, bytes: 4096, role: output}
stages:
  - {name: s1, kernel: {go: produce}, writes: [a]}
  - {name: s2, kernel: mix, reads: [a], writes: [out]}
`)
	good := specPath("seed/three-stage.yaml")
	for _, c := range []struct {
		cmd, bad, why string
		rows          int
	}{
		{"plan", budget, "memory_budget 64 bytes cannot be met", 2},
		{"memory", gofn, "Go function", 4},
	} {
		out, errs, code := cli(t, "bench", c.cmd, good, c.bad, good)
		if code != exitFailure {
			t.Errorf("bench %s: exit %d, want %d\n%s", c.cmd, code, exitFailure, errs)
		}
		name := strings.TrimSuffix(filepath.Base(c.bad), ".yaml")
		if n := strings.Count(out, "| three-stage | "); n != c.rows {
			t.Errorf("bench %s: %d rows of the good specs, want %d\n%s", c.cmd, n, c.rows, out)
		}
		if !strings.Contains(out, "| "+name+" | failed: ") || !strings.Contains(out, c.why) || !strings.Contains(errs, c.bad+": ") {
			t.Errorf("bench %s: the failed row or its error is missing\nstdout:\n%s\nstderr:\n%s", c.cmd, out, errs)
		}
		out, _, code = cli(t, "bench", c.cmd, good, filepath.Join(dir, "missing.yaml"))
		if code != exitUsage || out != "" {
			t.Errorf("bench %s with a missing spec: exit %d, stdout %q: want %d and no table", c.cmd, code, out, exitUsage)
		}
	}
}

// TestMemoryBudgetFlagValues: a size past the bound is called too large,
// with the bound, not "want a positive size"; other bad values, the empty
// one too (leaving the flag out takes the spec's), get the forms that work.
func TestMemoryBudgetFlagValues(t *testing.T) {
	spec := specPath("seed/three-stage.yaml")
	for _, c := range []struct{ v, want string }{
		{"99999999999999999999", "too large: at most 4611686018427387904 bytes"},
		{"9999999999GiB", "too large: at most"},
		{"10X", "want a positive size in bytes"},
		{"1TiB", "suffixes K, M, G (powers of 1000) or KiB, MiB, GiB"}, // the forms it takes, named
		{"64mib", "suffixes K, M, G (powers of 1000) or KiB, MiB, GiB"},
		{"-5", "want a positive size in bytes"},
		{"", "--memory-budget '': empty"},
	} {
		out, errOut, code := cli(t, "plan", "--memory-budget", c.v, spec)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("--memory-budget %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.v, code, out, errOut, c.want)
		}
	}
}

// bench memory of a spec of several devices says which figures are sums
// over the devices and which the largest device's: the one-stream arena
// of data-parallel-4 is 2.0 MiB in the first table (four devices of
// 0.5 MiB) and its budget 0.5 MiB in the second.
func TestBenchMemoryDevices(t *testing.T) {
	t.Parallel()
	out, errs, code := cli(t, "bench", "memory", "--no-sim", specPath("multigpu/data-parallel-4.yaml"), specPath("seed/three-stage.yaml"))
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	for _, want := range []string{"| data-parallel-4 | 20 | 4 | 2.0 | 2.0 | 2.0 | 2.0 | 1.000 |", "| data-parallel-4 | 0.5 |",
		"several devices: data-parallel-4 (4). Each device has an arena of its own: the first table's arenas and live bound are the sums of the devices'; memory_budget caps each device's arena, so the budget table's figures are the largest device's."} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "three-stage (") {
		t.Errorf("a spec of one device is named:\n%s", out)
	}
}

// Flags that contradict each other on the command line are refused before
// the spec is read: a budget with an arena it cannot cap, a pass that does
// not exist. The spec here does not exist, so any answer about the file
// means the spec was opened first.
func TestPlanFlagsRefusedBeforeLoad(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "none.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--memory-budget", "1KiB", "--arena", "off"}, "--memory-budget 1KiB conflicts with --arena off"},
		{[]string{"check", "--memory-budget", "auto", "--arena", "stream-order"}, "--memory-budget auto conflicts with --arena stream-order"},
		{[]string{"run", "--memory-budget", "64MiB", "--arena", "off"}, "--memory-budget 64MiB conflicts with --arena off"},
		{[]string{"plan", "--dump-after", "bogus"}, `--dump-after "bogus": no such pass (passes: reduce, assign`},
	} {
		out, errOut, code := cli(t, append(c.args, missing)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
	// No budget is no conflict.
	if _, errOut, code := cli(t, "plan", "--memory-budget", "none", "--arena", "off", specPath("seed/three-stage.yaml")); code != exitOK {
		t.Errorf("--memory-budget none --arena off: exit %d\n%s", code, errOut)
	}
}
