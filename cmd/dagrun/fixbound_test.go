package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckFixSearchBound: a hand-synchronized spec of 3,000 racing pairs
// that each need a wait of their own is past the fix search's work bound:
// check gives a wait per race at once and says the fixes are not
// minimized, and its JSON says fixes_partial and not fixes_minimal.
func TestCheckFixSearchBound(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("version: 1\nname: pairs\nsync: manual\nbuffers:\n")
	const n = 3000
	for i := range n {
		fmt.Fprintf(&b, "  - {name: x%d, bytes: 64}\n  - {name: y%d, bytes: 64}\n", i, i)
	}
	b.WriteString("stages:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: w%d, kernel: fill, args: {value: 1.0}, writes: [x%d], stream: a}\n", i, i)
		fmt.Fprintf(&b, "  - {name: r%d, kernel: scale, args: {a: 2.0}, reads: [x%d], writes: [y%d], stream: b}\n", i, i, i)
	}
	spec := filepath.Join(t.TempDir(), "pairs.yaml")
	if err := os.WriteFile(spec, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(t, "check", spec)
	if code != exitFailure || !strings.Contains(out, "3000 races; 3000 waits fix them (the fix search stopped at its work bound: one wait per race it did not reach, so fewer may do)") {
		t.Errorf("check: exit %d, stdout %.300q, stderr %q", code, out, errOut)
	}
	out, _, code = cli(t, "check", "--json", spec)
	var r struct {
		Report struct {
			Partial bool              `json:"fixes_partial"`
			Minimal *bool             `json:"fixes_minimal"`
			Fixes   []json.RawMessage `json:"fixes"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != exitFailure || !r.Report.Partial || r.Report.Minimal == nil || *r.Report.Minimal || len(r.Report.Fixes) != n {
		t.Errorf("check --json: exit %d, %v, partial %v, minimal %v, %d fixes", code, err, r.Report.Partial, r.Report.Minimal, len(r.Report.Fixes))
	}
}
