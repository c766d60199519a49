package verify

import (
	"github.com/dagrun/dagrun/internal/spectest"
	"github.com/dagrun/dagrun/plan"
)

var dropOp = spectest.DropOp

// waitOps lists p's waits as (stream, index in its ops).
func waitOps(p *plan.Plan) [][2]int {
	var waits [][2]int
	for s := range p.Streams {
		for j, o := range p.Streams[s].Ops {
			if o.Kind == plan.OpWait {
				waits = append(waits, [2]int{s, j})
			}
		}
	}
	return waits
}
