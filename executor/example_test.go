package executor_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
)

// A plan built by hand: stream 0 fills x with 1.5, records event 0; stream 1
// waits on it and scales x by 2 into y. The simulator runs it with its race
// detector on.
func ExampleRun() {
	x := []plan.Access{{Buffer: "x", Bytes: 16}}
	y := []plan.Access{{Buffer: "y", Bytes: 16}}
	p := &plan.Plan{
		Version: plan.PlanVersion,
		Buffers: []plan.Buffer{
			{Name: "x", Bytes: 16, Where: "device", Role: "temp"},
			{Name: "y", Bytes: 16, Where: "host_pinned", Role: "output"},
		},
		Stages: []plan.Stage{
			{Name: "fill", Stream: 0, Kernel: "fill", Args: map[string]any{"value": 1.5}, Writes: x},
			{Name: "double", Stream: 1, Kernel: "scale", Args: map[string]any{"a": 2.0}, Reads: x, Writes: y},
		},
		Streams: []plan.Stream{
			{ID: 0, Name: "s0", Ops: []plan.Op{{Kind: plan.OpLaunch, Stage: 0}, {Kind: plan.OpRecord, Event: 0}}},
			{ID: 1, Name: "s1", Ops: []plan.Op{{Kind: plan.OpWait, Event: 0}, {Kind: plan.OpLaunch, Stage: 1}}},
		},
		IssueOrder: [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}},
		Events:     1,
	}
	b := sim.New(sim.Options{Seed: 1})
	res, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := b.Close(); err != nil {
		fmt.Println(err)
	}
	for _, o := range res.Outputs {
		var v []float32
		for i := 0; i < len(o.Data); i += 4 {
			v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(o.Data[i:])))
		}
		fmt.Printf("%s = %v checksum %s\n", o.Name, v, o.Checksum)
	}
	fmt.Printf("%d launches, %d records, %d waits\n", res.Launches, res.Records, res.Waits)
	// Output:
	// y = [3 3 3 3] checksum 7722b8c7f0112965
	// 4 launches, 6 records, 5 waits
}
