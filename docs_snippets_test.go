package dagrun_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// TestDocsGoBlocksCompile: every Go block of the README and docs/ compiles
// (the ones TestDocsGoSnippets does not also run): each becomes the body of
// a main function that has a ctx, imports the packages the block names,
// and uses every variable the block declares; one `go build` checks them
// all.
func TestDocsGoBlocksCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program per Go block")
	}
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(".cache", 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp(".cache", "blocks-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	imports := map[string]string{
		"dagrun.": "github.com/dagrun/dagrun", "dag.": "github.com/dagrun/dagrun/dag",
		"errors.": "errors", "fmt.": "fmt", "os.": "os", "context.": "context",
	}
	declared := regexp.MustCompile(`(?m)^\s*(?:var\s+(\w+)|(\w+(?:\s*,\s*\w+)*)\s*:=)`)
	where := map[string]string{}
	for _, doc := range append([]string{"README.md"}, docs...) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(b, -1) {
			code := string(m[1])
			var imp []string
			for prefix, path := range imports {
				if strings.Contains(code, prefix) || prefix == "context." {
					imp = append(imp, `	"`+path+`"`)
				}
			}
			uses := map[string]bool{"ctx": true}
			for _, d := range declared.FindAllStringSubmatch(code, -1) {
				for _, name := range strings.Split(d[1]+d[2], ",") {
					if name = strings.TrimSpace(name); name != "" && name != "_" {
						uses[name] = true
					}
				}
			}
			var use strings.Builder
			for name := range uses {
				use.WriteString("\t_ = " + name + "\n")
			}
			prog := "package main\n\nimport (\n" + strings.Join(imp, "\n") + "\n)\n\nfunc main() {\n\tctx := context.Background()\n" +
				code + use.String() + "}\n"
			dir := filepath.Join(root, strings.NewReplacer("/", "_", ".", "_").Replace(doc)+"_"+strconv.Itoa(i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o644); err != nil {
				t.Fatal(err)
			}
			where[filepath.Base(dir)] = doc + ": the Go block\n" + code
		}
	}
	if len(where) < 4 {
		t.Errorf("%d Go blocks in README.md and docs/, want at least 4", len(where))
	}
	if out, err := exec.Command("go", "build", "-o", os.DevNull, "./"+filepath.ToSlash(root)+"/...").CombinedOutput(); err != nil {
		msg := string(out)
		for dir, block := range where {
			if strings.Contains(msg, dir+"/") {
				t.Errorf("%s\ndoes not compile", block)
			}
		}
		t.Errorf("go build: %v\n%s", err, msg)
	}
}
