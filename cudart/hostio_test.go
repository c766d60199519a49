//go:build cuda

package cudart

import (
	"context"
	"math"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
)

// ringPlan: the host fills pinned in_h; a copy stream uploads it; on a
// compute stream a Go stage copies it to y with its own driver call
// (cuMemcpyDtoDAsync on the stream it is given) and the built-in scale
// doubles y in place; a copy stream downloads y into pinned out_h. With
// copies: 2 and pinned streams, cross-iteration waits and host waits are
// all exercised.
func ringPlan(t *testing.T) *plan.Plan {
	t.Helper()
	const n = 4 * 1024
	all := func(b string) []dag.Access { return []dag.Access{{Buffer: b, Bytes: n}} }
	s := &dag.Spec{Version: 1, Name: "ring", Sync: dag.SyncAuto,
		Buffers: []dag.BufferSpec{
			{Name: "in_h", Bytes: n, Where: dag.WhereHostPinned, Role: dag.RoleInput, Copies: 2},
			{Name: "in", Bytes: n, Copies: 2},
			{Name: "y", Bytes: n, Copies: 2},
			{Name: "out_h", Bytes: n, Where: dag.WhereHostPinned, Role: dag.RoleOutput, Copies: 2},
		},
		Stages: []dag.StageSpec{
			{Name: "up", Kernel: dag.BuiltinCopy, Reads: all("in_h"), Writes: all("in"), Stream: "h2d"},
			{Name: "go", Kernel: "gocopy", Reads: all("in"), Writes: all("y"), Stream: "comp"},
			{Name: "scale", Kernel: dag.BuiltinScale, Args: map[string]any{"a": 2.0}, Reads: all("y"), Writes: all("y"), Stream: "comp"},
			{Name: "down", Kernel: dag.BuiltinCopy, Reads: all("y"), Writes: all("out_h"), Stream: "d2h"},
		}}
	p, err := planner.Build(s, planner.Options{StreamSets: 1, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A ring plan streams through pinned staging copies on the GPU with the
// host waiting on events (SyncEvent, QueryEvent), and a Go stage gets its
// stream and device pointers and queues its own driver call on them.
func TestGPURingHostIOAndGoStage(t *testing.T) {
	b := newTB(t, testOptions(t))
	defer b.Close()
	p := ringPlan(t)
	const iters = 200
	calls := 0
	gocopy := func(c *executor.FuncCall) error {
		calls++
		var s cu.Stream
		*(*uintptr)(unsafe.Pointer(&s)) = c.Stream
		if c.Stream == 0 || c.Reads[0].Ptr == 0 || c.Writes[0].Host != nil {
			t.Errorf("call %+v", c)
		}
		return cu.MemcpyDtoDAsync(cu.DevicePtr(c.Writes[0].Ptr), cu.DevicePtr(c.Reads[0].Ptr), c.Reads[0].Bytes, s)
	}
	wrong, got := 0, 0
	o := executor.Options{Iterations: iters, Funcs: map[string]executor.StageFunc{"gocopy": gocopy},
		Inputs: map[string]executor.InputFunc{"in_h": func(it int, dst []byte) error {
			for i := 0; i+4 <= len(dst); i += 4 {
				le.PutUint32(dst[i:], math.Float32bits(float32(it+i/4)))
			}
			return nil
		}},
		Outputs: map[string]executor.OutputFunc{"out_h": func(it int, data []byte) error {
			got++
			for i := 0; i+4 <= len(data); i += 4 {
				if math.Float32frombits(le.Uint32(data[i:])) != float32(2*(it+i/4)) {
					wrong++
					break
				}
			}
			return nil
		}}}
	res, err := executor.Run(context.Background(), p, b, o)
	if err != nil {
		t.Fatal(err)
	}
	if got != iters || wrong != 0 || calls != iters || len(res.Latencies) != iters {
		t.Fatalf("%d outputs, %d wrong, %d Go calls, %d latencies; want %d, 0, %d, %d", got, wrong, calls, len(res.Latencies), iters, iters, iters)
	}
	if ok, err := b.QueryEvent(nil); err == nil || ok {
		t.Error("QueryEvent(nil): no error")
	}
}
