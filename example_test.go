package dagrun_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dagrun/dagrun"
)

// Load a spec, plan it (streams, events, waits and lifetimes, verified race
// free) and run it on the simulator. The spec pins its three stages to three
// streams, so the plan needs 2 waits although the graph is one chain (lower
// bound 0 for an unpinned plan).
func Example() {
	spec, err := dagrun.Load("specs/seed/three-stage.yaml")
	if err != nil {
		log.Fatal(err)
	}
	plan, err := dagrun.Plan(spec, dagrun.PlanOptions{})
	if err != nil {
		log.Fatal(err)
	}
	st := plan.Stats
	fmt.Printf("%d stages on %d streams, %d waits (lower bound %d)\n", st.Stages, st.Streams, st.Waits, st.LowerBoundWaits)
	res, err := dagrun.Run(context.Background(), plan, dagrun.RunOptions{Backend: dagrun.BackendSim, Iterations: 3})
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range res.Outputs {
		fmt.Println(o.Name, o.Bytes, o.Checksum)
	}
	// Output:
	// 5 stages on 3 streams, 2 waits (lower bound 0)
	// result_h 4000 cdffd01ef6e1e1ec
}
