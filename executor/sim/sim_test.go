package sim_test

import (
	"strings"
	"testing"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/backendtest"
	"github.com/dagrun/dagrun/executor/sim"
)

func TestConformance(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		backendtest.Run(t, func(t *testing.T) executor.Backend {
			return sim.New(sim.Options{Seed: seed})
		})
	}
}

// TestQueueBounded: a host issuing far ahead of a stream blocks once the
// stream holds MaxQueued ops, as CUDA's launch queue does, so memory does
// not grow with the ops issued; every op still runs, and a wrapping
// access is refused at Launch.
func TestQueueBounded(t *testing.T) {
	b := sim.New(sim.Options{Seed: 1})
	defer b.Close()
	s, err := b.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	x, err := b.Alloc(executor.BufferDesc{Name: "x", Bytes: 64, Where: contract.WhereDevice})
	if err != nil {
		t.Fatal(err)
	}
	l := &executor.LaunchDesc{Name: "m", Kernel: contract.BuiltinMix, Writes: []executor.Arg{{Name: "x", Buffer: x, Bytes: 64}}}
	const n = 20 * sim.MaxQueued
	for i := range n {
		if err := b.Launch(s, l); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 0 {
			for _, c := range sim.QueueCap(b) {
				if c > 4*sim.MaxQueued {
					t.Fatalf("after %d launches a stream's queue has capacity %d, want ≤ %d", i, c, 4*sim.MaxQueued)
				}
			}
		}
	}
	if err := b.Synchronize(); err != nil {
		t.Fatal(err)
	}
	wrap := &executor.LaunchDesc{Name: "w", Kernel: contract.BuiltinMix, Writes: []executor.Arg{{Name: "x", Buffer: x, Offset: 60, Bytes: 1<<63 - 60}}}
	if err := b.Launch(s, wrap); err == nil || !strings.Contains(err.Error(), "outside the buffer") {
		t.Errorf("wrapping access: %v, want it refused", err)
	}
}
