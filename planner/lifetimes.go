package planner

import "github.com/dagrun/dagrun/plan"

// lifetimes records, for each buffer, the streams whose stages touch it and
// the event after whose record each stream is done with it: the first
// record on that stream at or after its last launch that touches the
// buffer, or else one record appended at the end of the stream (at most one
// new event per stream, shared by all buffers, with one slot in
// Plan.Iteration when the spec's waits across iterations set it). It is the planned form of
// CUDA's record_stream: the bytes may be reused once every listed event has
// completed. Done lists are sorted by stream id. Cost: O(ops + accesses).
// docs/design/lifetimes.md has the design.
func lifetimes(st *state) error {
	p := st.plan
	ab := st.accesses()
	accOff, acc := ab.off, ab.buf
	// Walk each stream backwards: the first launch met that touches a
	// buffer is the stream's last use of it, and the latest record met so
	// far is the first at or after it. Two walks: count, then fill.
	type done struct{ buf, event int32 }
	mark := make([]int32, len(p.Buffers)) // stream+1 that last claimed the buffer
	var found []done
	perStream := make([][]done, len(p.Streams))
	for s := range p.Streams {
		ops := p.Streams[s].Ops
		next := int32(-1)
		found = found[:0]
		for j := len(ops) - 1; j >= 0; j-- {
			o := ops[j]
			switch o.Kind {
			case plan.OpRecord:
				next = int32(o.Event)
			case plan.OpLaunch:
				for _, b := range acc[accOff[o.Stage]:accOff[o.Stage+1]] {
					if b >= 0 && mark[b] != int32(s+1) {
						mark[b] = int32(s + 1)
						found = append(found, done{b, next})
					}
				}
			}
		}
		// A last use with no record after it: one record at the stream's end.
		end := int32(-1)
		for i, d := range found {
			if d.event < 0 {
				if end < 0 {
					end = int32(p.Events)
					p.Events++
					sops := &p.Streams[s].Ops
					p.IssueOrder = append(p.IssueOrder, [2]int{s, len(*sops)})
					*sops = append(*sops, plan.Op{Kind: plan.OpRecord, Event: int(end)})
					if p.Iteration != nil {
						// A spec's own waits across iterations set the
						// slots already (manual.go): one slot, as no
						// wait reads the end record across iterations.
						p.Iteration.Slots = append(p.Iteration.Slots, 1)
					}
				}
				found[i].event = end
			}
		}
		perStream[s] = append([]done(nil), found...)
	}
	nd := make([]int, len(p.Buffers))
	total := 0
	for _, f := range perStream {
		for _, d := range f {
			nd[d.buf]++
			total++
		}
	}
	flat := make([]plan.StreamAt, 0, total)
	p.Lifetimes = make([]plan.Lifetime, len(p.Buffers))
	for i, b := range p.Buffers {
		p.Lifetimes[i] = plan.Lifetime{Buffer: b.Name, Done: flat[len(flat) : len(flat) : len(flat)+nd[i]]}
		flat = flat[:len(flat)+nd[i]]
	}
	for s, f := range perStream {
		for _, d := range f {
			l := &p.Lifetimes[d.buf]
			l.Done = append(l.Done, plan.StreamAt{Stream: s, Event: int(d.event)})
		}
	}
	return nil
}

// planAccesses is the buffer of every access of a plan's stages as an index
// into Plan.Buffers (-1: not declared), reads then writes per stage:
// buf[off[v]:off[v+1]] for stage v. The passes share it (state.accesses),
// so that each access's buffer name is looked up once per plan.
type planAccesses struct{ off, buf []int32 }

func newPlanAccesses(p *plan.Plan) *planAccesses {
	bufIdx := make(map[string]int32, len(p.Buffers))
	for i, b := range p.Buffers {
		bufIdx[b.Name] = int32(i)
	}
	a := &planAccesses{off: make([]int32, len(p.Stages)+1)}
	for v, sg := range p.Stages {
		a.off[v+1] = a.off[v] + int32(len(sg.Reads)+len(sg.Writes))
	}
	a.buf = make([]int32, a.off[len(p.Stages)])
	for v, sg := range p.Stages {
		k := a.off[v]
		for _, list := range [2][]plan.Access{sg.Reads, sg.Writes} {
			for _, x := range list {
				b, ok := bufIdx[x.Buffer]
				if !ok {
					b = -1
				}
				a.buf[k] = b
				k++
			}
		}
	}
	return a
}

// reads and writes return the buffers of stage v's reads and writes (p is
// the plan a was made for).
func (a *planAccesses) reads(p *plan.Plan, v int) []int32 {
	return a.buf[a.off[v] : a.off[v]+int32(len(p.Stages[v].Reads))]
}
func (a *planAccesses) writes(p *plan.Plan, v int) []int32 {
	return a.buf[a.off[v]+int32(len(p.Stages[v].Reads)) : a.off[v+1]]
}

// withIteration replaces the plan by WithIteration of it, which shares its
// stages and buffers, and so keeps the accesses made for it.
func (st *state) withIteration() {
	p := WithIteration(st.plan)
	if st.accPlan == st.plan {
		st.accPlan = p
	}
	st.plan = p
}

// accesses returns the plan's planAccesses, made at the first call for
// the current plan.
func (st *state) accesses() *planAccesses {
	if st.acc == nil || st.accPlan != st.plan {
		st.acc, st.accPlan = newPlanAccesses(st.plan), st.plan
	}
	return st.acc
}
