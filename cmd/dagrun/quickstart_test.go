package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docBlocks returns the fenced code blocks of a Markdown file, with their
// info strings ("yaml", "go", "").
func docBlocks(t *testing.T, path string) (infos, bodies []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```\n")
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		infos, bodies = append(infos, m[1]), append(bodies, m[2])
	}
	return infos, bodies
}

// The quickstart runs as written: its specs load, and plan and check print
// what the page shows (but the planning time).
func TestQuickstartAsWritten(t *testing.T) {
	infos, bodies := docBlocks(t, filepath.Join("..", "..", "docs", "quickstart.md"))
	dir := t.TempDir()
	var specs []string
	for i, info := range infos {
		if info != "yaml" {
			continue
		}
		name := regexp.MustCompile(`(?m)^name: (\S+)`).FindStringSubmatch(bodies[i])
		if name == nil {
			t.Fatalf("yaml block %d has no name", i)
		}
		p := filepath.Join(dir, name[1]+".yaml")
		os.WriteFile(p, []byte(bodies[i]), 0o644)
		specs = append(specs, p)
	}
	if len(specs) != 2 {
		t.Fatalf("want the first spec and its racy variant, found %d specs", len(specs))
	}
	planning := regexp.MustCompile(`planning=[0-9.]+ms`)
	checked := 0
	for i := 0; i+1 < len(bodies); i++ {
		cmd := strings.TrimSpace(bodies[i])
		var args []string
		switch cmd {
		case "dagrun plan first.yaml":
			args = []string{"plan", specs[0]}
		case "dagrun check first-handsync.yaml":
			args = []string{"check", specs[1]}
		default:
			continue
		}
		out, errs, code := cli(t, args...)
		if code == exitUsage {
			t.Fatalf("%s: %s", cmd, errs)
		}
		out = strings.ReplaceAll(out, dir+string(filepath.Separator), "")
		want := bodies[i+1]
		if !strings.HasPrefix(planning.ReplaceAllString(out, ""), planning.ReplaceAllString(want, "")) {
			t.Errorf("%s prints\n%s\nthe quickstart shows\n%s", cmd, out, want)
		}
		checked++
	}
	if checked != 2 {
		t.Fatalf("checked %d commands, want plan and check", checked)
	}
}
