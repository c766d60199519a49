package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// TestOutputPathsNeverReplaced: an output path (import -o, --trace,
// --timeline) that is a fifo or a character device is written through
// and stays what it was; a symbolic link, and a fifo that no process
// reads, are refused with exit 2 before any work, and left as they were.
func TestOutputPathsNeverReplaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := specPath("seed/three-stage.yaml")
	graph := filepath.Join("..", "..", "specs", "models", "graphs", "squeezenet1_1.json")
	// A fifo the test reads itself (opened read-write, so that it never
	// sees the end while dagrun has not opened it yet).
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"import", graph, "-o", fifo},
		{"run", "--backend", "sim", "--trace", fifo, spec},
		{"run", "--backend", "sim", "--timeline", fifo, spec},
	} {
		r, err := os.OpenFile(fifo, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte)
		go func() {
			var b []byte
			buf := make([]byte, 1<<16)
			for {
				r.SetReadDeadline(time.Now().Add(2 * time.Second))
				n, err := r.Read(buf)
				b = append(b, buf[:n]...)
				if err != nil {
					got <- b
					return
				}
			}
		}()
		_, errs, code := cli(t, args...)
		b := <-got
		r.Close()
		if code != exitOK || len(b) == 0 {
			t.Errorf("%v: exit %d, %d bytes through the fifo\n%s", args, code, len(b), errs)
		}
		if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
			t.Fatalf("%v: the fifo was replaced", args)
		}
	}
	// A character device (the null device, made here) is written through.
	null := filepath.Join(dir, "null")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3 /* major 1, minor 3 */); err == nil {
		for _, args := range [][]string{
			{"import", graph, "-o", null},
			{"run", "--backend", "sim", "--trace", null, spec},
		} {
			if _, errs, code := cli(t, args...); code != exitOK {
				t.Errorf("%v: exit %d\n%s", args, code, errs)
			}
			if st, err := os.Lstat(null); err != nil || st.Mode()&os.ModeCharDevice == 0 {
				t.Fatalf("%v: the device was replaced", args)
			}
		}
	} else {
		t.Logf("no character device here (%v): not tried", err)
	}
	// A link to a file, and a fifo nobody reads: refused, left alone.
	target := filepath.Join(dir, "target.json")
	os.WriteFile(target, []byte("mine"), 0o644)
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		words string
	}{
		{[]string{"import", graph, "-o", link}, "symbolic link"},
		{[]string{"run", "--backend", "sim", "--trace", link, spec}, "symbolic link"},
		{[]string{"run", "--backend", "sim", "--timeline", link, spec}, "symbolic link"},
		{[]string{"import", graph, "-o", fifo}, "no process reads"},
		{[]string{"run", "--backend", "sim", "--trace", fifo, spec}, "no process reads"},
	} {
		done := make(chan struct{})
		var stdout, errs string
		var code int
		go func() { stdout, errs, code = cli(t, c.args...); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("%v: still running after a minute", c.args)
		}
		if code != exitUsage || stdout != "" || !strings.Contains(errs, c.words) {
			t.Errorf("%v: exit %d, want 2 saying %q\nstdout:\n%s\nstderr:\n%s", c.args, code, c.words, stdout, errs)
		}
		if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%v: the link was replaced", c.args)
		}
		if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
			t.Fatalf("%v: the fifo was replaced", c.args)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "mine" {
		t.Errorf("the link's target was written: %q", b)
	}
}

// outConflictSpec has a streamed output y.bin (host_pinned: its frames go
// to --out/y.bin/NNNNNN.bin) and an output y (to --out/y.bin).
const outConflictSpec = `version: 1
buffers:
  - {name: in_h, bytes: 1024, where: host_pinned, role: input}
  - {name: y.bin, bytes: 1024, where: host_pinned, role: output}
  - {name: y, bytes: 1024, role: output}
stages:
  - {name: a, kernel: copy, reads: [in_h], writes: [y.bin]}
  - {name: b, kernel: copy, reads: [in_h], writes: [y]}
`

// TestOutConflictsBeforeRun: every clash of --out, --trace and --timeline
// with each other or with what is on disk is refused with exit 2 before
// the run (no "backend:" line, nothing on stdout), and nothing is written
// or lost: an output's folder where a file is, two outputs on one path
// (a file and a folder of frames), --out a dangling link, a buffer name
// longer than a file name may be, --trace as --out or as an output's file.
func TestOutConflictsBeforeRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := filepath.Join(dir, "s.yaml")
	os.WriteFile(spec, []byte(outConflictSpec), 0o644)
	frames := filepath.Join(dir, "frames")
	os.Mkdir(frames, 0o755)
	for _, n := range []string{"a.raw", "b.raw"} {
		os.WriteFile(filepath.Join(frames, n), make([]byte, 1024), 0o644)
	}
	long := strings.Repeat("z", 1<<20)
	longSpec := filepath.Join(dir, "long.yaml")
	os.WriteFile(longSpec, []byte("version: 1\nbuffers:\n  - {name: x, bytes: 1024}\n  - {name: "+long+", bytes: 1024, role: output}\nstages:\n  - {name: a, kernel: copy, reads: [x], writes: ["+long+"]}\n"), 0o644)
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		name  string
		setup func()
		args  []string
		words string
	}{
		{"file in the way", func() { os.Mkdir(out, 0o755); os.WriteFile(filepath.Join(out, "y.bin"), []byte("mine"), 0o644) },
			[]string{"--frames", frames, "--out", out, spec}, "in the way"},
		{"y and y.bin", nil, []string{"--frames", frames, "--out", out, spec}, `"y.bin" and "y"`},
		{"dangling link", func() { os.Symlink(filepath.Join(dir, "nowhere"), out) }, []string{"--out", out, spec}, "link to nothing"},
		{"long name", nil, []string{"--out", out, longSpec}, "more than a file system takes"},
		{"trace is out", nil, []string{"--out", out, "--trace", out, spec}, "same file"},
		{"trace is an output", func() { os.Mkdir(out, 0o755) }, []string{"--out", out, "--trace", filepath.Join(out, "y.bin"), spec}, "same file"},
		{"timeline in frames", func() { os.MkdirAll(filepath.Join(out, "y.bin"), 0o755) },
			[]string{"--frames", frames, "--out", out, "--timeline", filepath.Join(out, "y.bin", "t.png"), spec}, "lies inside"},
	} {
		os.RemoveAll(out)
		if c.setup != nil {
			c.setup()
		}
		before := listFiles(t, dir)
		args := append([]string{"run", "--backend", "sim"}, c.args...)
		stdout, errs, code := cli(t, args...)
		if code != exitUsage || stdout != "" || strings.Contains(errs, "backend:") || !strings.Contains(errs, c.words) {
			t.Errorf("%s: exit %d, want 2 before the run saying %q\nstdout:\n%s\nstderr:\n%.2000s", c.name, code, c.words, stdout, errs)
		}
		if len(errs) > 4000 {
			t.Errorf("%s: %d bytes of stderr", c.name, len(errs))
		}
		if after := listFiles(t, dir); strings.Join(after, " ") != strings.Join(before, " ") {
			t.Errorf("%s: files %v, were %v", c.name, after, before)
		}
	}
}

// TestPathsInMessagesEscaped: a spec path and an init file path holding
// an escape sequence (ESC [ 3 1 m) reach stdout and stderr escaped,
// never as the raw control character.
func TestPathsInMessagesEscaped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "s\x1b[31m.yaml")
	os.WriteFile(bad, []byte("version: 1\nbuffers:\n  - {name: a, bytes: 64, init: {file: \"x\\e[31m.bin\"}}\nstages: [{name: s, kernel: spin}]\n"), 0o644)
	good := filepath.Join(dir, "ok\x1b[32m.yaml")
	os.WriteFile(good, []byte("version: 1\nstages: [{name: s, kernel: spin}]\n"), 0o644)
	for _, args := range [][]string{
		{"check", bad},
		{"check", good},
		{"run", "--backend", "sim", "--trace", filepath.Join(dir, "t\x1b[33m.json"), "--timeline", filepath.Join(dir, "t\x1b[33m.json"), good},
		{"check", filepath.Join(dir, "missing\x1b[34m.yaml")},
		{"check", "--plan", filepath.Join(dir, "missing\x1b[35m.json")},
	} {
		stdout, errs, code := cli(t, args...)
		if strings.ContainsRune(stdout+errs, 0x1b) {
			t.Errorf("%q: exit %d, a raw escape in\nstdout: %q\nstderr: %q", args, code, stdout, errs)
		}
		if !strings.Contains(stdout+errs, `\x1b[3`) {
			t.Errorf("%q: exit %d, the path is not shown escaped\nstdout: %q\nstderr: %q", args, code, stdout, errs)
		}
	}
}

// TestNameFitsBoundary: a file name of 255 bytes is claimed, one of 256 is
// refused before the run; a path of 4095 bytes passes the length check,
// one of 4096 does not.
func TestNameFitsBoundary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var o outFiles
	defer o.discard()
	if err := o.claim("--trace", filepath.Join(dir, strings.Repeat("n", maxNameBytes)), claimFile); err != nil {
		t.Errorf("a name of %d bytes: %v", maxNameBytes, err)
	}
	if err := o.claim("--trace", filepath.Join(dir, strings.Repeat("m", maxNameBytes+1)), claimFile); err == nil || !strings.Contains(err.Error(), "more than a file system takes") {
		t.Errorf("a name of %d bytes: %v, want refused", maxNameBytes+1, err)
	}
	long := func(n int) string {
		p := strings.Repeat("d/", n/2)
		return p + strings.Repeat("f", n-len(p))
	}
	if err := nameFits("--trace", long(maxPathBytes)); err != nil {
		t.Errorf("a path of %d bytes: %v", maxPathBytes, err)
	}
	if err := nameFits("--trace", long(maxPathBytes+1)); err == nil {
		t.Errorf("a path of %d bytes: accepted", maxPathBytes+1)
	}
}

// TestPlanFileMovedNamesFileItReads: a plan file copied to another folder
// with a copy of its init file beside it still reads the file its "dir"
// field names; the refusal says which file that is and why, not only the
// name the plan gives.
func TestPlanFileMovedNamesFileItReads(t *testing.T) {
	t.Parallel()
	dir, moved := t.TempDir(), t.TempDir()
	spec := filepath.Join(dir, "s.yaml")
	os.WriteFile(spec, []byte(linkedInitSpec), 0o644)
	os.WriteFile(filepath.Join(dir, "data.bin"), make([]byte, 1024), 0o644)
	planOut, errs, code := cli(t, "plan", "--json", spec)
	if code != exitOK {
		t.Fatalf("plan --json: exit %d\n%s", code, errs)
	}
	plan := filepath.Join(moved, "p.json")
	os.WriteFile(plan, []byte(planOut), 0o644)
	os.WriteFile(filepath.Join(moved, "data.bin"), make([]byte, 1024), 0o644)
	_, errs, code = cli(t, "check", "--plan", plan)
	reads := filepath.Join(dir, "data.bin")
	if code != exitUsage || !strings.Contains(errs, "the plan reads "+reads) || !strings.Contains(errs, `"dir" field`) {
		t.Fatalf("moved plan: exit %d, want 2 naming %s and the dir field\n%s", code, reads, errs)
	}
}

// TestOutFileLinkToDeviceRefused: inside --out, where dagrun names the
// files, a symbolic link in the place of a buffer's file is refused even
// when it leads to a character device (someone else's link in a shared
// folder must not make dagrun write to /dev/null, or to a device that
// does harm): before the run, exit 2, the link left as it was. A device
// named as --trace itself is still written through.
func TestOutFileLinkToDeviceRefused(t *testing.T) {
	t.Parallel()
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Skip("no /dev/null character device here")
	}
	out := filepath.Join(t.TempDir(), "out")
	os.Mkdir(out, 0o755)
	link := filepath.Join(out, "result_h.bin")
	if err := os.Symlink("/dev/null", link); err != nil {
		t.Fatal(err)
	}
	spec := specPath("seed/three-stage.yaml")
	stdout, errs, code := cli(t, "run", "--backend", "sim", "--out", out, spec)
	if code != exitUsage || stdout != "" || strings.Contains(errs, "backend:") || !strings.Contains(errs, "symbolic link") {
		t.Errorf("--out with a link to /dev/null: exit %d, want 2 before the run naming the link\nstdout:\n%s\nstderr:\n%s", code, stdout, errs)
	}
	if target, err := os.Readlink(link); err != nil || target != "/dev/null" {
		t.Errorf("the link was replaced: %q, %v", target, err)
	}
	if _, errs, code := cli(t, "run", "--backend", "sim", "--trace", "/dev/null", spec); code != exitOK {
		t.Errorf("--trace /dev/null: exit %d\n%s", code, errs)
	}
}
