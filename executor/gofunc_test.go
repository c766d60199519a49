package executor_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/planner"
)

// funcSpec: fill x with 3, a Go-function stage "square" (on its own
// stream) writes y = x², and a copy reads y into the output.
func funcSpec() *dag.Spec {
	n := int64(4 * 64)
	all := func(b string) []dag.Access { return []dag.Access{{Buffer: b, Bytes: n}} }
	return &dag.Spec{Version: 1, Name: "func", Sync: dag.SyncAuto,
		Buffers: []dag.BufferSpec{{Name: "x", Bytes: n}, {Name: "y", Bytes: n}, {Name: "out", Bytes: n, Role: dag.RoleOutput}},
		Stages: []dag.StageSpec{
			{Name: "fill", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 3.0}, Writes: all("x"), Stream: "a"},
			{Name: "sq", Kernel: "square", Reads: all("x"), Writes: all("y"), Stream: "b"},
			{Name: "cp", Kernel: dag.BuiltinCopy, Reads: all("y"), Writes: all("out"), Stream: "a"},
		}}
}

func square(c *executor.FuncCall) error {
	if c.Stream != 0 || len(c.Reads) != 1 || len(c.Writes) != 1 || c.Reads[0].Name != "x" {
		return errors.New("unexpected call")
	}
	in, out := c.Reads[0].Host, c.Writes[0].Host
	for i := 0; i+4 <= len(out); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(in[i:]))
		binary.LittleEndian.PutUint32(out[i:], math.Float32bits(v*v))
	}
	return nil
}

// A Go-function stage is ordered like any other stage (the planner puts
// waits around it across streams) and runs in stream order on the
// simulator, race-free, over several iterations.
func TestFuncStage(t *testing.T) {
	p := mustPlan(t, funcSpec(), planner.Options{})
	if p.Stats.Waits == 0 {
		t.Fatal("no wait around the Go stage on its own stream")
	}
	for seed := int64(1); seed <= 4; seed++ {
		b := sim.New(sim.Options{Seed: seed})
		res, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: 3, Funcs: map[string]executor.StageFunc{"square": square}})
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		if string(res.Outputs[0].Data) != string(floats(9, 64)) {
			t.Fatalf("output is not 9s")
		}
	}
	b := sim.New(sim.Options{})
	defer b.Close()
	if _, err := executor.Run(context.Background(), p, b, executor.Options{}); err == nil || !strings.Contains(err.Error(), "square") {
		t.Errorf("no Funcs: %v", err)
	}
	failing := func(*executor.FuncCall) error { return errors.New("boom") }
	if _, err := executor.Run(context.Background(), p, b, executor.Options{Funcs: map[string]executor.StageFunc{"square": failing}}); err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "sq") {
		t.Errorf("failing function: %v", err)
	}
	if _, err := executor.Run(context.Background(), p, plainBackend{b}, executor.Options{Funcs: map[string]executor.StageFunc{"square": square}}); !errors.Is(err, executor.ErrNoFuncs) {
		t.Errorf("backend without Go stages: %v", err)
	}
}
