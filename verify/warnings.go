package verify

import (
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/plan"
)

// Warnings lists what is legal but likely not meant in p: in its waits,
// for hand-synchronized specs and plan files (a planned plan's waits give
// none), and in its buffers:
//
//   - an output buffer that no stage writes and nothing initialises reads
//     back as zeros (a stage's writes list that misses it, most likely);
//   - a wait issued before any record of its event waits for nothing
//     (CUDA's wait-before-record mistake);
//   - a wait whose event was recorded more than once before it waits for
//     the latest record only;
//   - a redundant wait: what it orders already happens-before its stream
//     there, through stream order and earlier waits (it names the one that
//     implies it); a wait on a record of its own stream is one. The
//     hazard-dag strategy's waits on hazard edges that others imply are
//     its design (the whole hazard DAG, for a CUDA graph), so they are not
//     listed in a plan of that strategy; a wait on its own stream's record
//     is. A recorded trace's torch.cuda.synchronize() (a host stage
//     hNNN:synchronize:FILE:LINE that waits for every stream) gets none:
//     its waits are one call's, none of them the user's to delete.
//
// Cross-iteration waits (Lag > 0) are not judged. Each warning is one
// sentence naming the wait's stream, the stage it guards and the records.
func Warnings(p *plan.Plan) []string {
	if p.ValidateShape() != nil {
		return nil
	}
	v := &verifier{p: withoutLaggedWaits(p)}
	v.clocks()
	launchBefore := func(s int, j int) string {
		for k := j - 1; k >= 0; k-- {
			if o := p.Streams[s].Ops[k]; o.Kind == plan.OpLaunch {
				return p.Stages[o.Stage].Name
			}
		}
		return "the stream's start"
	}
	name := func(s int) string { return streamLabel(p.Streams[s].Name, s) }
	guarded := func(s, j int) int { // the stage the wait guards, or -1
		for _, o := range p.Streams[s].Ops[j+1:] {
			if o.Kind == plan.OpLaunch {
				return o.Stage
			}
		}
		return -1
	}
	// guard names the stage a wait guards, with its spec position.
	guard := func(s, j int) string {
		st := guarded(s, j)
		if st < 0 {
			return "the end of stream " + name(s)
		}
		if src := p.Stages[st].Source; src != "" {
			return p.Stages[st].Name + " (" + src + ")"
		}
		return p.Stages[st].Name
	}
	recAt := func(r int32) string { // "after X on stream S"
		return fmt.Sprintf("after %s on stream %s", launchBefore(int(v.opStream[r]), int(v.opIndex(r))), name(int(v.opStream[r])))
	}
	// The barrier's own events (WithIteration: the last S) are not the user's.
	barrier := func(e int) bool {
		return p.Iteration != nil && p.Iteration.Barrier && len(p.Streams) > 1 && e >= p.Events-len(p.Streams)
	}
	var out []string
	records := make([][]int32, p.Events) // per event, its records issued so far
	for _, so := range p.IssueOrder {
		s, j := so[0], so[1]
		g := v.opBase[s] + int32(j)
		o := p.Streams[s].Ops[j]
		switch o.Kind {
		case plan.OpRecord:
			records[o.Event] = append(records[o.Event], g)
			continue
		case plan.OpLaunch:
			continue
		}
		if o.Lag > 0 || barrier(o.Event) {
			continue
		}
		at := guard(s, j)
		rs := records[o.Event]
		if len(rs) == 0 {
			where := "its event is never recorded"
			for si, st := range p.Streams {
				for k, r := range st.Ops {
					if r.Kind == plan.OpRecord && r.Event == o.Event {
						where = fmt.Sprintf("its event is recorded after %s on stream %s, but only later in the issue order", launchBefore(si, k), name(si))
					}
				}
			}
			out = append(out, fmt.Sprintf("%s: a wait on stream %s waits for nothing: %s (wait-before-record)", at, name(s), where))
			continue
		}
		r := rs[len(rs)-1]
		if len(rs) > 1 {
			out = append(out, fmt.Sprintf("%s: the wait on stream %s waits for its event's latest record, %s, not the earlier one %s",
				at, name(s), recAt(r), recAt(rs[0])))
		}
		rsStream := int(v.opStream[r])
		if rsStream == s {
			out = append(out, fmt.Sprintf("%s: the wait for the record %s is redundant: the record is on the same stream, which orders it already", at, recAt(r)))
			continue
		}
		if p.Strategy == strategyHazardDAG {
			continue // its waits are the hazard DAG's edges, implied ones included
		}
		if st := guarded(s, j); st >= 0 && recordedDeviceSync(p.Stages[st].Name) {
			continue // one call's waits on every stream: none is the user's to delete
		}
		// Redundant: the stream's clock just before the wait already
		// covers the record, or a later wait of the same group (the
		// waits right before one launch) covers it.
		why := ""
		if j > 0 && v.opHB(r, g-1) {
			why = "stream order"
			for k := 0; k < j; k++ {
				h := v.opBase[s] + int32(k)
				if w := p.Streams[s].Ops[k]; w.Kind == plan.OpWait && !barrier(w.Event) {
					if c := v.opCaptured[h]; c >= 0 && (c == r || v.opHB(r, c)) {
						why = "the earlier wait for the record " + recAt(c)
						break
					}
				}
			}
			if why == "stream order" {
				if h := hostStageAfter(p, v, r, g); h >= 0 {
					why = "host stage " + p.Stages[h].Name
					if src := p.Stages[h].Source; src != "" {
						why += " (" + src + ")"
					}
					why += ", which waits for it before this wait is issued,"
				}
			}
		} else {
			for k := j + 1; k < len(p.Streams[s].Ops); k++ {
				w := p.Streams[s].Ops[k]
				if w.Kind != plan.OpWait {
					break
				}
				c := v.opCaptured[v.opBase[s]+int32(k)]
				if w.Lag > 0 || c < 0 || barrier(w.Event) {
					continue
				}
				if cs := int(v.opStream[c]); cs == rsStream && v.opIndex(c) > v.opIndex(r) || cs != rsStream && v.opHB(r, c) {
					why = "the later wait for the record " + recAt(c)
					break
				}
			}
		}
		if why != "" {
			out = append(out, fmt.Sprintf("%s: the wait for the record %s is redundant: %s already orders it", at, recAt(r), why))
		}
	}
	return append(out, unwrittenOutputs(p)...)
}

// hostStageAfter is the first host stage issued before op g whose launch
// record r happens-before (the host waited for r, so everything it issues
// after that stage is ordered after r), or -1.
func hostStageAfter(p *plan.Plan, v *verifier, r, g int32) int {
	for _, so := range p.IssueOrder {
		h := v.opBase[so[0]] + int32(so[1])
		if h == g {
			break
		}
		if o := p.Streams[so[0]].Ops[so[1]]; p.Streams[so[0]].Host && o.Kind == plan.OpLaunch && v.opHB(r, h) {
			return o.Stage
		}
	}
	return -1
}

// withoutLaggedWaits returns p, or where p has waits across iterations
// (Lag > 0) a copy in which they wait on an event nothing records: within
// one iteration such a wait orders nothing, so the happens-before that
// judges the other waits must not take it for a wait on this iteration's
// record.
func withoutLaggedWaits(p *plan.Plan) *plan.Plan {
	lagged := func(o plan.Op) bool { return o.Kind == plan.OpWait && o.Lag > 0 }
	if !slices.ContainsFunc(p.Streams, func(s plan.Stream) bool { return slices.ContainsFunc(s.Ops, lagged) }) {
		return p
	}
	q := *p
	q.Ops, q.Events = nil, p.Events+1
	q.Streams = slices.Clone(p.Streams)
	for s := range q.Streams {
		ops := slices.Clone(q.Streams[s].Ops)
		for j := range ops {
			if lagged(ops[j]) {
				ops[j].Event = p.Events
			}
		}
		q.Streams[s].Ops = ops
	}
	return &q
}

// unwrittenOutputs warns of each output buffer that no stage writes and no
// init fills.
func unwrittenOutputs(p *plan.Plan) []string {
	written := make(map[string]bool)
	for i := range p.Stages {
		for _, w := range p.Stages[i].Writes {
			written[w.Buffer] = true
		}
	}
	var out []string
	for _, b := range p.Buffers {
		if b.Role == string(contract.RoleOutput) && !written[b.Name] && (b.Init == "" || b.Init == "zeros") {
			out = append(out, fmt.Sprintf("output buffer %s: no stage writes it and no init fills it, so it reads back as %d zero bytes: add it to the writes of the stage that produces it", b.Name, b.Bytes))
		}
	}
	return out
}

// Values of plan.Plan.Strategy the checks read (a test holds them equal
// to the planner's and the spec's names).
const (
	strategyManual    = "manual"     // dag.SyncManual: the spec's own streams and waits
	strategyHazardDAG = "hazard-dag" // planner.StrategyHazardDAG: a wait on every hazard edge
)
