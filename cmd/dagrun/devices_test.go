package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDevicesCommands: plan, check and run --backend sim on specs of
// several devices; a plan whose collective deadlocks is reported by check
// (DEADLOCK, exit 1) and, with --allow-race, by the simulator.
func TestDevicesCommands(t *testing.T) {
	t.Parallel()
	out, errs, code := cli(t, "plan", specPath("multigpu/data-parallel-4.yaml"))
	if code != exitOK || !strings.Contains(out, "4 devices") || !strings.Contains(out, "(device 3)") || !strings.Contains(out, "reduce/3") {
		t.Fatalf("plan: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = cli(t, "check", specPath("multigpu/nasnet-split.yaml"))
	if code != exitOK || !strings.Contains(out, "ok: no race") || !strings.Contains(out, "placement balance: stages per device") {
		t.Fatalf("check: exit %d\n%s%s", code, out, errs)
	}
	for _, spec := range []string{"multigpu/data-parallel.yaml", "multigpu/peer-ring.yaml", "video/cameras-2gpu.yaml"} {
		out, errs, code = cli(t, "run", "--backend", "sim", "--iterations", "3", specPath(spec))
		if code != exitOK || !strings.Contains(out, "checksum") {
			t.Fatalf("run %s: exit %d\n%s%s", spec, code, out, errs)
		}
	}
	deadlock := filepath.Join("testdata", "plans", "deadlock.json")
	out, errs, code = cli(t, "check", "--plan", deadlock)
	if code != exitFailure || !strings.Contains(out, "DEADLOCK") || !strings.Contains(out, "rank r/1 waits, through events, for rank r/0") {
		t.Fatalf("check --plan deadlock.json: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = cli(t, "run", "--backend", "sim", "--allow-race", "--plan", deadlock)
	if code != exitFailure || !strings.Contains(errs, "deadlock in a collective") {
		t.Fatalf("run --plan deadlock.json: exit %d\n%s%s", code, out, errs)
	}
}
