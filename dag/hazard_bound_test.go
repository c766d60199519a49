package dag

import (
	"fmt"
	"strings"
	"testing"
)

// prefixSpec is n stages appending to one buffer, each reading all that
// the earlier ones wrote (a prefix of the buffer): n(n−1)/2 RAW hazards
// from 2n−1 accesses.
func prefixSpec(n int) *Spec {
	s := &Spec{Name: "prefix", Buffers: []BufferSpec{{Name: "o", Bytes: int64(4 * n)}}}
	for i := range n {
		st := StageSpec{Name: fmt.Sprint("s", i), Kernel: BuiltinSpin, Writes: []Access{{Buffer: "o", Offset: int64(4 * i), Bytes: 4}}}
		if i > 0 {
			st.Reads = []Access{{Buffer: "o", Bytes: int64(4 * i)}}
		}
		s.Stages = append(s.Stages, st)
	}
	return s
}

// TestHazardsBound: a spec with more hazards than its limit (here
// MaxHazards, lowered; the per-access allowance is below it) is refused at
// the stage that passes it, naming the limit; at the limit it is not.
func TestHazardsBound(t *testing.T) {
	defer func(m int) { maxHazards = m }(maxHazards)
	const n = 100
	pairs := n * (n - 1) / 2
	if HazardsPerAccess*(2*n-1) >= pairs {
		t.Fatalf("the per-access allowance %d covers the %d pairs", HazardsPerAccess*(2*n-1), pairs)
	}
	maxHazards = pairs
	g, err := Hazards(prefixSpec(n))
	if err != nil || g.NumEdges() != pairs {
		t.Fatalf("at the limit (%d hazards): %v", pairs, err)
	}
	maxHazards = pairs - 1
	_, err = Hazards(prefixSpec(n))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("stage s%d: the spec's hazards", n-1)) || !strings.Contains(err.Error(), fmt.Sprint(pairs-1)) {
		t.Fatalf("one over the limit: %v", err)
	}
	// The per-access allowance: 4 × 199 accesses.
	maxHazards = 0
	_, err = Hazards(prefixSpec(n))
	if err == nil || !strings.Contains(err.Error(), "pass 796 here") {
		t.Fatalf("past the per-access allowance: %v", err)
	}
}
