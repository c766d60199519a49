package main

// The repository as a newcomer meets it: the README's "Try it" commands,
// the licence, docs without development history, the CUDA step of the
// test command.

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const repo = "../.."

// tryIt returns the commands of the README's "Try it" and "More to try" blocks.
func tryIt(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, h := range []string{"Try it", "More to try"} {
		m := regexp.MustCompile("(?s)## " + h + "\n.*?```\n(.*?)```").FindSubmatch(b)
		if m == nil {
			t.Fatalf("README has no %s block", h)
		}
		for _, l := range strings.Split(string(m[1]), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				cmds = append(cmds, l)
			}
		}
	}
	return cmds
}

// Every "Try it" command names files that ship in the repository, writes
// only under /tmp (a clone stays clean), and draws with dot -o (no empty
// file when Graphviz is missing).
func TestReadmeTryItSelfContained(t *testing.T) {
	cmds := tryIt(t)
	if len(cmds) < 8 {
		t.Fatalf("%d commands", len(cmds))
	}
	word := regexp.MustCompile(`\S+`)
	for _, c := range cmds {
		c = strings.SplitN(c, "#", 2)[0]
		if regexp.MustCompile(`>\s*[^/ ]`).MatchString(c) {
			t.Errorf("%q redirects into the clone; write under /tmp", c)
		}
		if strings.Contains(c, "| dot") && !strings.Contains(c, " -o /tmp/") {
			t.Errorf("%q: dot with a shell redirect leaves an empty file without Graphviz; use dot -o /tmp/…", c)
		}
		for _, w := range word.FindAllString(c, -1) {
			w = strings.Trim(w, `"'`)
			if strings.HasPrefix(w, "/tmp/") || strings.HasPrefix(w, "-") || !regexp.MustCompile(`\.(yaml|json|png)$`).MatchString(w) {
				continue
			}
			if strings.ContainsAny(w, "*") {
				if m, _ := filepath.Glob(filepath.Join(repo, w)); len(m) == 0 {
					t.Errorf("%q: %s matches nothing in the repository", c, w)
				}
				continue
			}
			if _, err := os.Stat(filepath.Join(repo, w)); err != nil {
				t.Errorf("%q: %s is not in the repository (write outputs under /tmp)", c, w)
			}
		}
	}
}

// The README's first screen (40 lines) holds the two set-up commands on its
// first two lines, exactly as CI reads them, then the title, the install
// commands (a clone's go install and the wheel's pip install) and three
// things to try.
func TestReadmeFrontDoor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	want := []string{
		"Main job (fresh machine with Go ≥ 1.26): `go run ./cmd/dagrun run specs/video/cameras.yaml --frames \"$(go env GOROOT)/src/image/testdata\"`",
		"Tests (fresh machine): `scripts/test.sh`",
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("README line %d: %q, want %q", i+1, lines[i], w)
		}
	}
	screen := strings.Join(lines[:min(40, len(lines))], "\n")
	for _, w := range []string{"\n# dagrun", "## Install", "go install ./cmd/dagrun", "pip install dagrun_torch-", "## Try it"} {
		if !strings.Contains(screen, w) {
			t.Errorf("README's first 40 lines lack %q", w)
		}
	}
	if m := regexp.MustCompile("(?s)## Try it\n.*?```\n(.*?)```").FindStringSubmatch(screen); m == nil || strings.Count(strings.TrimSpace(m[1]), "\n") != 2 {
		t.Errorf("README's first 40 lines: want a Try it block of three commands")
	}
}

// The docs install only what exists: the module is not published, so no
// `go install …@latest`.
func TestDocsInstallWhatExists(t *testing.T) {
	forEachDoc(t, func(p string, i int, line string) {
		if strings.Contains(line, "go install github.com/dagrun/dagrun") {
			t.Errorf("%s:%d: the module is not published; install from a clone (go install ./cmd/dagrun): %s", p, i, line)
		}
	})
}

// Docs speak of what is, not of how it came to be.
func TestDocsInThePresent(t *testing.T) {
	bad := regexp.MustCompile(`(?i)\bused to\b|\bno longer\b|\bslower day\b|\bwas not the cause\b`)
	forEachDoc(t, func(p string, i int, line string) {
		if m := bad.FindString(line); m != "" {
			t.Errorf("%s:%d: %q tells history; say what is: %s", p, i, m, line)
		}
	})
}

// Every Go, shell or Python file a doc names exists (from the top of the
// repository, the doc's folder, or python/).
func TestDocsNameFilesThatExist(t *testing.T) {
	file := regexp.MustCompile(`\b(?:[a-z0-9_.-]+/)+[a-z0-9_]+\.(?:go|sh|py)\b`)
	forEachDoc(t, func(p string, i int, line string) {
		for _, f := range file.FindAllString(line, -1) {
			found := false
			for _, dir := range []string{repo, filepath.Dir(p), filepath.Join(repo, "python")} {
				if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
					found = true
				}
			}
			if !found {
				t.Errorf("%s:%d: names %s, which does not exist", p, i, f)
			}
		}
	})
}

// forEachDoc calls f on every line (numbered from 1) of the repository's
// Markdown files outside hidden folders and testdata.
func forEachDoc(t *testing.T, f func(path string, line int, text string)) {
	t.Helper()
	err := filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && d.Name() != "." && d.Name() != ".." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, l := range strings.Split(string(b), "\n") {
			f(p, i+1, l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The repository carries the Apache-2.0 licence's full text.
func TestLicense(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo, "LICENSE"))
	if err != nil || !strings.Contains(string(b), "Apache License") || !strings.Contains(string(b), "END OF TERMS AND CONDITIONS") {
		t.Fatalf("LICENSE: %v (want the Apache-2.0 text)", err)
	}
}

// Docs and Go doc comments speak to users: no issue numbers, no names of
// development notes or folders outside the repository.
func TestNoDevelopmentHistory(t *testing.T) {
	bad := regexp.MustCompile(`(?i)\bissue \d+\b|\bGPU\.md\b|\.\./shared\b|\bthe seed\b|\bseed's\b`)
	err := filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && d.Name() != "." && d.Name() != ".." || d.Name() == "testdata" || d.Name() == "__pycache__") {
			return filepath.SkipDir
		}
		isDoc := strings.HasSuffix(p, ".md")
		isGo := strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go")
		if d.IsDir() || !(isDoc || isGo) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if isGo && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue // comments only: the godoc
			}
			if m := bad.FindString(line); m != "" {
				t.Errorf("%s:%d: %q speaks of development history: %s", p, i+1, m, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Where CUDA headers cannot be had, the GPU build script says so in one
// line and exits 3, which the test command turns into one SKIPPED line;
// headers named by DAGRUN_CUDA_INCLUDE that are not there are bad input.
func TestCUDAHeadersUnavailableSaysSo(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script := filepath.Join(repo, "scripts", "build-gpu.sh")
	run := func(env ...string) (string, int) {
		cmd := exec.Command("bash", script, "--headers-only")
		cmd.Env = append(os.Environ(), "DAGRUN_CUDA_CACHE="+t.TempDir())
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run("DAGRUN_CUDA_FETCH=no")
	if code != 3 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "DAGRUN_CUDA_INCLUDE") {
		t.Errorf("no headers, no fetching: exit %d, %q; want 3 and one line saying how to point at headers", code, out)
	}
	out, code = run("DAGRUN_CUDA_INCLUDE=" + t.TempDir())
	if code != 2 || !strings.Contains(out, "no cuda.h there") {
		t.Errorf("DAGRUN_CUDA_INCLUDE without cuda.h: exit %d, %q", code, out)
	}
}
