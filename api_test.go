package dagrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/cudart"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/cmdline"
	"github.com/dagrun/dagrun/internal/report"
	"github.com/dagrun/dagrun/verify"
)

func mustPlan(t *testing.T, path string, o dagrun.PlanOptions) *dagrun.StreamPlan {
	t.Helper()
	s, err := dagrun.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := dagrun.Plan(s, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A plan file reads back to the same plan, from anywhere (Dir is
// absolute); broken files are errors with path:line:column where JSON
// gives a position.
func TestPlanFileRoundTrip(t *testing.T) {
	p := mustPlan(t, "specs/shared-io/shared-io.yaml", dagrun.PlanOptions{})
	if !filepath.IsAbs(p.Dir) {
		t.Errorf("plan Dir %q is not absolute", p.Dir)
	}
	var buf bytes.Buffer
	if err := dagrun.WritePlanJSON(&buf, p, true); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "plan.json")
	os.WriteFile(f, buf.Bytes(), 0o644)
	q, err := dagrun.ReadPlan(f)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	dagrun.WritePlanJSON(&again, q, true)
	if again.String() != buf.String() {
		t.Errorf("plan file does not read back to the same plan")
	}
	for _, c := range []struct{ data, want string }{
		{buf.String()[:buf.Len()/2], `plan\.json:\d+:\d+: not a plan file`},
		{`{"version": 1, "colour": 3}`, `plan\.json:1:16: not a plan file: unknown field "colour" \(`},
		{strings.Replace(buf.String(), `"duration_us"`, `"duration"`, 1), `plan\.json:\d+:7: not a plan file: unknown field "duration" in stages\[0\]`},
		{buf.String() + "{}", `plan\.json:\d+:1: not a plan file: data after the plan's JSON object`},
		// The last op: the waits before it carry why, which is no unknown field.
		{buf.String()[:strings.LastIndex(buf.String(), `"op": `)] + `"colour": 1, ` + buf.String()[strings.LastIndex(buf.String(), `"op": `):], `plan\.json:\d+:\d+: not a plan file: unknown field "colour" in streams\[\d+\]\.ops\[\d+\]`},
		{strings.Replace(buf.String(), `"bytes": 16384`, `"bytes": 9223372036854775807`, 1), `plan\.json:\d+:\d+: plan: stages\[\d+\]\.(reads|writes)\[\d+\]\.bytes: .*outside the buffer`},
		{strings.Replace(buf.String(), `"events": `, `"events": "many", "x": `, 1), `plan\.json:\d+:\d+: plan: events: a JSON string where the plan format has an integer`},
		{strings.Replace(buf.String(), `"version": 1`, `"version": 99`, 1), `plan version 99`},
	} {
		os.WriteFile(f, []byte(c.data), 0o644)
		if _, err := dagrun.ReadPlan(f); err == nil || !regexp.MustCompile(c.want).MatchString(err.Error()) {
			t.Errorf("ReadPlan: %v, want an error matching %q", err, c.want)
		}
	}
	if _, err := dagrun.ReadPlan(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// A plan file's byte ranges at both sides of the end of their buffer:
// an access ending exactly at its buffer's end, and a buffer ending
// exactly at the arena's end, read back and run; one byte further (the
// range longer, or shifted, or the arena shorter) is refused with the
// field named, before anything runs.
func TestPlanFileRangeAtTheEnd(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "ib.yaml")
	os.WriteFile(spec, []byte(`version: 1
name: ib
buffers:
  - {name: x, bytes: 64}
  - {name: y, bytes: 64, role: output}
stages:
  - {name: fill, kernel: fill, args: {value: 1.0}, writes: [x]}
  - {name: tail, kernel: copy, reads: [{buffer: x, offset: 16, bytes: 48}], writes: [{buffer: y, offset: 16, bytes: 48}]}
`), 0o644)
	p := mustPlan(t, spec, dagrun.PlanOptions{})
	var buf bytes.Buffer
	if err := dagrun.WritePlanJSON(&buf, p, false); err != nil {
		t.Fatal(err)
	}
	// edit rewrites the plan file's JSON with f applied.
	edit := func(f func(plan map[string]any)) []byte {
		d := json.NewDecoder(bytes.NewReader(buf.Bytes()))
		d.UseNumber()
		var plan map[string]any
		if err := d.Decode(&plan); err != nil {
			t.Fatal(err)
		}
		f(plan)
		out, err := json.Marshal(plan)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	access := func(plan map[string]any, list string) map[string]any {
		tail := plan["stages"].([]any)[1].(map[string]any)
		if tail["name"] != "tail" {
			t.Fatalf("stages[1] is %v, want tail", tail["name"])
		}
		return tail[list].([]any)[0].(map[string]any)
	}
	// set gives tail's read and write (a byte copy: the same length)
	// the ranges [ro, ro+n) of x and [wo, wo+n) of y.
	set := func(ro, wo, n int) []byte {
		return edit(func(plan map[string]any) {
			r, w := access(plan, "reads"), access(plan, "writes")
			r["offset"], r["bytes"] = ro, n
			w["offset"], w["bytes"] = wo, n
		})
	}
	// shrink is the plan file with buffer i one byte shorter (63 bytes),
	// so that the aligned ranges ending at byte 64 of it (fill's [0:64]
	// of x, tail's [16:64]) end one byte past it.
	shrink := func(i int) []byte {
		return edit(func(plan map[string]any) {
			plan["buffers"].([]any)[i].(map[string]any)["bytes"] = 63
		})
	}
	arena := func(n int) []byte {
		return edit(func(plan map[string]any) {
			if x := plan["buffers"].([]any)[0].(map[string]any); x["name"] != "x" || x["arena_offset"] != json.Number("0") {
				t.Fatalf("buffers[0] is %v, want x at arena offset 0", x)
			}
			plan["stats"].(map[string]any)["arena_bytes"] = n
		})
	}
	f := filepath.Join(dir, "plan.json")
	for _, c := range []struct {
		name string
		data []byte
		want string // "" accepted
	}{
		{"read and write end at the end", set(16, 16, 48), ""},
		{"x one byte short of the writes and the read", shrink(0), `stages\[0\]\.writes\[0\]\.bytes: stage fill writes x at offset 0, 64 bytes: outside the buffer's 63 bytes`},
		{"y one byte short of the write", shrink(1), `stages\[1\]\.writes\[0\]\.bytes: stage tail writes y at offset 16, 48 bytes: outside the buffer's 63 bytes`},
		{"read one word later", set(20, 16, 48), `stages\[1\]\.reads\[0\]\.bytes: stage tail reads x at offset 20, 48 bytes: outside the buffer's 64 bytes`},
		{"from offset 12 to the end", set(12, 12, 52), ""},
		{"the last word", set(60, 60, 4), ""},
		{"the word past the last", set(64, 60, 4), `stages\[1\]\.reads\[0\]\.offset: stage tail reads x at offset 64: want 0 to 63`},
		{"the whole buffers", set(0, 0, 64), ""},
		{"one word more than the buffers", set(0, 0, 68), `stages\[1\]\.reads\[0\]\.bytes: stage tail reads x at offset 0, 68 bytes: outside the buffer's 64 bytes`},
		{"buffer ends at the arena's end", arena(64), ""},
		{"arena one byte short", arena(63), `buffers\[0\]\.arena_offset: buffer x: arena bytes \[0:64\] past the arena's 63 bytes`},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.WriteFile(f, c.data, 0o644)
			q, err := dagrun.ReadPlan(f)
			if c.want != "" {
				if err == nil || !regexp.MustCompile(c.want).MatchString(err.Error()) {
					t.Fatalf("ReadPlan: %v, want an error matching %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadPlan: %v", err)
			}
			if _, err := dagrun.Run(context.Background(), q, dagrun.RunOptions{Backend: dagrun.BackendSim}); err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}

// A race the simulator's detector sees comes back as data, with the result,
// as well as an *executor.RaceError.
func TestRunRacesAsData(t *testing.T) {
	s, err := dagrun.Load("specs/seed/two-writers-racy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := dagrun.Plan(s, dagrun.PlanOptions{})
	var pre *verify.RaceError
	if p == nil || !errors.As(err, &pre) {
		t.Fatalf("Plan of a racy spec: %v, %v; want the plan and a *verify.RaceError", p, err)
	}
	res, err := dagrun.Run(context.Background(), p, dagrun.RunOptions{Backend: dagrun.BackendSim})
	var re *executor.RaceError
	if res == nil || len(res.Races) == 0 || !errors.As(err, &re) || len(re.Races) != len(res.Races) {
		t.Fatalf("Run: result %v, error %v; want the races in both", res, err)
	}
	if r := res.Races[0]; r.Buffer != "out" || !strings.Contains(r.String(), "w1") {
		t.Errorf("race %v, want the two writers of out", r)
	}
	// Race-free: no races, no error, the timeline of the simulator's run
	// (its spans, said to be no GPU time), the last iterations of it.
	ok := mustPlan(t, "specs/seed/two-writers.yaml", dagrun.PlanOptions{})
	res, err = dagrun.Run(context.Background(), ok, dagrun.RunOptions{Backend: dagrun.BackendSim, Timeline: true, Iterations: 6})
	if err != nil || len(res.Races) != 0 || res.Backend != "sim" || res.Timeline == nil {
		t.Fatalf("two-writers: %v, %v", res != nil, err)
	}
	tl := res.Timeline
	if !strings.Contains(tl.Title, "not GPU time") || tl.Iterations() != dagrun.TimelineIterations || len(tl.Spans) != dagrun.TimelineIterations*len(ok.Stages) {
		t.Fatalf("timeline %q: %d iterations, %d spans; want the last %d iterations of the run, %d stages each", tl.Title, tl.Iterations(), len(tl.Spans), dagrun.TimelineIterations, len(ok.Stages))
	}
	// A cross-iteration wait is drawn between iterations.
	across := 0
	for _, f := range tl.Flows {
		if f.FromIteration < f.Iteration {
			across++
		}
	}
	if across == 0 {
		t.Errorf("no flow across iterations in %+v", tl.Flows)
	}
}

// Conflicting executor options are rejected by Run before the backend does
// any work, with a nil result.
func TestRunRejectsConflicts(t *testing.T) {
	p := mustPlan(t, "specs/seed/three-stage.yaml", dagrun.PlanOptions{})
	for _, o := range []dagrun.RunOptions{
		{Backend: dagrun.BackendSim, Mode: dagrun.ModeGraph, SyncEach: true},
		{Backend: dagrun.BackendSim, Mode: dagrun.ModeGraph, Alloc: dagrun.AllocDynamic},
		{Backend: dagrun.BackendSim, Alloc: "lazy"},
	} {
		res, err := dagrun.Run(context.Background(), p, o)
		if err == nil || res != nil {
			t.Errorf("%+v: %v, %v; want an error and no result", o, res, err)
		}
	}
	if _, err := dagrun.Run(context.Background(), p, dagrun.RunOptions{Backend: "tpu"}); err == nil || !strings.Contains(err.Error(), `unknown backend "tpu"`) {
		t.Errorf("backend tpu: %v", err)
	}
}

func TestAutoBackend(t *testing.T) {
	name, why := dagrun.AutoBackend()
	b, err := dagrun.NewBackend(dagrun.BackendAuto, dagrun.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if dagrun.Backend(b.Name()) != name || why == "" {
		t.Errorf("auto opened %s; AutoBackend says %s (%s)", b.Name(), name, why)
	}
	// The root's sentinels are cudart's, so errors.Is matches either.
	if dagrun.ErrNotSupported != cudart.ErrNotSupported || dagrun.ErrNoDevice != cudart.ErrNoDevice {
		t.Errorf("dagrun.ErrNotSupported, dagrun.ErrNoDevice are not cudart's")
	}
	if !cudart.Available {
		if name != dagrun.BackendSim || !strings.Contains(why, "cuda tag") {
			t.Errorf("without the cuda tag: %s (%s)", name, why)
		}
		if _, err := dagrun.NewBackend(dagrun.BackendCUDA, dagrun.RunOptions{}); !errors.Is(err, cudart.ErrNotSupported) {
			t.Errorf("cuda without the tag: %v", err)
		}
	}
}

// check's notes: waits issued before their record, and options that stream
// pins override.
func TestWarningsAndPinNotes(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "early.yaml")
	os.WriteFile(f, []byte(`version: 1
name: early
sync: manual
buffers:
  - {name: out, bytes: 64, role: output}
stages:
  - {name: w1, kernel: fill, args: {value: 1.0}, writes: [out], stream: a, waits: [w2]}
  - {name: w2, kernel: fill, args: {value: 2.0}, writes: [out], stream: b}
`), 0o644)
	s, err := dagrun.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := dagrun.Plan(s, dagrun.PlanOptions{})
	if p == nil {
		t.Fatal("no plan")
	}
	idle := dagrun.Warnings(p)
	if len(idle) != 1 || !strings.Contains(idle[0], "a wait on stream a waits for nothing") || !strings.HasPrefix(idle[0], "w1 (") || !strings.Contains(idle[0], "recorded after w2 on stream b") {
		t.Errorf("Warnings: %q", idle)
	}
	if n := dagrun.Warnings(mustPlan(t, "specs/seed/two-writers-handsync.yaml", dagrun.PlanOptions{})); len(n) != 0 {
		t.Errorf("handsync: %q", n)
	}
	if n := report.PinNotes(s, dagrun.PlanOptions{Strategy: dagrun.StrategySingle}, p); len(n) != 1 || !strings.Contains(n[0], "sync: manual, so --strategy and --max-streams do not apply") {
		t.Errorf("manual spec: %q", n)
	}
	three, err := dagrun.Load("specs/seed/three-stage.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o := dagrun.PlanOptions{Strategy: dagrun.StrategySingle, MaxStreams: 2}
	p3, err := dagrun.Plan(three, o)
	if err != nil {
		t.Fatal(err)
	}
	if n := report.PinNotes(three, o, p3); len(n) != 2 || !strings.Contains(n[0], "strategy single") || !strings.Contains(n[1], "--max-streams 2, but") {
		t.Errorf("pinned spec: %q", n)
	}
	if n := report.PinNotes(three, dagrun.PlanOptions{}, mustPlan(t, "specs/seed/three-stage.yaml", dagrun.PlanOptions{})); len(n) != 0 {
		t.Errorf("default options: %q", n)
	}
}

func TestHostIO(t *testing.T) {
	p := mustPlan(t, "specs/video/cameras.yaml", dagrun.PlanOptions{})
	in, out := cmdline.HostIO(p)
	var names []string
	for _, i := range append(in, out...) {
		names = append(names, p.Buffers[i].Name)
	}
	if got := strings.Join(names, " "); got != "cam0/frame_h cam1/frame_h cam0/out_h cam1/out_h" {
		t.Errorf("HostIO: %s", got)
	}
}

// A JSON spec given where a plan file belongs (check --plan, run --plan)
// is named as a spec, as a YAML one is, not reported as a broken plan.
func TestReadPlanOfJSONSpec(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "spec.json")
	spec := `{"version": 1,
 "buffers": [{"name": "x", "bytes": 64}],
 "stages": [{"name": "a", "kernel": "fill", "args": {"value": 1.5}, "writes": ["x"]}]}`
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := dagrun.Load(path); err != nil {
		t.Fatalf("the spec does not load: %v", err)
	}
	_, err := dagrun.ReadPlan(path)
	if err == nil || !strings.Contains(err.Error(), "not a plan file") || !strings.Contains(err.Error(), "a spec (JSON) is passed without --plan") {
		t.Errorf("ReadPlan of a JSON spec: %v", err)
	}
}

// A plan file that is not there is reported as a spec file that is not
// there is: what could not be read, and what to do, not Go's "stat" error
// (errors.Is(err, os.ErrNotExist) still holds).
func TestReadPlanOfMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "plan.json")
	_, err := dagrun.ReadPlan(path)
	want := path + ": cannot read plan file: no such file or directory (check the path; write a plan file with `dagrun plan --json SPEC > FILE`)"
	if err == nil || err.Error() != want || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadPlan of a missing file:\n%v\nwant\n%s", err, want)
	}
}

// A nil spec or plan is an error that says so, from every function of
// the API that takes one (Verify's included), not a nil dereference.
func TestNilSpecAndPlan(t *testing.T) {
	ctx := context.Background()
	for name, f := range map[string]func() error{
		"Plan":      func() error { _, err := dagrun.Plan(nil, dagrun.PlanOptions{}); return err },
		"PlanWhile": func() error { _, err := dagrun.PlanWhile(nil, dagrun.PlanOptions{}, nil); return err },
		"WriteSpec": func() error { return dagrun.WriteSpec(&bytes.Buffer{}, nil) },
		"Verify":    func() error { return dagrun.Verify(nil) },
		"CheckRun":  func() error { return dagrun.CheckRun(nil, dagrun.RunOptions{Backend: dagrun.BackendSim}) },
		"Run": func() error {
			_, err := dagrun.Run(ctx, nil, dagrun.RunOptions{Backend: dagrun.BackendSim})
			return err
		},
		"WritePlanJSON": func() error { return dagrun.WritePlanJSON(&bytes.Buffer{}, nil, false) },
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s(nil) panicked: %v", name, r)
				}
			}()
			if err := f(); err == nil || !strings.Contains(err.Error(), "nil") {
				t.Errorf("%s(nil) = %v, want an error that names the nil spec or plan", name, err)
			}
		}()
	}
	if w := dagrun.Warnings(nil); w != nil {
		t.Errorf("Warnings(nil) = %q, want none", w)
	}
}

// Load of a plan file says what it is and how to read it (ReadPlan; on the
// command line --plan), as one spec error, not the loader's list of
// fields a spec does not have.
func TestLoadPlanFile(t *testing.T) {
	p := mustPlan(t, "specs/seed/three-stage.yaml", dagrun.PlanOptions{})
	path := filepath.Join(t.TempDir(), "plan.json")
	var b bytes.Buffer
	if err := dagrun.WritePlanJSON(&b, p, true); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := dagrun.Load(path)
	var list dagrun.SpecErrors
	if !errors.As(err, &list) || len(list) != 1 || !strings.Contains(list[0].Msg, "is a plan file") || !strings.Contains(list[0].Hint, "ReadPlan") || !strings.Contains(list[0].Hint, "--plan "+path) {
		t.Errorf("Load of a plan file: %v; want one spec error that it is a plan file, with ReadPlan and --plan %s in its hint", err, path)
	}
	if _, err := dagrun.ReadPlan(path); err != nil {
		t.Errorf("ReadPlan: %v", err)
	}
}
