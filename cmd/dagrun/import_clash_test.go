package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportOutputIsNotItsGraph: import -o naming the graph it reads is a
// usage error (exit 2), and the graph is left as it was.
func TestImportOutputIsNotItsGraph(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("..", "..", "specs", "models", "graphs", "squeezenet1_1.json"))
	if err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(t.TempDir(), "g.json")
	os.WriteFile(g, src, 0o644)
	_, errs, code := cli(t, "import", g, "-o", g)
	if code != exitUsage || !strings.Contains(errs, "-o") {
		t.Errorf("import -o its graph: exit %d, stderr %q; want 2 naming -o", code, errs)
	}
	if got, _ := os.ReadFile(g); string(got) != string(src) {
		t.Error("the graph was overwritten")
	}
}
