package dagrun_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"math"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
)

// Build a spec in Go with a stage that is a Go function, plan it and run it
// over a stream of inputs. Each frame goes through a pinned staging buffer
// with two copies (a ring: iteration i uses copy i%2), is uploaded, negated
// by the Go stage and downloaded; the host fills a copy only after the
// upload of two frames earlier has read it, and reads each result after its
// download. On the GPU the Go function gets its CUstream (c.Stream) and the
// device pointers of its buffers (c.Reads[0].Ptr) to queue its own kernels
// or library calls; on the simulator it works on the bytes (Host).
func Example_goStage() {
	const n = 16 // bytes: four float32s
	all := func(b string) []dag.Access { return []dag.Access{{Buffer: b, Bytes: n}} }
	spec := &dag.Spec{Version: 1, Name: "negate",
		Buffers: []dag.BufferSpec{
			{Name: "in_h", Bytes: n, Where: dag.WhereHostPinned, Role: dag.RoleInput, Copies: 2},
			{Name: "in", Bytes: n, Copies: 2},
			{Name: "out", Bytes: n, Copies: 2},
			{Name: "out_h", Bytes: n, Where: dag.WhereHostPinned, Role: dag.RoleOutput, Copies: 2},
		},
		Stages: []dag.StageSpec{
			{Name: "upload", Kernel: dag.BuiltinCopy, Reads: all("in_h"), Writes: all("in")},
			{Name: "negate", Kernel: "negate", Go: true, Reads: all("in"), Writes: all("out")},
			{Name: "download", Kernel: dag.BuiltinCopy, Reads: all("out"), Writes: all("out_h")},
		}}
	plan, err := dagrun.Plan(spec, dagrun.PlanOptions{})
	if err != nil {
		log.Fatal(err)
	}
	negate := func(c *executor.FuncCall) error {
		if c.Stream != 0 {
			return fmt.Errorf("on the GPU: launch a kernel on stream %#x over %#x", c.Stream, c.Reads[0].Ptr)
		}
		in, out := c.Reads[0].Host, c.Writes[0].Host
		for i := 0; i < len(out); i += 4 {
			binary.LittleEndian.PutUint32(out[i:], binary.LittleEndian.Uint32(in[i:])^0x80000000)
		}
		return nil
	}
	_, err = dagrun.Run(context.Background(), plan, dagrun.RunOptions{
		Backend: dagrun.BackendSim,
		Options: executor.Options{
			Iterations: 3,
			Funcs:      map[string]executor.StageFunc{"negate": negate},
			Inputs: map[string]dagrun.InputFunc{"in_h": func(frame int, dst []byte) error {
				binary.LittleEndian.PutUint32(dst, math.Float32bits(float32(frame)+0.5))
				return nil
			}},
			Outputs: map[string]dagrun.OutputFunc{"out_h": func(frame int, res []byte) error {
				fmt.Println("frame", frame, "→", math.Float32frombits(binary.LittleEndian.Uint32(res)))
				return nil
			}},
		},
	})
	fmt.Println("err:", err)
	// Output:
	// frame 0 → -0.5
	// frame 1 → -1.5
	// frame 2 → -2.5
	// err: <nil>
}
