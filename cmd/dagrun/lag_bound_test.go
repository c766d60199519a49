package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLagPastSlotBoundNamesPosition: a manual spec whose lags the plan's
// event slots cannot hold is bad input at the wait's file:line:column,
// named once, with a hint, for check, plan and run: one lag past the
// loader's bound (65,536, the slots one event may have beyond one), and
// two lags within it whose slots together are past the bound on all.
func TestLagPastSlotBoundNamesPosition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ name, waits, want string }{
		{"one", "{event: e, lag: 65537}", "lag must be in [0, 65536], got 65537"},
		{"two", "{event: e, lag: 40000}, {event: f, lag: 40000}", "lag 40000 takes the spec's event slots to 80000 beyond one each, more than 65536"},
	} {
		bad := filepath.Join(dir, c.name+".yaml")
		os.WriteFile(bad, []byte(`version: 1
name: lag
sync: manual
buffers:
  - {name: out, bytes: 4096, role: output}
stages:
  - {name: w1, kernel: fill, args: {value: 1.0}, writes: [out], stream: a, event: e}
  - {name: w2, kernel: fill, args: {value: 2.0}, writes: [out], stream: b, event: f, waits: [`+c.waits+`]}
`), 0o644)
		for _, cmd := range [][]string{{"check", bad}, {"plan", bad}, {"run", "--backend", "sim", bad}} {
			out, errs, code := cli(t, cmd...)
			if code != exitUsage || out != "" {
				t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", cmd, code, out)
			}
			if strings.Count(errs, bad) != 1 || !strings.Contains(errs, bad+":8:") || !strings.Contains(errs, "hint:") || !strings.Contains(errs, c.want) {
				t.Errorf("%v: want the file once, at line 8, %q with a hint:\n%s", cmd, c.want, errs)
			}
		}
	}
}
