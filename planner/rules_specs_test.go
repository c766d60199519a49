package planner

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
)

// rulesSpecs are the public patterns of specs/rules/: each buggy spec's
// report names the rule it breaks; its fixed twin verifies.
var rulesSpecs = []struct{ name, rule string }{
	{"legacy", RuleLegacy},
	{"pageable", RuleStaged},
	{"pageable-async", RulePageableSource},
	{"copy", RuleAsyncCopy},
	{"hostfunc", RuleHostFunc},
	{"capture", `capture rule "` + CaptureUnjoined + `"`},
	{"warmup", `capture rule "` + CaptureAlloc + `"`},
	{"merge", `capture rule "` + CaptureMerge + `"`},
	{"isolation", `capture rule "` + CaptureIsolation + `"`},
	{"replay-eager", `capture rule "` + CaptureReplayOrder + `" broken by branch`},
	{"replay-wait", `capture rule "` + CaptureReplayOrder + `" broken by branch`},
	{"threads", RuleThreads},
}

func TestRulesSpecs(t *testing.T) {
	for _, c := range rulesSpecs {
		for _, variant := range []string{"racy", "fixed"} {
			path := filepath.Join("..", "specs", "rules", c.name+"-"+variant+".yaml")
			t.Run(c.name+"-"+variant, func(t *testing.T) {
				s, err := dag.LoadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				p, err := Build(s, Options{})
				if err != nil {
					t.Fatal(err)
				}
				err = Verify(p)
				if variant == "fixed" {
					if err != nil {
						t.Fatalf("want no race, got %v", err)
					}
					return
				}
				var re *RaceError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), c.rule) {
					t.Fatalf("want a report naming %q, got %v", c.rule, err)
				}
			})
		}
	}
}
