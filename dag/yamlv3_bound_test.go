package dag

import (
	"strings"
	"testing"
)

// TestYAMLv3Bound: a YAML spec outside the scanner's subset (here an
// anchor), which yaml.v3 parses whole, loads up to MaxYAMLv3Bytes and is
// refused one byte past it, at the place it leaves the subset; the same
// spec within the subset loads past it (the scanner streams it).
func TestYAMLv3Bound(t *testing.T) {
	defer func(m int) { maxYAMLv3Bytes = m }(maxYAMLv3Bytes)
	plain := "version: 1\nname: v3\nbuffers:\n  - {name: x, bytes: 64}\nstages:\n  - {name: a, kernel: fill, args: {value: 1.0}, writes: [x]}\n"
	anchored := strings.Replace(plain, "name: v3", "name: &n v3", 1)
	maxYAMLv3Bytes = len(anchored)
	if _, err := LoadWith([]byte(anchored), "v3.yaml", t.TempDir(), LoadOptions{}); err != nil {
		t.Errorf("at the bound (%d bytes): %v", maxYAMLv3Bytes, err)
	}
	maxYAMLv3Bytes = len(anchored) - 1
	msg := loadErr(t, anchored, t.TempDir(), LoadOptions{})
	if !strings.Contains(msg, "t.yaml:2:") || !strings.Contains(msg, "first at line 2, column 7") || !strings.Contains(msg, "dag.MaxYAMLv3Bytes") {
		t.Errorf("one byte past the bound: %s", msg)
	}
	maxYAMLv3Bytes = 10
	if _, err := LoadWith([]byte(plain), "plain.yaml", t.TempDir(), LoadOptions{}); err != nil {
		t.Errorf("a spec within the subset, past the bound: %v", err)
	}
}
