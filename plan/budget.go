package plan

import (
	"fmt"
	"strings"
)

// BudgetStep is one step of Build's budget loop: the buffer orders it added
// and the plan after it.
type BudgetStep struct {
	Kind string `json:"kind"` // BudgetReuse or BudgetSerialize
	// Orders lists the buffer pairs the step orders, as "x<y": every access
	// of x now happens-before every access of y (sorted, at most 8 listed).
	Orders []string `json:"orders"`
	Pairs  int      `json:"pairs"` // buffer pairs ordered (Orders may list fewer)
	// Edges is how many after: edges (stage → stage) the step added; the
	// reduce pass drops those that other paths imply.
	Edges int `json:"edges"`
	// KeptStreams says the re-plan kept each stage's stream and order of
	// the plan before the step (a reuse step whose re-plan on streams
	// chosen anew came out longer; keptStreams): the step then costs no
	// makespan, and may cost waits the new streams would have saved.
	KeptStreams bool    `json:"kept_streams,omitempty"`
	ArenaBytes  int64   `json:"arena_bytes"` // arena after the step, bytes: with several devices, the largest device's (BudgetArena)
	MakespanUS  float64 `json:"makespan_us"` // ideal makespan after the step, µs
	CostUS      float64 `json:"cost_us"`     // makespan increase of this step, µs
}

func (s BudgetStep) String() string {
	kept := ""
	if s.KeptStreams {
		kept = " on the streams of the plan before it"
	}
	return fmt.Sprintf("%s: %d pair(s) ordered (%s), %d edge(s)%s: arena %d bytes, makespan %.1f µs (%+.1f µs)",
		s.Kind, s.Pairs, strings.Join(s.Orders, ", "), s.Edges, kept, s.ArenaBytes, s.MakespanUS, s.CostUS)
}
