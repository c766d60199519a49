package planner

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// joinCaptures makes an automatically synchronized plan keep the join
// rule by construction: for each capture, every device stream forked into
// it (CaptureJoins) whose last op in the region does not happen before
// the launch of the capture's last stage gets a record after that op
// (reusing one that is there) and the capture's stream a wait on it right
// before that launch. Other waits are untouched, so the fewest waits of the
// sync pass are kept elsewhere. It returns the waits added. Cost:
// O(captures × (joins + 1) × ops) for the happens-before it recomputes.
func joinCaptures(p *plan.Plan) int {
	added := 0
	for _, c := range p.Captures {
		for {
			s, at := unjoinedStream(p, c)
			if s < 0 {
				break
			}
			so := p.IssueOrder[at]
			ev := -1
			if o := p.Streams[s].Ops[so[1]]; o.Kind == plan.OpRecord {
				ev = o.Event
			} else {
				ev = p.Events
				p.Events++
				insertOp(p, s, so[1]+1, at+1, plan.Op{Kind: plan.OpRecord, Event: ev})
			}
			last := p.StageIndex(c.Last)
			for k, so := range p.IssueOrder {
				if o := p.Streams[so[0]].Ops[so[1]]; so[0] == c.Stream && o.Kind == plan.OpLaunch && o.Stage == last {
					insertOp(p, c.Stream, so[1], k, plan.Op{Kind: plan.OpWait, Event: ev})
					break
				}
			}
			added++
		}
	}
	return added
}

// unjoinedStream returns a device stream forked into capture c whose last
// op in the region does not happen before the launch of c's last stage,
// and the issue position of that op; −1 when every forked stream joins.
func unjoinedStream(p *plan.Plan, c plan.Capture) (stream, at int) {
	begin, end := p.CaptureRegion(c)
	joined := p.CaptureJoins(c)
	lastAt := make([]int, len(p.Streams))
	for s := range lastAt {
		lastAt[s] = -1
	}
	for k := begin; k < end; k++ {
		if s := p.IssueOrder[k][0]; joined[s] >= 0 && joined[s] <= k && !p.Streams[s].Host {
			lastAt[s] = k
		}
	}
	v := verify.NewOrder(p)
	lastLaunch := v.LaunchOp[p.StageIndex(c.Last)]
	for s, k := range lastAt {
		if s == c.Stream || k < 0 {
			continue
		}
		so := p.IssueOrder[k]
		if !v.Before(v.OpBase[s]+int32(so[1]), lastLaunch) {
			return s, k
		}
	}
	return -1, -1
}

// insertOp inserts op at index j of stream s's ops and at position k of
// the issue order.
func insertOp(p *plan.Plan, s, j, k int, op plan.Op) {
	for i, so := range p.IssueOrder {
		if so[0] == s && so[1] >= j {
			p.IssueOrder[i][1]++
		}
	}
	p.Streams[s].Ops = slices.Insert(p.Streams[s].Ops, j, op)
	p.IssueOrder = slices.Insert(p.IssueOrder, k, [2]int{s, j})
}

// captureOrder makes the order the passes share keep each capture region
// free of the work its captured stages wait for. Of the stages the order
// puts between a capture's first and last stage, those that do not follow
// the first (in the reduced hazard graph and stream order) but precede a
// stage that does are moved, in their order, to just before the first:
// otherwise the stream order of their records would put them inside the
// region, on streams the capture does not take, where a captured wait for
// them breaks the isolation rule (CaptureIsolation) and a wait before the
// capture begins would come before their records. Moving them is a
// topological order still (their predecessors in the region are moved
// too), and each stream keeps its order (a stage after one that follows
// the first follows it too). Stages that follow the first stay, and so do
// the others (work that runs eagerly while the capture is under way).
// Cost: O(stages + reduced edges) per capture, and when a stage moved, a
// sort of the reduced rows by the new positions.
func (st *state) captureOrder() {
	if len(st.spec.Captures) == 0 {
		return
	}
	index := make(map[string]int32, len(st.spec.Stages))
	for i := range st.spec.Stages {
		index[st.spec.Stages[i].Name] = int32(i)
	}
	const follows, precedes = 1, 2
	moved := false
	on := make([]int8, len(st.names)) // per stream: the mark of its latest stage walked
	for _, c := range st.spec.Captures {
		f, okf := index[c.First]
		l, okl := index[c.Last]
		if !okf || !okl || st.pos[f] >= st.pos[l] {
			continue
		}
		a := int(st.pos[f])
		w := st.topo[a : st.pos[l]+1]
		mark := make([]int8, len(w))
		at := func(u int32) int { return int(st.pos[u]) - a } // u's index in w, if 0 ≤ it < len(w)
		// Forward: the stages that follow the first. A stream's stages
		// after one that does follow it too.
		clear(on)
		for i, v := range w {
			s := st.stream[v]
			if i == 0 || on[s] == follows {
				mark[i] = follows
			} else {
				for _, u := range st.redPred.row(int(v)) {
					if j := at(u); j >= 0 && mark[j] == follows {
						mark[i] = follows
						break
					}
				}
			}
			if mark[i] == follows {
				on[s] = follows
			}
		}
		// Backward: the others that precede a marked stage. A stream's
		// stages before a marked one precede it.
		clear(on)
		n := 0
		for i := len(w) - 1; i > 0; i-- {
			v := w[i]
			s := st.stream[v]
			if mark[i] == 0 {
				if on[s] != 0 {
					mark[i] = precedes
				} else {
					for _, x := range st.red.row(int(v)) {
						if j := at(x); j < len(w) && mark[j] != 0 {
							mark[i] = precedes
							break
						}
					}
				}
			}
			if mark[i] == precedes {
				n++
			}
			if mark[i] != 0 {
				on[s] = mark[i]
			}
		}
		if n == 0 {
			continue
		}
		moved = true
		order := make([]int32, 0, len(w))
		for i, v := range w {
			if mark[i] == precedes {
				order = append(order, v)
			}
		}
		for i, v := range w {
			if mark[i] != precedes {
				order = append(order, v)
			}
		}
		copy(w, order)
		for i, v := range w {
			st.pos[v] = int32(a + i)
		}
	}
	if !moved {
		return
	}
	for u := range st.n {
		slices.SortFunc(st.red.row(u), func(x, y int32) int { return int(st.pos[x]) - int(st.pos[y]) })
	}
	st.redPred = transpose(st.red, st.topo)
}

// isolateCaptures makes an automatically synchronized plan keep the
// isolation rule (CaptureIsolation) by construction: every wait the
// capture takes on an event it does not record (an earlier iteration's
// record, or one issued before the region), after the waits of its first
// stage, is moved to the first stage's waits, which are issued before
// cuStreamBeginCapture (CaptureRegion); so is such a wait of a stream
// right before the wait by which it joins the capture, which the capture
// would not take (the stream's work before it joins runs eagerly, and the
// captured work after it does not wait for it). A moved wait orders the
// work after it as before: the capture's work follows its first stage
// through the waits by which streams join it. A lag-0 wait whose record
// happens before the first stage's launch, or before the record of
// another moved wait, is dropped rather than moved. Waits outside the
// regions are untouched, so the fewest waits of the sync and iterate
// passes are kept elsewhere.
//
// It returns the waits removed and added (lag 0 and lagged together), and
// the captured waits that cannot move: a lag-0 wait for a record issued
// in the region by work the capture does not take, which a wait before
// the capture would precede (captureOrder leaves such a record only
// where the recording work follows the capture's first stage through work
// no capture can take, such as a host stage). Cost: per capture,
// O(ops × streams) for the happens-before it recomputes plus O(moved²).
func isolateCaptures(p *plan.Plan) (removed, added int, stuck []stuckWait) {
	for ck := range p.Captures {
		r, a, s := isolateCapture(p, ck)
		removed, added, stuck = removed+r, added+a, append(stuck, s...)
	}
	return removed, added, stuck
}

// stuckWait is a captured wait isolateCaptures cannot move: stage Waiter
// (a stage index) of capture Capture waits for the record after stage
// Producer on stream Stream, issued in the region; Via is a host stage
// that follows the capture's first stage and precedes Producer (−1: none
// found).
type stuckWait struct {
	Capture, Waiter, Producer, Stream, Via int
}

func isolateCapture(p *plan.Plan, ck int) (removed, added int, stuck []stuckWait) {
	c := p.Captures[ck]
	first := p.StageIndex(c.First)
	if first < 0 || len(p.IssueOrder) == 0 {
		return 0, 0, nil
	}
	v := verify.NewOrder(p)
	if v.Over {
		return 0, 0, nil
	}
	begin, end := p.CaptureRegion(c)
	joins := p.CaptureJoins(c)
	fl := v.LaunchOp[first]
	firstAt := int(v.OpIssue[fl])
	// The first stage's waits: a lagged wait there already is not added.
	has := map[plan.Op]bool{}
	for k := begin; k < firstAt; k++ {
		if so := p.IssueOrder[k]; so[0] == c.Stream {
			has[p.Streams[so[0]].Ops[so[1]]] = true
		}
	}
	drop := map[[2]int]bool{}
	var lagged []plan.Op
	var recs []int32 // records of lag-0 waits moved, latest first below
	for k := begin; k < end; k++ {
		so := p.IssueOrder[k]
		s, j := so[0], so[1]
		str := &p.Streams[s]
		o := str.Ops[j]
		if o.Kind != plan.OpWait || str.Host {
			continue
		}
		switch J := joins[s]; {
		case s == c.Stream:
			if k < firstAt {
				continue
			}
		case J < 0:
			continue
		case k < J:
			// Only the waits right before the join, of the stage it
			// joins for.
			jj := p.IssueOrder[J][1]
			if slices.ContainsFunc(str.Ops[j:jj], func(o plan.Op) bool { return o.Kind != plan.OpWait }) {
				continue
			}
		}
		g := v.OpBase[s] + int32(j)
		if v.Isolated(ck, o, g, begin, joins) == "" {
			continue
		}
		if o.Lag > 0 {
			drop[so] = true
			if !has[o] {
				has[o] = true
				lagged = append(lagged, o)
			}
			continue
		}
		r := v.OpCaptured[g]
		if int(v.OpIssue[r]) >= begin {
			w, pr := p.OpStage(s, j), p.OpStage(int(v.OpStream[r]), int(v.OpIndex(r)))
			via := -1 // a host stage between the first stage and the record
			for q := begin; q < int(v.OpIssue[r]) && via < 0; q++ {
				if h := p.IssueOrder[q]; p.Streams[h[0]].Host && p.Streams[h[0]].Ops[h[1]].Kind == plan.OpLaunch {
					if hg := v.OpBase[h[0]] + int32(h[1]); v.Before(fl, hg) && v.Before(hg, r) {
						via = p.Streams[h[0]].Ops[h[1]].Stage
					}
				}
			}
			stuck = append(stuck, stuckWait{Capture: ck, Waiter: w, Producer: pr, Stream: int(v.OpStream[r]), Via: via})
			continue
		}
		drop[so] = true
		recs = append(recs, r)
	}
	if len(drop) == 0 {
		return 0, 0, stuck
	}
	// The latest records first: an earlier one that happens before a
	// chosen one (or before the first stage) needs no wait of its own.
	slices.SortFunc(recs, func(x, y int32) int { return int(v.OpIssue[y]) - int(v.OpIssue[x]) })
	var adds []plan.Op
	var chosen []int32
	for _, r := range recs {
		if v.Before(r, fl) || slices.ContainsFunc(chosen, func(c int32) bool { return v.Before(r, c) }) {
			continue
		}
		chosen = append(chosen, r)
		adds = append(adds, plan.Op{Kind: plan.OpWait, Event: p.Streams[v.OpStream[r]].Ops[v.OpIndex(r)].Event})
	}
	adds = append(adds, lagged...)
	slices.SortFunc(adds, func(x, y plan.Op) int { return cmp.Or(x.Event-y.Event, x.Lag-y.Lag) })
	moveWaits(p, drop, c.Stream, int(v.OpIndex(fl)), adds)
	return len(drop), len(adds), stuck
}

// moveWaits removes the ops drop names ((stream, op index) pairs) and
// inserts adds right before op j of stream s, in stream order and in issue
// order, in one pass over the issue order.
func moveWaits(p *plan.Plan, drop map[[2]int]bool, s, j int, adds []plan.Op) {
	ops := make([][]plan.Op, len(p.Streams))
	for t := range p.Streams {
		ops[t] = make([]plan.Op, 0, len(p.Streams[t].Ops)+len(adds))
	}
	order := make([][2]int, 0, len(p.IssueOrder)+len(adds))
	emit := func(t int, o plan.Op) {
		order = append(order, [2]int{t, len(ops[t])})
		ops[t] = append(ops[t], o)
	}
	for _, so := range p.IssueOrder {
		if drop[so] {
			continue
		}
		if so == [2]int{s, j} {
			for _, o := range adds {
				emit(s, o)
			}
		}
		emit(so[0], p.Streams[so[0]].Ops[so[1]])
	}
	for t := range p.Streams {
		p.Streams[t].Ops = ops[t]
	}
	p.IssueOrder = order
}

// isolationError is the spec error for captured waits that no placement
// keeps isolated (isolateCaptures' stuck waits), at the waiting stage: it
// names the capture, both stages and their streams, the host stage between
// them where there is one, and what to change.
func (st *state) isolationError(p *plan.Plan, stuck []stuckWait) error {
	var l dag.ErrorList
	for _, w := range stuck {
		c := p.Captures[w.Capture]
		at := ""
		if c.Source != "" {
			at = " (" + c.Source + ")"
		}
		x, y := p.Stages[w.Waiter].Name, p.Stages[w.Producer].Name
		why := "work the capture cannot take"
		hint := fmt.Sprintf("end the capture before %s, or let %s follow the captured work through device stages only, so that its stream joins the capture", x, y)
		if w.Via >= 0 {
			h := p.Stages[w.Via].Name
			why = fmt.Sprintf("host stage %s, which no capture takes (the host cannot wait for captured work, which has not run)", h)
			hint = fmt.Sprintf("end the capture before %s, or order %s after the capture ends, or let %s not follow %s", x, h, y, h)
		}
		l = append(l, &dag.Error{Pos: st.spec.Stages[w.Waiter].Pos,
			Msg: fmt.Sprintf("stage %s, which the capture of %s…%s on stream %s%s takes, must wait for stage %s on stream %s, issued while the capture is under way but not taken by it: %s follows the captured work through %s. A captured wait for %s fails with CUDA_ERROR_STREAM_CAPTURE_ISOLATION, and a wait before the capture begins would come before %s is issued",
				x, c.First, c.Last, p.Streams[c.Stream].Name, at, y, p.Streams[w.Stream].Name, y, why, y, y),
			Hint: hint})
	}
	return l.Err()
}
