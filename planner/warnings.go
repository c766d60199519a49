package planner

import "fmt"

// Warnings lists what is legal but likely not meant in p's waits, for
// hand-synchronized specs and plan files (a planned plan has none):
//
//   - a wait issued before any record of its event waits for nothing
//     (CUDA's wait-before-record mistake);
//   - a wait whose event was recorded more than once before it waits for
//     the latest record only;
//   - a redundant wait: what it orders already happens-before its stream
//     there, through stream order and earlier waits (it names the one that
//     implies it).
//
// Cross-iteration waits (Lag > 0) are not judged. Each warning is one
// sentence naming the wait's stream, the stage it guards and the records.
func Warnings(p *Plan) []string {
	if p.Validate() != nil {
		return nil
	}
	v := &verifier{p: p}
	v.clocks()
	launchBefore := func(s int, j int) string {
		for k := j - 1; k >= 0; k-- {
			if o := p.Streams[s].Ops[k]; o.Kind == OpLaunch {
				return p.Stages[o.Stage].Name
			}
		}
		return "the stream's start"
	}
	launchAfter := func(s int, j int) string {
		for _, o := range p.Streams[s].Ops[j+1:] {
			if o.Kind == OpLaunch {
				return p.Stages[o.Stage].Name
			}
		}
		return "the stream's end"
	}
	name := func(s int) string { return streamLabel(p.Streams[s].Name, s) }
	var out []string
	records := make([][]int32, p.Events) // per event, its records issued so far
	for _, so := range p.IssueOrder {
		s, j := so[0], so[1]
		g := v.opBase[s] + int32(j)
		o := p.Streams[s].Ops[j]
		switch o.Kind {
		case OpRecord:
			records[o.Event] = append(records[o.Event], g)
			continue
		case OpLaunch:
			continue
		}
		if o.Lag > 0 {
			continue
		}
		guard := launchAfter(s, j)
		rs := records[o.Event]
		if len(rs) == 0 {
			where := "is never recorded"
			for si, st := range p.Streams {
				for k, r := range st.Ops {
					if r.Kind == OpRecord && r.Event == o.Event {
						where = fmt.Sprintf("is recorded after %s on stream %s, but only later in the issue order", launchBefore(si, k), name(si))
					}
				}
			}
			out = append(out, fmt.Sprintf("the wait on e%d before %s (stream %s) waits for nothing: e%d %s (wait-before-record)", o.Event, guard, name(s), o.Event, where))
			continue
		}
		r := rs[len(rs)-1]
		if len(rs) > 1 {
			first := rs[0]
			out = append(out, fmt.Sprintf("the wait on e%d before %s (stream %s) waits for its latest record, after %s on stream %s, not the earlier one after %s on stream %s",
				o.Event, guard, name(s), launchBefore(int(v.opStream[r]), int(v.opIndex[r])), name(int(v.opStream[r])),
				launchBefore(int(v.opStream[first]), int(v.opIndex[first])), name(int(v.opStream[first]))))
		}
		rsStream := int(v.opStream[r])
		if rsStream == s {
			out = append(out, fmt.Sprintf("the wait on e%d before %s (stream %s) is redundant: its record is on the same stream, which is ordered already", o.Event, guard, name(s)))
			continue
		}
		// The stream's clock just before the wait.
		row := int32(0)
		if j > 0 {
			row = v.opRow[g-1]
		}
		if v.vecs[int(row)*v.S+rsStream] <= v.opIndex[r] {
			continue // the wait orders something new
		}
		why := "stream order"
		for k := 0; k < j; k++ {
			h := v.opBase[s] + int32(k)
			if w := p.Streams[s].Ops[k]; w.Kind == OpWait && v.vecs[int(v.opRow[h])*v.S+rsStream] > v.opIndex[r] {
				why = fmt.Sprintf("the earlier wait on e%d before %s", w.Event, launchAfter(s, k))
				break
			}
		}
		out = append(out, fmt.Sprintf("the wait on e%d before %s (stream %s) is redundant: %s already orders it after %s on stream %s",
			o.Event, guard, name(s), why, launchBefore(rsStream, int(v.opIndex[r])), name(rsStream)))
	}
	return out
}
