package backendtest

import (
	"context"
	"errors"
	"testing"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
)

// deviceCount is how many devices the suite's backends drive (1 for a
// backend that is no executor.Devicer).
func (s suite) deviceCount(t *testing.T) (int, bool) {
	b := s.newBackend(t)
	defer b.Close()
	_, coll := b.(executor.Collectiver)
	if d, ok := b.(executor.Devicer); ok {
		return d.Devices(), coll
	}
	return 1, coll
}

// devices: across two devices, a slow producer on device 0, a peer copy
// on device 1 after a wait for it (RAW), and device 0 overwriting the
// source after a wait for the copy (WAR): the copy holds the producer's
// value. With a Collectiver, an all-reduce of two ranks sums them on
// both devices. Skipped on a backend of one device.
func (s suite) devices(t *testing.T) {
	n, coll := s.deviceCount(t)
	if n < 2 {
		t.Skipf("the backend drives %d device(s)", n)
	}
	const size = 1 << 16
	p := NewBuilder(2).OnDevice(1, 1)
	p.Buffer(plan.Buffer{Name: "a", Bytes: size})
	p.Buffer(plan.Buffer{Name: "b", Bytes: size, Device: 1, Role: dag.RoleOutput})
	p.Launch(0, plan.Stage{Name: "slow", Kernel: dag.BuiltinSpin, Args: map[string]any{"us": 2000}})
	p.Launch(0, plan.Stage{Name: "produce", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 3.0}, Writes: p.All("a")})
	p.Record(0, 0)
	p.Wait(1, 0)
	p.Launch(1, plan.Stage{Name: "send", Kernel: dag.BuiltinCopy, Reads: p.All("a"), Writes: p.All("b")})
	p.Record(1, 1)
	p.Wait(0, 1)
	p.Launch(0, plan.Stage{Name: "overwrite", Kernel: dag.BuiltinFill, Args: map[string]any{"value": -1.0}, Writes: p.All("a")})
	out := s.run(t, p.Plan(), 2)
	expect(t, "b", out["b"], fillBytes(size, 3))
	if !coll {
		return
	}
	c := NewBuilder(2).OnDevice(1, 1)
	c.Buffer(plan.Buffer{Name: "g0", Bytes: size, Role: dag.RoleOutput})
	c.Buffer(plan.Buffer{Name: "g1", Bytes: size, Device: 1, Role: dag.RoleOutput})
	c.Launch(0, plan.Stage{Name: "one", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 1.0}, Writes: c.All("g0")})
	c.Launch(1, plan.Stage{Name: "two", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 2.0}, Writes: c.All("g1")})
	for r := range 2 {
		g := []string{"g0", "g1"}[r]
		c.Launch(r, plan.Stage{Name: "grad/" + string(rune('0'+r)), Kernel: contract.BuiltinAllReduce, Args: map[string]any{"op": contract.ReduceSum},
			Reads: c.All(g), Writes: c.All(g), Collective: &plan.Collective{Op: contract.BuiltinAllReduce, Reduce: contract.ReduceSum, Rank: r, Ranks: 2}})
	}
	b := s.newBackend(t)
	res, err := executor.Run(context.Background(), c.Plan(), b, executor.Options{})
	if cerr := b.Close(); cerr != nil {
		t.Errorf("%s: Close after Run: %v", b.Name(), cerr)
	}
	if errors.Is(err, executor.ErrRanksShareGPU) {
		t.Logf("%s: the all-reduce needs two GPUs: %v", b.Name(), err)
		return
	}
	if err != nil {
		t.Fatalf("%s: Run: %v", b.Name(), err)
	}
	got := map[string][]byte{}
	for _, o := range res.Outputs {
		got[o.Name] = o.Data
	}
	expect(t, "g0", got["g0"], fillBytes(size, 3))
	expect(t, "g1", got["g1"], fillBytes(size, 3))
}
