package executor_test

import (
	"strings"
	"testing"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
)

// TestAllocProducerOutsideArena: a temp its producer allocates (alloc:
// producer) gets no arena offset, the arena shrinks by the bytes it took
// there, and the plan verifies and runs on the simulator with its own
// allocation for it, giving the same outputs as the plan without the mark,
// statically and with --alloc dynamic.
func TestAllocProducerOutsideArena(t *testing.T) {
	shared := planYAML(t, chainSpec, planner.Options{})
	text := strings.Replace(chainSpec, "{name: a2,  bytes: 65536}", "{name: a2,  bytes: 65536, alloc: producer}", 1)
	p := planYAML(t, text, planner.Options{})
	var a2 *plan.Buffer
	for i := range p.Buffers {
		if p.Buffers[i].Name == "a2" {
			a2 = &p.Buffers[i]
		}
	}
	if a2 == nil || a2.Alloc != plan.AllocProducer || a2.ArenaOffset != nil {
		t.Fatalf("a2: %+v, want alloc producer and no arena offset", a2)
	}
	// The chain a1 → a2 → a3 needs two 64 KiB slots and b1 → b2 two 32 KiB
	// ones; without a2, a1 and a3 share one slot.
	if shared.Stats.ArenaBytes != 196608 || p.Stats.ArenaBytes != 131072 {
		t.Errorf("arena %d bytes, with a2 producer %d: want 196608 and 131072", shared.Stats.ArenaBytes, p.Stats.ArenaBytes)
	}
	for _, iters := range []int{1, 3} {
		want := runOn(t, sim.New(sim.Options{Seed: 1}), shared, executor.Options{Iterations: iters})
		c := &counting{Backend: sim.New(sim.Options{Seed: 2})}
		if got := runOn(t, c, p, executor.Options{Iterations: iters}); got["out"] != want["out"] {
			t.Errorf("%d iterations: out %s, without producer %s", iters, got["out"], want["out"])
		}
		// in, out, the arena and a2.
		if c.allocs != 4 || c.arena != p.Stats.ArenaBytes {
			t.Errorf("static: %d allocations, arena %d bytes; want 4 and %d", c.allocs, c.arena, p.Stats.ArenaBytes)
		}
		c = &counting{Backend: sim.New(sim.Options{Seed: 3})}
		if got := runOn(t, c, p, executor.Options{Iterations: iters, Alloc: executor.AllocDynamic}); got["out"] != want["out"] {
			t.Errorf("%d iterations: dynamic out %s, want %s", iters, got["out"], want["out"])
		}
		// a2 has bytes of its own for the run; the other four temps are
		// allocated stream-ordered at their first use.
		if c.asyncAllocs != 4*iters || c.allocs != 3 {
			t.Errorf("dynamic: %d stream-ordered allocations, %d others; want %d and 3", c.asyncAllocs, c.allocs, 4*iters)
		}
	}
}
