package verify

import (
	"errors"
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/plan"
)

// CaptureReplayOrder is the capture rule of a replay's order (its
// CaptureViolation has no driver error: the GPU races silently). A
// graph's nodes depend only on captured work (CUDA programming guide,
// "CUDA Graphs", cross-stream dependencies and events; a dependency may
// cross the capture's boundary only through the origin stream's order,
// cudaErrorStreamCaptureIsolation): a replay, launched on the capture's
// stream, starts after the work issued to that stream before it, and a
// stream that joined the capture runs its captured work after the wait
// that joined it and nothing of its own before it. The stream's work
// issued before it joined (its eager launches, and a wait it issued
// before the joining one) and its work issued after the capture ended
// are not ordered against the captured work in a replay, though stream
// order puts them so in stream mode and in the capturing iteration's
// issue order.
const CaptureReplayOrder = "replay order"

// ReplayPlan returns p as graph mode runs it (executor: capture regions):
// for each capture, each stream that joins it (CaptureJoins), other than
// the capture's own, has its captured ops moved to a stream of their own
// (a graph branch), which first waits on an event recorded on the
// capture's stream right before the launch of the capture's first stage
// (the replay's launch point: after the first stage's waits, which are
// issued before the capture begins), and every event recorded in the
// region by captured work is recorded again on the capture's stream at
// the region's end (graph mode records them after each replay). Verify
// of the result is happens-before as a replay has it. It returns p itself
// when no capture takes another stream (a replay then orders as p does).
// p must be valid.
func ReplayPlan(p *plan.Plan) *plan.Plan {
	type move struct{ from, to int }
	var moves [][]move // per capture: the streams it moves
	any := false
	for _, c := range p.Captures {
		var ms []move
		for s, j := range p.CaptureJoins(c) {
			if j >= 0 && s != c.Stream && !p.Streams[s].Host {
				ms = append(ms, move{from: s})
				any = true
			}
		}
		moves = append(moves, ms)
	}
	if !any {
		return p
	}
	q := *p
	q.Streams = slices.Clone(p.Streams)
	for s := range q.Streams {
		q.Streams[s].Ops = nil
	}
	q.Stages = slices.Clone(p.Stages)
	q.Lifetimes = nil // a branch's records are not its stream's: the lifetime check is stream mode's
	q.AccOwn, q.AccBuf = false, nil
	if p.Iteration != nil {
		it := *p.Iteration
		it.Slots = slices.Clone(it.Slots)
		q.Iteration = &it
	}
	// Per issue position: the ops to issue before it, and where its op goes.
	before := map[int][]plan.Op{} // ops of q issued before position k, with their streams in beforeS
	beforeS := map[int][]int{}
	after := map[int][]plan.Op{} // and after it
	afterS := map[int][]int{}
	to := make([]int, len(p.IssueOrder)) // the stream of q that takes the op at k
	for k, so := range p.IssueOrder {
		to[k] = so[0]
	}
	newEvent := func() int {
		e := q.Events
		q.Events++
		if q.Iteration != nil {
			q.Iteration.Slots = append(q.Iteration.Slots, 1)
		}
		return e
	}
	for ck, c := range p.Captures {
		if len(moves[ck]) == 0 {
			continue
		}
		begin, end := p.CaptureRegion(c)
		joins := p.CaptureJoins(c)
		f := p.StageIndex(c.First)
		at := begin // the launch of the first stage
		for ; at < end; at++ {
			if so := p.IssueOrder[at]; so[0] == c.Stream && p.Streams[so[0]].Ops[so[1]].Kind == plan.OpLaunch && p.Streams[so[0]].Ops[so[1]].Stage == f {
				break
			}
		}
		launch := newEvent()
		before[at] = append(before[at], plan.Op{Kind: plan.OpRecord, Event: launch})
		beforeS[at] = append(beforeS[at], c.Stream)
		for m := range moves[ck] {
			s := moves[ck][m].from
			b := len(q.Streams)
			moves[ck][m].to = b
			src := p.Streams[s]
			q.Streams = append(q.Streams, plan.Stream{ID: b, Name: fmt.Sprintf("%s (its branch of the graph of %s…%s)", src.Name, c.First, c.Last),
				Kind: plan.StreamNonBlocking, Thread: src.Thread, Device: src.Device})
			j := joins[s]
			before[j] = append(before[j], plan.Op{Kind: plan.OpWait, Event: launch})
			beforeS[j] = append(beforeS[j], b)
			for k := j; k < end; k++ {
				if p.IssueOrder[k][0] == s {
					to[k] = b
				}
			}
		}
		// The records of the region's captured work, again after it.
		seen := map[int]bool{}
		for k := begin; k < end; k++ {
			so := p.IssueOrder[k]
			if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpRecord && joins[so[0]] >= 0 && joins[so[0]] <= k && !seen[o.Event] {
				seen[o.Event] = true
				after[end-1] = append(after[end-1], o)
				afterS[end-1] = append(afterS[end-1], c.Stream)
			}
		}
	}
	q.IssueOrder = make([][2]int, 0, len(p.IssueOrder)+2*len(before))
	emit := func(s int, o plan.Op) {
		q.IssueOrder = append(q.IssueOrder, [2]int{s, len(q.Streams[s].Ops)})
		q.Streams[s].Ops = append(q.Streams[s].Ops, o)
	}
	for k, so := range p.IssueOrder {
		for i, o := range before[k] {
			emit(beforeS[k][i], o)
		}
		o := p.Streams[so[0]].Ops[so[1]]
		if o.Kind == plan.OpLaunch {
			q.Stages[o.Stage].Stream = to[k]
		}
		emit(to[k], o)
		for i, o := range after[k] {
			emit(afterS[k][i], o)
		}
	}
	return &q
}

// ReplayRace is a race of a replay that p does not have: stage Moved,
// moved into the branch of capture Capture (ReplayPlan), and stage Other,
// earlier in issue order (in an earlier iteration, or the same one:
// SameIter) or not (Before).
type ReplayRace struct {
	Capture, Moved, Other int
	Race                  Race
	Before, SameIter      bool
	Lag                   int // iterations between the earlier stage of the pair and the later
	// For a race of two stages neither captured (stream mode ordered
	// them through a branch): the earlier stage, the later one and the
	// iterations between them; Through is false for other races.
	Through                 bool
	Early, Late, ThroughLag int
}

// ReplayRaces returns the races of p as a replay runs it (ReplayPlan) that
// p does not have, once per pair of stages. Cost: two Verify runs.
func ReplayRaces(p *plan.Plan) []ReplayRace {
	q := ReplayPlan(p)
	if q == p {
		return nil
	}
	var re *RaceError
	if err := verify(q, false); !errors.As(err, &re) || len(re.Races) == 0 {
		return nil
	}
	// A plan with iteration info is verified unrolled: its races name
	// stage i of iteration t as t·n + i.
	n := len(p.Stages)
	had := map[replayPair]bool{}
	var pre *RaceError
	if err := verify(p, false); errors.As(err, &pre) {
		for _, r := range pre.Races {
			had[replayKey(r, n)] = true
		}
	}
	pos := make([]int, len(p.Stages)) // per stage: the issue position of its launch
	for k, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpLaunch {
			pos[o.Stage] = k
		}
	}
	capOf := replayCaptureOf(p, q, pos)
	rs := &replayRaces{p: p, pos: pos, capOf: capOf, branchOf: replayBranches(p, pos, capOf), done: map[[2]int]bool{}}
	for _, r := range re.Races {
		k := replayKey(r, n)
		if had[k] {
			continue // p's own race
		}
		moved, other, mi, oi := k.a, k.b, r.First/n, r.Second/n
		if _, ok := capOf[moved]; !ok {
			moved, other, mi, oi = other, moved, oi, mi
		}
		if _, ok := capOf[moved]; ok {
			rs.through = ReplayRace{}
			rs.add(moved, other, mi, oi, r)
			continue
		}
		rs.addThrough(k, r, n)
	}
	return rs.out
}

// replayPair names a race of an unrolled plan by its stages in p, the
// iterations between them and the buffer, so that a race of p and the
// replay's race of the same pair match.
type replayPair struct {
	a, b, lag int
	buf       string
}

// replayKey is r's replayPair; n is the stages of one iteration.
func replayKey(r Race, n int) replayPair {
	return replayPair{r.First % n, r.Second % n, r.Second/n - r.First/n, r.Buffer}
}

// replayCaptureOf maps each stage that replay q runs in a capture's branch
// to that capture (an index into p.Captures); pos is each stage's issue
// position in p.
func replayCaptureOf(p, q *plan.Plan, pos []int) map[int]int {
	// The capture whose branch runs each moved stage.
	capOf := map[int]int{}
	for s := len(p.Streams); s < len(q.Streams); s++ {
		for _, o := range q.Streams[s].Ops {
			if o.Kind != plan.OpLaunch {
				continue
			}
			for ck, c := range p.Captures {
				if b, e := p.CaptureRegion(c); b <= pos[o.Stage] && pos[o.Stage] < e {
					capOf[o.Stage] = ck
				}
			}
		}
	}
	// A stage on the capture's own stream in the region is captured too:
	// a joined stream's work outside the capture that stream mode orders
	// against it only through that stream's joining wait (a graph edge in
	// a replay) races it in a replay.
	for ck, c := range p.Captures {
		b, e := p.CaptureRegion(c)
		for k := b; k < e; k++ {
			so := p.IssueOrder[k]
			if o := p.Streams[so[0]].Ops[so[1]]; so[0] == c.Stream && o.Kind == plan.OpLaunch {
				if _, ok := capOf[o.Stage]; !ok {
					capOf[o.Stage] = ck
				}
			}
		}
	}
	return capOf
}

// branchStage is, for a stage of a stream that joins a capture, issued
// before it joins (pre) or after the capture (not pre), the branch's first
// and last stages (launch order), which stream order puts around it.
type branchStage struct {
	first, last int
	pre         bool
}

// replayBranches returns the branchStage of each stage of a stream that
// joins a capture, outside the capture; capOf is replayCaptureOf's map.
func replayBranches(p *plan.Plan, pos []int, capOf map[int]int) map[int]branchStage {
	branchOf := map[int]branchStage{}
	for ck, c := range p.Captures {
		_, e := p.CaptureRegion(c)
		for s, j := range p.CaptureJoins(c) {
			if j < 0 || s == c.Stream || p.Streams[s].Host {
				continue
			}
			firstIn, lastIn := -1, -1
			for k := j; k < e; k++ {
				if so := p.IssueOrder[k]; so[0] == s {
					if o := p.Streams[s].Ops[so[1]]; o.Kind == plan.OpLaunch && capOf[o.Stage] == ck {
						if firstIn < 0 {
							firstIn = o.Stage
						}
						lastIn = o.Stage
					}
				}
			}
			if firstIn < 0 {
				continue
			}
			for _, o := range p.Streams[s].Ops {
				if o.Kind != plan.OpLaunch {
					continue
				}
				if at := pos[o.Stage]; at < j {
					branchOf[o.Stage] = branchStage{firstIn, lastIn, true}
				} else if at >= e {
					branchOf[o.Stage] = branchStage{firstIn, lastIn, false}
				}
			}
		}
	}
	return branchOf
}

// replayRaces collects ReplayRaces' result, once per pair of stages.
type replayRaces struct {
	p        *plan.Plan
	pos      []int // per stage: the issue position of its launch
	capOf    map[int]int
	branchOf map[int]branchStage
	out      []ReplayRace
	done     map[[2]int]bool
	through  ReplayRace // the pair of a race of two stages neither captured
}

// add records the race r of stage moved (iteration mi), which a capture's
// branch runs, and stage other (iteration oi), unless the pair has one.
func (rs *replayRaces) add(moved, other, mi, oi int, r Race) {
	ck := rs.capOf[moved]
	if rs.done[[2]int{moved, other}] {
		return
	}
	rs.done[[2]int{moved, other}] = true
	rr := rs.through
	rr.Capture, rr.Moved, rr.Other, rr.Race = ck, moved, other, r
	rr.Before, rr.SameIter, rr.Lag = oi < mi || oi == mi && rs.pos[other] < rs.pos[moved], oi == mi, max(mi-oi, oi-mi)
	rs.out = append(rs.out, rr)
}

// addThrough records race r (pair k; n stages an iteration) of two stages
// neither captured. Stream mode ordered them through a joined stream's
// captured work, which a replay runs as a graph branch: the earlier stage
// is that stream's work before it joined (the branch does not follow it),
// or the later one its work after the capture (it does not follow the
// branch). The pair is the stage and the branch's first or last stage.
// Where both stages are joined streams' work outside the capture, the
// earlier one reaches a replay only through the first stage's waits and
// the later one follows it only through a wait for the last stage: both
// sides are races of the replay, each named but for a side whose wait p
// already has.
func (rs *replayRaces) addThrough(k replayPair, r Race, n int) {
	p, pos := rs.p, rs.pos
	a, b, ai, bi := k.a, k.b, r.First/n, r.Second/n
	if bi < ai || bi == ai && pos[b] < pos[a] {
		a, b, ai, bi = b, a, bi, ai
	}
	rs.through = ReplayRace{Through: true, Early: a, Late: b, ThroughLag: bi - ai}
	ma, okA := rs.branchOf[a]
	mb, okB := rs.branchOf[b]
	okB = okB && (!mb.pre || bi > 0)
	// a's stream reaches the branch of a's iteration (a before the
	// join) or of the next one (a after the capture).
	aMi := ai
	if okA && !ma.pre {
		aMi = ai + 1
	}
	// b's stream follows the branch of b's iteration (b after the
	// capture) or of the one before (b before the join).
	bMi := bi
	if okB && mb.pre {
		bMi = bi - 1
	}
	if okA && okB {
		fa, la := p.StageIndex(p.Captures[rs.capOf[ma.first]].First), p.StageIndex(p.Captures[rs.capOf[mb.last]].Last)
		hasA := plan.HasWait(p, a, fa, aMi-ai)
		hasB := plan.HasWait(p, la, b, bi-bMi)
		if !hasA || hasB {
			rs.add(ma.first, a, aMi, ai, r)
		}
		if !hasB {
			rs.add(mb.last, b, bMi, bi, r)
		}
	} else if okA {
		rs.add(ma.first, a, aMi, ai, r)
	} else if okB {
		rs.add(mb.last, b, bMi, bi, r)
	}
}

// replayOrder returns the violations of CaptureReplayOrder (replayRaces),
// each named by the captured stage of its pair.
func replayOrder(p *plan.Plan) []CaptureViolation {
	var out []CaptureViolation
	for _, rr := range ReplayRaces(p) {
		r, c := rr.Race, p.Captures[rr.Capture]
		st, ot := &p.Stages[rr.Moved], &p.Stages[rr.Other]
		sn := p.Streams[st.Stream].Name
		how, joined := "captured on stream "+sn+", which joined the capture", sn
		if st.Stream == c.Stream {
			how, joined = "captured on stream "+sn+", the capture's stream", p.Streams[ot.Stream].Name
		}
		var fix string
		switch {
		case rr.Before:
			fix = fmt.Sprintf("in each replay, %s (%s) runs unordered with %s (stream %s), which it follows only in stream order or through a wait %s issued before it joined: a graph's nodes depend on captured work and on the work issued to %s before the launch only (%s race on %s); wait for %s before the capture begins: add it to the waits of %s, the capture's first stage, whose waits are issued before cuStreamBeginCapture (issue %s before %s)",
				st.Name, how, ot.Name, p.Streams[ot.Stream].Name, joined, p.Streams[c.Stream].Name, r.Kind, BufferSiteOf(r.Buffer), ot.Name, c.First, ot.Name, c.First)
		case st.Stream == c.Stream:
			on := p.Streams[ot.Stream].Name
			fix = fmt.Sprintf("in each replay, %s (%s) runs unordered with %s (stream %s), which follows it only through the wait by which stream %s joined the capture: in a replay that wait is a graph edge, which stream %s's work after the capture does not follow (%s race on %s); add %s to the waits of %s: its record after the capture comes after the whole replay",
				st.Name, how, ot.Name, on, on, on, r.Kind, BufferSiteOf(r.Buffer), c.Last, ot.Name)
		default:
			fix = fmt.Sprintf("in each replay, %s (%s) runs unordered with %s (stream %s), which follows it in stream order only: a graph's nodes are not stream %s's work (%s race on %s); add %s to the waits of %s: its record after the capture comes after the whole replay",
				st.Name, how, ot.Name, p.Streams[ot.Stream].Name, sn, r.Kind, BufferSiteOf(r.Buffer), c.Last, ot.Name)
		}
		out = append(out, CaptureViolation{Rule: CaptureReplayOrder, Stage: st.Name, Stream: sn, Fix: fix, Source: st.Source})
	}
	return out
}
