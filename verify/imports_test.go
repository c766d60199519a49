package verify_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestImports: the verifier proves plans from the plan alone, so package
// verify imports neither the planner that makes plans nor the spec
// package they come from, directly or through another package (go list
// -deps; test files aside).
func TestImports(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goTool); err != nil {
		goTool = "go"
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		if e, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps: %v\n%s", err, e.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/dagrun/dagrun"
	var ours []string
	for _, p := range strings.Fields(string(out)) {
		if p == module || strings.HasPrefix(p, module+"/") {
			ours = append(ours, p)
		}
	}
	if len(ours) == 0 || ours[len(ours)-1] != module+"/verify" {
		t.Fatalf("go list -deps listed %q, not package verify and its imports", ours)
	}
	for _, p := range ours {
		for _, banned := range []string{module + "/planner", module + "/dag"} {
			if p == banned || strings.HasPrefix(p, banned+"/") {
				t.Errorf("package verify imports %s (its module imports: %s)", p, strings.Join(ours, ", "))
			}
		}
	}
}
