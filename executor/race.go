package executor

import (
	"fmt"
	"strings"
)

// RaceAccess is one side of a race: a stage's access to a byte range.
type RaceAccess struct {
	Stage      string // stage name
	StageIndex int    // index in the plan's stages
	Stream     int    // the backend's stream number (the plan's stream id when run by Run)
	Write      bool   // true for a write, false for a read
}

func (a RaceAccess) String() string {
	verb := "reads"
	if a.Write {
		verb = "writes"
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
}

func (e *RaceError) Error() string {
	var b strings.Builder
	n := len(e.Races) + e.Dropped
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
