package backendtest

import (
	"testing"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
)

// Memory: the plan's arena (accesses at buffer offsets inside one
// allocation), stream-ordered allocation (executor.StreamAllocator) and
// host stages (a plan's host stream, through executor.HostSyncer).

// arena runs a plan whose temps share one arena: x and y at offset 0 (y
// after x on one stream), z at 256 on another stream.
func (s suite) arena(t *testing.T) {
	const n = 1024
	b := NewBuilder(2)
	for _, name := range []string{"x", "y", "z"} {
		b.Buffer(plan.Buffer{Name: name, Bytes: n})
	}
	for _, name := range []string{"ox", "oy", "oz"} {
		b.Buffer(plan.Buffer{Name: name, Bytes: n, Role: dag.RoleOutput})
	}
	b.Launch(0, plan.Stage{Name: "fx", Kernel: "fill", Args: map[string]any{"value": 1.0}, Writes: b.All("x")})
	b.Launch(1, plan.Stage{Name: "fz", Kernel: "fill", Args: map[string]any{"value": 3.0}, Writes: b.All("z")})
	b.Launch(0, plan.Stage{Name: "cx", Kernel: "copy", Reads: b.All("x"), Writes: b.All("ox")})
	b.Launch(0, plan.Stage{Name: "fy", Kernel: "fill", Args: map[string]any{"value": 2.0}, Writes: Range("y", 4, n-4)})
	b.Launch(0, plan.Stage{Name: "cy", Kernel: "copy", Reads: Range("y", 4, n-4), Writes: Range("oy", 4, n-4)})
	b.Launch(1, plan.Stage{Name: "cz", Kernel: "scale", Args: map[string]any{"a": 2.0}, Reads: b.All("z"), Writes: b.All("oz")})
	p := b.Plan()
	offs := map[string]int64{"x": 0, "y": 0, "z": 1280}
	for i := range p.Buffers {
		if off, ok := offs[p.Buffers[i].Name]; ok {
			p.Buffers[i].ArenaOffset = &off
		}
	}
	p.Stats.ArenaBytes = 1280 + n
	if err := verify.Verify(p); err != nil {
		t.Fatalf("the test plan: %v", err)
	}
	out := s.run(t, p, 1)
	expect(t, "ox", out["ox"], fillBytes(n, 1))
	expect(t, "oy", out["oy"][4:], fillBytes(n-4, 2))
	expect(t, "oz", out["oz"], fillBytes(n, 6))
}

// streamAlloc allocates on one stream, uses the buffer there and on
// another after an event, and frees it stream-ordered after both.
func (s suite) streamAlloc(t *testing.T) {
	be := s.newBackend(t)
	defer func() {
		if err := be.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	sa, ok := be.(executor.StreamAllocator)
	if !ok {
		t.Skipf("%s: no stream-ordered allocation", be.Name())
	}
	const n = 4096
	s0, err := be.NewStream()
	must(t, err)
	s1, err := be.NewStream()
	must(t, err)
	e0, err := be.NewEvent()
	must(t, err)
	e1, err := be.NewEvent()
	must(t, err)
	out, err := be.Alloc(executor.BufferDesc{Name: "out", Bytes: n, Where: contract.WhereDevice})
	must(t, err)
	for round := range 3 { // the pool may hand the same bytes back
		h, err := sa.AllocAsync(executor.BufferDesc{Name: "tmp", Bytes: n, Where: contract.WhereDevice}, s0)
		must(t, err)
		v := float64(round + 1)
		fill := &executor.LaunchDesc{Stage: 0, Name: "fill", Kernel: "fill", Args: map[string]any{"value": v}, Writes: []executor.Arg{{Buffer: h, Name: "tmp", Bytes: n}}}
		copyL := &executor.LaunchDesc{Stage: 1, Name: "copy", Kernel: "copy", Reads: []executor.Arg{{Buffer: h, Name: "tmp", Bytes: n}}, Writes: []executor.Arg{{Buffer: out, Name: "out", Bytes: n}}}
		must(t, be.Launch(s0, fill))
		must(t, be.Record(e0, s0))
		must(t, be.Wait(s1, e0))
		must(t, be.Launch(s1, copyL))
		must(t, be.Record(e1, s1))
		must(t, be.Wait(s0, e1))
		must(t, sa.FreeAsync(h, s0))
		must(t, be.Synchronize())
		got, err := be.Read(out)
		must(t, err)
		expect(t, "out", got, fillBytes(n, float32(v)))
	}
	must(t, be.Free(out))
	for _, x := range []executor.Event{e0, e1} {
		must(t, be.DestroyEvent(x))
	}
	for _, x := range []executor.Stream{s0, s1} {
		must(t, be.DestroyStream(x))
	}
}

// hostStages runs a plan with a host stream: the host fills a pinned
// buffer, a device copy uploads it, the host refills it after waiting for
// the copy, and reads back a device-to-host copy after waiting for it.
func (s suite) hostStages(t *testing.T) {
	probe := s.newBackend(t)
	_, ok := probe.(executor.HostSyncer)
	probe.Close()
	if !ok {
		t.Skip("no HostSyncer")
	}
	const n = 4096
	b := NewBuilder(2)
	b.Buffer(plan.Buffer{Name: "pin", Bytes: n, Where: dag.WhereHostPinned})
	b.Buffer(plan.Buffer{Name: "back", Bytes: n, Where: dag.WhereHostPinned})
	b.Buffer(plan.Buffer{Name: "d0", Bytes: n, Role: dag.RoleOutput})
	b.Buffer(plan.Buffer{Name: "d1", Bytes: n, Role: dag.RoleOutput})
	b.Buffer(plan.Buffer{Name: "sum", Bytes: 8, Where: dag.WhereHostPinned, Role: dag.RoleOutput})
	fill := func(v float64, buf string) plan.Stage {
		return plan.Stage{Name: "fill" + buf, Kernel: "fill", Args: map[string]any{"value": v}, Writes: b.All(buf)}
	}
	st := fill(1, "pin")
	st.Name = "fill0"
	b.Launch(0, st)
	b.Record(0, 0)
	b.Wait(1, 0)
	b.Launch(1, plan.Stage{Name: "spin", Kernel: "spin", Args: map[string]any{"us": 500.0}})
	b.Launch(1, plan.Stage{Name: "up0", Kernel: "copy", Reads: b.All("pin"), Writes: b.All("d0")})
	b.Record(1, 1)
	b.Wait(0, 1) // the host waits for up0 before refilling pin
	st = fill(2, "pin")
	st.Name = "fill1"
	b.Launch(0, st)
	b.Record(0, 2)
	b.Wait(1, 2)
	b.Launch(1, plan.Stage{Name: "up1", Kernel: "copy", Reads: b.All("pin"), Writes: b.All("d1")})
	b.Launch(1, plan.Stage{Name: "down", Kernel: "copy", Reads: b.All("d1"), Writes: b.All("back")})
	b.Record(1, 3)
	b.Wait(0, 3) // the host waits for the download before reading back
	b.Launch(0, plan.Stage{Name: "check", Kernel: "checksum", Reads: b.All("back"), Writes: b.All("sum")})
	p := b.Plan()
	p.Streams[0].Host, p.Streams[0].Name = true, "host"
	if err := verify.Verify(p); err != nil {
		t.Fatalf("the test plan: %v", err)
	}
	out := s.run(t, p, 1)
	expect(t, "d0", out["d0"], fillBytes(n, 1))
	expect(t, "d1", out["d1"], fillBytes(n, 2))
	w := words(out["sum"])
	if two := words(fillBytes(4, 2))[0]; w[0] != two*(n/4) {
		t.Errorf("host checksum of the download: sum %#x, want %#x", w[0], two*(n/4))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
