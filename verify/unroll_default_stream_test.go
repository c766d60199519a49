package verify

import (
	"errors"
	"testing"

	"github.com/dagrun/dagrun/plan"
)

// legacyStreamSetsPlan is a valid plan with the legacy default stream and
// two stream sets (a plan file may say so; the iterate pass never makes
// one). Streams: A (blocking) runs x, which writes X; C (non-blocking)
// runs y, which reads X; L, the legacy default stream, records f. X has
// two ring copies. Per iteration, issued in this order: C waits for f one
// iteration back, launches y, records g; A waits for g, launches x; L
// records f. So y@k → x@k (WAR on X#(k mod 2)) through g, and x@k →
// y@(k+2) (RAW on X#(k mod 2)) only through f@(k+1): the legacy rule orders
// f@(k+1) after A's earlier work, and y@(k+2) waits for f@(k+1).
func legacyStreamSetsPlan() *plan.Plan {
	X := func() []plan.Access { return []plan.Access{{Buffer: "X", Bytes: 256}} }
	return &plan.Plan{
		Version: plan.PlanVersion,
		Buffers: []plan.Buffer{{Name: "X", Bytes: 256, Where: "device", Role: "temp", Copies: 2}},
		Stages: []plan.Stage{
			{Name: "y", Stream: 2, Kernel: "spin", Reads: X(), Writes: []plan.Access{}},
			{Name: "x", Stream: 0, Kernel: "spin", Reads: []plan.Access{}, Writes: X()},
		},
		Events: 2, // 0: f, 1: g
		Streams: []plan.Stream{
			{ID: 0, Name: "A", Kind: plan.StreamBlocking, Ops: []plan.Op{{Kind: plan.OpWait, Event: 1}, {Kind: plan.OpLaunch, Stage: 1}}},
			{ID: 1, Name: "L", Kind: plan.StreamLegacy, Ops: []plan.Op{{Kind: plan.OpRecord, Event: 0}}},
			{ID: 2, Name: "C", Ops: []plan.Op{{Kind: plan.OpWait, Event: 0, Lag: 1}, {Kind: plan.OpLaunch, Stage: 0}, {Kind: plan.OpRecord, Event: 1}}},
		},
		IssueOrder: [][2]int{{2, 0}, {2, 1}, {2, 2}, {0, 0}, {0, 1}, {1, 0}},
		Iteration:  &plan.Iteration{StreamSets: 2, Slots: []int{1, 1}, InFlight: 1},
	}
}

// TestUnrollDefaultStreamSets: stream sets share a plan's default stream
// (PhysicalStreams), as the executor does (CUDA has one legacy default
// stream, and one per-thread default stream per thread). So the unrolled
// legacyStreamSetsPlan has one stream L, under the legacy rule in every
// iteration, and the verdict over UnrollIterations(p) iterations (3: a
// period of 2) is the verdict over many more: race-free, x@k → y@(k+2)
// through f@(k+1) in every iteration. Were L copied per stream set, only
// one of the copies would be the legacy default stream, the iterations of
// the two sets would differ, and x@1, y@3 would race over 4 iterations and
// more but not over 3. Without C's lagged wait the plan races across
// iterations, and Verify says so (not that the unrolled plan has two
// default streams), L legacy or per-thread.
func TestUnrollDefaultStreamSets(t *testing.T) {
	p := legacyStreamSetsPlan()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	k := plan.UnrollIterations(p)
	if got, want := unrollVerdict(t, p, k), unrollVerdict(t, p, 3*k+8); (got == nil) != (want == nil) {
		t.Errorf("over %d iterations: %v; over %d: %v", k, got, 3*k+8, want)
	}
	// Without C's lagged wait, x@k → y@(k+2) races for every k; L the
	// legacy or a per-thread default stream.
	for _, kind := range []string{plan.StreamLegacy, plan.StreamPerThread} {
		q := dropOp(p, 2, 0)
		q.Version = p.Version
		q.Streams[1].Kind = kind
		if err := q.Validate(); err != nil {
			t.Fatal(err)
		}
		var re *RaceError
		if err := Verify(q); !errors.As(err, &re) {
			t.Errorf("stream L %s, without the lagged wait: Verify: %v; want the races across iterations", kind, err)
		}
	}
}
