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

// tryIt returns the commands of the README's "Try it" block.
func tryIt(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Try it\n.*?```\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("README has no Try it block")
	}
	var cmds []string
	for _, l := range strings.Split(string(m[1]), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			cmds = append(cmds, l)
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
