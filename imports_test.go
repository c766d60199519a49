package dagrun_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestImportsNoPlot: a Go program that embeds dagrun (this package, or
// the executor, planner, verifier, plan, spec and timeline packages it is
// made of) does not link gonum.org/v1/plot, its fonts or its image
// encoders, directly or through another package (go list's Deps; test
// files aside). Timeline pictures come from executor/trace/tracepng, which
// only the command and programs that draw import.
func TestImportsNoPlot(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goTool); err != nil {
		goTool = "go"
	}
	// The last is the one that draws: it must link plot, or this test
	// could not see a link at all.
	pkgs := []string{".", "./executor", "./executor/trace", "./planner", "./verify", "./plan", "./dag", "./executor/trace/tracepng"}
	args := append([]string{"list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"}, pkgs...)
	out, err := exec.Command(goTool, args...).Output()
	if err != nil {
		if e, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, e.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(pkgs) {
		t.Fatalf("go list printed %d packages for %d asked:\n%s", len(lines), len(pkgs), out)
	}
	const banned = "gonum.org/v1/plot"
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("go list printed %q: a package without imports", line)
		}
		links := ""
		for _, dep := range f[1:] {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				links = dep
				break
			}
		}
		switch draws := i == len(lines)-1; {
		case draws && links == "":
			t.Errorf("package %s does not link %s: go list's output is not what this test reads", f[0], banned)
		case !draws && links != "":
			t.Errorf("package %s links %s (draw timelines through executor/trace/tracepng, which it must not import)", f[0], links)
		}
	}
}
