package dag

import (
	"os"
	"strings"
	"testing"
)

// TestSpecDoc loads every example of docs/spec.md: each ```yaml block must
// load, and each ```yaml-bad block must fail with exactly the text of the
// ```text block that follows it.
func TestSpecDoc(t *testing.T) {
	data, err := os.ReadFile("../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	type block struct {
		lang, body string
		line       int
	}
	var blocks []block
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok || lang == "" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && lines[i] != "```"; i++ {
		}
		blocks = append(blocks, block{lang, strings.Join(lines[start:i], "\n") + "\n", start})
	}
	good, bad := 0, 0
	for k, b := range blocks {
		switch b.lang {
		case "yaml":
			good++
			if _, err := Load([]byte(b.body), "doc.yaml", loadDir); err != nil {
				t.Errorf("docs/spec.md:%d: example does not load:\n%v", b.line, err)
			}
		case "yaml-bad":
			bad++
			_, err := Load([]byte(b.body), "bad.yaml", loadDir)
			if err == nil {
				t.Errorf("docs/spec.md:%d: bad example loads", b.line)
				continue
			}
			if k+1 >= len(blocks) || blocks[k+1].lang != "text" {
				t.Errorf("docs/spec.md:%d: bad example not followed by a text block", b.line)
				continue
			}
			if got, want := err.Error()+"\n", blocks[k+1].body; got != want {
				t.Errorf("docs/spec.md:%d: errors differ; got:\n%swant:\n%s", blocks[k+1].line, got, want)
			}
		}
	}
	if good < 8 || bad < 1 {
		t.Errorf("found %d yaml and %d yaml-bad examples; the parser of this test is broken", good, bad)
	}
}
