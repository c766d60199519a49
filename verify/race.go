package verify

import (
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/plan"
)

// verifyMaxPrinted bounds the races RaceError.Error prints.
const verifyMaxPrinted = 20

// Race is one pair of conflicting accesses that the plan does not order as
// declaration order does: stage First's launch does not happen-before stage
// Second's launch. One Race is reported per (First, Second, Buffer).
type Race struct {
	First  int `json:"first"`  // stage index, First < Second (declaration order)
	Second int `json:"second"` // stage index
	// FirstName and SecondName are the stages' names.
	FirstName    string `json:"first_name"`
	SecondName   string `json:"second_name"`
	FirstStream  int    `json:"first_stream"`
	SecondStream int    `json:"second_stream"`
	// FirstStreamName, SecondStreamName are the streams' names in the plan
	// (a spec's pinned names, or s0, s1, … for planned streams).
	FirstStreamName  string `json:"first_stream_name"`
	SecondStreamName string `json:"second_stream_name"`
	// Buffer is the buffer of First's access. Offset and Bytes are the
	// smallest byte range of Buffer that holds every conflicting byte.
	Buffer string `json:"buffer"`
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
	// Shared, when Second's access is to another buffer that shares arena
	// bytes with Buffer, names that buffer (the arena pass's mistake, or an
	// arena laid out by hand).
	Shared string `json:"shared,omitempty"`
	// Kind is RaceWAW if any conflicting access pair is write/write, else
	// RaceRAW if First writes, else RaceWAR.
	Kind string `json:"kind"`
	// Reversed is true when the plan orders Second before First (a
	// happens-before path from Second's launch to First's): ordered, but the
	// wrong way round.
	Reversed bool `json:"reversed,omitempty"`
	// Fix says which record/wait would order the pair (or what to move).
	Fix string `json:"fix"`
	// Rule, when CUDA's implicit order was expected to order the pair,
	// names the rule that does not (implicit.go) and why.
	Rule string `json:"rule,omitempty"`

	// Site indexes RaceError.Sites: the race's identity in the program's
	// source (RaceSite).
	Site int `json:"site"`

	edit *ruleEdit // the plan edit Rule suggests instead of a wait (implicit.go)
}

func (r Race) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "race (%s) on %s[%d:%d]: ", r.Kind, r.Buffer, r.Offset, r.Offset+r.Bytes)
	if r.Shared != "" {
		fmt.Fprintf(&b, "(arena bytes shared with %s) ", r.Shared)
	}
	if r.Reversed {
		fmt.Fprintf(&b, "stage %s (stream %s) runs before stage %s (stream %s), the reverse of declaration order",
			r.SecondName, streamLabel(r.SecondStreamName, r.SecondStream), r.FirstName, streamLabel(r.FirstStreamName, r.FirstStream))
	} else {
		fmt.Fprintf(&b, "stage %s (stream %s) and stage %s (stream %s) are not ordered",
			r.FirstName, streamLabel(r.FirstStreamName, r.FirstStream), r.SecondName, streamLabel(r.SecondStreamName, r.SecondStream))
	}
	if r.Rule != "" {
		b.WriteString(" (")
		b.WriteString(r.Rule)
		b.WriteString(")")
	}
	if r.Fix != "" {
		b.WriteString("; fix: ")
		b.WriteString(r.Fix)
	}
	return b.String()
}

// RaceError is Verify's error when a plan has races. Races are sorted by
// (First, Second, Buffer).
type RaceError struct {
	Races []Race `json:"races"`
	// Sites groups the races by their identity in the program's source
	// (RaceSite): the iterations of a loop and the repeated calls of a
	// recorded program are one site, with a count and an example.
	Sites []RaceSite `json:"sites,omitempty"`
	// Handoffs order races between host threads, one host event per pair
	// of threads (Handoff), for the Unfixed races no device wait orders.
	Handoffs []Handoff `json:"handoffs,omitempty"`
	// Truncated is true when Verify stopped after verifyMaxRaces races; more exist.
	Truncated bool `json:"truncated,omitempty"`
	// Fixes are few waits that, added to the plan, order every race but
	// the Unfixed ones, each with the races it orders (see Fix).
	Fixes []Fix `json:"fixes"`
	// Unfixed indexes the races no added wait orders: ordered the wrong way
	// round, on one stream, through shared arena bytes, or needing a
	// record that is issued after the wait; each Race's Fix says what to do.
	Unfixed []int `json:"unfixed"`
	// FixesPartial is set when the fix search stopped at its work bound
	// (fixMaxWork steps): each race it did not reach has a wait of its
	// own, so fewer waits may do.
	FixesPartial bool `json:"fixes_partial,omitempty"`
	// Lifetimes are lifetime records that end before a stream's last use
	// of their buffer.
	Lifetimes []LifetimeGap `json:"lifetimes,omitempty"`
	// Unrolled is set for races across iterations: stages are named
	// NAME@iteration and ring copies NAME#copy.
	Unrolled bool `json:"unrolled,omitempty"`
	// LagsShortest is set when the fixes across iterations keep the
	// shortest lag that orders their races, not lengthened as far as the
	// plan stays race-free (more than 4 fixes, or more than 32 iterations
	// unrolled): a longer lag, with less order between iterations, may
	// also do.
	LagsShortest bool `json:"lags_shortest,omitempty"`
	// AcrossIterations counts the races between stages of different
	// iterations that the plan, unrolled, also has when these races are
	// within one iteration: not listed, as they may change once these are
	// fixed; check again after fixing these. MoreAcross is set when the
	// count is a lower bound (the race list was truncated).
	AcrossIterations int  `json:"across_iterations,omitempty"`
	MoreAcross       bool `json:"more_across,omitempty"`
	// FixesMinimal is set when an exhaustive search proved that no fewer
	// waits order these races; otherwise the fixes are a greedy set (plans
	// with more candidate sets than fixMaxExact, or more work than
	// fixMaxWork, to try), or one wait per race (FixesPartial).
	FixesMinimal bool `json:"fixes_minimal"`
	// Captures are broken stream-capture rules (capture.go).
	Captures []CaptureViolation `json:"captures,omitempty"`
	// Deadlocks are collectives whose ranks are not issued as one group
	// (devices_verify.go); with them, Races is empty (the plan would not
	// finish).
	Deadlocks []Deadlock `json:"deadlocks,omitempty"`
}

// Error is the report grouped by fix: one block per wait with the races it
// orders, then the races no wait fixes.
func (e *RaceError) Error() string {
	if e.AcrossIterations > 0 {
		c := *e
		c.AcrossIterations = 0
		more := ""
		if e.MoreAcross {
			more = " or more"
		}
		return c.Error() + fmt.Sprintf("\nnote: iterations unrolled show %d%s race%s between stages of different iterations besides these, not listed as they may change once these are fixed: run check again after fixing these", e.AcrossIterations, more, plural(e.AcrossIterations))
	}
	if len(e.Races) == 0 {
		var b strings.Builder
		e.reportLifetimes(&b)
		return strings.TrimPrefix(b.String(), "\n")
	}
	if len(e.Fixes) > 0 || len(e.Unfixed) > 0 {
		var b strings.Builder
		e.report(&b)
		return b.String()
	}
	if len(e.Races) == 1 && !e.Truncated {
		return e.Races[0].String()
	}
	var b strings.Builder
	more := ""
	if e.Truncated {
		more = " or more"
	}
	fmt.Fprintf(&b, "%d%s races", len(e.Races), more)
	for i, r := range e.Races {
		if i == verifyMaxPrinted {
			fmt.Fprintf(&b, "\n\t... and %d more", len(e.Races)-i)
			break
		}
		b.WriteString("\n\t")
		b.WriteString(r.String())
	}
	return b.String()
}

func verifyKindRank(k string) int {
	switch k {
	case plan.RaceWAW:
		return 2
	case plan.RaceRAW:
		return 1
	}
	return 0
}

// streamLabel names a stream in messages: its plan name when it has one, else
// its id.
func streamLabel(name string, id int) string {
	if name == "" {
		return fmt.Sprint(id)
	}
	return name
}
