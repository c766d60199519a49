package planner

import "github.com/dagrun/dagrun/plan"

// WithIteration returns p when it has iteration info, else a copy of p
// whose iterations are separated by a barrier written as plan ops, so that
// every plan can be issued iteration after iteration by one mechanism (the
// executor, Unroll, Verify):
//
//   - at the start of an iteration, stream 0 waits (lag 1) on an event each
//     other stream records after its last op of the previous iteration,
//     then records a fork event that every other stream waits on before
//     its first op;
//   - at the end of an iteration, every stream but stream 0 records its end
//     event.
//
// Everything of iteration i then happens-before everything of iteration
// i+1 (2·(S−1) waits and S records per iteration for S streams), one
// stream set, one slot per event, in-flight bound 1, Iteration.Barrier set.
// It is correct for any race-free single iteration and as concurrent as
// the plan within an iteration; iterations do not overlap. Stats count the
// barrier's ops: Events its S events, Waits its S−1 fork waits, and
// Iteration.CrossWaits its S−1 lagged waits. p is not changed.
func WithIteration(p *plan.Plan) *plan.Plan {
	if p.Iteration != nil {
		return p
	}
	q := *p
	S := len(p.Streams)
	q.Iteration = &plan.Iteration{StreamSets: 1, InFlight: 1, Barrier: true}
	if S <= 1 {
		q.Iteration.Slots = ones(p.Events)
		return &q
	}
	end := func(s int) int { return p.Events + s - 1 } // s ≥ 1
	fork := p.Events + S - 1
	q.Events = p.Events + S
	q.Iteration.Slots = ones(q.Events)
	q.Iteration.CrossWaits = S - 1
	q.Streams = make([]plan.Stream, S)
	q.IssueOrder = make([][2]int, 0, len(p.IssueOrder)+3*S)
	add := func(s int, o plan.Op) {
		q.IssueOrder = append(q.IssueOrder, [2]int{s, len(q.Streams[s].Ops)})
		q.Streams[s].Ops = append(q.Streams[s].Ops, o)
	}
	for s, str := range p.Streams {
		q.Streams[s] = str
		q.Streams[s].Ops = make([]plan.Op, 0, len(str.Ops)+2)
	}
	q.Streams[0].Ops = make([]plan.Op, 0, len(p.Streams[0].Ops)+S)
	for s := 1; s < S; s++ {
		add(0, plan.Op{Kind: plan.OpWait, Event: end(s), Lag: 1})
	}
	add(0, plan.Op{Kind: plan.OpRecord, Event: fork})
	for s := 1; s < S; s++ {
		add(s, plan.Op{Kind: plan.OpWait, Event: fork})
	}
	for _, so := range p.IssueOrder {
		add(so[0], p.Streams[so[0]].Ops[so[1]])
	}
	for s := 1; s < S; s++ {
		add(s, plan.Op{Kind: plan.OpRecord, Event: end(s)})
	}
	q.Stats.Events = q.Events
	q.Stats.Waits = p.Stats.Waits + S - 1
	return &q
}

func ones(n int) []int {
	xs := make([]int, n)
	for i := range xs {
		xs[i] = 1
	}
	return xs
}
