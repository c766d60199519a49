package verify_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// rulesSpecs are the public patterns of specs/rules/: each buggy spec's
// report names the rule it breaks; its fixed twin verifies.
var rulesSpecs = []struct{ name, rule string }{
	{"legacy", verify.RuleLegacy},
	{"pageable", verify.RuleStaged},
	{"pageable-async", verify.RulePageableSource},
	{"copy", verify.RuleAsyncCopy},
	{"hostfunc", verify.RuleHostFunc},
	{"capture", `capture rule "` + verify.CaptureUnjoined + `"`},
	{"warmup", `capture rule "` + verify.CaptureAlloc + `"`},
	{"merge", `capture rule "` + verify.CaptureMerge + `"`},
	{"isolation", `capture rule "` + verify.CaptureIsolation + `"`},
	{"replay-eager", `capture rule "` + verify.CaptureReplayOrder + `" broken by branch`},
	{"replay-wait", `capture rule "` + verify.CaptureReplayOrder + `" broken by branch`},
	{"threads", verify.RuleThreads},
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
				p, err := planner.Build(s, planner.Options{})
				if err != nil {
					t.Fatal(err)
				}
				err = verify.Verify(p)
				if variant == "fixed" {
					if err != nil {
						t.Fatalf("want no race, got %v", err)
					}
					return
				}
				var re *verify.RaceError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), c.rule) {
					t.Fatalf("want a report naming %q, got %v", c.rule, err)
				}
			})
		}
	}
}
