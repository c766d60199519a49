package dagrun

import (
	"context"
	"testing"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
)

// countingSim is the simulator counting its stream-ordered allocations.
type countingSim struct {
	*sim.Backend
	allocs, frees int
}

func (c *countingSim) AllocAsync(d executor.BufferDesc, s executor.Stream) (executor.Buffer, error) {
	c.allocs++
	return c.Backend.AllocAsync(d, s)
}

func (c *countingSim) FreeAsync(b executor.Buffer, s executor.Stream) error {
	c.frees++
	return c.Backend.FreeAsync(b, s)
}

// Every executor option reaches the executor: Alloc dynamic allocates the
// spec's temps stream-ordered, static none; Iterations and SyncEach too.
func TestRunPassesExecutorOptions(t *testing.T) {
	var last *countingSim
	openBackend = func(name Backend, o RunOptions) (executor.Backend, error) {
		last = &countingSim{Backend: sim.New(sim.Options{Seed: o.Seed})}
		return last, nil
	}
	defer func() { openBackend = NewBackend }()
	spec, err := Load("specs/seed/three-stage.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Plan(spec, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, alloc := range []string{AllocStatic, AllocDynamic} {
		res, err := Run(context.Background(), p, RunOptions{Alloc: alloc, Iterations: 3})
		if err != nil {
			t.Fatalf("alloc %s: %v", alloc, err)
		}
		dynamic := alloc == AllocDynamic
		if (last.allocs > 0) != dynamic || last.allocs != last.frees {
			t.Errorf("alloc %s: %d AllocAsync, %d FreeAsync calls", alloc, last.allocs, last.frees)
		}
		if dynamic && last.allocs%3 != 0 {
			t.Errorf("alloc dynamic: %d allocations over 3 iterations, want a multiple of 3", last.allocs)
		}
		if res.Backend != "sim" || res.Launches != 3*len(p.Stages) {
			t.Errorf("alloc %s: backend %q, %d launches, want sim and %d", alloc, res.Backend, res.Launches, 3*len(p.Stages))
		}
		sums = append(sums, res.Outputs[0].Checksum)
	}
	if sums[0] != sums[1] {
		t.Errorf("static %s, dynamic %s", sums[0], sums[1])
	}
}
