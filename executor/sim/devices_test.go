package sim_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// rendezvousPlan: mark (stream s0, device 0) writes host memory before
// rank 0 of a collective; seen (stream s1, device 1) reads it after rank
// 1. No event orders them: only the rendezvous. With seenFirst, seen runs
// before rank 1 on its stream, so nothing orders them.
func rendezvousPlan(seenFirst bool) *plan.Plan {
	rank := func(r int) *plan.Collective {
		return &plan.Collective{Group: 0, Op: "all_reduce", Reduce: "sum", Rank: r, Ranks: 2}
	}
	sum := map[string]any{"op": "sum"}
	p := &plan.Plan{Version: 1, Devices: 2,
		Buffers: []plan.Buffer{{Name: "note", Bytes: 64, Where: dag.WhereHostPinned, Role: dag.RoleTemp},
			{Name: "g0", Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleOutput, Init: dag.InitFill, InitValue: 1},
			{Name: "g1", Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleOutput, Init: dag.InitFill, InitValue: 2, Device: 1},
			{Name: "sum", Bytes: 8, Where: dag.WhereHostPinned, Role: dag.RoleOutput}},
		Stages: []plan.Stage{
			{Name: "mark", Stream: 0, Kernel: "fill", Args: map[string]any{"value": 1.0}, Writes: []plan.Access{{Buffer: "note", Bytes: 64}}},
			{Name: "r/0", Stream: 0, Kernel: "all_reduce", Args: sum, Reads: []plan.Access{{Buffer: "g0", Bytes: 64}}, Writes: []plan.Access{{Buffer: "g0", Bytes: 64}}, Collective: rank(0)},
			{Name: "r/1", Stream: 1, Kernel: "all_reduce", Args: sum, Reads: []plan.Access{{Buffer: "g1", Bytes: 64}}, Writes: []plan.Access{{Buffer: "g1", Bytes: 64}}, Collective: rank(1)},
			{Name: "seen", Stream: 1, Kernel: "checksum", Reads: []plan.Access{{Buffer: "note", Bytes: 64}}, Writes: []plan.Access{{Buffer: "sum", Bytes: 8}}},
		},
		Streams: []plan.Stream{
			{ID: 0, Name: "s0", Ops: []plan.Op{{Kind: plan.OpLaunch, Stage: 0}, {Kind: plan.OpLaunch, Stage: 1}}},
			{ID: 1, Name: "s1", Device: 1, Ops: []plan.Op{{Kind: plan.OpLaunch, Stage: 2}, {Kind: plan.OpLaunch, Stage: 3}}},
		},
		IssueOrder: [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}},
	}
	if seenFirst {
		p.Streams[1].Ops[0].Stage, p.Streams[1].Ops[1].Stage = 3, 2
		p.IssueOrder = [][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}}
	}
	return p
}

// TestRendezvousDetector: the detector takes a collective's rendezvous as
// the verifier does (mark → seen ordered through it, not when seen comes
// before rank 1), and the all-reduce writes the sum on both devices.
func TestRendezvousDetector(t *testing.T) {
	for _, seenFirst := range []bool{false, true} {
		p := rendezvousPlan(seenFirst)
		verr := verify.Verify(p)
		for seed := range int64(10) {
			res, err := run(t, p, sim.Options{Seed: seed, MaxDelay: 2000}, 1)
			var re *executor.RaceError
			if err != nil && !errors.As(err, &re) {
				t.Fatal(err)
			}
			if (re != nil) != (verr != nil) {
				t.Fatalf("seenFirst %v seed %d: detector %v, verifier %v", seenFirst, seed, err, verr)
			}
			if !seenFirst {
				three := executor.Checksum(floats(3, 16))
				for _, o := range res.Outputs {
					if (o.Name == "g0" || o.Name == "g1") && o.Checksum != three {
						t.Errorf("%s = %s, want the sum 3.0 everywhere (%s)", o.Name, o.Checksum, three)
					}
				}
			}
		}
		if seenFirst != (verr != nil) {
			t.Errorf("seenFirst %v: verifier %v", seenFirst, verr)
		}
	}
}

// TestDeviceMemory: a launch that touches another device's memory is
// refused; a copy between two devices on a third device's stream too.
func TestDeviceMemory(t *testing.T) {
	b := sim.New(sim.Options{Devices: 3})
	defer b.Close()
	s1, err := b.NewStreamOn(1, "")
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := b.NewStreamOn(2, "")
	a0, _ := b.Alloc(executor.BufferDesc{Name: "a0", Bytes: 64, Where: contract.WhereDevice})
	a1, _ := b.Alloc(executor.BufferDesc{Name: "a1", Bytes: 64, Where: contract.WhereDevice, Device: 1})
	arg := func(h executor.Buffer, name string) []executor.Arg {
		return []executor.Arg{{Buffer: h, Name: name, Bytes: 64}}
	}
	err = b.Launch(s1, &executor.LaunchDesc{Name: "k", Kernel: "fill", Args: map[string]any{"value": 1.0}, Writes: arg(a0, "a0")})
	if err == nil || !strings.Contains(err.Error(), "writes buffer a0 of device 0") {
		t.Errorf("kernel on device 1 writing device 0: %v", err)
	}
	err = b.Launch(s2, &executor.LaunchDesc{Name: "c", Kernel: "copy", Reads: arg(a0, "a0"), Writes: arg(a1, "a1")})
	if err == nil || !strings.Contains(err.Error(), "peer copy from device 0 to device 1 on stream") {
		t.Errorf("peer copy on device 2: %v", err)
	}
	if err := b.Launch(s1, &executor.LaunchDesc{Name: "c", Kernel: "copy", Reads: arg(a0, "a0"), Writes: arg(a1, "a1")}); err != nil {
		t.Errorf("peer copy on the destination's stream: %v", err)
	}
	if _, err := b.NewStreamOn(3, ""); err == nil {
		t.Error("a stream on device 3 of 3")
	}
	if err := b.Synchronize(); err != nil {
		t.Error(err)
	}
	for _, h := range []executor.Stream{s1, s2} {
		b.DestroyStream(h)
	}
	b.Free(a0)
	b.Free(a1)
}

// floats is n float32 words of v.
func floats(v float32, n int) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// TestDeadlockTwice: two collectives issued apart in one Synchronize, each
// rank 1 waiting for an event recorded after its rank 0: the simulator
// reports both deadlocks and returns.
func TestDeadlockTwice(t *testing.T) {
	b := sim.New(sim.Options{Devices: 2})
	defer b.Close()
	s0, _ := b.NewStreamOn(0, "")
	s1, _ := b.NewStreamOn(1, "")
	g0, _ := b.Alloc(executor.BufferDesc{Name: "g0", Bytes: 64, Where: contract.WhereDevice})
	g1, _ := b.Alloc(executor.BufferDesc{Name: "g1", Bytes: 64, Where: contract.WhereDevice, Device: 1})
	rank := func(group, r int, g executor.Buffer, name string) *executor.LaunchDesc {
		a := []executor.Arg{{Buffer: g, Name: name, Bytes: 64}}
		return &executor.LaunchDesc{Name: fmt.Sprintf("c%d/%d", group, r), Kernel: "all_reduce", Args: map[string]any{"op": "sum"}, Reads: a, Writes: a,
			Collective: &plan.Collective{Group: group, Op: "all_reduce", Reduce: "sum", Rank: r, Ranks: 2}}
	}
	var evs []executor.Event
	for group := range 2 {
		e, _ := b.NewEvent()
		evs = append(evs, e)
		if err := b.Launch(s0, rank(group, 0, g0, "g0")); err != nil {
			t.Fatal(err)
		}
		b.Record(e, s0)
		b.Wait(s1, e)
		if err := b.Launch(s1, rank(group, 1, g1, "g1")); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- b.Synchronize() }()
	select {
	case err := <-done:
		// Both collectives deadlock; how many releases report them depends
		// on when the watcher sees the streams stuck, so each must be named.
		if err == nil || !strings.Contains(err.Error(), "c0/0 (stream 0, device 0) waited for c0/1") || !strings.Contains(err.Error(), "c1/0 (stream 0, device 0) waited for c1/1") {
			t.Errorf("Synchronize = %v, want the deadlocks of c0 and c1", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Synchronize hangs after the first deadlock")
	}
	for _, e := range evs {
		b.DestroyEvent(e)
	}
	b.DestroyStream(s0)
	b.DestroyStream(s1)
	b.Free(g0)
	b.Free(g1)
}
