package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLagPastSlotBoundNamesPosition: a manual spec whose lag the planner's
// event slots cannot hold is bad input at the wait's file:line:column,
// named once, with a hint, for check, plan and run.
func TestLagPastSlotBoundNamesPosition(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "lag.yaml")
	os.WriteFile(bad, []byte(`version: 1
name: lag
sync: manual
buffers:
  - {name: out, bytes: 4096, role: output}
stages:
  - {name: w1, kernel: fill, args: {value: 1.0}, writes: [out], stream: a, event: e}
  - {name: w2, kernel: fill, args: {value: 2.0}, writes: [out], stream: b, waits: [{event: e, lag: 65537}]}
`), 0o644)
	for _, cmd := range [][]string{{"check", bad}, {"plan", bad}, {"run", "--backend", "sim", bad}} {
		out, errs, code := cli(t, cmd...)
		if code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", cmd, code, out)
		}
		if strings.Count(errs, bad) != 1 || !strings.Contains(errs, bad+":8:") || !strings.Contains(errs, "hint:") {
			t.Errorf("%v: want the file once, at line 8, with a hint:\n%s", cmd, errs)
		}
	}
}
