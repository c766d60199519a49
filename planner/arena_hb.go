package planner

import (
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// stageOrder answers "does stage u's launch happen-before stage v's"
// (false for u == v).
type stageOrder interface{ before(u, v int32) bool }

// graphOrder is stageOrder by a search of the plan's happens-before graph
// (verify's hb.go), for plans whose dense clocks (launchHB) would be too large.
type graphOrder struct{ o *verify.Order }

func (g graphOrder) before(u, v int32) bool {
	return u != v && g.o.Before(g.o.LaunchOp[u], g.o.LaunchOp[v])
}

// graphOrderMaxTemps bounds the device temps the arena pass lays out when
// its vector clocks do not fit (launchHBMax) and each happens-before test
// is a search of the plan's graph (graphOrder): past it the plan has no
// arena, with a note. Plans with the default stream cap have dense clocks
// of streams × waits entries, which fit up to about 2,000,000 waits.
const graphOrderMaxTemps = 2048

// launchHBMax bounds the clock entries (streams × clocks) of launchHB that
// newArenaInfo builds; beyond it the arena asks the happens-before graph.
const launchHBMax = 1 << 24

// launchHBSize is the clock entries launchHB needs for p: streams × (waits+1).
func launchHBSize(p *plan.Plan) int {
	waits := 0
	for _, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == plan.OpWait {
				waits++
			}
		}
	}
	return len(p.Streams) * (waits + 1)
}

func denseClocksFit(p *plan.Plan) bool { return launchHBSize(p) <= launchHBMax }

// launchHB answers "does launch u happen-before launch v" for a plan: vector
// clocks over streams walked in issue order (Lamport 1978; Fidge 1988,
// Mattern 1989; denseClocks), as in Verify but computed here on their own,
// so that Verify checks the arena independently. A clock is shared by the
// launches of a stream between two waits. A host stream's ops
// happen-before every op issued after them. It describes one iteration: a
// wait with a lag orders an earlier iteration's record, not this one's,
// and is left out.
type launchHB struct {
	at     []launchAt   // per stage: where its launch is
	issue  []int32      // per stage: position of its launch in IssueOrder
	clocks *denseClocks // per clock: the ops of each stream (a prefix) that happen-before
}

// launchAt is a launch's stream, its op index on that stream and its
// clock's number, together so that a happens-before test reads one place
// per stage.
type launchAt struct{ stream, index, row int32 }

func newLaunchHB(p *plan.Plan) *launchHB {
	S := len(p.Streams)
	h := &launchHB{at: make([]launchAt, len(p.Stages)), issue: make([]int32, len(p.Stages)), clocks: newDenseClocks(S)}
	// Every stream starts on clock 0 (nothing); a clock that a launch or a
	// record names is shared, and a join copies it.
	cur := make([]int32, S)
	shared := make([]bool, S)
	for s := range shared {
		shared[s] = true
	}
	type rec struct{ stream, index, row int32 }
	last := make([]rec, p.Events)
	for e := range last {
		last[e].stream = -1
	}
	var hosts []int
	for s := range p.Streams {
		if p.Streams[s].Host {
			hosts = append(hosts, s)
		}
	}
	hostOps := make([]int32, S) // per host stream: ops issued so far
	for k, so := range p.IssueOrder {
		s := so[0]
		o := p.Streams[s].Ops[so[1]]
		for _, hs := range hosts {
			if hs != s && hostOps[hs] > 0 {
				h.clocks.join(&cur[s], &shared[s], cur[hs], int32(hs), hostOps[hs])
			}
		}
		switch o.Kind {
		case plan.OpRecord:
			last[o.Event] = rec{int32(s), int32(so[1]), cur[s]}
			shared[s] = true
		case plan.OpWait:
			if r := last[o.Event]; o.Lag == 0 && r.stream >= 0 && int(r.stream) != s {
				h.clocks.join(&cur[s], &shared[s], r.row, r.stream, r.index+1)
			}
		case plan.OpLaunch:
			v := o.Stage
			h.at[v], h.issue[v] = launchAt{int32(s), int32(so[1]), cur[s]}, int32(k)
			shared[s] = true
		}
		if p.Streams[s].Host {
			hostOps[s] = int32(so[1]) + 1
		}
	}
	return h
}

// before reports whether stage u's launch happens-before stage v's launch
// (false for u == v): u completes before v starts.
func (h *launchHB) before(u, v int32) bool {
	x, y := &h.at[u], &h.at[v]
	if x.stream == y.stream {
		return x.index < y.index
	}
	return h.clocks.at(y.row)[x.stream] > x.index
}
