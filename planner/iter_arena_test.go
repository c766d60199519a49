package planner

import (
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/verify"
)

// Temps that share arena bytes are ordered by the schedule, not by a hazard
// of the spec: here st1 (writing b2) may be issued before st0 (writing b1),
// so the iterate pass must take the segment's first and last write in issue
// order. Taken in declaration order it ordered st1@i before st0@i+1 only,
// and st0@i raced with st1@i+1 on the other stream set.
func TestIterateArenaIssueOrder(t *testing.T) {
	s := &dag.Spec{Name: "arena-iter", Sync: dag.SyncAuto}
	for _, n := range []string{"b0", "b1", "b2"} {
		s.Buffers = append(s.Buffers, dag.BufferSpec{Name: n, Bytes: 64})
	}
	s.Stages = []dag.StageSpec{
		{Name: "st0", Kernel: dag.BuiltinMix, Reads: []dag.Access{{Buffer: "b0", Bytes: 64}}, Writes: []dag.Access{{Buffer: "b1", Bytes: 64}}},
		{Name: "st1", Kernel: dag.BuiltinMix, Writes: []dag.Access{{Buffer: "b2", Bytes: 4}}},
		{Name: "st2", Kernel: dag.BuiltinMix, After: []string{"st0"}},
	}
	for copies := 0; copies < 4; copies++ {
		for seed := int64(0); seed < 4; seed++ {
			s.Buffers[0].Copies = copies
			p, err := Build(s, Options{MaxStreams: 1, StreamSets: 2, ShuffleSeed: seed, Check: true})
			if err != nil {
				t.Fatalf("copies %d, shuffle %d: %v", copies, seed, err)
			}
			if err := verify.Verify(p); err != nil {
				t.Fatalf("copies %d, shuffle %d: %v", copies, seed, err)
			}
		}
	}
}
