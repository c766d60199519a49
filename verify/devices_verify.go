package verify

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/plan"
)

// The verifier's checks of several devices: what each launch may touch,
// and that each collective's ranks are issued as one group.

// deviceAccesses returns a *PlanError for the first launch that touches
// device memory of another device than its stream's: a kernel (and a
// collective's rank) touches only its own device's memory and host memory;
// a copy may read one device and write another (a peer copy), one of them
// its own. No wait can fix it. Cost: O(accesses).
func deviceAccesses(p *plan.Plan) error {
	if p.DeviceCount() <= 1 {
		return nil
	}
	dev := make(map[string]int, len(p.Buffers))
	for _, b := range p.Buffers {
		if b.Where == "" || b.Where == string(contract.WhereDevice) {
			dev[b.Name] = b.Device
		}
	}
	for i := range p.Stages {
		st := &p.Stages[i]
		if st.Stream < 0 || st.Stream >= len(p.Streams) || p.Streams[st.Stream].Host {
			continue
		}
		d := p.StageDevice(i)
		if st.Kernel == contract.BuiltinCopy && !st.Go && st.Collective == nil && len(st.Reads) == 1 && len(st.Writes) == 1 {
			from, fok := dev[st.Reads[0].Buffer]
			to, tok := dev[st.Writes[0].Buffer]
			if fok && tok && from != to {
				if d != from && d != to {
					return plan.ErrorAt(fmt.Sprintf("stages[%d].stream", i), "stage %s copies from device %d to device %d on stream %s of device %d: a peer copy runs on a stream of its source or destination device", st.Name, from, to, p.Streams[st.Stream].Name, d)
				}
				continue
			}
		}
		for k, list := range [2][]plan.Access{st.Reads, st.Writes} {
			for j, a := range list {
				if bd, ok := dev[a.Buffer]; ok && bd != d {
					field := [2]string{"reads", "writes"}[k]
					return plan.ErrorAt(fmt.Sprintf("stages[%d].%s[%d]", i, field, j), "stage %s on stream %s of device %d %s buffer %s of device %d: a kernel touches only its own device's memory and host memory (copy the bytes across with a copy stage, a peer copy)",
						st.Name, p.Streams[st.Stream].Name, d, field, a.Buffer, bd)
				}
			}
		}
	}
	return nil
}

// Deadlock is a collective whose ranks are not issued as one group. NCCL
// issued from one thread needs every rank's call between one
// ncclGroupStart and ncclGroupEnd; and no rank completes before every rank
// has started, so a rank whose stream waits, before it, for another rank's
// completion (through events) never starts: Waits names it and For the
// rank it waits for. When no rank waits for another, Waits and For are ""
// and the ranks are only not consecutive in the issue order (Between
// names an op issued between them).
type Deadlock struct {
	Group   int      `json:"group"`
	Ranks   []string `json:"ranks"` // the ranks' stages, in issue order
	Waits   string   `json:"waits,omitempty"`
	For     string   `json:"for,omitempty"`
	Between string   `json:"between,omitempty"`
	// Source is the collective's position in its spec (file:line:col, the
	// first rank's Stage.Source), "" when the plan has none.
	Source string `json:"source,omitempty"`
}

func (d Deadlock) String() string {
	name := plan.RankGroupName(d.Ranks)
	if d.Source != "" {
		name += " (" + d.Source + ")"
	}
	if d.Waits != "" {
		return fmt.Sprintf("deadlock: collective %s: rank %s waits, through events, for rank %s to complete, but no rank completes before every rank has started; issue the ranks consecutively (as the planner does) and wait for what precedes every rank before the group",
			name, d.Waits, d.For)
	}
	return fmt.Sprintf("collective %s: its ranks (%s) are not issued consecutively (%s is issued between them): a collective's ranks are issued as one group (ncclGroupStart, one call per rank, ncclGroupEnd), and from one thread NCCL may block on a rank's call until every rank has been issued; move the ops between them before the first rank or after the last",
		name, strings.Join(d.Ranks, ", "), d.Between)
}

// collectiveDeadlocks returns the collectives of p whose ranks' launches
// are not consecutive in IssueOrder, each as a Deadlock: with the rank
// that waits for another's completion when one does (happens-before from
// the other rank's launch to the op before it on its stream, which
// includes the rendezvous of the other collectives), else with an op
// issued between them.
func collectiveDeadlocks(p *plan.Plan) []Deadlock {
	type rank struct{ issue, stage int }
	groups := map[int][]rank{}
	var order []int
	for k, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		if o.Kind != plan.OpLaunch {
			continue
		}
		if c := p.Stages[o.Stage].Collective; c != nil {
			if _, ok := groups[c.Group]; !ok {
				order = append(order, c.Group)
			}
			groups[c.Group] = append(groups[c.Group], rank{k, o.Stage})
		}
	}
	var out []Deadlock
	var h *hbGraph
	for _, g := range order {
		rs := groups[g]
		if rs[len(rs)-1].issue-rs[0].issue == len(rs)-1 {
			continue
		}
		d := Deadlock{Group: g, Source: p.Stages[rs[0].stage].Source}
		for _, r := range rs {
			d.Ranks = append(d.Ranks, p.Stages[r.stage].Name)
		}
		if h == nil {
			h = hbEdges(p)
		}
		launch := func(stage int) int32 {
			s := p.Stages[stage].Stream
			return h.opBase[s] + int32(slices.IndexFunc(p.Streams[s].Ops, func(o plan.Op) bool { return o.Kind == plan.OpLaunch && o.Stage == stage }))
		}
	search:
		for b := 1; b < len(rs); b++ {
			lb := launch(rs[b].stage)
			if lb == h.opBase[p.Stages[rs[b].stage].Stream] {
				continue // first on its stream: nothing before it waits
			}
			for a := 0; a < b; a++ {
				if h.reach(launch(rs[a].stage), lb-1) {
					d.Waits, d.For = p.Stages[rs[b].stage].Name, p.Stages[rs[a].stage].Name
					break search
				}
			}
		}
		if d.Waits == "" {
			for k := rs[0].issue + 1; k < rs[len(rs)-1].issue; k++ {
				so := p.IssueOrder[k]
				o := p.Streams[so[0]].Ops[so[1]]
				if o.Kind == plan.OpLaunch && p.Stages[o.Stage].Collective != nil && p.Stages[o.Stage].Collective.Group == g {
					continue
				}
				d.Between = fmt.Sprintf("%s on stream %s", o, p.Streams[so[0]].Name)
				if o.Kind == plan.OpLaunch {
					d.Between = fmt.Sprintf("launch %s on stream %s", p.Stages[o.Stage].Name, p.Streams[so[0]].Name)
				}
				break
			}
		}
		out = append(out, d)
	}
	return out
}

// reportDeadlocks prints the deadlocks, one a line.
func (e *RaceError) reportDeadlocks(b *strings.Builder) {
	for _, d := range e.Deadlocks {
		b.WriteString("\n")
		b.WriteString(d.String())
	}
}

// rankLaunches returns, per collective group of p, the global op ids
// (numbered from base, per stream) of its ranks' launches.
func rankLaunches(p *plan.Plan, base []int32) map[int][]int32 {
	var out map[int][]int32
	for s := range p.Streams {
		for j, o := range p.Streams[s].Ops {
			if o.Kind != plan.OpLaunch || o.Stage < 0 || o.Stage >= len(p.Stages) {
				continue
			}
			if c := p.Stages[o.Stage].Collective; c != nil {
				if out == nil {
					out = map[int][]int32{}
				}
				out[c.Group] = append(out[c.Group], base[s]+int32(j))
			}
		}
	}
	return out
}
