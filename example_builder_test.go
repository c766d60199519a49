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
	w := b.Buffer("weights", 4096, dagrun.Input(), dagrun.Random(7))
	for _, cam := range []string{"cam0", "cam1"} {
		in := b.Buffer(cam+"/frame", 4096, dagrun.Input(), dagrun.Random(1))
		feat := b.Buffer(cam+"/feat", 4096)
		out := b.Buffer(cam+"/out", 4096, dagrun.Output())
		b.Stage(cam+"/pre", "scale", dagrun.Reads(in), dagrun.Writes(feat), dagrun.Arg("a", 0.5), dagrun.Duration(20)).
			Stage(cam+"/infer", "mix", dagrun.Reads(feat, w), dagrun.Writes(out), dagrun.Duration(100))
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
	bad.Stage("a", "fill", dagrun.Writes(x.Range(32, 64)), dagrun.Arg("value", 1.0))
	_, err = dagrun.Plan(bad.Spec(), dagrun.PlanOptions{})
	fmt.Println(err)
	// Output:
	// 4 stages on 2 streams, 0 waits
	// cam0/out 4096 19e2009f6557b03f
	// cam1/out 4096 801b8b8515edada2
	// stages[0].writes: stage a: writes range x[32:96] is out of range of buffer x (64 bytes)
	// 	hint: buffer x is 64 bytes; use a range within [0:64]
}
