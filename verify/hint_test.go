package verify_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/synth"
	"github.com/dagrun/dagrun/verify"
)

// TestVerifyAccessHint: a plan may carry an index of each access's
// buffer as a hint (plan.Memo.AccBuf); Verify and WaitReasons check each entry
// against the access's buffer name, so that a wrong hint changes neither
// the verdict, nor a race report, nor a wait's reason.
func TestVerifyAccessHint(t *testing.T) {
	s := synth.Layered(300)
	p, err := planner.Build(s, planner.Options{MaxStreams: 8})
	if err != nil {
		t.Fatal(err)
	}
	p.AccBuf = plan.AccessBuffers(p) // a right hint, made wrong below
	want := fmt.Sprint(p.WaitReasons())
	wrong := func(p *plan.Plan) {
		p.AccBuf = slices.Clone(p.AccBuf)
		for k := range p.AccBuf {
			p.AccBuf[k] = int32(k % 3) // other buffers' indices
		}
	}
	q := *p
	wrong(&q)
	if err := verify.Verify(&q); err != nil {
		t.Fatalf("a wrong hint made Verify fail a race-free plan: %v", err)
	}
	if got := fmt.Sprint(q.WaitReasons()); got != want {
		t.Fatal("a wrong hint changed the waits' reasons")
	}
	// A race: the first wait gone. The report is the one without a hint.
	racy := p.WithoutOps(func(s, j int, o plan.Op) bool { return o.Kind == plan.OpWait && s == p.Streams[len(p.Streams)-1].ID })
	racy.AccBuf = nil
	base := verify.Verify(racy)
	if base == nil {
		t.Fatal("dropping a stream's waits left the plan race-free: pick another test plan")
	}
	h := *racy
	h.AccBuf = p.AccBuf
	wrong(&h)
	if got := verify.Verify(&h); got == nil || got.Error() != base.Error() {
		t.Fatalf("with a wrong hint: %v\nwithout a hint: %v", got, base)
	}
}

// TestStrategyNames: the strategy names the checks read are the planner's
// and the spec's.
func TestStrategyNames(t *testing.T) {
	if verify.StrategyManual != dag.SyncManual || verify.StrategyHazardDAG != planner.StrategyHazardDAG {
		t.Errorf("verify reads strategies %q and %q, the planner names them %q and %q",
			verify.StrategyManual, verify.StrategyHazardDAG, dag.SyncManual, planner.StrategyHazardDAG)
	}
}
