package executor_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
)

// ringChain is n mix stages pinned round-robin to 4 streams, each reading
// the previous stage's ring buffer (2 copies) and writing its own: a plan
// with cross-iteration waits, stream sets and event slots.
func ringChain(b *testing.B, n int) *plan.Plan {
	s := &dag.Spec{Version: 1, Name: "ring-chain", Sync: dag.SyncAuto}
	for k := range 4 {
		s.Buffers = append(s.Buffers, dag.BufferSpec{Name: fmt.Sprint("x", k), Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleTemp, Copies: 2})
	}
	s.Buffers[3].Role = dag.RoleOutput
	for i := range n {
		st := dag.StageSpec{Name: fmt.Sprint("m", i), Kernel: dag.BuiltinMix, Stream: fmt.Sprint("s", i%4), DurationUS: 1,
			Writes: []dag.Access{{Buffer: fmt.Sprint("x", i%4), Bytes: 64}}}
		if i > 0 {
			st.Reads = []dag.Access{{Buffer: fmt.Sprint("x", (i-1)%4), Bytes: 64}}
		}
		s.Stages = append(s.Stages, st)
	}
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if p.Iteration == nil {
		b.Fatal("no iteration info")
	}
	return p
}

// benchmarkIssue reports the executor's own host cost per issued op (a
// no-op backend) over 1000 iterations of p, lowering and setup included.
func benchmarkIssue(b *testing.B, p *plan.Plan) {
	ctx := context.Background()
	const iters = 1000
	b.ResetTimer()
	var ops int
	for range b.N {
		res, err := executor.Run(ctx, p, &nop{}, executor.Options{Iterations: iters})
		if err != nil {
			b.Fatal(err)
		}
		ops = res.Launches + res.Records + res.Waits
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ops), "ns/op-issued")
}

// BenchmarkIssue: a plan without iteration info (its iterations separated
// by a barrier).
func BenchmarkIssue(b *testing.B) { benchmarkIssue(b, wide(1000, 4)) }

// BenchmarkIssueRing: a plan with ring buffers and cross-iteration waits.
func BenchmarkIssueRing(b *testing.B) { benchmarkIssue(b, ringChain(b, 1000)) }
