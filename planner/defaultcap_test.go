package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/synth"
)

// The default cap's note warns what planning uncapped costs where the
// uncapped plan's streams times its stages pass uncappedWarn, with both
// figures, and not below it.
func TestDefaultCapNoteWarnsUncapped(t *testing.T) {
	defer func(w int64) { uncappedWarn = w }(uncappedWarn)
	s := synth.Layered(2000)
	uncapped, err := Build(s, Options{MaxStreams: Uncapped})
	if err != nil {
		t.Fatal(err)
	}
	work := int64(uncapped.Stats.Streams) * int64(uncapped.Stats.Stages)
	for _, c := range []struct {
		warn int64
		want bool
	}{{work, true}, {work + 1, false}} {
		uncappedWarn = c.warn
		p, err := Build(s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		note := ""
		for _, n := range p.Notes {
			if strings.Contains(n, "by default (the uncapped plan has") {
				note = n
			}
		}
		warned := strings.Contains(note, fmt.Sprintf("plans uncapped (%d streams over %d stages: the planner's and verifier's happens-before clocks grow with their product", uncapped.Stats.Streams, uncapped.Stats.Stages))
		if note == "" || warned != c.want {
			t.Errorf("warn from %d (the uncapped plan: %d): note %q, want the warning %v", c.warn, work, note, c.want)
		}
	}
}
