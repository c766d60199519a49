package dagrun_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsGoSnippets: every Go block of the README and the quickstart that
// builds a spec with dagrun.NewSpec compiles and plans as written (run as
// a program with `go run`; err must come back nil).
func TestDocsGoSnippets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program per snippet")
	}
	n := 0
	for _, doc := range []string{"README.md", filepath.Join("docs", "quickstart.md")} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(b, -1) {
			code := string(m[1])
			if !strings.Contains(code, "dagrun.NewSpec(") || !strings.Contains(code, "dagrun.Plan(") {
				continue
			}
			n++
			// In the module (so that it imports this package), in an
			// ignored folder.
			dir, err := os.MkdirTemp(".cache", "snippet-")
			if err != nil {
				if err = os.MkdirAll(".cache", 0o755); err == nil {
					dir, err = os.MkdirTemp(".cache", "snippet-")
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			defer os.RemoveAll(dir)
			prog := "package main\n\nimport \"github.com/dagrun/dagrun\"\n\nfunc main() {\n" + code +
				"\tif err != nil {\n\t\tpanic(err)\n\t}\n\t_ = plan\n}\n"
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("go", "run", "./"+filepath.ToSlash(dir)).CombinedOutput(); err != nil {
				t.Errorf("%s: the Go block\n%s\ndoes not plan: %v\n%s", doc, code, err, out)
			}
		}
	}
	if n < 2 {
		t.Errorf("%d Go blocks that build and plan a spec, want the README's and the quickstart's", n)
	}
}
