package dagrun_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dagrun/dagrun"
)

// Build a spec in Go, Taskflow/CUDASTF style: declare the buffers, then
// each stage with what it reads and writes. Two cameras share one weights
// buffer; Plan derives the order from the accesses, puts the cameras on
// their own streams and proves the plan race-free.
func ExampleNewSpec() {
	b := dagrun.NewSpec("two-cameras")
	w := b.Buffer("weights", 4096).Input().Random(7)
	for _, cam := range []string{"cam0", "cam1"} {
		in := b.Buffer(cam+"/frame", 4096).Input().Random(1)
		feat := b.Buffer(cam+"/feat", 4096)
		out := b.Buffer(cam+"/out", 4096).Output()
		b.Stage(cam+"/pre", "scale").Reads(in).Writes(feat).Arg("a", 0.5).Duration(20)
		b.Stage(cam+"/infer", "mix").Reads(feat, w).Writes(out).Duration(100)
	}
	plan, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d stages on %d streams, %d waits\n", plan.Stats.Stages, plan.Stats.Streams, plan.Stats.Waits)
	res, err := dagrun.Run(context.Background(), plan, dagrun.RunOptions{Backend: dagrun.BackendSim})
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range res.Outputs {
		fmt.Println(o.Name, o.Bytes, o.Checksum)
	}

	// A mistake is found by Plan, named by its place in the spec.
	bad := dagrun.NewSpec("bad")
	x := bad.Buffer("x", 64)
	bad.Stage("a", "fill").Writes(x.Range(32, 96)).Arg("value", 1.0)
	_, err = dagrun.Plan(bad.Spec(), dagrun.PlanOptions{})
	fmt.Println(err)
	// Output:
	// 4 stages on 2 streams, 0 waits
	// cam0/out 4096 19e2009f6557b03f
	// cam1/out 4096 801b8b8515edada2
	// stages[0].writes: stage a: writes range x[32:96] is out of range of buffer x (64 bytes)
	// 	hint: buffer x is 64 bytes: pass x.Range(start, end) with end ≤ 64
}

// A data-parallel step built in Go: a gradient buffer per device, each
// device's backward stage on its buffers' device (no OnDevice needed), an
// all-reduce of the gradients, then each device's optimizer step; every
// device ends with the same weights.
func ExampleSpecBuilder_Devices() {
	b := dagrun.NewSpec("data-parallel").Devices(2)
	var grads []dagrun.Buf
	for d := range 2 {
		x := b.Tensor(fmt.Sprintf("x%d", d), "f32", []int64{1024}).Input().Fill(float64(d + 1)).InDevice(d)
		g := b.Tensor(fmt.Sprintf("grad%d", d), "f32", []int64{1024}).InDevice(d)
		b.Stage(fmt.Sprintf("backward%d", d), "scale").Reads(x).Writes(g).Arg("a", 0.25).Duration(400)
		grads = append(grads, g)
	}
	b.Stage("reduce", "all_reduce").Reads(grads...).Writes(grads...).Arg("op", "sum")
	for d := range 2 {
		w := b.Tensor(fmt.Sprintf("w%d", d), "f32", []int64{1024}).Output().Fill(1).InDevice(d)
		b.Stage(fmt.Sprintf("step%d", d), "axpy").Reads(grads[d], w).Writes(w).Arg("a", -0.1)
	}
	plan, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, st := range plan.Streams {
		fmt.Printf("%s on device %d\n", st.Name, st.Device)
	}
	res, err := dagrun.Run(context.Background(), plan, dagrun.RunOptions{Backend: dagrun.BackendSim})
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range res.Outputs {
		fmt.Println(o.Name, o.Checksum)
	}
	// Output:
	// s0 on device 0
	// s1 on device 1
	// w0 d58e2d61a604c325
	// w1 d58e2d61a604c325
}
