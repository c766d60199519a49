package planner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPassesHaveDesignPages checks that every pass of the pipeline has its
// page in docs/design, named after the pass, and that the index links it.
func TestPassesHaveDesignPages(t *testing.T) {
	dir := filepath.Join("..", "docs", "design")
	index, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Passes() {
		page := name + ".md"
		src, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Errorf("pass %s: %v", name, err)
			continue
		}
		if !strings.HasPrefix(string(src), "# "+name) {
			t.Errorf("docs/design/%s: want a title that starts with the pass's name %q", page, name)
		}
		if !strings.Contains(string(index), "("+page+")") {
			t.Errorf("docs/design/README.md: no link to %s", page)
		}
	}
}
