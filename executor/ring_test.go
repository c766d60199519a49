package executor_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

const ringWords = 256

// ringSpec is the video service's shape on built-ins: the host fills the
// pinned frame_h; up copies it to the device, pre scales it by 2, down
// copies the result to the pinned res_h. With pin, up and down run on copy
// streams and pre on a compute stream (cross-iteration waits needed);
// without, the planner puts the chain on one stream per stream set.
func ringSpec(copies int, pin bool) *dag.Spec {
	s := &dag.Spec{Version: 1, Name: "ring", Sync: dag.SyncAuto}
	n := int64(4 * ringWords)
	buf := func(name, where, role string) {
		s.Buffers = append(s.Buffers, dag.BufferSpec{Name: name, Bytes: n, Where: where, Role: role, Copies: copies})
	}
	buf("frame_h", dag.WhereHostPinned, dag.RoleInput)
	buf("frame", dag.WhereDevice, dag.RoleTemp)
	buf("x", dag.WhereDevice, dag.RoleTemp)
	buf("res_h", dag.WhereHostPinned, dag.RoleOutput)
	all := func(b string) []dag.Access { return []dag.Access{{Buffer: b, Bytes: n}} }
	st := func(name, kernel, stream string, args map[string]any, r, w string) {
		sg := dag.StageSpec{Name: name, Kernel: kernel, Args: args, Reads: all(r), Writes: all(w), DurationUS: 5}
		if pin {
			sg.Stream = stream
		}
		s.Stages = append(s.Stages, sg)
	}
	st("up", dag.BuiltinCopy, "h2d", nil, "frame_h", "frame")
	st("pre", dag.BuiltinScale, "comp", map[string]any{"a": 2.0}, "frame", "x")
	st("down", dag.BuiltinCopy, "d2h", nil, "x", "res_h")
	return s
}

func mustPlan(t testing.TB, s *dag.Spec, o planner.Options) *plan.Plan {
	t.Helper()
	o.Check = true
	p, err := planner.Build(s, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func floats(v float32, n int) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// ringIO feeds iteration i the value i+1 and checks that every output is
// 2(i+1), counting wrong iterations.
type ringIO struct {
	got   []int
	wrong int
}

func (r *ringIO) options(iters int) executor.Options {
	return executor.Options{
		Iterations: iters,
		Inputs: map[string]executor.InputFunc{"frame_h": func(it int, dst []byte) error {
			copy(dst, floats(float32(it+1), ringWords))
			return nil
		}},
		Outputs: map[string]executor.OutputFunc{"res_h": func(it int, data []byte) error {
			r.got = append(r.got, it)
			for i := 0; i+4 <= len(data); i += 4 {
				if math.Float32frombits(binary.LittleEndian.Uint32(data[i:])) != float32(2*(it+1)) {
					r.wrong++
					break
				}
			}
			return nil
		}},
	}
}

// A ring pipeline streams inputs and outputs through pinned staging copies
// on the simulator: every iteration's output is right, delivered once and
// in order, the detector sees no race (host accesses included), and no
// handle leaks.
func TestRingRunStreamsIO(t *testing.T) {
	for _, c := range []struct {
		copies int
		pin    bool
	}{{1, false}, {2, false}, {3, false}, {1, true}, {2, true}, {3, true}} {
		p := mustPlan(t, ringSpec(c.copies, c.pin), planner.Options{})
		for seed := int64(1); seed <= 3; seed++ {
			b := sim.New(sim.Options{Seed: seed})
			var io ringIO
			o := io.options(24)
			var prog []int
			o.Progress = func(it int, lat time.Duration) { prog = append(prog, it) }
			res, err := executor.Run(context.Background(), p, b, o)
			if err != nil {
				t.Fatalf("copies %d pin %v seed %d: %v", c.copies, c.pin, seed, err)
			}
			if cerr := b.Close(); cerr != nil {
				t.Fatal(cerr)
			}
			if io.wrong != 0 || len(io.got) != 24 {
				t.Fatalf("copies %d pin %v: %d wrong of %d delivered", c.copies, c.pin, io.wrong, len(io.got))
			}
			for i := range 24 {
				if io.got[i] != i || prog[i] != i {
					t.Fatalf("delivery order %v, progress %v", io.got, prog)
				}
			}
			if len(res.Latencies) != 24 {
				t.Errorf("%d latencies, want 24", len(res.Latencies))
			}
			if want := floats(2*24, ringWords); string(res.Outputs[0].Data) != string(want) {
				t.Errorf("final output is not iteration 23's")
			}
		}
	}
}

// Without host I/O a ring plan runs with its planned waits and no barrier:
// it issues the plan's cross waits (fewer ops than the barrier's joins) and
// the detector finds nothing over many iterations.
func TestRingRunNoBarrier(t *testing.T) {
	p := mustPlan(t, ringSpec(2, true), planner.Options{StreamSets: 1})
	if p.Iteration.CrossWaits == 0 {
		t.Fatal("pinned ring plan has no cross wait")
	}
	b := sim.New(sim.Options{Seed: 7})
	defer b.Close()
	res, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: 50})
	if err != nil {
		t.Fatal(err)
	}
	perIter := 0
	for _, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == plan.OpWait {
				perIter++
			}
		}
	}
	if res.Waits > 50*perIter || res.Launches != 50*len(p.Stages) {
		t.Errorf("waits %d (plan has %d per iteration), launches %d", res.Waits, perIter, res.Launches)
	}
}

// The seed's bug across iterations: with copies: 2 and the cross-iteration
// wait removed by hand, the detector reports the race (a batch overwrites
// data the previous batch still reads), under every seed.
func TestRingRunMissingCrossWaitRaces(t *testing.T) {
	p := mustPlan(t, ringSpec(2, true), planner.Options{StreamSets: 1})
	q := dropLagWaits(p)
	if verify.Verify(q) == nil {
		t.Fatal("verifier accepts the plan without cross waits")
	}
	for seed := int64(1); seed <= 5; seed++ {
		b := sim.New(sim.Options{Seed: seed})
		_, err := executor.Run(context.Background(), q, b, executor.Options{Iterations: 10})
		b.Close()
		var re *executor.RaceError
		if !errors.As(err, &re) {
			t.Fatalf("seed %d: %v, want a race", seed, err)
		}
	}
}

// dropLagWaits returns p without its cross-iteration waits.
func dropLagWaits(p *plan.Plan) *plan.Plan {
	return p.WithoutOps(func(_, _ int, o plan.Op) bool { return o.Kind == plan.OpWait && o.Lag > 0 })
}

// noHostWaits is the simulator with host waits that do not wait: the
// pinned-staging bug (the host refills a copy the upload still reads).
type noHostWaits struct{ *sim.Backend }

func (noHostWaits) SyncEvent(executor.Event) error          { return nil }
func (noHostWaits) QueryEvent(executor.Event) (bool, error) { return true, nil }

// Host accesses are checked too: without the host's waits the detector
// reports the host's write of a staging copy racing the upload (or its read
// of an output racing the download).
func TestRingRunMissingHostWaitRaces(t *testing.T) {
	p := mustPlan(t, ringSpec(2, false), planner.Options{})
	b := sim.New(sim.Options{Seed: 3})
	defer b.Close()
	var io ringIO
	_, err := executor.Run(context.Background(), p, noHostWaits{b}, io.options(12))
	var re *executor.RaceError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "host") {
		t.Fatalf("%v, want a race with the host", err)
	}
}

// countingSync counts the host's waits and the queries that found an event done.
type countingSync struct {
	*sim.Backend
	syncs atomic.Int64
}

func (c *countingSync) SyncEvent(e executor.Event) error {
	c.syncs.Add(1)
	return c.Backend.SyncEvent(e)
}

func (c *countingSync) QueryEvent(e executor.Event) (bool, error) {
	ok, err := c.Backend.QueryEvent(e)
	if ok {
		c.syncs.Add(1)
	}
	return ok, err
}

// The in-flight bound makes the host wait: with InFlight 1 the host waits
// for (or finds complete) every previous iteration before issuing the next.
func TestRingRunInFlight(t *testing.T) {
	p := mustPlan(t, ringSpec(2, false), planner.Options{})
	b := &countingSync{Backend: sim.New(sim.Options{Seed: 1})}
	defer b.Close()
	res, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: 10, InFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n := b.syncs.Load(); n < 9 {
		t.Errorf("%d host waits or completed queries with InFlight 1 over 10 iterations, want ≥ 9", n)
	}
	if len(res.Latencies) != 10 {
		t.Errorf("%d latencies", len(res.Latencies))
	}
	if _, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: 2, InFlight: -1}); err == nil {
		t.Error("InFlight -1: no error")
	}
}

// Host I/O is checked before anything runs: unknown or device buffers, and
// backends without host waits.
func TestRingRunIOErrors(t *testing.T) {
	p := mustPlan(t, ringSpec(2, false), planner.Options{})
	in := func(int, []byte) error { return nil }
	for _, c := range []struct {
		o    executor.Options
		want string
	}{
		{executor.Options{Iterations: 2, Inputs: map[string]executor.InputFunc{"nope": in}}, "no such buffer"},
		{executor.Options{Iterations: 2, Inputs: map[string]executor.InputFunc{"frame": in}}, "host_pinned"},
	} {
		b := sim.New(sim.Options{})
		_, err := executor.Run(context.Background(), p, b, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
		if cerr := b.Close(); cerr != nil {
			t.Errorf("leak after error: %v", cerr)
		}
	}
	_, err := executor.Run(context.Background(), p, plainBackend{sim.New(sim.Options{})}, executor.Options{Iterations: 2, Inputs: map[string]executor.InputFunc{"frame_h": in}})
	if !errors.Is(err, executor.ErrNoHostSync) {
		t.Errorf("backend without host waits: %v", err)
	}
	// Plans without iteration info stream too, in the barrier form.
	q := dropLagWaits(p)
	q.Iteration = nil
	if _, err := executor.Run(context.Background(), q, sim.New(sim.Options{}), executor.Options{Iterations: 3, Inputs: map[string]executor.InputFunc{"frame_h": in}}); err != nil {
		t.Errorf("host I/O on a plan without iteration info: %v", err)
	}
}

// plainBackend hides every optional interface of the simulator.
type plainBackend struct{ executor.Backend }

// Plans without iteration info (older plan files) run in the barrier form of
// planner.WithIteration, rings included, and give the outputs of the
// planned iterations.
func TestRingRunOldPlanBarrier(t *testing.T) {
	p := mustPlan(t, ringSpec(1, true), planner.Options{})
	q := dropLagWaits(p)
	q.Iteration = nil
	b := sim.New(sim.Options{Seed: 2})
	defer b.Close()
	res, err := executor.Run(context.Background(), q, b, executor.Options{Iterations: 5})
	if err != nil {
		t.Fatal(err)
	}
	// The barrier joins every stream onto stream 0 and forks back out.
	if res.Waits < 4*2*(len(q.Streams)-1) {
		t.Errorf("%d waits: no barrier?", res.Waits)
	}
	r := mustPlan(t, ringSpec(2, true), planner.Options{})
	want, err := executor.Run(context.Background(), r, b, executor.Options{Iterations: 5})
	if err != nil {
		t.Fatal(err)
	}
	r2 := dropLagWaits(r)
	r2.Iteration = nil
	got, err := executor.Run(context.Background(), r2, b, executor.Options{Iterations: 5})
	if err != nil {
		t.Fatalf("ring without iteration info: %v", err)
	}
	if !reflect.DeepEqual(outputSums(got), outputSums(want)) {
		t.Errorf("ring without iteration info: outputs %v, planned %v", outputSums(got), outputSums(want))
	}
}

func ExampleRun_ring() {
	// Two cameras' frames through a ring of 2 pinned staging copies: the
	// host fills copy i%2 for iteration i after the upload of iteration
	// i−2 has read it, and reads each result after its download.
	s := &dag.Spec{Version: 1, Name: "ring", Sync: dag.SyncAuto,
		Buffers: []dag.BufferSpec{
			{Name: "in_h", Bytes: 16, Where: dag.WhereHostPinned, Role: dag.RoleInput, Copies: 2},
			{Name: "x", Bytes: 16, Copies: 2},
			{Name: "out_h", Bytes: 16, Where: dag.WhereHostPinned, Role: dag.RoleOutput, Copies: 2},
		},
		Stages: []dag.StageSpec{
			{Name: "scale", Kernel: dag.BuiltinScale, Args: map[string]any{"a": 10.0},
				Reads: []dag.Access{{Buffer: "in_h", Bytes: 16}}, Writes: []dag.Access{{Buffer: "x", Bytes: 16}}},
			{Name: "down", Kernel: dag.BuiltinCopy,
				Reads: []dag.Access{{Buffer: "x", Bytes: 16}}, Writes: []dag.Access{{Buffer: "out_h", Bytes: 16}}},
		}}
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		panic(err)
	}
	b := sim.New(sim.Options{})
	defer b.Close()
	_, err = executor.Run(context.Background(), p, b, executor.Options{
		Iterations: 4,
		Inputs: map[string]executor.InputFunc{"in_h": func(it int, dst []byte) error {
			copy(dst, floats(float32(it), 4))
			return nil
		}},
		Outputs: map[string]executor.OutputFunc{"out_h": func(it int, data []byte) error {
			fmt.Println(it, math.Float32frombits(binary.LittleEndian.Uint32(data)))
			return nil
		}},
	})
	fmt.Println(err)
	// Output:
	// 0 0
	// 1 10
	// 2 20
	// 3 30
	// <nil>
}

// outputSums returns the checksums of a run's outputs by name.
func outputSums(res *executor.Result) map[string]string {
	m := map[string]string{}
	for _, o := range res.Outputs {
		m[o.Name] = o.Checksum
	}
	return m
}
