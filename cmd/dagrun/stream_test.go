package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/specs/video"
)

func testImages(t *testing.T) string {
	dir := video.TestImageDir()
	if _, err := os.Stat(dir); err != nil {
		t.Skip(err)
	}
	return dir
}

// The README's demo: the video spec over Go's own test images on the
// simulator, every frame checked against the float64 reference.
func TestRunFramesVideo(t *testing.T) {
	t.Parallel()
	imgs := testImages(t)
	out, errs, code := cli(t, "run", specPath("video/cameras.yaml"), "--frames", imgs, "--backend", "sim")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"streamed 38 frames (19 iterations × 2 inputs, 37 distinct frames) on sim", "checked 38 output frames against the float64 reference: 0 wrong", "p99"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// --out writes each output of each iteration; --iterations overrides the
// frame count; --progress on draws the bar on stderr.
func TestRunFramesOut(t *testing.T) {
	t.Parallel()
	imgs := testImages(t)
	dir := t.TempDir()
	out, errs, code := cli(t, "run", specPath("video/cameras.yaml"), "--frames", imgs, "--backend", "sim", "--iterations", "5", "--out", dir, "--progress", "on", "--in-flight", "1")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "cam1_out_h", "*.bin"))
	if len(files) != 5 {
		t.Errorf("%d output files for cam1, want 5: %v", len(files), files)
	}
	if !strings.Contains(errs, "frames") || !strings.Contains(out, "checked 10 output frames") {
		t.Errorf("no progress bar or wrong count:\n%s\n%s", out, errs)
	}
}

// Raw frames of the buffer's size stream without a spec shape; a wrong
// size, a missing directory and conflicting flags are usage errors (exit 2).
func TestRunFramesErrors(t *testing.T) {
	t.Parallel()
	imgs := testImages(t)
	raw := t.TempDir()
	os.WriteFile(filepath.Join(raw, "f.raw"), []byte("tiny"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--frames", raw}, "has 4 bytes"},
		{[]string{"--frames", filepath.Join(raw, "nope")}, "not a directory"},
		{[]string{"--frames", imgs, "--mode", "graph"}, "conflicts with --mode graph"},
		{[]string{"--in-flight", "2"}, "needs --frames"},
		{[]string{"--frames", imgs, "--progress", "maybe"}, "--progress"},
		{[]string{"--frames", imgs, "--check", "video", "--in-flight", "-1"}, "--in-flight"},
	} {
		args := append([]string{"run", specPath("video/cameras.yaml"), "--backend", "sim"}, c.args...)
		out, errs, code := cli(t, args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q\n%s", c.args, code, errs, c.want, out)
		}
	}
	// A spec without pinned inputs cannot stream.
	if _, errs, code := cli(t, "run", specPath("seed/two-writers.yaml"), "--frames", imgs, "--backend", "sim"); code != 2 || !strings.Contains(errs, "no host_pinned input") {
		t.Errorf("two-writers: exit %d, %s", code, errs)
	}
}

// --stream-sets reaches the planner: 1 keeps every iteration on the same
// streams; a negative count is a usage error.
func TestStreamSetsFlag(t *testing.T) {
	t.Parallel()
	out, errs, code := cli(t, "plan", specPath("video/cameras.yaml"), "--stream-sets", "1")
	if code != 0 || !strings.Contains(out, "stream_sets=1") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	out, _, _ = cli(t, "plan", specPath("video/cameras.yaml"))
	if !strings.Contains(out, "stream_sets=2") {
		t.Errorf("default: want 2 stream sets (copies: 2)\n%s", out)
	}
	if _, _, code := cli(t, "plan", specPath("video/cameras.yaml"), "--stream-sets", "-1"); code != 2 {
		t.Errorf("--stream-sets -1: exit %d, want 2", code)
	}
}

var issuedLine = regexp.MustCompile(`issued (\d+) launches, (\d+) waits, (\d+) records \(alloc (\w+)\)`)

// --alloc reaches the executor in a streamed run: with dynamic allocation
// the single-copy temp t is allocated at its first use every iteration and
// freed on the executor's free stream after waits on its lifetime's events,
// so the run issues more waits than the static one, with the same outputs.
// The video demo runs with --alloc dynamic too (its temps are rings of two
// copies, which stay allocated for the run), every frame right.
func TestRunFramesAllocReachesExecutor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := filepath.Join(dir, "dyn.yaml")
	os.WriteFile(spec, []byte(`version: 1
name: dyn
buffers:
  - {name: in_h, bytes: 64, where: host_pinned, role: input, copies: 2}
  - {name: t, bytes: 64}
  - {name: u, bytes: 64, copies: 2}
  - {name: out_h, bytes: 64, where: host_pinned, role: output, copies: 2}
stages:
  - {name: up, kernel: copy, reads: [in_h], writes: [t]}
  - {name: twice, kernel: scale, args: {a: 2.0}, reads: [t], writes: [u]}
  - {name: down, kernel: copy, reads: [u], writes: [out_h]}
`), 0o644)
	frames := filepath.Join(dir, "frames")
	os.Mkdir(frames, 0o755)
	for i := 0; i < 4; i++ {
		os.WriteFile(filepath.Join(frames, fmt.Sprintf("%d.raw", i)), bytes.Repeat([]byte{byte(i + 1), 0, 0, 0x3f}, 16), 0o644)
	}
	waits := map[string]int{}
	outs := map[string]string{}
	for _, alloc := range []string{"static", "dynamic"} {
		out, errs, code := cli(t, "run", spec, "--backend", "sim", "--frames", frames, "--alloc", alloc)
		m := issuedLine.FindStringSubmatch(out)
		if code != 0 || m == nil || m[4] != alloc {
			t.Fatalf("--alloc %s: exit %d, no issued line for it\n%s%s", alloc, code, out, errs)
		}
		waits[alloc], _ = strconv.Atoi(m[2])
		outs[alloc] = outLines(out)
	}
	if waits["dynamic"] <= waits["static"] {
		t.Errorf("--alloc dynamic issued %d waits, static %d: dynamic allocation did not reach the executor", waits["dynamic"], waits["static"])
	}
	if outs["static"] != outs["dynamic"] || outs["static"] == "" {
		t.Errorf("outputs differ: static\n%s\ndynamic\n%s", outs["static"], outs["dynamic"])
	}

	imgs := testImages(t)
	out, errs, code := cli(t, "run", specPath("video/cameras.yaml"), "--frames", imgs, "--backend", "sim", "--alloc", "dynamic")
	if code != 0 || !strings.Contains(out, "(alloc dynamic)") || !strings.Contains(out, "checked 38 output frames against the float64 reference: 0 wrong") {
		t.Errorf("cameras --alloc dynamic: exit %d\n%s%s", code, out, errs)
	}
}

// --progress auto draws no bar when stderr is not a terminal (a file, a
// pipe, a test's buffer), even for a run long enough to get one on a
// terminal (500 iterations); --progress on draws it anywhere
// (TestRunFramesOut).
func TestProgressAutoOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs 500 iterations")
	}
	out, errs, code := cli(t, "run", specPath("video/cameras.yaml"), "--frames", testImages(t), "--backend", "sim", "--iterations", "500")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if strings.Contains(errs, "frames/s") || strings.Contains(errs, "\r") {
		t.Errorf("a progress bar on a stderr that is no terminal:\n%q", errs)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) || isTerminal(new(strings.Builder)) {
		t.Error("isTerminal: a pipe or a buffer taken for a terminal")
	}
}
