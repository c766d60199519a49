package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/specs/video"
)

// bench runs the command line in-process and returns stdout, stderr and the exit code.
func bench(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), exitCode(err, &errb)
}

// specDir is specs/video from this package's directory.
var specDir = filepath.Join("..", "..")

// On the simulator, tiny: every table row is there, the plan's frames are
// right, and the two broken variants (cross waits removed, host waits
// skipped) are reported by the detector (a happens-before check, so under
// every seed; their wrong frames depend on timing).
func TestVideoBenchSim(t *testing.T) {
	if _, err := os.Stat(video.TestImageDir()); err != nil {
		t.Skip(err)
	}
	out, errs, code := bench(t, "--backend", "sim", "--dir", specDir, "--cameras", "1,2", "--copies", "1,2",
		"--iterations", "6", "--fail-iterations", "40", "--ok-iterations", "20")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"backend sim;", "1       2      |", "2       1      |", "verifier on the plan without them: ", "with the plan: 0 wrong of 20 frames"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	caught := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "cross-iteration waits removed") || strings.HasPrefix(line, "host staging waits skipped") {
			if !strings.Contains(line, "detector: ") {
				t.Errorf("broken variant not caught: %s", line)
			}
			caught++
		}
	}
	if caught != 2 {
		t.Errorf("%d broken variants reported, want 2:\n%s", caught, out)
	}
}

// With --devices 2 the table's pipeline puts camera c on device c mod 2 and
// every frame is still right.
func TestVideoBenchDevices(t *testing.T) {
	if _, err := os.Stat(video.TestImageDir()); err != nil {
		t.Skip(err)
	}
	out, errs, code := bench(t, "--backend", "sim", "--dir", specDir, "--cameras", "2", "--copies", "2", "--devices", "2",
		"--iterations", "6", "--fail-iterations", "10", "--ok-iterations", "10")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"camera c on device c mod 2", "2       2      |", " sets, 2 devices)", "with the plan: 0 wrong of 10 frames"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestVideoBenchUsage(t *testing.T) {
	for _, args := range [][]string{{"--cameras", "0"}, {"--copies", "x"}, {"--iterations", "0"}, {"--devices", "0"}, {"--bogus"}, {"extra"}} {
		out, _, code := bench(t, args...)
		if code != 2 || out != "" {
			t.Errorf("%v: exit %d, output %q; want 2 and none", args, code, out)
		}
	}
}
