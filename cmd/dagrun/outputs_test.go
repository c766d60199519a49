package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// listFiles lists every file and folder under dir, relative to it.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if rel, _ := filepath.Rel(dir, p); rel != "." {
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestOutputsOnlyFromSuccess: a run that fails (here the simulator's
// detector sees a race) leaves none of --out, --trace and --timeline
// behind, nor staging folders; output paths that cannot be written are
// refused before the run; the same run without the race writes them all.
func TestOutputsOnlyFromSuccess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, trace, png := filepath.Join(dir, "out"), filepath.Join(dir, "t.json"), filepath.Join(dir, "t.png")
	racy := specPath("shared-io/shared-io-racy.yaml")
	args := []string{"run", "--backend", "sim", "--seed", "3", "--allow-race", "--iterations", "2", "--out", out, "--trace", trace, "--timeline", png, racy}
	if _, errs, code := cli(t, args...); code != exitFailure {
		t.Fatalf("racy run: exit %d, want 1\n%s", code, errs)
	}
	if got := listFiles(t, dir); len(got) != 0 {
		t.Errorf("a failed run left %v", got)
	}
	for _, c := range [][]string{
		{"--timeline", filepath.Join(dir, "no", "t.png")},
		{"--trace", dir},
		{"--out", trace + "x/y"},
	} {
		args := append([]string{"run", "--backend", "sim", "--trace", trace}, c...)
		_, errs, code := cli(t, append(args, specPath("shared-io/shared-io.yaml"))...)
		if code != exitUsage || !strings.Contains(errs, c[0]) || strings.Contains(errs, "backend:") {
			t.Errorf("%v: exit %d, want 2 naming the flag before the run\n%s", c, code, errs)
		}
		if got := listFiles(t, dir); len(got) != 0 {
			t.Errorf("%v: refused run left %v", c, got)
		}
	}
	args = []string{"run", "--backend", "sim", "--out", out, "--trace", trace, "--timeline", png, specPath("shared-io/shared-io.yaml")}
	if _, errs, code := cli(t, args...); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	got := strings.Join(listFiles(t, dir), " ")
	for _, want := range []string{"t.json", "t.png", "out"} {
		if !strings.Contains(got, want) {
			t.Errorf("a run that succeeded wrote %s, no %s", got, want)
		}
	}
	if strings.Contains(got, ".dagrun-tmp") {
		t.Errorf("staging folders left: %s", got)
	}
}

// TestOutNamesStayInside: buffer names become file names that cannot
// leave --out (a buffer named "..", "../x", "/etc/y"), and two that would
// be the same file are refused before the run.
func TestOutNamesStayInside(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"..", "../../x", "/etc/y", ".", ""} {
		if n := outName(name); n == "" || strings.HasPrefix(n, ".") || strings.ContainsRune(n, filepath.Separator) || !filepath.IsLocal(n) {
			t.Errorf("outName(%q) = %q: not a plain name inside the folder", name, n)
		}
	}
	base, err := os.ReadFile(filepath.Join("testdata", "plans", "fan-out-fan-in.json"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(t *testing.T, edit func(p map[string]any)) string {
		var p map[string]any
		json.Unmarshal(base, &p)
		edit(p)
		b, _ := json.Marshal(p)
		path := filepath.Join(t.TempDir(), "plan.json")
		os.WriteFile(path, b, 0o644)
		return path
	}
	rename := func(p map[string]any, old, name string) {
		for _, b := range p["buffers"].([]any) {
			if m := b.(map[string]any); m["name"] == old {
				m["name"] = name
			}
		}
		for _, l := range p["lifetimes"].([]any) {
			if m := l.(map[string]any); m["buffer"] == old {
				m["buffer"] = name
			}
		}
		for _, s := range p["stages"].([]any) {
			for _, k := range []string{"reads", "writes"} {
				for _, a := range s.(map[string]any)[k].([]any) {
					if m := a.(map[string]any); m["buffer"] == old {
						m["buffer"] = name
					}
				}
			}
		}
	}
	root := t.TempDir()
	out := filepath.Join(root, "x", "out")
	os.MkdirAll(filepath.Dir(out), 0o755)
	plan := write(t, func(p map[string]any) { rename(p, "y", "..") })
	if _, errs, code := cli(t, "run", "--backend", "sim", "--plan", plan, "--out", out); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	if got := listFiles(t, root); strings.Join(got, " ") != "x x/out x/out/_...bin" {
		t.Errorf("files %v, want only x/out/_...bin", got)
	}
	plan = write(t, func(p map[string]any) {
		rename(p, "y", "a/b")
		rename(p, "d", "a_b")
		for _, b := range p["buffers"].([]any) {
			if m := b.(map[string]any); m["name"] == "a_b" {
				m["role"] = "output" // --out writes both
				delete(m, "arena_offset")
			}
		}
	})
	if _, errs, code := cli(t, "run", "--backend", "sim", "--plan", plan, "--out", out); code != exitUsage || !strings.Contains(errs, "would both be written as a_b") {
		t.Errorf("colliding names: exit %d\n%s", code, errs)
	}
}

var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "dagrun-bin-*")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "dagrun")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", &exec.ExitError{Stderr: out}
	}
	return bin, nil
})

// TestCrashExit3: a crash of the command (a panic in any goroutine, the Go
// runtime out of memory) is exit 3 with one line on stderr and nothing on
// stdout; other exits pass through the watcher unchanged, and an output
// that cannot be written is a failure, exit 1.
func TestCrashExit3(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	run := func(env string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env)
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return so.String(), se.String(), code
	}
	spec := specPath("examples/fan-out-fan-in.yaml")
	for _, c := range []struct{ crash, want, says string }{
		{"panic", "dagrun: internal error: please report: panic: ", "dagrun: test crash"},
		{"oom", "dagrun: internal error: please report: fatal error: ", "out of memory"}, // "runtime: out of memory", or "out of memory" under memory pressure
	} {
		out, errs, code := run("DAGRUN_TEST_CRASH="+c.crash, "check", spec)
		if code != exitInternal || out != "" || !strings.HasPrefix(errs, c.want) || !strings.Contains(errs, c.says) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 3, nothing, %q", c.crash, code, out, errs, c.want)
		}
	}
	if out, _, code := run("", "check", spec); code != exitOK || !strings.Contains(out, "ok: no race") {
		t.Errorf("check through the watcher: exit %d, %q", code, out)
	}
	if _, errs, code := run("", "check", "nosuch.yaml"); code != exitUsage || !strings.Contains(errs, "nosuch.yaml") {
		t.Errorf("bad input through the watcher: exit %d, %q", code, errs)
	}
	if f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0); err == nil {
		cmd := exec.Command(bin, "check", spec)
		cmd.Stdout = f
		var se strings.Builder
		cmd.Stderr = &se
		err := cmd.Run()
		f.Close()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailure || !strings.Contains(se.String(), "writing the output") {
			t.Errorf("check > /dev/full: %v, %q; want exit 1 saying the output was not written", err, se.String())
		}
	}
}

// TestOutFilesStaged: staged files appear only on commit, all of them, and
// discard leaves nothing, staging folders included.
func TestOutFilesStaged(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.bin"), filepath.Join(dir, "out", "buf", "000001.bin")
	var o outFiles
	if err := o.write(a, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := o.write(b, []byte("b")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a, b} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists before commit", p)
		}
	}
	o.discard()
	if got := listFiles(t, dir); len(got) != 0 {
		t.Errorf("discard left %v", got)
	}
	o.write(a, []byte("a"))
	o.write(b, []byte("b"))
	if err := o.commit(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listFiles(t, dir), " "); got != "a.bin out out/buf out/buf/000001.bin" {
		t.Errorf("after commit: %s", got)
	}
	os.Remove(a)
	os.Mkdir(a, 0o755) // a destination that became a folder: nothing moves
	o.write(filepath.Join(dir, "c.bin"), []byte("c"))
	o.write(a, []byte("a"))
	if err := o.commit(); err == nil {
		t.Errorf("commit over a folder: no error")
	}
	if got := strings.Join(listFiles(t, dir), " "); got != "a.bin out out/buf out/buf/000001.bin" {
		t.Errorf("after a failed commit: %s", got)
	}
}

// A reader that goes away (`dagrun plan --format dot | dot` without
// Graphviz) is a broken pipe, not a crash: exit 1 and one line saying so.
func TestBrokenPipeIsNoCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone before dagrun writes
	cmd := exec.Command(bin, "plan", "--format", "dot", specPath("models/nasnetalarge.yaml"))
	cmd.Stdout = w
	var se strings.Builder
	cmd.Stderr = &se
	err = cmd.Run()
	w.Close()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitFailure || strings.Contains(se.String(), "internal error") || !strings.Contains(se.String(), "broken pipe") {
		t.Errorf("plan into a closed pipe: %v, %q; want exit 1 and one line saying the pipe was closed", err, se.String())
	}
}

// An output path in a folder that takes no new entry is refused before
// the run (exit 2), not after it.
func TestOutPathNotWritableRefusedFirst(t *testing.T) {
	spec := filepath.Join("..", "..", "specs", "seed", "three-stage.yaml")
	for _, args := range [][]string{
		{"run", "--backend", "sim", "--out", "/proc/dagrun-out", spec},
		{"run", "--backend", "sim", "--trace", "/proc/dagrun-trace.json", spec},
	} {
		out, errOut, code := cli(t, args...)
		if code != 2 || !strings.Contains(errOut, "cannot write in folder /proc") || strings.Contains(out, "backend:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// TestInterruptReachesWorker: an interrupt sent to the dagrun process alone
// (not to its process group, as a supervisor's kill does) stops the run in
// the worker: exit 128+N (130, 143) with the executor's "stopped before iteration" line,
// and no worker left behind.
func TestInterruptReachesWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		cmd := exec.Command(bin, "run", "--backend", "sim", "--iterations", "9000000", specPath("seed/three-stage.yaml"))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var se strings.Builder
		cmd.Stderr = &se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Signal once the worker exists and has had time to start its run
		// (its handler is set before the command starts).
		waitForWorker(cmd, time.Second)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { io.Copy(io.Discard, stdout); done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%v: dagrun still running a minute after the signal", sig)
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != signalExit(sig) || !strings.Contains(se.String(), "stopped before iteration") {
			t.Errorf("%v: %v, stderr %q; want exit %d saying where the run stopped", sig, err, se.String(), signalExit(sig))
		}
	}
}

// TestOutUnicodeNames: --out keeps the letters and digits of any script in
// file names (出力.bin), and only the buffers it writes (role: output) can
// clash: an input 入力 beside the output 出力 is no clash.
func TestOutUnicodeNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := filepath.Join(dir, "uni.yaml")
	os.WriteFile(spec, []byte(`version: 1
name: unicode
buffers:
  - {name: 入力, bytes: 4096, role: input, init: {random: 1}}
  - {name: x_y, bytes: 4096}
  - {name: 出力, bytes: 4096, role: output}
  - {name: x/y, bytes: 4096, role: output}
stages:
  - {name: 前処理, kernel: scale, args: {a: 2.0}, reads: [入力], writes: [x_y]}
  - {name: 後, kernel: scale, args: {a: 2.0}, reads: [x_y], writes: [出力]}
  - {name: 後2, kernel: scale, args: {a: 2.0}, reads: [出力], writes: [x/y]}
`), 0o644)
	out := filepath.Join(dir, "out")
	if _, errs, code := cli(t, "run", "--backend", "sim", "--out", out, spec); code != exitOK {
		t.Fatalf("run --out: exit %d\n%s", code, errs)
	}
	if got := strings.Join(listFiles(t, out), " "); got != "x_y.bin 出力.bin" {
		t.Errorf("--out wrote %q, want x_y.bin 出力.bin", got)
	}
}

// TestTimelineFilesSwapped: --trace FILE.png and --timeline FILE.json
// (the two swapped) are refused before any work, with the other flag.
func TestTimelineFilesSwapped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ flag, file, want string }{
		{"--trace", "t.png", "the trace is JSON"},
		{"--timeline", "t.json", "the timeline is a PNG picture"},
	} {
		path := filepath.Join(dir, c.file)
		out, errOut, code := cli(t, "run", "--backend", "sim", c.flag, path, specPath("seed/three-stage.yaml"))
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%s %s: exit %d, stdout %q, stderr %q", c.flag, c.file, code, out, errOut)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s %s: the file was written", c.flag, c.file)
		}
	}
}

// TestStopSignalsStopAtOnce: a plan being computed does not watch for
// signals, yet an interrupt, a termination, a hangup or a quit signal
// stops dagrun at once: exit 128+N, one line saying nothing was written, no
// stdout, no worker left behind.
func TestStopSignalsStopAtOnce(t *testing.T) {
	bin, dir := layeredSpec(t, "10k")
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		// A budget just above what one stage takes, far below the arena, on
		// 10,000 stages re-plans for seconds.
		cmd, so, se := startWorking(t, bin, 500*time.Millisecond, "plan", "--memory-budget", "1100", filepath.Join(dir, "layered-10k.yaml"))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		sent := time.Now()
		cmd.Process.Signal(sig)
		var err error
		select {
		case err = <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%v: dagrun still running a minute after the signal", sig)
		}
		if took := time.Since(sent); took > 2*time.Second {
			t.Errorf("%v: dagrun ran %v after the signal", sig, took)
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != signalExit(sig) || !strings.Contains(se.String(), "nothing written") || strings.Contains(se.String(), "internal error") {
			t.Errorf("%v: %v, stderr %q; want exit %d saying nothing was written", sig, err, se.String(), signalExit(sig))
		}
		if so.Len() != 0 {
			t.Errorf("%v: stdout %q", sig, so.String())
		}
	}
}

// TestStopSignalsRemoveStaging: a hangup or quit signal during a streamed
// run, whose --out files are staged as frames finish, stops the run (exit
// 129, 131) and leaves neither the staging folder nor --out.
func TestStopSignalsRemoveStaging(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	imgs := testImages(t)
	for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGQUIT} {
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		cmd, _, se := startWorking(t, bin, 0, "run", specPath("video/cameras.yaml"), "--frames", imgs, "--backend", "sim", "--iterations", "1000000", "--out", out)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Signal once files are staged.
		for i := 0; i < 600; i++ {
			if m, _ := filepath.Glob(filepath.Join(dir, ".dagrun-tmp-*", "*")); len(m) > 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		cmd.Process.Signal(sig)
		select {
		case err = <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%v: dagrun still running a minute after the signal", sig)
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != signalExit(sig) || strings.Contains(se.String(), "internal error") {
			t.Errorf("%v: %v, stderr %q; want exit %d", sig, err, se.String(), signalExit(sig))
		}
		if left := listFiles(t, dir); len(left) != 0 {
			t.Errorf("%v: left %v in the folder of --out", sig, left)
		}
	}
}

// layeredSpec returns the dagrun binary and a folder with bench scale's
// layered spec of size stages (DIR/layered-SIZE.yaml); it skips the test
// in -short mode, which builds no binary.
func layeredSpec(t *testing.T, size string) (bin, dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if _, errs, code := cli(t, "bench", "scale", "--shapes", "layered", "--stages", size, "--write", dir); code != exitOK {
		t.Fatalf("bench scale --write: exit %d\n%s", code, errs)
	}
	return bin, dir
}

// startWorking starts dagrun with args and returns once its worker
// process has run for settle (waitForWorker), with the command's stdout
// and stderr.
func startWorking(t *testing.T, bin string, settle time.Duration, args ...string) (*exec.Cmd, *strings.Builder, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	so, se := new(strings.Builder), new(strings.Builder)
	cmd.Stdout, cmd.Stderr = so, se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForWorker(cmd, settle)
	return cmd, so, se
}

// waitForWorker returns once the started dagrun cmd has a worker process
// (or after 30 s without one) and settle has passed since.
func waitForWorker(cmd *exec.Cmd, settle time.Duration) {
	children := fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid)
	for i := 0; i < 600; i++ {
		if b, err := os.ReadFile(children); err != nil || len(bytes.TrimSpace(b)) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(settle)
}

// TestInterruptStopsBeforeWriting: loading, planning and verifying do not
// watch for an interrupt, but a command interrupted during them ends when
// they are done without printing its plan or writing its files: exit 130,
// one line saying so.
func TestInterruptStopsBeforeWriting(t *testing.T) {
	bin, dir := layeredSpec(t, "100k")
	var err error
	out := filepath.Join(t.TempDir(), "specs")
	for _, args := range [][]string{
		{"plan", "--json", filepath.Join(dir, "layered-100k.yaml")},
		{"check", filepath.Join(dir, "layered-100k.yaml")},
		{"bench", "scale", "--shapes", "layered,wavefront,shared-read", "--stages", "100k,200k", "--write", out},
	} {
		cmd, so, se := startWorking(t, bin, 300*time.Millisecond, args...)
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(120 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%v: still running two minutes after the interrupt", args)
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(se.String(), "stopped by an interrupt or termination: nothing written") {
			t.Errorf("%v: %v, stderr %q; want exit 130 saying nothing was written", args, err, se.String())
		}
		if so.Len() != 0 {
			t.Errorf("%v: stdout %.200q", args, so.String())
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("bench scale --write made %s", out)
	}
}

// An output or input path flag given an empty value (`--out "$DIR"` with
// DIR unset) is refused before any work, as an empty --memory-budget is, not
// taken as the flag left out: the run would write nothing, or bench scale
// would plan instead of writing. An empty file argument is refused too.
func TestEmptyPathFlagsRefused(t *testing.T) {
	t.Parallel()
	spec := specPath("seed/three-stage.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--backend", "sim", "--out", "", spec}, "--out '': empty"},
		{[]string{"run", "--backend", "sim", "--trace", "", spec}, "--trace '': empty"},
		{[]string{"run", "--backend", "sim", "--timeline", "", spec}, "--timeline '': empty"},
		{[]string{"run", "--backend", "sim", "--frames", "", spec}, "--frames '': empty"},
		{[]string{"check", "--plan", ""}, "--plan '': empty"},
		{[]string{"import", specPath("models/graphs/resnet50.json"), "-o", ""}, "--output '': empty"},
		{[]string{"bench", "scale", "--write", "", "--stages", "1k", "--shapes", "layered"}, "--write '': empty"},
		{[]string{"bench", "memory", "--plot", "", spec}, "--plot '': empty"},
		{[]string{"plan", ""}, "an empty argument (''): dagrun plan reads files"},
		{[]string{"check", ""}, "an empty argument (''): dagrun check reads files"},
		{[]string{"run", "--backend", "sim", ""}, "an empty argument (''): dagrun run reads files"},
		{[]string{"bench", "plan", spec, ""}, "an empty argument (''): dagrun bench plan reads files"},
		{[]string{"import", ""}, "an empty argument (''): dagrun import reads files"},
	} {
		out, errOut, code := cli(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stdout %.100q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
}

// TestStopDuringLongIteration: a stop signal during a run's one long
// iteration (stages over 64 MiB buffers on the simulator, seconds in all)
// ends dagrun within the grace it gives the run (exit 128 + the signal,
// nothing written, no staging folder left).
func TestStopDuringLongIteration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("version: 1\nname: big\nbuffers:\n  - {name: x, bytes: 67108864}\n  - {name: y, bytes: 67108864, role: output}\nstages:\n  - {name: f, kernel: fill, args: {value: 1.0}, writes: [x]}\n")
	for i := range 60 {
		src, dst := "x", "y"
		if i%2 == 1 {
			src, dst = dst, src
		}
		fmt.Fprintf(&b, "  - {name: s%d, kernel: scale, args: {a: 1.0}, reads: [%s], writes: [%s]}\n", i, src, dst)
	}
	spec := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(spec, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd, so, se := startWorking(t, bin, 700*time.Millisecond, "run", "--backend", "sim", "--out", out, spec)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("dagrun still running a minute after the signal")
	}
	if took := time.Since(sent); took > 3*time.Second {
		t.Errorf("dagrun ran %v after the signal", took)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != signalExit(syscall.SIGTERM) || !strings.Contains(se.String(), "nothing written") || strings.Contains(se.String(), "internal error") {
		t.Errorf("%v, stderr %q; want exit %d saying nothing was written", err, se.String(), signalExit(syscall.SIGTERM))
	}
	if so.Len() != 0 {
		t.Errorf("stdout %q", so.String())
	}
	if left := listFiles(t, dir); len(left) != 1 || left[0] != "big.yaml" {
		t.Errorf("left %v", left)
	}
}

// TestWroteOnlyAfterCommit: run says it wrote --out's files only once
// they are in place. A commit that fails (--trace written through to
// /dev/full, which takes no byte) prints no "wrote" line and leaves no
// file of --out; the same run with a trace file that can be written says
// "wrote" and leaves the files.
func TestWroteOnlyAfterCommit(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec := specPath("shared-io/shared-io.yaml")
	_, errs, code := cli(t, "run", "--backend", "sim", "--out", out, "--trace", "/dev/full", spec)
	if code != exitFailure || !strings.Contains(errs, "writing the output files") {
		t.Errorf("--trace /dev/full: exit %d, want 1 saying the output files were not written\n%s", code, errs)
	}
	if strings.Contains(errs, "wrote") {
		t.Errorf("a commit that failed said it wrote the files:\n%s", errs)
	}
	if got := listFiles(t, dir); len(got) != 0 {
		t.Errorf("a commit that failed left %v", got)
	}
	_, errs, code = cli(t, "run", "--backend", "sim", "--out", out, "--trace", filepath.Join(dir, "t.json"), spec)
	if code != exitOK || !strings.Contains(errs, "dagrun: wrote ") {
		t.Fatalf("run: exit %d, want 0 with a \"wrote\" line\n%s", code, errs)
	}
	if got := listFiles(t, out); len(got) == 0 {
		t.Errorf("a run that said it wrote --out %s left it empty", out)
	}
}

// TestCommitWritesThroughFirst: commit writes to a fifo or device before
// it moves any file into place, so a write-through that fails (/dev/full)
// leaves no file behind, whatever order the files were staged in.
func TestCommitWritesThroughFirst(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	dir := t.TempDir()
	a := filepath.Join(dir, "a.bin")
	var o outFiles
	defer o.discard()
	if err := o.claim("--out", a, claimFile); err != nil {
		t.Fatal(err)
	}
	if err := o.claim("--trace", "/dev/full", claimFile); err != nil {
		t.Fatal(err)
	}
	if err := o.write(a, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := o.write("/dev/full", []byte("trace")); err != nil {
		t.Fatal(err)
	}
	if err := o.commit(); err == nil {
		t.Errorf("commit through /dev/full: no error")
	}
	if got := listFiles(t, dir); len(got) != 0 {
		t.Errorf("a commit that failed left %v", got)
	}
}
