package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPlanHeldUntilVerified: dagrun plan encodes the plan while the
// verifier runs and prints it only after: a plan with races prints
// nothing (exit 1), --no-verify prints it, and a plan that passes prints
// the same bytes whether it was held in memory or in a temporary file,
// which is gone afterwards.
func TestPlanHeldUntilVerified(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	planning := regexp.MustCompile(`("planning_ms": |planning=)[0-9.e+-]+`)
	racy := specPath("seed/two-writers-racy.yaml")
	ok := specPath("examples/fan-out-fan-in.yaml")
	defer func(n int) { heldInMemory = n }(heldInMemory)
	for _, format := range []string{"json", "table", "dot", "mermaid"} {
		heldInMemory = 16 << 20
		inMem, errs, code := cli(t, "plan", "--format", format, ok)
		if code != exitOK || inMem == "" {
			t.Fatalf("plan --format %s: exit %d\n%s", format, code, errs)
		}
		heldInMemory = 100 // spills to a temporary file
		inFile, errs, code := cli(t, "plan", "--format", format, ok)
		if code != exitOK || planning.ReplaceAllString(inFile, "") != planning.ReplaceAllString(inMem, "") {
			t.Errorf("plan --format %s held in a file: exit %d, %d bytes, want %d\n%s", format, code, len(inFile), len(inMem), errs)
		}
		out, errs, code := cli(t, "plan", "--format", format, racy)
		if code != exitFailure || out != "" || !strings.Contains(errs, "the plan has races") {
			t.Errorf("plan --format %s of a racy spec: exit %d, %d bytes out, want exit 1 and none\n%s", format, code, len(out), errs)
		}
		out, errs, code = cli(t, "plan", "--no-verify", "--format", format, racy)
		if code != exitOK || out == "" || !strings.Contains(errs, "printing a plan with races") {
			t.Errorf("plan --no-verify --format %s of a racy spec: exit %d, %d bytes out\n%s", format, code, len(out), errs)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// A held output with no folder for its temporary file holds it all in
// memory, and prints it all.
func TestHeldOutputInMemory(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "none"))
	defer func(n int) { heldInMemory = n }(heldInMemory)
	heldInMemory = 100
	var h heldOutput
	want := strings.Repeat("0123456789", 100)
	for i := 0; i < len(want); i += 30 {
		h.Write([]byte(want[i:min(i+30, len(want))]))
	}
	if h.err != nil || h.file != nil {
		t.Fatalf("held output: error %v, file %v; want it in memory", h.err, h.file)
	}
	var got strings.Builder
	if err := h.writeTo(&got); err != nil || got.String() != want {
		t.Errorf("held output printed %d bytes (%v), want %d", got.Len(), err, len(want))
	}
}

// A held output past heldInMemory goes to its temporary file compressed
// (a plan's JSON repeats itself), and prints back byte for byte.
func TestHeldOutputCompressed(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	defer func(n int) { heldInMemory = n }(heldInMemory)
	heldInMemory = 100
	var h heldOutput
	var want strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&want, `{"op":"wait","event":%d,"why":{"from":"s%d","to":"s%d","hazards":[{"kind":"RAW","buffer":"t%d","offset":0,"bytes":4096}]}},`, i, i, i+1, i)
	}
	for s := want.String(); len(s) > 0; {
		n := min(len(s), 1000)
		if _, err := h.Write([]byte(s[:n])); err != nil {
			t.Fatal(err)
		}
		s = s[n:]
	}
	if h.file == nil {
		t.Fatal("held output not in a temporary file")
	}
	var out bytes.Buffer
	size := func() int64 { fi, _ := h.file.Stat(); return fi.Size() }
	if err := h.z.Flush(); err != nil {
		t.Fatal(err)
	}
	if held := size(); held > int64(want.Len())/4 {
		t.Errorf("temporary file holds %d bytes of %d: want them compressed", held, want.Len())
	}
	if err := h.writeTo(&out); err != nil || out.String() != want.String() {
		t.Errorf("printed %d bytes (error %v), want the %d written", out.Len(), err, want.Len())
	}
}
