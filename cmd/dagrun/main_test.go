package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/internal/cmdline"
)

// dagrun runs the command line in-process and returns stdout, stderr and the exit code.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	code := exitCode(err, &errb)
	return out.String(), errb.String(), code
}

func specPath(rel string) string { return filepath.Join("..", "..", "specs", rel) }

// specCopy copies the repository spec rel into a new temporary folder, for
// tests that check a command leaves its input alone; it returns the copy's
// path and the folder.
func specCopy(t *testing.T, rel string) (spec, dir string) {
	t.Helper()
	src, err := os.ReadFile(specPath(rel))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	spec = filepath.Join(dir, filepath.Base(rel))
	if err := os.WriteFile(spec, src, 0o644); err != nil {
		t.Fatal(err)
	}
	return spec, dir
}

// allSpecs lists every spec under specs/ (racy ones included).
func allSpecs(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join("..", "..", "specs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			out = append(out, p)
		}
		return err
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("no specs found: %v", err)
	}
	return out
}

func isRacy(path string) bool { return strings.Contains(filepath.Base(path), "racy") }

func TestCheckExitCodes(t *testing.T) {
	t.Parallel()
	for _, p := range allSpecs(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			t.Parallel()
			out, errs, code := cli(t, "check", p)
			if isRacy(p) {
				if code != exitFailure {
					t.Fatalf("check %s: exit %d, want 1 (race)\nstdout:\n%s\nstderr:\n%s", p, code, out, errs)
				}
				if !strings.Contains(out, "RACE") || !strings.Contains(strings.ToLower(out), "wait") {
					t.Errorf("check %s: report does not name the missing wait:\n%s", p, out)
				}
				return
			}
			if code != exitOK || !strings.Contains(out, "ok: no race") {
				t.Fatalf("check %s: exit %d\nstdout:\n%s\nstderr:\n%s", p, code, out, errs)
			}
		})
	}
}

func TestCheckRacyTwoWritersNamesBoth(t *testing.T) {
	t.Parallel()
	out, _, code := cli(t, "check", specPath("seed/two-writers-racy.yaml"))
	if code != exitFailure {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{"w1", "w2", "out"} {
		if !strings.Contains(out, want) {
			t.Errorf("race report does not mention %q:\n%s", want, out)
		}
	}
}

func TestBadSpecExit2NoOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("version: 1\nname: bad\nbuffers:\n  - {name: x, bytes: 16}\nstages:\n  - {name: a, kernel: fill, writes: [x], colour: red}\n"), 0o644)
	for _, cmd := range [][]string{{"plan", bad}, {"plan", "--json", bad}, {"check", bad}, {"run", "--backend", "sim", bad}} {
		out, errs, code := cli(t, cmd...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want 2; stderr %s", cmd, code, errs)
		}
		if out != "" {
			t.Errorf("%v: wrote partial output %q", cmd, out)
		}
		if !regexp.MustCompile(`bad\.yaml:6:\d+`).MatchString(errs) {
			t.Errorf("%v: error does not give file:line:column of the unknown field:\n%s", cmd, errs)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{
		{"plan"},
		{"plan", "--json", "--format", "dot", specPath("seed/three-stage.yaml")},
		{"plan", "--strategy", "fastest", specPath("seed/three-stage.yaml")},
		{"run", "--backend", "tpu", specPath("seed/three-stage.yaml")},
		{"run", "--iterations", "0", specPath("seed/three-stage.yaml")},
		{"run"},
		{"run", "--plan", "x.json", specPath("seed/three-stage.yaml")},
		{"frobnicate"},
		{"check", "does-not-exist.yaml"},
	} {
		out, _, code := cli(t, cmd...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want 2", cmd, code)
		}
		if out != "" {
			t.Errorf("%v: wrote output %q", cmd, out)
		}
	}
}

func TestPlanFormats(t *testing.T) {
	t.Parallel()
	p := specPath("seed/three-stage.yaml")
	out, errs, code := cli(t, "plan", p)
	if code != 0 || !strings.Contains(out, "waits=") {
		t.Fatalf("plan table: exit %d\n%s%s", code, out, errs)
	}
	dot, _, code := cli(t, "plan", "--format", "dot", p)
	if code != 0 || !strings.Contains(dot, "digraph") || !strings.Contains(dot, "cluster") {
		t.Fatalf("plan dot: exit %d\n%s", code, dot)
	}
	js, _, code := cli(t, "plan", "--json", p)
	if code != 0 {
		t.Fatalf("plan --json: exit %d", code)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("plan --json is not JSON: %v", err)
	}
	for _, k := range []string{"version", "stages", "streams", "issue_order", "events", "buffers", "lifetimes", "stats"} {
		if _, ok := v[k]; !ok {
			t.Errorf("plan JSON lacks %q", k)
		}
	}
	// Planning twice gives identical bytes.
	js2, _, _ := cli(t, "plan", "--json", p)
	if stripPlanningTime(js) != stripPlanningTime(js2) {
		t.Errorf("plan --json is not byte-stable across runs")
	}
}

var planningMS = regexp.MustCompile(`"planning_ms": [0-9.e+-]+`)

func stripPlanningTime(s string) string { return planningMS.ReplaceAllString(s, `"planning_ms": X`) }

// checksums runs a spec (or a plan) and returns "name=checksum" lines.
func checksums(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := cli(t, append([]string{"run", "--backend", "sim"}, args...)...)
	if code != 0 {
		t.Fatalf("run %v: exit %d\n%s%s", args, code, out, errs)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 6 && f[0] == "output" {
			lines = append(lines, f[1]+"="+f[5])
		}
	}
	if len(lines) == 0 {
		t.Fatalf("run %v printed no output checksums:\n%s", args, out)
	}
	return strings.Join(lines, " ")
}

// Every spec's outputs are identical across simulator seeds and equal to a
// one-stream run.
func TestRunSeedsMatchSingleStream(t *testing.T) {
	t.Parallel()
	for _, p := range allSpecs(t) {
		if isRacy(p) {
			continue
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			t.Parallel()
			want := checksums(t, "--strategy", "single", p)
			seeds := 20
			if testing.Short() {
				seeds = 3
			}
			// Seeds in parallel too: the largest specs take most of the time.
			for seed := 1; seed <= seeds; seed++ {
				t.Run("seed"+strconv.Itoa(seed), func(t *testing.T) {
					t.Parallel()
					if got := checksums(t, "--seed", strconv.Itoa(seed), p); got != want {
						t.Fatalf("%s, one stream: %s", got, want)
					}
				})
			}
		})
	}
}

func TestRunPlanFile(t *testing.T) {
	t.Parallel()
	p := specPath("shared-io/shared-io.yaml")
	js, _, code := cli(t, "plan", "--json", p)
	if code != 0 {
		t.Fatal("plan failed")
	}
	f := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(f, []byte(js), 0o644)
	if a, b := checksums(t, "--plan", f, "--iterations", "3"), checksums(t, p, "--iterations", "3"); a != b {
		t.Fatalf("plan file run %s != spec run %s", a, b)
	}
	// A corrupt plan file is bad input with a position.
	os.WriteFile(f, []byte(js[:len(js)/2]), 0o644)
	_, errs, code := cli(t, "run", "--plan", f)
	if code != exitUsage || !strings.Contains(errs, "plan") {
		t.Fatalf("corrupt plan: exit %d: %s", code, errs)
	}
}

func TestRunRacyRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	p := specPath("seed/two-writers-racy.yaml")
	if _, _, code := cli(t, "run", "--backend", "sim", p); code != exitFailure {
		t.Fatalf("run racy: exit %d, want 1", code)
	}
	// With --allow-race the simulator's detector still reports it.
	_, errs, code := cli(t, "run", "--backend", "sim", "--allow-race", p)
	if code != exitFailure || !strings.Contains(strings.ToLower(errs), "race") {
		t.Fatalf("run --allow-race racy: exit %d, want 1 with a race report: %s", code, errs)
	}
}

// run --backend cuda on a build without the CUDA backend is bad usage:
// exit 2 before anything is loaded or printed (no "backend:" line), with
// how to build one.
func TestCUDAWithoutTag(t *testing.T) {
	t.Parallel()
	if cmdline.CUDABuilt() {
		t.Skip("this binary has the CUDA backend")
	}
	out, errs, code := cli(t, "run", "--backend", "cuda", specPath("seed/three-stage.yaml"))
	if code != exitUsage || out != "" || strings.Contains(errs, "backend:") || !strings.Contains(errs, "build-gpu.sh") ||
		strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("--backend cuda without the tag: exit %d, stdout %q, stderr %q; want exit 2 and one line saying how to build one", code, out, errs)
	}
}

func TestImportGraph(t *testing.T) {
	t.Parallel()
	g := filepath.Join("..", "..", "..", "shared", "graphs", "squeezenet1_1.json")
	if _, err := os.Stat(g); err != nil {
		t.Skip("shared graphs not present")
	}
	dst := filepath.Join(t.TempDir(), "sq.yaml")
	if _, errs, code := cli(t, "import", g, "-o", dst); code != 0 {
		t.Fatalf("import: exit %d: %s", code, errs)
	}
	out, errs, code := cli(t, "check", dst)
	if code != 0 {
		t.Fatalf("check imported: exit %d\n%s%s", code, out, errs)
	}
}

// The converted model specs under specs/models are what `dagrun import`
// makes of specs/models/graphs today: the conversion is stable.
func TestModelSpecsStable(t *testing.T) {
	t.Parallel()
	graphs, _ := filepath.Glob(filepath.Join("..", "..", "specs", "models", "graphs", "*.json"))
	if len(graphs) != 8 {
		t.Fatalf("%d graphs in specs/models/graphs, want 8", len(graphs))
	}
	for _, g := range graphs {
		name := strings.TrimSuffix(filepath.Base(g), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, errs, code := cli(t, "import", g)
			if code != 0 {
				t.Fatalf("import: exit %d: %s", code, errs)
			}
			want, err := os.ReadFile(specPath(filepath.Join("models", name+".yaml")))
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("specs/models/%s.yaml differs from a fresh import; regenerate with scripts/import-models.sh", name)
			}
		})
	}
}

// Graph mode (emulated on the simulator) gives the stream mode's outputs,
// and --trace/--timeline write their files.
func TestRunGraphModeAndTimeline(t *testing.T) {
	t.Parallel()
	p := specPath("examples/fan-out-fan-in.yaml")
	dir := t.TempDir()
	png, js := filepath.Join(dir, "t.png"), filepath.Join(dir, "t.json")
	streams := checksums(t, "--iterations", "2", p)
	graph := checksums(t, "--iterations", "2", "--mode", "graph", "--timeline", png, "--trace", js, p)
	if streams != graph {
		t.Fatalf("graph mode %s != stream mode %s", graph, streams)
	}
	for _, f := range []string{png, js} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	var v struct{ TraceEvents []map[string]any }
	b, _ := os.ReadFile(js)
	if err := json.Unmarshal(b, &v); err != nil || len(v.TraceEvents) == 0 {
		t.Errorf("trace is not trace-event JSON: %v", err)
	}
	if _, _, code := cli(t, "run", "--mode", "graph", "--sync-each", p); code != exitUsage {
		t.Errorf("--mode graph --sync-each: exit %d, want 2", code)
	}
}

// TestPlanNotes: dagrun plan prints each of the plan's notes as "note: …"
// (on stderr with --json, which carries them in the file), and
// --strategy hazard-dag plans the whole hazard DAG.
func TestPlanNotes(t *testing.T) {
	racy := specPath("seed/two-writers-racy.yaml")
	out, errs, code := cli(t, "plan", "--no-verify", racy)
	if code != exitOK || !strings.Contains(out, "\nnote: iterations do not overlap: the spec's waits order one iteration only") {
		t.Errorf("plan %s: exit %d\n%s%s", racy, code, out, errs)
	}
	out, errs, code = cli(t, "plan", "--no-verify", "--json", racy)
	if code != exitOK || !strings.Contains(out, `"notes": [`) || !strings.Contains(errs, "note: iterations do not overlap") {
		t.Errorf("plan --json %s: exit %d\n%s%s", racy, code, out, errs)
	}
	out, errs, code = cli(t, "plan", "--strategy", "hazard-dag", specPath("examples/fan-out-fan-in.yaml"))
	if code != exitOK || !strings.Contains(out, "strategy hazard-dag") || strings.Contains(out, "note:") {
		t.Errorf("plan --strategy hazard-dag: exit %d\n%s%s", code, out, errs)
	}
}
