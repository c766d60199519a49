package backendtest

import (
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// hostThreads (a Threader backend only): crossStreamOrder issued from two
// host threads. Main runs a slow spin and a fill on stream 0 and records
// e0; thread b's stream 1 waits on e0 and fills again. A host event handed
// from main (a record on its host stream after e0's record) to b (a wait
// on b's host stream before its wait) makes b's wait take main's record,
// so the last fill wins in every run: the backend's thread views must
// have made the record by the time the handoff is released.
func (s suite) hostThreads(t *testing.T) {
	b := s.newBackend(t)
	_, ok := b.(executor.Threader)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("the backend issues from one host thread")
	}
	p := NewBuilder(4)
	pl := p.Plan()
	pl.Streams[1].Thread = "b"
	pl.Streams[2].Host = true
	pl.Streams[3].Host, pl.Streams[3].Thread = true, "b"
	p.Buffer(plan.Buffer{Name: "x", Bytes: 1 << 16, Role: dag.RoleOutput})
	p.Launch(0, plan.Stage{Name: "slow", Kernel: dag.BuiltinSpin, Args: map[string]any{"us": 2000}, Writes: p.All("x")})
	p.Launch(0, plan.Stage{Name: "one", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 1.0}, Writes: p.All("x")})
	p.Record(0, 0)
	p.Record(2, 1) // the handoff's signal
	p.Wait(3, 1)   // and its wait, on thread b
	p.Wait(1, 0)
	p.Launch(1, plan.Stage{Name: "two", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 2.0}, Writes: p.All("x")})
	if err := verify.Verify(p.Plan()); err != nil {
		t.Fatalf("the plan: %v", err)
	}
	for range 5 {
		out := s.run(t, p.Plan(), 1)
		expect(t, "x", out["x"], fillBytes(1<<16, 2))
	}
}
