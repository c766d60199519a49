package plan

// Ops is a plan's ops as hbEdges reads them, 9 bytes an op: op g
// (numbered stream by stream, base[s] the first of stream s) is of kind
// kind[g], with arg[g] its stage (a launch) or its event; issue lists the
// ops in issue order. A derived plan (UnrollDerived) has only these (Plan.Ops).
type Ops struct {
	Base  []int32 // S+1 entries
	Kind  []OpKind
	Arg   []int32
	Issue []int32
}

// OpsOf returns p's ops as Ops: Plan.Ops, or made from Streams and
// IssueOrder.
func OpsOf(p *Plan) *Ops {
	if p.Ops != nil {
		return p.Ops
	}
	S := len(p.Streams)
	c := &Ops{Base: make([]int32, S+1)}
	for s := range p.Streams {
		c.Base[s+1] = c.Base[s] + int32(len(p.Streams[s].Ops))
	}
	c.Kind, c.Arg = make([]OpKind, c.Base[S]), make([]int32, c.Base[S])
	for s := range p.Streams {
		for j, o := range p.Streams[s].Ops {
			g := c.Base[s] + int32(j)
			c.Kind[g] = o.Kind
			if o.Kind == OpLaunch {
				c.Arg[g] = int32(o.Stage)
			} else {
				c.Arg[g] = int32(o.Event)
			}
		}
	}
	c.Issue = make([]int32, len(p.IssueOrder))
	for k, so := range p.IssueOrder {
		c.Issue[k] = c.Base[so[0]] + int32(so[1])
	}
	return c
}
