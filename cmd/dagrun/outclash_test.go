package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunOutputsDoNotClash: --trace and --timeline naming one file, or
// either naming the spec or plan file that run reads, are refused with
// exit 2 before anything is written; the input is left as it was.
func TestRunOutputsDoNotClash(t *testing.T) {
	t.Parallel()
	spec, dir := specCopy(t, "seed/three-stage.yaml")
	src, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	planOut, _, code := cli(t, "plan", "--json", spec)
	if code != 0 {
		t.Fatal("plan --json failed")
	}
	plan := filepath.Join(dir, "p.json")
	os.WriteFile(plan, []byte(planOut), 0o644)
	both := filepath.Join(dir, "x.dat")
	for _, cmd := range [][]string{
		{"run", "--backend", "sim", "--trace", both, "--timeline", both, spec},
		{"run", "--backend", "sim", "--trace", spec, spec},
		{"run", "--backend", "sim", "--timeline", filepath.Join(dir, ".", "three-stage.yaml"), spec},
		{"run", "--backend", "sim", "--trace", plan, "--plan", plan},
	} {
		out, errs, code := cli(t, cmd...)
		if code != exitUsage || out != "" || !strings.Contains(errs, "same file") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming the same file", cmd, code, out, errs)
		}
	}
	if got, _ := os.ReadFile(spec); string(got) != string(src) {
		t.Error("the spec was overwritten")
	}
	if got, _ := os.ReadFile(plan); string(got) != planOut {
		t.Error("the plan file was overwritten")
	}
	if _, err := os.Stat(both); err == nil {
		t.Error("x.dat was written")
	}
}
