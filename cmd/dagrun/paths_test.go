package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// linkedInitSpec is a spec whose buffer x takes its contents from
// data.bin and is copied into the output y.
const linkedInitSpec = `version: 1
buffers:
  - {name: x, bytes: 1024, init: {file: data.bin}}
  - {name: y, bytes: 1024, role: output}
stages:
  - {name: a, kernel: copy, reads: [x], writes: [y]}
`

// TestPlanFileInitLinkOutsideRefused: a plan file whose init file is a
// symbolic link out of the plan file's folder is refused as a spec with
// the same link is (exit 2, "outside"), by check and run, and nothing of
// the file it points to reaches --out; --allow-outside-paths lifts it.
func TestPlanFileInitLinkOutsideRefused(t *testing.T) {
	t.Parallel()
	secretDir, dir := t.TempDir(), t.TempDir()
	secret := filepath.Join(secretDir, "secret.bin")
	if err := os.WriteFile(secret, []byte(strings.Repeat("SECRET!!", 128)), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "s.yaml")
	os.WriteFile(spec, []byte(linkedInitSpec), 0o644)
	os.WriteFile(filepath.Join(dir, "data.bin"), make([]byte, 1024), 0o644)
	planOut, errs, code := cli(t, "plan", "--json", spec)
	if code != exitOK {
		t.Fatalf("plan --json: exit %d\n%s", code, errs)
	}
	plan := filepath.Join(dir, "p.json")
	os.WriteFile(plan, []byte(planOut), 0o644)
	// The file is replaced by a link out of the folder, in the spec's and
	// the plan's folder alike; a link inside the folder stays fine.
	os.Remove(filepath.Join(dir, "data.bin"))
	os.WriteFile(filepath.Join(dir, "inside.bin"), make([]byte, 1024), 0o644)
	if err := os.Symlink("inside.bin", filepath.Join(dir, "data.bin")); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := cli(t, "run", "--backend", "sim", "--plan", plan); code != exitOK {
		t.Fatalf("a link inside the folder: exit %d\n%s", code, errs)
	}
	os.Remove(filepath.Join(dir, "data.bin"))
	if err := os.Symlink(secret, filepath.Join(dir, "data.bin")); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := cli(t, "check", spec); code != exitUsage || !strings.Contains(errs, "outside") {
		t.Fatalf("check SPEC: exit %d, want 2 naming the file outside\n%s", code, errs)
	}
	out := filepath.Join(dir, "out")
	for _, args := range [][]string{
		{"check", "--plan", plan},
		{"run", "--backend", "sim", "--plan", plan, "--out", out},
	} {
		stdout, errs, code := cli(t, args...)
		if code != exitUsage || stdout != "" || !strings.Contains(errs, "init file") || !strings.Contains(errs, "outside") {
			t.Errorf("%v: exit %d, want 2 naming the init file outside\nstdout:\n%s\nstderr:\n%s", args, code, stdout, errs)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("--out was written")
	}
	if _, errs, code := cli(t, "run", "--backend", "sim", "--allow-outside-paths", "--plan", plan); code != exitOK {
		t.Errorf("--allow-outside-paths: exit %d\n%s", code, errs)
	}
}
