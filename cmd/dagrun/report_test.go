package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateReports = flag.Bool("update-reports", false, "rewrite testdata/reports/*.txt")

// TestReportGolden pins every form of the race report: grouped fixes in a
// spec's terms, fixes across iterations, the JSON form, a lifetime record
// cut short in a plan file, warnings, and the simulator's report of a racy
// run. Run with -update-reports to rewrite the files after a deliberate
// change.
func TestReportGolden(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A plan file whose lifetime for in_d on stream s1 ends at an event
	// recorded before the stream's last use of it.
	var planOut, errb bytes.Buffer
	if err := run(context.Background(), []string{"plan", "--json", "../../specs/shared-io/shared-io.yaml"}, &planOut, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	var p map[string]any
	if err := json.Unmarshal(planOut.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	cut := false
	for _, l := range p["lifetimes"].([]any) {
		l := l.(map[string]any)
		if l["buffer"] != "in_d" {
			continue
		}
		var keep []any
		for _, d := range l["done"].([]any) {
			if d.(map[string]any)["stream"].(float64) != 1 {
				keep = append(keep, d)
			}
		}
		l["done"], cut = keep, true
	}
	if !cut {
		t.Fatal("no lifetime of in_d to cut")
	}
	cutPlan := filepath.Join(dir, "cut.json")
	b, _ := json.Marshal(p)
	if err := os.WriteFile(cutPlan, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
	}{
		{"shared-io-racy", []string{"check", "../../specs/shared-io/shared-io-racy.yaml"}},
		{"ring-handsync-racy", []string{"check", "../../specs/examples/ring-handsync-racy.yaml"}},
		{"two-writers-racy-json", []string{"check", "--json", "../../specs/seed/two-writers-racy.yaml"}},
		{"lifetime-cut", []string{"check", "--plan", cutPlan}},
		{"warnings", []string{"check", "testdata/warnings.yaml"}},
		{"sim-racy-run", []string{"run", "--backend", "sim", "--seed", "3", "--allow-race", "--iterations", "2", "../../specs/shared-io/shared-io-racy.yaml"}},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		err := run(context.Background(), c.args, &out, &errb)
		got := out.String() + errb.String()
		if err != nil {
			got += "error: " + err.Error() + "\n"
		}
		got = strings.ReplaceAll(got, dir, "$TMP")
		if c.name == "sim-racy-run" { // keep the report, not the timings
			var keep []string
			for _, line := range strings.Split(got, "\n") {
				if !strings.Contains(line, "wall") && !strings.HasPrefix(line, "backend") {
					keep = append(keep, line)
				}
			}
			got = strings.Join(keep, "\n")
		}
		file := filepath.Join("testdata", "reports", c.name+".txt")
		if *updateReports {
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run with -update-reports)", err)
		}
		if got != string(want) {
			t.Errorf("%s: report changed (-update-reports rewrites it):\n--- got\n%s\n--- want\n%s", c.name, got, want)
		}
	}
}

// TestArenaRaceNames: a race through shared arena bytes names the streams
// as the plan table does (A, B: the spec's), in the text, the fix and the
// JSON, and gives the two stages' spec positions in its fix.
func TestArenaRaceNames(t *testing.T) {
	spec := filepath.Join("..", "..", "specs", "memory", "a-stream-reuse-racy.yaml")
	out, errOut, code := cli(t, "check", spec)
	if code != exitFailure {
		t.Fatalf("check: exit %d, %q %q", code, out, errOut)
	}
	for _, want := range []string{
		"stage copy (stream B) and stage zeros (stream A) are not ordered",
		"record an event after copy (" + spec + ":18:5) on stream B and wait on it before zeros (" + spec + ":19:5) on stream A",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check printed\n%s\nwant %q", out, want)
		}
	}
	out, _, _ = cli(t, "check", "--json", spec)
	var r struct {
		Report struct {
			Races []struct {
				FirstStreamName  string `json:"first_stream_name"`
				SecondStreamName string `json:"second_stream_name"`
				Shared           string `json:"shared"`
			} `json:"races"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Report.Races) != 1 || r.Report.Races[0].FirstStreamName != "B" || r.Report.Races[0].SecondStreamName != "A" || r.Report.Races[0].Shared != "fresh" {
		t.Errorf("check --json races %+v, want one race through fresh from stream B to stream A", r.Report.Races)
	}
}

// check's ok line counts the waits across iterations (lag) beside the
// others, so that a hand-synchronized ring's waits all show.
func TestCheckOKCountsCrossIterationWaits(t *testing.T) {
	t.Parallel()
	out, errOut, code := cli(t, "check", specPath("examples/ring-handsync.yaml"))
	if want := "ok: no race (2 stages on 2 streams, 1 wait and 1 across iterations, 2 events)"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 0 and %q", code, out, errOut, want)
	}
}

// TestArenaOffsetOfDevice: a race through arena bytes shared on device 1
// names the offset within device 1's arena, not the verifier's address of
// it (device 1's arena starts at 2 × the largest buffer there).
func TestArenaOffsetOfDevice(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(specPath("multigpu/peer-reuse-racy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Device 0 and 1 swapped: the reused block is device 1's.
	s := strings.NewReplacer("device: 0}", "device: @}", "device: 1}", "device: 0}").Replace(string(src))
	s = strings.ReplaceAll(s, "device: @}", "device: 1}")
	path := filepath.Join(t.TempDir(), "peer-reuse-1.yaml")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(t, "check", path)
	if code != exitFailure || !strings.Contains(out, "share arena bytes (from offset 0 of device 1's arena)") {
		t.Errorf("exit %d:\n%s%s", code, out, errOut)
	}
}

// TestThreadsReport: a race between host threads names both stages'
// places in the spec (file:line:col), and the note on iterations does not
// claim a barrier separates them (its waits on another thread's records
// order nothing).
func TestThreadsReport(t *testing.T) {
	t.Parallel()
	out, errOut, code := cli(t, "check", specPath("rules/threads-racy.yaml"))
	if code != exitFailure {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{"after it has waited for infer (../../specs/rules/threads-racy.yaml:19:5)",
		"before fetch (../../specs/rules/threads-racy.yaml:20:5)", "iterations are not separated across host threads"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "so a barrier separates them") {
		t.Errorf("a barrier claimed with host threads:\n%s", out)
	}
}

// TestInsteadOnce: an edit that would do instead of several fixes (one
// stream declared blocking) is said once, after them, not under each.
func TestInsteadOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "legacy-twice.yaml")
	spec := `version: 1
name: legacy-twice
sync: manual
streams:
  - {name: default, kind: legacy}
  - {name: work}
buffers:
  - {name: x, bytes: 4096, role: output}
  - {name: y, bytes: 4096, role: output}
stages:
  - {name: produce, kernel: mix, writes: [x], stream: default}
  - {name: overwrite, kernel: fill, args: {value: 2.0}, writes: [x], stream: work}
  - {name: produce2, kernel: mix, writes: [y], stream: work}
  - {name: overwrite2, kernel: fill, args: {value: 2.0}, writes: [y], stream: default}
`
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(t, "check", path)
	const edit = "declare stream work with kind: blocking"
	if code != exitFailure || strings.Count(out, edit) != 1 || !strings.Contains(out, "instead of fixes 1, 2: "+edit) {
		t.Errorf("exit %d:\n%s%s", code, out, errOut)
	}
}
