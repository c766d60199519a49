package main

// Habits of the command line: a usage line on argument errors, examples in
// every command's help, the debug flags apart, check --json's errors as
// JSON, the exit code of a stopped command.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"
)

func TestArgumentErrorsPrintUsage(t *testing.T) {
	t.Parallel()
	spec := specPath("seed/three-stage.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", spec, spec}, "usage: dagrun plan SPEC [flags]"},
		{[]string{"plan"}, "usage: dagrun plan SPEC [flags]"},
		{[]string{"import"}, "usage: dagrun import GRAPH.json"},
		{[]string{"check"}, "usage: dagrun check SPEC | --plan FILE"},
		{[]string{"run"}, "usage: dagrun run [SPEC]"},
		{[]string{"plan", "--bogus", spec}, "usage: dagrun plan SPEC [flags]"},
		{[]string{"frobnicate"}, "usage: dagrun COMMAND [flags]"},
		{[]string{"bench", "frobnicate"}, "usage: dagrun bench plan|memory|scale"},
	} {
		out, errs, code := cli(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errs, c.want)
		}
	}
}

// Every command's help shows examples (cobra's completion scripts for
// each shell aside: completion itself has them).
func TestEveryCommandHasExamples(t *testing.T) {
	t.Parallel()
	root := newRoot(new(strings.Builder), new(strings.Builder))
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.IsAvailableCommand() || !c.HasParent() {
			if c.Example == "" && !(c.HasParent() && c.Parent().Name() == "completion") {
				t.Errorf("%s: no examples in its help", c.CommandPath())
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	out, _, _ := cli(t, "check", "--help")
	if !strings.Contains(out, "Examples:\n  dagrun check ") {
		t.Errorf("check --help shows no examples:\n%s", out)
	}
}

// The debug flags are listed under their own heading, after the flags for
// use, and nowhere else.
func TestDebugFlagsGroup(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"plan", "check", "run"} {
		out, _, code := cli(t, cmd, "--help")
		i := strings.Index(out, "\nFlags:\n")
		j := strings.Index(out, "\nDebug flags")
		if code != 0 || i < 0 || j < i {
			t.Errorf("%s --help: exit %d, want Flags: then Debug flags:\n%s", cmd, code, out)
			continue
		}
		for _, f := range debugFlags {
			if strings.Contains(out[:j], "--"+f+" ") {
				t.Errorf("%s --help: --%s among the flags for use", cmd, f)
			}
		}
		if !strings.Contains(out[j:], "--dump-after") || strings.Contains(out[j:], "--strategy") {
			t.Errorf("%s --help: the debug group is wrong:\n%s", cmd, out[j:])
		}
	}
}

// check --json of a spec with mistakes prints them as JSON on stdout, each
// at its line and column, and exits 2; so does a file that is not there.
func TestCheckJSONErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("version: 1\nname: x\nbuffers:\n  - {name: a, bytes: -1}\nstages:\n  - {name: s, kernel: scale, args: {a: 1.0}, reads: [a], writes: [a]}\n"), 0o644)
	for _, c := range []struct {
		path     string
		line     int
		contains string
	}{{bad, 4, "bytes must be"}, {filepath.Join(dir, "missing.yaml"), 0, "cannot read"}} {
		out, errs, code := cli(t, "check", "--json", c.path)
		var r struct {
			Source string `json:"source"`
			OK     bool   `json:"ok"`
			Errors []struct {
				File    string `json:"file"`
				Line    int    `json:"line"`
				Column  int    `json:"column"`
				Message string `json:"message"`
			} `json:"errors"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != exitUsage || r.OK || len(r.Errors) == 0 {
			t.Errorf("check --json %s: exit %d, %v, stdout %q, stderr %q; want exit 2 and the errors as JSON", c.path, code, err, out, errs)
			continue
		}
		e := r.Errors[0]
		if e.Line != c.line || !strings.Contains(e.Message, c.contains) || (c.line > 0 && e.Column == 0) {
			t.Errorf("check --json %s: first error %+v; want line %d saying %q", c.path, e, c.line, c.contains)
		}
	}
	// Without --json the errors stay on stderr, stdout empty.
	if out, _, code := cli(t, "check", bad); code != exitUsage || out != "" {
		t.Errorf("check of a bad spec: exit %d, stdout %q", code, out)
	}
}

// A command a signal stops exits 128 + the signal's number, as shells
// report it: 130 for Ctrl-C.
func TestSignalExit(t *testing.T) {
	for sig, want := range map[os.Signal]int{os.Interrupt: 130, syscall.SIGTERM: 143, syscall.SIGHUP: 129, syscall.SIGQUIT: 131} {
		if got := signalExit(sig); got != want {
			t.Errorf("signalExit(%v) = %d, want %d", sig, got, want)
		}
	}
}
