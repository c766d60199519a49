package planner

import "github.com/dagrun/dagrun/plan"

// stageOrder answers "does stage u's launch happen-before stage v's"
// (false for u == v).
type stageOrder interface{ before(u, v int32) bool }

// graphOrder is stageOrder by a search of the plan's happens-before graph
// (hb.go), for plans whose dense clocks (launchHB) would be too large.
type graphOrder struct {
	h      *hbGraph
	launch []int32 // per stage: its launch op
}

func (g graphOrder) before(u, v int32) bool { return u != v && g.h.reach(g.launch[u], g.launch[v]) }

// graphOrderMaxTemps bounds the device temps the arena pass lays out when
// its vector clocks do not fit (launchHBMax) and each happens-before test
// is a search of the plan's graph (graphOrder): past it the plan has no
// arena, with a note. Plans with the default stream cap have dense clocks
// of streams × waits entries, which fit up to about 2,000,000 waits.
const graphOrderMaxTemps = 2048

// launchHBMax bounds the clock entries (streams × rows) of launchHB that
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
// Mattern 1989), as in Verify but computed here on their own, so that Verify
// checks the arena independently. Rows are shared between the launches of a
// stream between two waits. A host stream's ops happen-before every op
// issued after them. It describes one iteration: a wait with a lag orders
// an earlier iteration's record, not this one's, and is left out.
type launchHB struct {
	S     int
	at    []launchAt // per stage: where its launch is
	issue []int32    // per stage: position of its launch in IssueOrder
	vecs  []int32    // rows of S entries: ops of each stream (a prefix) that happen-before
}

// launchAt is a launch's stream, its op index on that stream and its clock
// row, together so that a happens-before test reads one place per stage.
type launchAt struct{ stream, index, row int32 }

func newLaunchHB(p *plan.Plan) *launchHB {
	S := len(p.Streams)
	// Rows: the first, and at most one per wait (more only with host
	// streams), so that the rows are mostly allocated once.
	h := &launchHB{S: S, at: make([]launchAt, len(p.Stages)), issue: make([]int32, len(p.Stages)), vecs: make([]int32, S, launchHBSize(p))}
	cur := make([]int32, S) // every stream starts on row 0 (nothing)
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
	tmp := make([]int32, S)
	// join sets stream s's clock to its row joined with row r and entry
	// (t, upTo), copying the row only if something changes.
	join := func(s int, r int32, t int, upTo int32) {
		row := h.vecs[int(cur[s])*S : int(cur[s]+1)*S]
		other := h.vecs[int(r)*S : int(r+1)*S]
		changed := false
		for k := range S {
			x := max(row[k], other[k])
			if k == t {
				x = max(x, upTo)
			}
			tmp[k] = x
			changed = changed || (x != row[k] && k != s)
		}
		if changed {
			cur[s] = int32(len(h.vecs) / S)
			h.vecs = append(h.vecs, tmp...)
		}
	}
	hostOps := make([]int32, S) // per host stream: ops issued so far
	for k, so := range p.IssueOrder {
		s := so[0]
		o := p.Streams[s].Ops[so[1]]
		for _, hs := range hosts {
			if hs != s && hostOps[hs] > 0 {
				join(s, cur[hs], hs, hostOps[hs])
			}
		}
		switch o.Kind {
		case plan.OpRecord:
			last[o.Event] = rec{int32(s), int32(so[1]), cur[s]}
		case plan.OpWait:
			if r := last[o.Event]; o.Lag == 0 && r.stream >= 0 && int(r.stream) != s {
				join(s, r.row, int(r.stream), r.index+1)
			}
		case plan.OpLaunch:
			v := o.Stage
			h.at[v], h.issue[v] = launchAt{int32(s), int32(so[1]), cur[s]}, int32(k)
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
	return h.vecs[int(y.row)*h.S+int(x.stream)] > x.index
}
