package dagrun_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"math"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
)

// A spec built in Go is checked as a spec file is: Plan reports every
// mistake at once, each naming the stage or buffer and the field by its
// path in the spec, and returns no plan.
func ExamplePlan_validation() {
	spec := &dag.Spec{Version: 1, Name: "mistakes",
		Buffers: []dag.BufferSpec{{Name: "x", Bytes: 4096}, {Name: "y", Bytes: 4096, Role: dag.RoleOutput}},
		Stages: []dag.StageSpec{
			{Name: "a", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 1.0}, Writes: []dag.Access{{Buffer: "x"}}},
			{Name: "b", Kernel: dag.BuiltinMix, Reads: []dag.Access{{Buffer: "nope"}}, Writes: []dag.Access{{Buffer: "y"}}},
			{Name: "c", Kernel: dag.BuiltinMix, Reads: []dag.Access{{Buffer: "x"}}, Writes: []dag.Access{{Buffer: "y", Offset: 2, Bytes: 64}}},
			{Name: "d", Kernel: dag.BuiltinScale, Reads: []dag.Access{{Buffer: "x"}}, Writes: []dag.Access{{Buffer: "y"}}},
		}}
	plan, err := dagrun.Plan(spec, dagrun.PlanOptions{})
	var list dag.ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			fmt.Printf("%s: %s\n", e.Pos, e.Msg)
		}
	}
	fmt.Println("plan:", plan)
	// Output:
	// stages[1].reads: stage b: reads unknown buffer "nope"
	// stages[2].writes: stage c: built-in mix needs 4-byte aligned accesses, a multiple of 4 bytes long; y[2:66] is not
	// stages[3]: stage d: built-in scale needs the argument a
	// plan: <nil>
}

// In Go as in YAML, an access without Bytes covers the whole buffer (or
// the rest of it from Offset), and a buffer given by dtype and shape has
// their size.
func ExamplePlan_defaults() {
	spec := &dag.Spec{Version: 1, Name: "defaults",
		Buffers: []dag.BufferSpec{
			{Name: "img", DType: "f32", Shape: []int64{3, 64, 64}},
			{Name: "out", Bytes: 3 * 64 * 64 * 4, Role: dag.RoleOutput},
		},
		Stages: []dag.StageSpec{
			{Name: "fill", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 0.5}, Writes: []dag.Access{{Buffer: "img"}}},
			{Name: "copy", Kernel: dag.BuiltinCopy, Reads: []dag.Access{{Buffer: "img"}}, Writes: []dag.Access{{Buffer: "out"}}},
		}}
	plan, err := dagrun.Plan(spec, dagrun.PlanOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("img:", plan.Buffers[0].Bytes, "bytes")
	r := plan.Stages[1].Reads[0]
	fmt.Printf("copy reads %s[%d:%d]\n", r.Buffer, r.Offset, r.Offset+r.Bytes)
	// Output:
	// img: 49152 bytes
	// copy reads img[0:49152]
}

// A spec file names a Go function as a stage's kernel with {go: name};
// Run binds it through RunOptions.Funcs, and says so when the binding is
// missing.
func ExampleRun_goKernel() {
	spec, err := dag.Load([]byte(`version: 1
buffers:
  - {name: x, bytes: 16}
  - {name: y, bytes: 16, role: output}
stages:
  - {name: fill, kernel: fill, args: {value: 2.0}, writes: [x]}
  - {name: square, kernel: {go: square}, reads: [x], writes: [y]}
`), "square.yaml", "")
	if err != nil {
		log.Fatal(err)
	}
	plan, err := dagrun.Plan(spec, dagrun.PlanOptions{})
	if err != nil {
		log.Fatal(err)
	}
	square := func(c *dagrun.FuncCall) error {
		in, out := c.Reads[0].Host, c.Writes[0].Host
		for i := 0; i < len(out); i += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(in[i:]))
			binary.LittleEndian.PutUint32(out[i:], math.Float32bits(v*v))
		}
		return nil
	}
	res, err := dagrun.Run(context.Background(), plan, dagrun.RunOptions{Backend: dagrun.BackendSim,
		Funcs: map[string]func(*dagrun.FuncCall) error{"square": square}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("y[0] =", math.Float32frombits(binary.LittleEndian.Uint32(res.Outputs[0].Data)))
	_, err = dagrun.Run(context.Background(), plan, dagrun.RunOptions{Backend: dagrun.BackendSim})
	fmt.Println(errors.Is(err, executor.ErrUnboundFunc), err)
	// Output:
	// y[0] = 4
	// true executor: stage square runs the Go function "square", which Options.Funcs does not bind: pass Funcs["square"] (RunOptions.Funcs): Go function not bound
}
