package executor

import (
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/verify"
)

// RaceAccess is one side of a race: a stage's access to a byte range.
type RaceAccess struct {
	Stage      string // stage name
	StageIndex int    // index in the plan's stages
	Stream     int    // the backend's stream number (Run: the physical stream, plan streams first)
	// StreamName is the plan's name of the stream ("NAME/r" in stream set
	// r > 0), set by Run.
	StreamName string
	Write      bool // true for a write, false for a read
}

func (a RaceAccess) String() string {
	verb := "reads"
	if a.Write {
		verb = "writes"
	}
	if a.StreamName != "" {
		return fmt.Sprintf("stage %s (stream %s) %s", a.Stage, a.StreamName, verb)
	}
	return fmt.Sprintf("stage %s (stream %d) %s", a.Stage, a.Stream, verb)
}

// Race is one pair of conflicting accesses (write/write or read/write on
// overlapping bytes) with no happens-before path between them: no chain of
// stream order and record→wait orders them.
type Race struct {
	Buffer string
	Offset int64 // first byte of the overlap found when the race was first seen
	Bytes  int64 // bytes of that overlap
	// First is the access of the stage declared first (lower stage index),
	// Second the other.
	First, Second RaceAccess
	// Count is how many times the pair was seen on this buffer (iterations,
	// ranges) since the report was started.
	Count int
}

// String reads e.g. "stage w1 (stream 0) writes out[0:64] and stage w2
// (stream 1) writes it, with no happens-before path (no event orders them)".
func (r Race) String() string {
	return fmt.Sprintf("%s %s[%d:%d] and %s it, with no happens-before path (no event orders them)",
		r.First, r.Buffer, r.Offset, r.Offset+r.Bytes, r.Second)
}

// RaceError is returned by a backend's Synchronize (and so by Run) when its
// race detector saw conflicting accesses that the stream order and the
// record/wait pairs do not order. The CLI exits 1 on it.
type RaceError struct {
	Backend string
	Races   []Race
	// Dropped counts distinct races not listed because the list was full.
	Dropped int
	// Plan, set by Run when verify.Verify finds the plan racy, is the
	// plan's races grouped by the fewest waits that fix them: the same
	// report as `dagrun check`, the same for every seed and interleaving
	// (the detector sees the races that the run's timing exposed, Races).
	Plan *verify.RaceError
}

func (e *RaceError) Error() string {
	var b strings.Builder
	n := len(e.Races) + e.Dropped
	if e.Plan != nil {
		fmt.Fprintf(&b, "%s: the race detector saw conflicting accesses with no happens-before path; the plan's ", e.Backend)
		b.WriteString(e.Plan.Error())
		return b.String()
	}
	fmt.Fprintf(&b, "%s: %d race", e.Backend, n)
	if n != 1 {
		b.WriteString("s")
	}
	for _, r := range e.Races {
		b.WriteString("\n\t")
		b.WriteString(r.String())
	}
	if e.Dropped > 0 {
		fmt.Fprintf(&b, "\n\t(%d more not listed)", e.Dropped)
	}
	return b.String()
}
