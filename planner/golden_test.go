package planner

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/verify"
)

var update = flag.Bool("update", false, "rewrite the plan sections of testdata/*.txtar")

// archive is a txtar archive (golang.org/x/tools/txtar's format): a comment,
// then files introduced by "-- name --" lines.
type archive struct {
	comment string
	files   []archiveFile
}

type archiveFile struct{ name, data string }

func parseArchive(data string) archive {
	var a archive
	cur := &a.comment
	for _, line := range strings.SplitAfter(data, "\n") {
		t := strings.TrimRight(line, "\n")
		if strings.HasPrefix(t, "-- ") && strings.HasSuffix(t, " --") && len(t) >= 6 {
			a.files = append(a.files, archiveFile{name: strings.TrimSpace(t[3 : len(t)-3])})
			cur = &a.files[len(a.files)-1].data
			continue
		}
		*cur += line
	}
	return a
}

func (a archive) format() string {
	var b strings.Builder
	b.WriteString(a.comment)
	for _, f := range a.files {
		fmt.Fprintf(&b, "-- %s --\n%s", f.name, f.data)
		if f.data != "" && !strings.HasSuffix(f.data, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// goldenOptions parses a section name "plan STRATEGY [max=N] [dot]".
func goldenOptions(t *testing.T, name string) (Options, bool) {
	f := strings.Fields(name)
	o := Options{Strategy: Strategy(f[1])}
	dot := false
	for _, x := range f[2:] {
		switch {
		case strings.HasPrefix(x, "max="):
			n, err := strconv.Atoi(x[4:])
			if err != nil {
				t.Fatalf("section %q: %v", name, err)
			}
			o.MaxStreams = n
		case x == "dot":
			dot = true
		default:
			t.Fatalf("section %q: unknown word %q", name, x)
		}
	}
	if o.Strategy == "manual" {
		o.Strategy = ""
	}
	return o, dot
}

// TestGolden plans each testdata/*.txtar's spec.yaml under the options its
// "plan ..." sections name and compares the table (planning time zeroed) or
// DOT output. Run with -update to rewrite them.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			a := parseArchive(string(data))
			if len(a.files) == 0 || a.files[0].name != "spec.yaml" {
				t.Fatalf("first file must be spec.yaml")
			}
			s, err := dag.Load([]byte(a.files[0].data), file, "testdata")
			if err != nil {
				t.Fatal(err)
			}
			changed := false
			for i := 1; i < len(a.files); i++ {
				f := &a.files[i]
				o, dot := goldenOptions(t, f.name)
				o.Check = true
				p, err := Build(s, o)
				if err != nil {
					t.Fatalf("%s: %v", f.name, err)
				}
				if s.Sync != dag.SyncManual {
					if err := verify.Verify(p); err != nil {
						t.Fatalf("%s: %v", f.name, err)
					}
				}
				p.Stats.PlanningMS = 0
				var buf bytes.Buffer
				if dot {
					if err := p.WriteDOT(&buf); err != nil {
						t.Fatal(err)
					}
				} else {
					p.WriteTable(&buf)
				}
				if got := buf.String(); got != f.data {
					if *update {
						f.data, changed = got, true
						continue
					}
					t.Errorf("%s: got\n%s\nwant\n%s", f.name, got, f.data)
				}
			}
			if changed {
				if err := os.WriteFile(file, []byte(a.format()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	in := "comment\n-- a --\nx\n-- b c --\ny\nz\n"
	if got := parseArchive(in).format(); got != in {
		t.Errorf("round trip: %q", got)
	}
}
