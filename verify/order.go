package verify

import "github.com/dagrun/dagrun/plan"

// Order is the happens-before order of a plan's ops as the verifier's
// clocks give it (hb.go), for passes that ask whether one op
// happens-before another. Ops are numbered stream by stream: op j of
// stream s is OpBase[s] + j.
type Order struct {
	OpBase   []int32 // per stream, the number of its op 0 (len(Streams)+1 entries)
	OpStream []int32 // per op, its stream
	OpIssue  []int32 // per op, its position in IssueOrder
	// OpCaptured, per op: for a wait, the record op it orders after (the
	// latest record of its event issued before it), or -1; -1 for others.
	OpCaptured []int32
	LaunchOp   []int32 // per stage, its launch op
	// Over is set when the clocks stopped at their bound
	// (WorkBoundError's): the order answers nothing.
	Over bool
	v    *verifier
}

// NewOrder builds p's order. p must be valid (plan.Plan.Validate).
func NewOrder(p *plan.Plan) *Order {
	v := &verifier{p: p}
	v.clocks()
	if v.hb.over {
		return &Order{Over: true, v: v}
	}
	return &Order{OpBase: v.opBase, OpStream: v.opStream, OpIssue: v.opIssue, OpCaptured: v.opCaptured, LaunchOp: v.launchOp, v: v}
}

// OpIndex is op g's index in its stream's ops.
func (o *Order) OpIndex(g int32) int32 { return g - o.OpBase[o.OpStream[g]] }

// Before reports whether op a happens-before op b.
func (o *Order) Before(a, b int32) bool { return o.v.opHB(a, b) }

// Isolated is the isolation rule's answer for wait op (numbered g) of
// capture ck, whose region begins at issue position begin (joins:
// plan.Plan.CaptureJoins): what the wait waits for when that is not a
// record made in the capture, or "" (verifier.isolated).
func (o *Order) Isolated(ck int, op plan.Op, g int32, begin int, joins []int) string {
	return o.v.isolated(ck, op, g, begin, joins)
}
