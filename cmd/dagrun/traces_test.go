package main

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
)

// TestPyTorchTraces checks the multi-stream PyTorch programs recorded on
// the GPU by dagrun_torch.record (python/tests/testdata/traces: the bug
// patterns, on the H200; python/tests/testdata/programs: the programs of
// python/tests/programs, on an H100, with several host threads and a CUDA
// graph among them): each racy program is a race with at least one fix,
// every other trace is clean.
func TestPyTorchTraces(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../python/tests/testdata/traces/*.yaml")
	programs, _ := filepath.Glob("../../python/tests/testdata/programs/*.yaml")
	if len(files) < 16 || len(programs) < 23 {
		t.Fatalf("%d pattern traces and %d program traces, want 16 and 23", len(files), len(programs))
	}
	files = append(files, programs...)
	for _, f := range files {
		var out, errb bytes.Buffer
		err := run(context.Background(), []string{"check", "--json", f}, &out, &errb)
		racy := strings.HasSuffix(f, "-racy.yaml")
		var fl failure
		if errors.As(err, &fl) != racy || !racy && err != nil {
			t.Errorf("%s: %v, want a race: %v\n%s", f, err, racy, errb.String())
			continue
		}
		var rep struct {
			OK     bool `json:"ok"`
			Report *struct {
				Fixes []json.RawMessage `json:"fixes"`
			} `json:"report"`
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if rep.OK == racy || racy && (rep.Report == nil || len(rep.Report.Fixes) == 0) {
			t.Errorf("%s: ok %v, report %+v", f, rep.OK, rep.Report)
		}
	}
}

// TestRunRejectsPlanOptionConflict: an option that conflicts with the plan
// itself (graph mode on a plan with host stages) is bad input, rejected
// before a backend is opened: exit 2, nothing on stdout.
func TestRunRejectsPlanOptionConflict(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"run", "--backend", "sim", "--mode", "graph", "../../specs/memory/d-pinned-readback.yaml"}, &out, &errb)
	var u usageError
	if !errors.As(err, &u) || out.Len() != 0 || strings.Contains(errb.String(), "backend:") || !strings.Contains(err.Error(), "host stages") {
		t.Errorf("err %v (usage error: %v), stdout %q, stderr %q", err, errors.As(err, &u), out.String(), errb.String())
	}
}

// TestPyTorchDocCheckOutput: docs/pytorch.md shows what `dagrun check
// trace.yaml` prints for the recorded seed-c trace, as it prints it.
func TestPyTorchDocCheckOutput(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "pytorch.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\$ dagrun check trace\.yaml\n(.*?)\$ echo \$\?`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/pytorch.md has no `$ dagrun check trace.yaml` block")
	}
	src, err := os.ReadFile(filepath.Join(repo, "python", "tests", "testdata", "traces", "seed-c-racy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.yaml")
	os.WriteFile(path, src, 0o644)
	out, errOut, code := cli(t, "check", path)
	got := strings.ReplaceAll(out+errOut, dir+string(filepath.Separator), "")
	if code != exitFailure || got != string(m[1]) {
		t.Errorf("dagrun check trace.yaml: exit %d, printed\n%s\ndocs/pytorch.md shows\n%s", code, got, m[1])
	}
}
