package planner

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// orderReplays makes an automatically synchronized plan keep the replay
// order (CaptureReplayOrder) by construction: for each race of a replay
// (replayRaces) of a captured stage with a stage issued before the
// capture, the capture's first stage waits for that stage (its waits are
// issued before cuStreamBeginCapture); with a stage issued after the
// capture in the same iteration, that stage waits for the capture's last
// stage (whose record graph mode makes again after each replay); across
// iterations, with the lag between them. It returns the waits added and
// the races it cannot order so (a stage issued inside the region before
// its stream joined the capture; across iterations, a plan without
// iteration info; a race whose wait the plan already has). A race that
// no new wait orders is returned, never dropped. Cost: two Verify runs
// per round, a round per wait, at most one round per stage and capture
// plus one.
func orderReplays(p *plan.Plan) (added int, left []verify.ReplayRace) {
	for range len(p.Stages) + len(p.Captures) + 1 {
		left = nil
		fixed := false
		rs := verify.ReplayRaces(p)
		for _, rr := range rs {
			c := p.Captures[rr.Capture]
			begin, _ := p.CaptureRegion(c)
			from, to := rr.Other, p.StageIndex(c.First)
			if !rr.Before {
				from, to = p.StageIndex(c.Last), rr.Other
			}
			direct := rr.Through && plan.HasWait(p, from, to, rr.Lag)
			if direct {
				// The branch's side of the pair has its wait, and the
				// pair still races (the earlier stage reaches the branch
				// through a wait its stream issued before it joined):
				// the later stage waits for the earlier one itself.
				from, to = rr.Early, rr.Late
				if rr.Lag = rr.ThroughLag; rr.Lag == 0 && plan.LaunchOf(p, from) > plan.LaunchOf(p, to) {
					left = append(left, rr)
					continue
				}
			}
			if rr.Lag > 0 && p.Iteration == nil || rr.Before && rr.Lag == 0 && plan.LaunchOf(p, from) >= begin && !direct || plan.HasWait(p, from, to, rr.Lag) {
				left = append(left, rr)
				continue
			}
			addReplayWait(p, from, to, rr.Lag)
			added++
			fixed = true
			break
		}
		if !fixed {
			return added, left
		}
	}
	return added, verify.ReplayRaces(p)
}

// addWait makes stage to wait for stage from of lag iterations back: a
// record right after from's launch (reusing one that is there) and a wait
// right before to's launch; a plan with iteration info gets the event
// ring slots the wait's lag needs (crossSlots).
func addReplayWait(p *plan.Plan, from, to, lag int) {
	at := plan.LaunchOf(p, from)
	so := p.IssueOrder[at]
	ev := -1
	if j := so[1] + 1; j < len(p.Streams[so[0]].Ops) && p.Streams[so[0]].Ops[j].Kind == plan.OpRecord && at+1 < len(p.IssueOrder) && p.IssueOrder[at+1] == [2]int{so[0], j} {
		ev = p.Streams[so[0]].Ops[j].Event
	} else {
		ev = p.Events
		p.Events++
		if p.Iteration != nil {
			p.Iteration.Slots = append(p.Iteration.Slots, 1)
		}
		insertOp(p, so[0], so[1]+1, at+1, plan.Op{Kind: plan.OpRecord, Event: ev})
	}
	at = plan.LaunchOf(p, to)
	so = p.IssueOrder[at]
	insertOp(p, so[0], so[1], at, plan.Op{Kind: plan.OpWait, Event: ev, Lag: lag})
	if p.Iteration != nil && lag > 0 {
		p.Iteration.Slots = crossSlots(p)
	}
}

// replayOrderError is the spec error for replay races that no wait of the
// capture's first stage orders (orderReplays' left): the earlier stage is
// issued inside the region, before its stream joined the capture.
func (st *state) replayOrderError(p *plan.Plan, left []verify.ReplayRace) error {
	var l dag.ErrorList
	for _, rr := range left {
		c := p.Captures[rr.Capture]
		at := ""
		if c.Source != "" {
			at = " (" + c.Source + ")"
		}
		x, y := &p.Stages[rr.Moved], &p.Stages[rr.Other]
		var pos dag.Pos // the final passes run without the spec
		if st.spec != nil {
			pos = st.spec.Stages[rr.Moved].Pos
		}
		l = append(l, &dag.Error{Pos: pos,
			Msg: fmt.Sprintf("stage %s, which the capture of %s…%s on stream %s%s takes on stream %s, needs stage %s on stream %s (%s race on %s), which is issued while the capture is under way but not taken by it: a replay of the graph runs %s after captured work and the launch only, and a wait of %s, issued before the capture begins, would come before %s is issued",
				x.Name, c.First, c.Last, p.Streams[c.Stream].Name, at, p.Streams[x.Stream].Name, y.Name, p.Streams[y.Stream].Name, rr.Race.Kind, verify.BufferSiteOf(rr.Race.Buffer), x.Name, c.First, y.Name),
			Hint: fmt.Sprintf("order %s before %s, or end the capture before %s", y.Name, c.First, x.Name)})
	}
	return l.Err()
}
