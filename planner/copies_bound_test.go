package planner

import (
	"errors"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// TestRingCopiesPastBoundIsSpecError: ring copies the loader takes but a
// plan cannot hold (more than MaxExtraSlots beyond one in all) are a spec
// error at the buffer, whatever the stream sets: not a plan that check
// passes and run refuses.
func TestRingCopiesPastBoundIsSpecError(t *testing.T) {
	for _, sets := range []int{0, 1} {
		s := spec(stage("w", writes("x")), stage("r", reads("x"), writes("y")))
		for i := range s.Buffers {
			if s.Buffers[i].Name == "x" {
				s.Buffers[i].Copies = plan.MaxExtraSlots + 2
				s.Buffers[i].Pos = dag.Pos{File: "s.yaml", Line: 4, Col: 5}
			}
		}
		_, err := Build(s, Options{StreamSets: sets})
		var el dag.ErrorList
		if !errors.As(err, &el) || el[0].Pos.Line != 4 || el[0].Hint == "" || !strings.Contains(el[0].Msg, "buffer x") {
			t.Errorf("stream sets %d: Build = %v, want a dag.ErrorList at s.yaml:4:5 naming buffer x, with a hint", sets, err)
		}
	}
}
