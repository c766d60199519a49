package planner

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// buildManual turns a `sync: manual` spec into a plan as written, without
// planning: one stream per distinct stream name in order of first use; per
// stage in declaration order, a wait for each `waits:` entry (on an event
// recorded right after the named stage), the launch, then a record if any
// stage waits on this one. The issue order is declaration order, so a wait
// on a stage declared later is issued before its record and waits for
// nothing — CUDA's wait-before-record trap, which Verify reports.
//
// Errors: a stage with no stream, a waits: entry naming no stage.
// docs/design/manual.md has the design.
func (st *state) buildManual() error {
	s := st.spec
	p := st.newPlan()
	streamID := map[string]int{}
	index := make(map[string]int, len(s.Stages))
	for i, sg := range s.Stages {
		index[sg.Name] = i
	}
	needed := make([]bool, len(s.Stages))
	for i, sg := range s.Stages {
		if sg.Stream == "" {
			return fmt.Errorf("%s: stage %s: sync: manual needs a stream: for every stage", sg.Pos, sg.Name)
		}
		if _, ok := streamID[sg.Stream]; !ok {
			streamID[sg.Stream] = len(p.Streams)
			p.Streams = append(p.Streams, plan.Stream{ID: len(p.Streams), Name: sg.Stream, Host: sg.Stream == dag.HostStream, Device: int(st.device(int32(i)))})
		}
		p.Stages[i].Stream = streamID[sg.Stream]
		for _, w := range sg.Waits {
			u, ok := index[w]
			if !ok {
				return fmt.Errorf("%s: stage %s: waits: names no stage %q", sg.Pos, sg.Name, w)
			}
			needed[u] = true
		}
		for _, w := range sg.WaitFor {
			if w.Stage == "" {
				continue
			}
			u, ok := index[w.Stage]
			if !ok {
				return fmt.Errorf("%s: stage %s: waits: names no stage %q", w.Pos, sg.Name, w.Stage)
			}
			needed[u] = true
		}
	}
	event := make([]int, len(s.Stages))
	for i := range event {
		event[i] = -1
		if needed[i] {
			event[i] = p.Events
			p.Events++
		}
	}
	named := map[string]int{}
	for _, sg := range s.Stages {
		if _, ok := named[sg.Event]; sg.Event != "" && !ok {
			named[sg.Event] = p.Events
			p.Events++
		}
	}
	slots := make([]int, p.Events)
	lagged, extra := 0, 0
	emit := func(sid int, op plan.Op) {
		ops := &p.Streams[sid].Ops
		p.IssueOrder = append(p.IssueOrder, [2]int{sid, len(*ops)})
		*ops = append(*ops, op)
	}
	p.IssueOrder = [][2]int{}
	for i, sg := range s.Stages {
		sid := p.Stages[i].Stream
		for _, w := range sg.Waits {
			emit(sid, plan.Op{Kind: plan.OpWait, Event: event[index[w]]})
		}
		for _, w := range sg.WaitFor {
			e, ok := named[w.Event]
			if w.Stage != "" {
				e, ok = event[index[w.Stage]], true
			}
			if !ok {
				return fmt.Errorf("%s: stage %s: waits: names event %q, which no stage records", w.Pos, sg.Name, w.Event)
			}
			emit(sid, plan.Op{Kind: plan.OpWait, Event: e, Lag: w.Lag})
			if w.Lag+1 > slots[e] {
				extra += w.Lag + 1 - max(slots[e], 1)
				slots[e] = w.Lag + 1
				if extra > plan.MaxExtraSlots {
					return dag.ErrorList{{Pos: w.Pos,
						Msg:  fmt.Sprintf("stage %s: waits: lag %d takes the spec's event slots to %d beyond one each, more than %d", sg.Name, w.Lag, extra, plan.MaxExtraSlots),
						Hint: "each event keeps one slot per iteration its longest lag reaches back: wait fewer iterations back"}}
				}
			}
			if w.Lag > 0 {
				lagged++
			}
		}
		emit(sid, plan.Op{Kind: plan.OpLaunch, Stage: i})
		if event[i] >= 0 {
			emit(sid, plan.Op{Kind: plan.OpRecord, Event: event[i]})
		}
		if sg.Event != "" {
			emit(sid, plan.Op{Kind: plan.OpRecord, Event: named[sg.Event]})
		}
	}
	if lagged > 0 {
		// Waits across iterations: the iterations overlap as the waits say
		// (one stream set), each event with a slot per iteration its
		// longest lag reaches back.
		for e := range slots {
			slots[e] = max(slots[e], 1)
		}
		p.Iteration = &plan.Iteration{StreamSets: 1, Slots: slots, CrossWaits: lagged, InFlight: 1}
	}
	if p.Streams == nil {
		p.Streams = []plan.Stream{}
	}
	applySpecRules(s, p) // spec_rules.go
	st.plan = p
	return nil
}
