package main

// A newcomer's first hour: the rough edges a new user met, each as a test.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/cmdline"
)

// eachCommand calls f for every command of the command line.
func eachCommand(f func(c *cobra.Command)) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		f(c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(io.Discard, io.Discard))
}

// No flag prints its default twice ("(default: the spec's …) (default -1)").
func TestHelpPrintsEachDefaultOnce(t *testing.T) {
	eachCommand(func(c *cobra.Command) {
		for _, line := range strings.Split(c.Flags().FlagUsages(), "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("dagrun %s: %s", c.CommandPath(), strings.TrimSpace(line))
			}
		}
	})
}

// --dump-after's help names every planner pass.
func TestDumpAfterHelpListsEveryPass(t *testing.T) {
	out, _, code := cli(t, "plan", "--help")
	if code != 0 {
		t.Fatal(code)
	}
	line := regexp.MustCompile(`--dump-after[^\n]*`).FindString(out)
	for _, p := range cmdline.Passes() {
		if !strings.Contains(line, p) {
			t.Errorf("--dump-after's help lacks pass %s: %s", p, line)
		}
	}
}

// complete returns the completions dagrun offers for args (the last one
// being completed) and the directive.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	out, _, code := cli(t, append([]string{cobra.ShellCompRequestCmd}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %v: exit %d", args, code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// Flag values complete to exactly the words the flag accepts: each one
// passes the flag's check, and a word outside the list is refused with a
// message that names every word.
func TestCompletionValuesAccepted(t *testing.T) {
	spec := specPath("seed/three-stage.yaml")
	cmdOf := map[string][]string{
		"backend": {"run", "--iterations", "1"}, "mode": {"run"}, "alloc": {"run"},
		"format": {"plan"}, "strategy": {"plan"}, "arena": {"plan"},
	}
	for flag, cmd := range cmdOf {
		got, dir := complete(t, append(cmd, "--"+flag, "")...)
		if !slicesEqual(got, flagValues[flag]) || dir != ":4" { // 4: no file completion
			t.Errorf("--%s completes to %v (%s), want %v", flag, got, dir, flagValues[flag])
		}
		for _, v := range got {
			_, errs, code := cli(t, append(cmd, "--"+flag, v, spec)...)
			if code == exitUsage && strings.Contains(errs, "--"+flag) {
				t.Errorf("--%s %s, offered by completion, is refused: %s", flag, v, errs)
			}
		}
		_, errs, code := cli(t, append(cmd, "--"+flag, "bogus", spec)...)
		if code != exitUsage {
			t.Errorf("--%s bogus: exit %d, want %d", flag, code, exitUsage)
		}
		// "want a, b or c": the words the check accepts, as completion offers them.
		m := regexp.MustCompile(`want ([^:\n]*)`).FindStringSubmatch(errs)
		if m == nil {
			t.Errorf("--%s bogus: no list of values in %q", flag, errs)
			continue
		}
		want := strings.FieldsFunc(strings.ReplaceAll(m[1], " or ", ", "), func(r rune) bool { return r == ',' || r == ' ' })
		if !slicesEqual(want, flagValues[flag]) {
			t.Errorf("--%s: the check accepts %v, completion offers %v", flag, want, flagValues[flag])
		}
	}
	if got, _ := complete(t, "plan", "--dump-after", ""); !slicesEqual(got, cmdline.Passes()) {
		t.Errorf("--dump-after completes to %v, want the passes %v", got, cmdline.Passes())
	}
}

// Spec arguments complete to YAML and JSON files (specs load from both),
// import's to JSON graphs.
func TestCompletionSpecFiles(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"plan", ""}, []string{"yaml", "yml", "json"}},
		{[]string{"check", ""}, []string{"yaml", "yml", "json"}},
		{[]string{"run", ""}, []string{"yaml", "yml", "json"}},
		{[]string{"bench", "plan", ""}, []string{"yaml", "yml", "json"}},
		{[]string{"import", ""}, []string{"json"}},
		{[]string{"run", "--plan", ""}, []string{"json"}},
	} {
		got, dir := complete(t, tc.args...)
		if !slicesEqual(got, tc.want) || dir != ":8" { // 8: filter by extension
			t.Errorf("%v completes to %v (%s), want extensions %v", tc.args, got, dir, tc.want)
		}
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// dagrun version and --version print the release and the build info.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, _, code := cli(t, args...)
		if code != 0 || !strings.HasPrefix(out, "dagrun "+release) || !strings.Contains(out, "go1.") {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
	}
}

// Every wait says why it is there in the table, the DOT, Mermaid and JSON.
func TestWaitReasonsInEveryFormat(t *testing.T) {
	spec := specPath("shared-io/shared-io.yaml")
	table, _, _ := cli(t, "plan", spec)
	dot, _, _ := cli(t, "plan", "--format", "dot", spec)
	mermaid, _, code := cli(t, "plan", "--format", "mermaid", spec)
	if code != 0 {
		t.Fatal(code)
	}
	js, _, _ := cli(t, "plan", "--json", spec)
	reason := "WAR in_d[0:16384]"
	if !strings.Contains(table, "for run0: "+reason) {
		t.Errorf("table lacks the wait's reason %q:\n%s", reason, table)
	}
	if !strings.Contains(dot, `label="e0\n`+reason) || !strings.Contains(dot, "key:") {
		t.Errorf("DOT lacks the wait's reason or the key:\n%s", dot)
	}
	if !strings.HasPrefix(mermaid, "---\ntitle: ") || !strings.Contains(mermaid, "flowchart TB") || !strings.Contains(mermaid, `-.->|"e0: `+reason+`"|`) {
		t.Errorf("Mermaid lacks the flowchart or the wait's reason:\n%s", mermaid)
	}
	var p struct {
		Streams []struct {
			Ops []struct {
				Op  string
				Why *struct {
					From, To string
					Hazards  []struct{ Kind, Buffer string }
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		t.Fatal(err)
	}
	waits := 0
	for _, s := range p.Streams {
		for _, o := range s.Ops {
			if o.Op == "wait" {
				waits++
				if o.Why == nil || len(o.Why.Hazards) == 0 {
					t.Errorf("a wait in the JSON has no reason: %+v", o)
				}
			}
		}
	}
	if waits == 0 {
		t.Fatal("no waits in the JSON")
	}
	// The plan file with reasons reads back and runs.
	dir := t.TempDir()
	pf := filepath.Join(dir, "plan.json")
	os.WriteFile(pf, []byte(js), 0o644)
	if _, errs, code := cli(t, "check", "--plan", pf); code != 0 {
		t.Errorf("check --plan of a plan with reasons: exit %d: %s", code, errs)
	}
}

// The simulator says its timings are no GPU prediction, in text and JSON.
func TestSimulatorTimingsSaySo(t *testing.T) {
	spec := specPath("seed/three-stage.yaml")
	out, _, code := cli(t, "run", "--backend", "sim", spec)
	if code != 0 || !strings.Contains(out, "not predictions of GPU time") {
		t.Errorf("run on sim: exit %d, no note on its timings:\n%s", code, out)
	}
	js, _, _ := cli(t, "run", "--backend", "sim", "--json", spec)
	if !strings.Contains(js, `"note": "simulator timings`) {
		t.Errorf("run --json on sim: no note:\n%s", js)
	}
}

// --out writes every output buffer without --frames, and warns when the
// plan has none.
func TestOutWritesOutputs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	_, errs, code := cli(t, "run", "--backend", "sim", "--out", dir, specPath("seed/three-stage.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(filepath.Join(dir, "result_h.bin"))
	if err != nil || len(b) != 4000 {
		t.Fatalf("--out: result_h.bin: %d bytes, %v", len(b), err)
	}
	if bytes.Count(b, []byte{0}) == len(b) {
		t.Error("--out wrote zeros")
	}
	// A spec with no output buffer: a warning, nothing written.
	spec := filepath.Join(t.TempDir(), "none.yaml")
	os.WriteFile(spec, []byte("version: 1\nbuffers: [{name: x, bytes: 64}]\nstages:\n  - {name: a, kernel: fill, args: {value: 1.0}, writes: [x]}\n"), 0o644)
	dir2 := filepath.Join(t.TempDir(), "out")
	_, errs, code = cli(t, "run", "--backend", "sim", "--out", dir2, spec)
	if code != 0 || !strings.Contains(errs, "nothing was written") {
		t.Errorf("--out with no output buffer: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(dir2); err == nil {
		t.Error("--out with no output buffer made the folder")
	}
}

// A negative stream cap is bad input even when it is the flag's internal
// "not given" value.
func TestMaxStreamsNegativeRejected(t *testing.T) {
	spec := filepath.Join("..", "..", "specs", "seed", "three-stage.yaml")
	for _, v := range []string{"-1", "-2"} {
		_, errOut, code := cli(t, "plan", "--max-streams", v, spec)
		if code != 2 || !strings.Contains(errOut, "--max-streams "+v+": want 0 (uncapped) or a positive cap") {
			t.Errorf("--max-streams %s: exit %d, %q", v, code, errOut)
		}
	}
	if _, errOut, code := cli(t, "plan", spec); code != 0 {
		t.Errorf("no --max-streams: exit %d, %q", code, errOut)
	}
}

// A plan file given as a spec, or a spec given as a plan file, is named
// for what it is, with the flag to use.
func TestPlanFileAndSpecMixedUp(t *testing.T) {
	plan := filepath.Join("testdata", "plans", "fan-out-fan-in.json")
	spec := filepath.Join("..", "..", "specs", "seed", "three-stage.yaml")
	if _, errOut, code := cli(t, "plan", plan); code != 2 || !strings.Contains(errOut, "is a plan file") || !strings.Contains(errOut, "--plan") {
		t.Errorf("plan PLANFILE: exit %d, %q", code, errOut)
	}
	if _, errOut, code := cli(t, "check", "--plan", spec); code != 2 || !strings.Contains(errOut, "a spec (YAML) is passed without --plan") {
		t.Errorf("check --plan SPEC: exit %d, %q", code, errOut)
	}
}

// --iterations beyond dagrun.MaxIterations is refused before any work.
func TestIterationsBounded(t *testing.T) {
	spec := filepath.Join("..", "..", "specs", "seed", "three-stage.yaml")
	out, errOut, code := cli(t, "run", "--backend", "sim", "--iterations", "2000000000000", spec)
	if code != 2 || !strings.Contains(errOut, "want 1 to 1099511627776") || strings.Contains(out, "backend:") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestSummaryCountsAgree: check's summary and run's issue line write "1
// wait", not "1 waits".
func TestSummaryCountsAgree(t *testing.T) {
	out, _, code := cli(t, "check", specPath("seed/two-writers.yaml"))
	if code != exitOK || !strings.Contains(out, "3 stages on 2 streams, 1 wait and 1 across iterations, 2 events") {
		t.Fatalf("check: exit %d, output %q", code, out)
	}
	if got, want := counted(2, "launch"), "2 launches"; got != want {
		t.Errorf("counted(2, launch) = %q, want %q", got, want)
	}
	if got, want := counted(1, "record"), "1 record"; got != want {
		t.Errorf("counted(1, record) = %q, want %q", got, want)
	}
}

// TestScaleWriteFolder: bench scale --write makes its folder when the
// parent exists, and refuses a folder whose parent is missing before any
// work, leaving nothing.
func TestScaleWriteFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "specs")
	out, errOut, code := cli(t, "bench", "scale", "--write", dir, "--stages", "1k", "--shapes", "layered")
	if code != exitOK || !strings.Contains(out, "layered-1k.yaml: 1000 stages") {
		t.Fatalf("exit %d, %q %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "layered-1k.yaml")); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "no", "such")
	if _, errOut, code := cli(t, "bench", "scale", "--write", missing, "--stages", "1k", "--shapes", "layered"); code != exitUsage || !strings.Contains(errOut, "does not exist") {
		t.Errorf("missing parent: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Dir(missing)); err == nil {
		t.Errorf("%s was made", filepath.Dir(missing))
	}
}

// TestScaleRefusesBeforeWork: bench scale refuses a missing --graphs file,
// --copies without --graphs and planner options with --write before it
// plans or writes anything.
func TestScaleRefusesBeforeWork(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "specs")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--stages", "1k", "--shapes", "layered", "--graphs", "/no/such/graph.json", "--copies", "2"}, "--graphs: open /no/such/graph.json"},
		{[]string{"--stages", "1k", "--shapes", "layered", "--copies", "2"}, "--copies needs --graphs"},
		{[]string{"--stages", "1k", "--shapes", "layered", "--write", dir, "--arena", "off"}, "--write writes the specs and plans nothing"},
		{[]string{"--stages", "1k", "--shapes", "layered", "--write", dir, "--memory-budget", "1K"}, "--write writes the specs and plans nothing"},
		// Specs past the loader's stage limit, which no command could read.
		{[]string{"--stages", "5M", "--shapes", "layered", "--write", dir}, "a spec has at most 4194304 (dag.MaxStages)"},
		{[]string{"--stages", "5M", "--shapes", "wavefront"}, "a spec has at most 4194304 (dag.MaxStages)"},
		{[]string{"--shapes", "", "--graphs", specPath("models/graphs/nasnetalarge.json"), "--copies", "100000000", "--write", dir}, "a spec has at most 4194304 (dag.MaxStages)"},
		{[]string{"--shapes", "chain", "--graphs", specPath("models/graphs/nasnetalarge.json"), "--stages", "5M", "--write", dir}, "a spec has at most 4194304 (dag.MaxStages)"},
		{[]string{"--shapes", "", "--write", dir}, "nothing to make"},
		{[]string{"--stages", "", "--write", dir}, "nothing to make"},
	} {
		out, errOut, code := cli(t, append([]string{"bench", "scale"}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d, no output, %q", c.args, code, out, errOut, exitUsage, c.want)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s was made", dir)
	}
}

// TestCheckPassesRaceExit: a race the verifier finds after a pass
// (--check-passes) exits 1 like the same race found at the end, not 2.
func TestCheckPassesRaceExit(t *testing.T) {
	spec := filepath.Join("..", "..", "specs", "memory", "a-stream-reuse-racy.yaml")
	_, errOut, code := cli(t, "plan", "--check-passes", spec)
	if code != exitFailure || !strings.Contains(errOut, "after pass") {
		t.Errorf("exit %d, %q; want exit %d and the pass named", code, errOut, exitFailure)
	}
	if _, errOut, code := cli(t, "plan", spec); code != exitFailure {
		t.Errorf("without --check-passes: exit %d, %q", code, errOut)
	}
}

// TestCheckPassesNoVerify: --no-verify prints the plan with --check-passes
// as without it (the finished plan, the pass that first made a race named
// on stderr), and check --check-passes reports the race with the pass.
func TestCheckPassesNoVerify(t *testing.T) {
	spec := filepath.Join("..", "..", "specs", "memory", "a-stream-reuse-racy.yaml")
	want, _, code := cli(t, "plan", "--no-verify", spec)
	if code != exitOK || !strings.Contains(want, "plan memory-a-racy") {
		t.Fatalf("plan --no-verify: exit %d, %q", code, want)
	}
	out, errOut, code := cli(t, "plan", "--check-passes", "--no-verify", spec)
	if code != exitOK || !strings.Contains(errOut, `after pass "arena"`) {
		t.Errorf("plan --check-passes --no-verify: exit %d, stderr %q; want exit 0 and the pass named", code, errOut)
	}
	strip := func(s string) string { return regexp.MustCompile(`planning=\S+`).ReplaceAllString(s, "") }
	if strip(out) != strip(want) {
		t.Errorf("plan --check-passes --no-verify printed\n%s\nwant the plan of --no-verify:\n%s", out, want)
	}
	out, errOut, code = cli(t, "check", "--check-passes", spec)
	if code != exitFailure || !strings.Contains(out, `after pass "arena"`) || !strings.Contains(out, "RACE") {
		t.Errorf("check --check-passes: exit %d, stdout %q, stderr %q; want exit 1 and the race after pass arena", code, out, errOut)
	}
}

// TestCompletionUnknownShell: an unknown shell is a usage error with no
// script on stdout; a known one prints its script.
func TestCompletionUnknownShell(t *testing.T) {
	out, errOut, code := cli(t, "completion", "nosh")
	if code != exitUsage || out != "" || !strings.Contains(errOut, `unknown shell "nosh"`) {
		t.Errorf("completion nosh: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, _, code := cli(t, "completion", "bash"); code != exitOK || !strings.Contains(out, "bash completion") {
		t.Errorf("completion bash: exit %d, %.80q", code, out)
	}
}

// TestGraphModeOverlappingCaptures: graph mode runs one capture region at
// a time, so it cannot run merge-racy.yaml's two captures under way at
// once. run --mode graph --allow-race and check --mode graph say why, then
// give check's verdict (the merge rule broken, with the stage's position),
// exit 1; check --mode graph passes the fixed spec and refuses, exit 2, a
// race-free plan graph mode cannot run (host stages).
func TestGraphModeOverlappingCaptures(t *testing.T) {
	racy := specPath("rules/merge-racy.yaml")
	why := "graph mode captures one region at a time"
	verdict := `capture rule "merge" broken by consume (` + racy + ":16:5)"
	_, errOut, code := cli(t, "run", "--mode", "graph", "--backend", "sim", "--allow-race", racy)
	if code != exitFailure || !strings.Contains(errOut, why) || !strings.Contains(errOut, verdict) || strings.Index(errOut, why) > strings.Index(errOut, verdict) {
		t.Errorf("run --mode graph --allow-race: exit %d, stderr %q; want exit 1, why graph mode refuses it, then %q", code, errOut, verdict)
	}
	out, errOut, code := cli(t, "check", "--mode", "graph", racy)
	if code != exitFailure || !strings.Contains(out, why) || !strings.Contains(out, verdict) || strings.Index(out, why) > strings.Index(out, verdict) {
		t.Errorf("check --mode graph: exit %d, stdout %q, stderr %q; want exit 1, why graph mode refuses it, then %q", code, out, errOut, verdict)
	}
	if out, errOut, code := cli(t, "check", "--mode", "graph", specPath("rules/merge-fixed.yaml")); code != exitOK || !strings.Contains(out, "ok: no race") {
		t.Errorf("check --mode graph merge-fixed: exit %d, %q %q", code, out, errOut)
	}
	if out, errOut, code := cli(t, "check", "--mode", "graph", specPath("rules/copy-fixed.yaml")); code != exitUsage || out != "" || !strings.Contains(errOut, "host stages") {
		t.Errorf("check --mode graph copy-fixed: exit %d, stdout %q, stderr %q; want exit 2, the host stages named", code, out, errOut)
	}
	if _, errOut, code := cli(t, "check", "--mode", "graphs", racy); code != exitUsage || !strings.Contains(errOut, "want streams or graph") {
		t.Errorf("check --mode graphs: exit %d, %q", code, errOut)
	}
}

// TestInit: init writes the quickstart's first spec (its comments aside,
// the same text, named after the file), which check accepts; it refuses
// to overwrite a file, and prints the spec without FILE.
func TestInit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pipeline.yaml")
	if out, errOut, code := cli(t, "init", path); code != exitOK || !strings.Contains(out, "wrote "+path) {
		t.Fatalf("init: exit %d, %q %q", code, out, errOut)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := os.ReadFile(filepath.Join(repo, "docs", "quickstart.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)Save this as `first.yaml`.*?:\n\n```yaml\n(.*?)```").FindSubmatch(qs)
	if m == nil {
		t.Fatal("docs/quickstart.md has no first.yaml block")
	}
	var body []string
	for _, l := range strings.Split(string(got), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			body = append(body, l)
		}
	}
	if want := strings.Replace(string(m[1]), "name: first\n", "name: pipeline\n", 1); strings.Join(body, "\n") != want {
		t.Errorf("init wrote (comments aside)\n%s\nwant the quickstart's first.yaml named pipeline:\n%s", strings.Join(body, "\n"), want)
	}
	if out, errOut, code := cli(t, "check", path); code != exitOK || !strings.Contains(out, "ok: no race") {
		t.Errorf("check of init's spec: exit %d, %q %q", code, out, errOut)
	}
	os.WriteFile(path, []byte("mine"), 0o644)
	if out, errOut, code := cli(t, "init", path); code != exitUsage || out != "" || !strings.Contains(errOut, "exists") {
		t.Errorf("init over a file: exit %d, %q %q", code, out, errOut)
	}
	if b, _ := os.ReadFile(path); string(b) != "mine" {
		t.Errorf("init overwrote %s", path)
	}
	if out, _, code := cli(t, "init"); code != exitOK || !strings.Contains(out, "name: first\n") {
		t.Errorf("init without FILE: exit %d, %q", code, out)
	}
}

// TestStreamSetsTooMany: --stream-sets past the physical-stream bound is
// refused with the flag's largest value for the spec, not a plan file
// path.
func TestStreamSetsTooMany(t *testing.T) {
	out, errOut, code := cli(t, "plan", "--stream-sets", "100000", specPath("seed/three-stage.yaml"))
	if code != exitUsage || out != "" || !strings.Contains(errOut, "use --stream-sets 21845 or fewer") || strings.Contains(errOut, "iteration.stream_sets") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and the largest --stream-sets", code, out, errOut)
	}
}

// TestHazardDAGCapNote: --max-streams with the hazard-dag strategy gets
// the one note that the strategy is never capped, not a claim that the
// spec's pins won (fan-out-fan-in pins nothing).
func TestHazardDAGCapNote(t *testing.T) {
	out, errOut, code := cli(t, "plan", "--strategy", "hazard-dag", "--max-streams", "1", specPath("examples/fan-out-fan-in.yaml"))
	if code != exitOK || strings.Contains(out+errOut, "pins win") || !strings.Contains(out, "a stream cap of 1 (--max-streams, or the spec's max_streams) is not applied: the hazard-dag strategy") {
		t.Errorf("exit %d, stdout %q, stderr %q; want the hazard-dag note alone", code, out, errOut)
	}
}

// TestBenchPlanManual: bench plan and bench memory of a sync: manual spec
// say the strategies do not apply (bad input, nothing printed), not a race
// under "strategy default" or a row summing one plan's races thrice.
func TestBenchPlanManual(t *testing.T) {
	for _, bench := range [][]string{{"bench", "plan"}, {"bench", "memory", "--no-sim"}} {
		out, errOut, code := cli(t, append(bench, specPath("seed/three-stage.yaml"), specPath("seed/two-writers-racy.yaml"))...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "sync: manual") || strings.Contains(errOut, "strategy default") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, nothing printed, the manual spec named", bench, code, out, errOut)
		}
	}
}

// check --mode graph of a plan of several devices: graph mode runs it (one
// graph over every device), so check says ok, and neither check's help
// nor docs/spec.md lists several devices among what graph mode refuses.
func TestGraphModeSeveralDevicesDocs(t *testing.T) {
	spec := specPath("multigpu/data-parallel.yaml")
	if out, errs, code := cli(t, "check", "--mode", "graph", spec); code != exitOK || !strings.Contains(out, "ok: no race") {
		t.Fatalf("check --mode graph: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := cli(t, "run", "--backend", "sim", "--mode", "graph", spec); code != exitOK || !strings.Contains(out, "checksum cd561be4f14a2325") {
		t.Fatalf("run --mode graph: exit %d\n%s%s", code, out, errs)
	}
	help, _, _ := cli(t, "check", "--help")
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "spec.md"))
	if err != nil {
		t.Fatal(err)
	}
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for name, text := range map[string]string{"check --help": flat(help), "docs/spec.md": flat(string(doc))} {
		for _, stale := range []string{"graph mode cannot run (host stages, several devices", "capture regions and graph mode"} {
			if strings.Contains(text, stale) {
				t.Errorf("%s says %q, but graph mode runs plans of several devices", name, stale)
			}
		}
	}
}

// TestSimOpsBounded: a run on the simulator of more than dagrun.MaxSimOps
// ops (iterations × the plan's ops) is refused before any work, naming the
// most iterations that fit; that many pass dagrun.CheckRun, and the API's
// Run refuses one more on the simulator.
func TestSimOpsBounded(t *testing.T) {
	spec := specPath("seed/three-stage.yaml")
	s, err := dagrun.Load(spec)
	if err != nil {
		t.Fatal(err)
	}
	p, err := dagrun.Plan(s, dagrun.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ro := dagrun.RunOptions{Backend: dagrun.BackendSim}
	ro.Iterations = 9090909
	if err := dagrun.CheckRun(p, ro); err != nil {
		t.Errorf("CheckRun of %d iterations: %v", ro.Iterations, err)
	}
	ro.Iterations++
	if err := dagrun.CheckRun(p, ro); err == nil || !strings.Contains(err.Error(), "9090910 iterations of 11 ops") {
		t.Fatalf("CheckRun of %d iterations: %v", ro.Iterations, err) // (Run would run for minutes)
	}
	if res, err := dagrun.Run(context.Background(), p, ro); res != nil || err == nil || !strings.Contains(err.Error(), "more than it takes in one run") {
		t.Fatalf("Run of %d iterations: %v, %v", ro.Iterations, res, err)
	}
	out, errOut, code := cli(t, "run", "--backend", "sim", "--iterations", "1099511627776", spec)
	if code != 2 || out != "" || !strings.Contains(errOut, "run at most 9090909 iterations there (--iterations; in Go, RunOptions.Iterations), or run on the GPU (--backend cuda; in Go, BackendCUDA)") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
