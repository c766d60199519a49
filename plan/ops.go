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

// HasWait reports whether stage to's launch follows, among the waits
// issued right before it on its stream, a wait of lag iterations back on
// the record issued right after stage from's launch: the form of a wait
// that orders one stage after another (a fix, a replay order).
func HasWait(p *Plan, from, to, lag int) bool {
	at := LaunchOf(p, from)
	if at < 0 {
		return false
	}
	so := p.IssueOrder[at]
	j := so[1] + 1
	if j >= len(p.Streams[so[0]].Ops) || p.Streams[so[0]].Ops[j].Kind != OpRecord {
		return false
	}
	ev := p.Streams[so[0]].Ops[j].Event
	if at = LaunchOf(p, to); at < 0 {
		return false
	}
	so = p.IssueOrder[at]
	for j := so[1] - 1; j >= 0 && p.Streams[so[0]].Ops[j].Kind == OpWait; j-- {
		if o := p.Streams[so[0]].Ops[j]; o.Event == ev && o.Lag == lag {
			return true
		}
	}
	return false
}

// LaunchOf returns the issue position of stage i's launch, or −1.
func LaunchOf(p *Plan, i int) int {
	for k, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == OpLaunch && o.Stage == i {
			return k
		}
	}
	return -1
}

// LaunchPositions returns each stage's launch position in IssueOrder.
func LaunchPositions(p *Plan) []int {
	pos := make([]int, len(p.Stages))
	for k, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == OpLaunch {
			pos[o.Stage] = k
		}
	}
	return pos
}
