package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/internal/num"
	"github.com/dagrun/dagrun/plan"
)

// iterMaxPrune bounds the cross waits that the iterate pass tries to drop
// one by one after placing them, and iterMaxPruneWork the work of those
// tries (the ops their walks visit and the clock entries they read, in
// all; a try that fails stops at the first order it misses): past either,
// the waits not tried stay (correct, possibly not minimal), and a note
// says so. (The bounds of this file are variables so that tests can lower
// them.)
var (
	iterMaxPrune     = 512
	iterMaxPruneWork = 200_000_000
)

// iterMaxClock bounds the walk of the iterate pass: it keeps a snapshot
// per stage for the last few unrolled iterations, and a dense vector clock
// per physical stream, which a join that teaches the stream something new
// reads and may copy (a join that does not costs O(1)), so its time and
// memory grow as iterations × such joins × physical streams. A plan whose
// iterations × waits × physical streams exceed it, or whose walk passes it,
// gets the barrier form (WithIteration) and a note.
var iterMaxClock = 100_000_000 // clock entries read by one walk, 4 bytes each

// iterReq is one cross-iteration order the reference semantics needs: stage
// a of iteration i−d happens-before stage b of iteration i, for every i ≥ d.
type iterReq struct {
	a, d int32
}

// iterate plans the iterations (Iteration): stream sets, the cross-
// iteration hazards and the waits they need, and event slots.
//
// Hazards: two accesses of stages a and b conflict across iterations when
// they overlap on a buffer with K copies and one writes; then a in
// iteration i−K must happen-before b in iteration i (and b before a). Longer
// distances (2K, …) follow by induction through the writer's own WAW at
// distance K, so distance K is all that is needed.
//
// Waits: like sync, but with vector clocks carried across iterations
// (Lamport 1978; Fidge 1988, Mattern 1989). The pass walks enough unrolled
// iterations in issue order, physical stream by physical stream, and before
// each launch adds a cross wait for every needed order that stream order
// and the waits so far do not give, trying producers latest first. It then
// drops, one at a time, each cross wait without which the walk still meets
// every order. Each producer of a cross wait records an event right after
// its launch (sync's event when it has one); slots follow from the lags.
//
// Manual specs (their waits are the user's) and plans beyond the walk's
// bound (iterMaxClock) get the barrier form instead
// (WithIteration): correct for any race-free iteration, iterations not
// overlapping; a note states the cost.
//
// Errors: negative stream sets; more stream sets (given, or by default
// the largest copies of any buffer) than plan.MaxStreamSetStreams device
// streams hold, naming the most that fit. docs/design/iterate.md has the
// design.
func iterate(st *state) error {
	p := st.plan
	n, S := len(p.Stages), len(p.Streams)
	copies := make([]int, len(p.Buffers)) // per Plan.Buffers index
	kmax, kbuf := 1, ""                   // the most copies of any buffer, and the first buffer with them
	for i, b := range p.Buffers {
		copies[i] = max(b.Copies, 1)
		if b.Copies > kmax {
			kmax, kbuf = b.Copies, b.Name
		}
	}
	R := st.opts.StreamSets
	switch {
	case R < 0:
		return fmt.Errorf("stream sets %d: want ≥ 0 (0: the largest copies, 1: no extra streams)", R)
	case st.manual && p.Iteration != nil:
		return nil // the spec's own waits across iterations ({stage: X, lag: N})
	case st.manual:
		if S > 1 || kmax > 1 {
			st.barrier("the spec's waits order one iteration only (waits: [{stage: X, lag: N}] order iterations)")
		} else {
			st.withIteration()
		}
		return nil
	case R != 1 && plan.HasDefaultStream(p): // verify's implicit.go
		if R > 1 || kmax > 1 {
			st.note("one stream set: stream %s is a default stream, of which CUDA has one (per context, or per thread), so iterations do not get streams of their own", plan.DefaultStreamName(p))
		}
		R = 1
	case R == 0 && st.strategy == StrategySingle:
		R = 1
	case R == 0:
		R = kmax
	}
	if R > 1 {
		device := 0
		for _, s := range p.Streams {
			if !s.Host {
				device++
			}
		}
		if most := min(plan.MaxStreamSetStreams/max(device, 1), plan.MaxLag); R > most {
			from, or := "", ""
			switch {
			case st.opts.StreamSets == 0: // the default: one set per copy of the largest ring
				from = fmt.Sprintf(" (the default, one per copy of buffer %s)", kbuf)
			case kbuf == "":
				or = ", or 0 (one stream set: every buffer has one copy)"
			case kmax <= most:
				or = fmt.Sprintf(", or 0 (one set per copy of buffer %s: %d)", kbuf, kmax)
			}
			return fmt.Errorf("stream sets %d%s: %d copies of this plan's %d device streams would be more than %d physical streams (a GPU runs at most a few hundred at once): use --stream-sets %d or fewer (PlanOptions.StreamSets)%s", R, from, R, device, plan.MaxStreamSetStreams, most, or)
		}
	}
	// The walks below unroll at most 64 iterations of the period: a
	// least common multiple saturating past that never overflows (ring
	// sizes of distinct primes pass 2^63 in a few dozen buffers).
	period := plan.LCM(64, R, copies)
	p.Iteration = &plan.Iteration{StreamSets: R} // provisional: the walk maps streams through it
	_, P := p.PhysicalStreams()
	// Each wait of an iteration may join a clock of P entries: the walk's
	// work is at most about U0·waits·P (U0 iterations) plus its cross
	// waits', and plans with that many streams cost the verifier as much.
	if U0 := min(period, 64) + 4; U0*p.Stats.Waits*P > iterMaxClock {
		p.Iteration = nil
		st.barrier(fmt.Sprintf("the iterate pass is bounded at %s vector-clock entries read (this plan could need %s: %d iterations × %s waits × %s physical streams)",
			num.Thousands(iterMaxClock), num.Thousands(U0*p.Stats.Waits*P), U0, num.Thousands(p.Stats.Waits), num.Thousands(P)))
		return nil
	}
	reqs, inflight := iterHazards(p, copies, st.accesses())
	// Latest producer first: smaller distance, then later in issue order.
	pos := plan.LaunchPositions(p)
	for b := range n {
		slices.SortFunc(reqs.row(b), func(x, y iterReq) int {
			return cmp.Or(cmp.Compare(x.d, y.d), cmp.Compare(pos[y.a], pos[x.a]))
		})
	}
	dmax := 1
	for _, r := range reqs.r {
		dmax = max(dmax, int(r.d))
	}
	U := min(period, 64) + 2*dmax + 2
	w := &iterWalk{p: p, S: S, R: R, n: n, U: U, window: dmax + 1, reqs: reqs, cross: make([][]iterReq, n), limit: iterMaxClock}
	if !w.run(true) {
		p.Iteration = nil
		st.barrier(fmt.Sprintf("the iterate pass is bounded at %s vector-clock entries read, and its walk over %d iterations of %s physical streams passed that in iteration %d (cross-iteration orders to meet: %s)",
			num.Thousands(iterMaxClock), U, num.Thousands(P), w.stopped+1, num.Thousands(len(reqs.r))))
		return nil
	}
	// Drop cross waits that others make redundant, latest added first.
	total := len(w.added)
	if total > iterMaxPrune {
		st.note("cross-iteration waits are not minimized: the iterate pass drops redundant ones only up to %d waits (this plan has %d), so some of its %d cross-iteration waits may be redundant",
			iterMaxPrune, total, total)
	} else if total > 0 {
		w.limit = 0
		spent, tried := 0, 0
		for i := len(w.added) - 1; i >= 0; i-- {
			b, r := w.added[i][0], iterReq{w.added[i][1], w.added[i][2]}
			k := slices.Index(w.cross[b], r)
			w.cross[b] = slices.Delete(w.cross[b], k, k+1)
			w.budget = iterMaxPruneWork - spent
			ok := w.budget > 0 && w.run(false)
			spent += w.steps
			if !ok {
				w.cross[b] = slices.Insert(w.cross[b], k, r)
			}
			if w.budget <= 0 || w.exhausted {
				break
			}
			tried++
		}
		w.budget, w.exhausted = 0, false
		if tried < total {
			st.note("cross-iteration waits are not minimized: the iterate pass spends at most %s steps (ops walked and clock entries read) dropping redundant ones, and tried %d of this plan's %d before that, so some of the other %d may be redundant",
				num.Thousands(iterMaxPruneWork), tried, total, total-tried)
		}
	}
	if st.opts.Check {
		// The walks above resume after iteration 0; one from the start
		// must agree with them.
		w.limit = 0
		resumed, work := w.run(false), w.work
		w.first = nil
		if fresh := w.run(false); !resumed || !fresh || work != w.work {
			return fmt.Errorf("the walk resumed after iteration 0 disagrees with the walk from the start: orders met %v and %v, clock entries read %d and %d", resumed, fresh, work, w.work)
		}
	}
	for b := range w.cross {
		slices.SortFunc(w.cross[b], func(x, y iterReq) int {
			return cmp.Or(cmp.Compare(pos[x.a], pos[y.a]), cmp.Compare(x.d, y.d))
		})
	}
	emitCross(p, w.cross, R)
	removed, added, _ := isolateCaptures(p) // capture.go: cross waits the captures take, on their first stages
	replays, left := orderReplays(p)        // capture_replay.go: a joined stream's work across iterations ordered through the capture's stream
	if len(left) > 0 {
		return st.replayOrderError(p, left)
	}
	if removed+added+replays > 0 {
		p.Stats.Waits, p.Iteration.CrossWaits = waitCounts(p)
		p.Iteration.Slots = crossSlots(p)
	}
	p.Iteration.InFlight = inflight
	p.Stats.Events = p.Events
	return nil
}

// barrier gives the plan the barrier form of iteration info
// (WithIteration), with a note giving why (a clause) and what it costs.
func (st *state) barrier(why string) {
	st.withIteration()
	p := st.plan
	S := len(p.Streams)
	cost := "cross-iteration waits would let consecutive iterations overlap as far as their hazards allow"
	if k := iterInFlight(p); k > 1 {
		cost += fmt.Sprintf(", up to %d at once", k)
	}
	how := fmt.Sprintf("a barrier separates them (%s waits and %s records per iteration)", num.Thousands(2*(S-1)), num.Thousands(S))
	if S <= 1 {
		how = "they run one after another on the plan's one stream"
	}
	if threads := planThreads(p); len(threads) > 1 {
		// The barrier's waits on another thread's records are not handed
		// over by a host event: they order nothing.
		st.note("iterations are not separated across host threads: %s, and the barrier between iterations (%s waits and %s records per iteration) waits on records of streams that other threads (%s) issue, which orders nothing without a host event handing each record over; iterations of different threads may overlap, and check unrolls them",
			why, num.Thousands(2*(S-1)), num.Thousands(S), strings.Join(threads, ", "))
		return
	}
	st.note("iterations do not overlap: %s, so %s; %s", why, how, cost)
}

// planThreads is the host threads that issue p's streams, in order of
// their first stream ("main" for the main thread).
func planThreads(p *plan.Plan) []string {
	var out []string
	for _, s := range p.Streams {
		if t := plan.ThreadLabel(s.Thread); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// iterInFlight is the in-flight bound of p's iterations with cross-iteration
// waits (Iteration.InFlight): the smallest copies of a written buffer, all
// of the arena counting as one copy (every write conflicts with itself
// across iterations), or the largest copies when nothing is written.
func iterInFlight(p *plan.Plan) int {
	copies := make(map[string]int, len(p.Buffers))
	kmax := 1
	for _, b := range p.Buffers {
		k := max(b.Copies, 1)
		if b.ArenaOffset != nil {
			k = 1
		}
		copies[b.Name] = k
		kmax = max(kmax, k)
	}
	k := 0
	for _, sg := range p.Stages {
		for _, w := range sg.Writes {
			if c := max(copies[w.Buffer], 1); k == 0 || c < k {
				k = c
			}
		}
	}
	if k == 0 {
		return kmax
	}
	return k
}

// emitCross writes the cross waits into p: for each producer a record right
// after its launch (reusing the one there), for each consumer its cross
// waits right before its launch, in stream order and issue order; then the
// event slots and p.Iteration.
func emitCross(p *plan.Plan, cross [][]iterReq, R int) {
	n := len(p.Stages)
	event := make([]int, n) // producer → its event (-1: none yet)
	for i := range event {
		event[i] = -1
	}
	need := make([]bool, n)
	waits := 0
	for _, c := range cross {
		for _, r := range c {
			need[r.a] = true
			waits++
		}
	}
	// Reuse a record right after the producer's launch.
	for _, str := range p.Streams {
		for j, o := range str.Ops {
			if o.Kind == plan.OpLaunch && need[o.Stage] && j+1 < len(str.Ops) && str.Ops[j+1].Kind == plan.OpRecord {
				event[o.Stage] = str.Ops[j+1].Event
			}
		}
	}
	// New events in issue order of their producers.
	for _, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpLaunch && need[o.Stage] && event[o.Stage] < 0 {
			event[o.Stage] = p.Events
			p.Events++
		}
	}
	newRec := make([]bool, n) // a record must be inserted after this launch
	for _, str := range p.Streams {
		for j, o := range str.Ops {
			if o.Kind == plan.OpLaunch && need[o.Stage] && !(j+1 < len(str.Ops) && str.Ops[j+1].Kind == plan.OpRecord) {
				newRec[o.Stage] = true
			}
		}
	}
	ops := make([][]plan.Op, len(p.Streams))
	for s, str := range p.Streams {
		c := len(str.Ops) // and the cross waits and records it gets
		for _, o := range str.Ops {
			if o.Kind == plan.OpLaunch {
				c += len(cross[o.Stage])
				if newRec[o.Stage] {
					c++
				}
			}
		}
		ops[s] = make([]plan.Op, 0, c)
	}
	order := make([][2]int, 0, len(p.IssueOrder)+waits)
	emit := func(s int, o plan.Op) {
		order = append(order, [2]int{s, len(ops[s])})
		ops[s] = append(ops[s], o)
	}
	// A collective's ranks are launched consecutively, as one group
	// (syncStreams): every rank's cross waits go before the group's first
	// launch and the records after its last, as sync places its own, so
	// that nothing is issued between the ranks. (A wait moved earlier on
	// its stream, or a record later, past ops of other streams only,
	// orders the same.)
	ranks := false // the plan has a collective
	for v := range p.Stages {
		ranks = ranks || p.Stages[v].Collective != nil
	}
	rankOf := func(so [2]int) *plan.Collective {
		if !ranks {
			return nil
		}
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpLaunch {
			return p.Stages[o.Stage].Collective
		}
		return nil
	}
	crossWaits := func(s, stage int) {
		for _, r := range cross[stage] {
			emit(s, plan.Op{Kind: plan.OpWait, Event: event[r.a], Lag: int(r.d)})
		}
	}
	var deferred [][2]int // (stream, stage): records after the group's last rank
	for k, so := range p.IssueOrder {
		s := so[0]
		o := p.Streams[s].Ops[so[1]]
		c := rankOf(so)
		first := c != nil && (k == 0 || rankOf(p.IssueOrder[k-1]) == nil || rankOf(p.IssueOrder[k-1]).Group != c.Group)
		last := c != nil && (k+1 == len(p.IssueOrder) || rankOf(p.IssueOrder[k+1]) == nil || rankOf(p.IssueOrder[k+1]).Group != c.Group)
		switch {
		case first:
			for q := k; q < len(p.IssueOrder); q++ {
				if rc := rankOf(p.IssueOrder[q]); rc == nil || rc.Group != c.Group {
					break
				}
				crossWaits(p.IssueOrder[q][0], p.Streams[p.IssueOrder[q][0]].Ops[p.IssueOrder[q][1]].Stage)
			}
		case c == nil && o.Kind == plan.OpLaunch:
			crossWaits(s, o.Stage)
		}
		emit(s, o)
		if o.Kind == plan.OpLaunch && newRec[o.Stage] {
			deferred = append(deferred, [2]int{s, o.Stage})
		}
		if c == nil || last {
			for _, d := range deferred {
				emit(d[0], plan.Op{Kind: plan.OpRecord, Event: event[d[1]]})
			}
			deferred = deferred[:0]
		}
	}
	for s := range p.Streams {
		p.Streams[s].Ops = ops[s]
	}
	p.IssueOrder = order
	p.Iteration = &plan.Iteration{StreamSets: R, Slots: crossSlots(p), CrossWaits: waits}
}

// waitCounts returns p's waits with lag 0 and with a lag.
func waitCounts(p *plan.Plan) (waits, cross int) {
	for _, str := range p.Streams {
		for _, o := range str.Ops {
			switch {
			case o.Kind == plan.OpWait && o.Lag > 0:
				cross++
			case o.Kind == plan.OpWait:
				waits++
			}
		}
	}
	return waits, cross
}

// crossSlots returns the event slots p's cross waits need: the next
// record of the slot a lag-d wait reads is d' = slots iterations later; it
// must come after the wait in issue order, so an event needs d slots for a
// lag-d wait issued before its record in an iteration, d+1 for one issued
// after it, and 1 with no cross wait.
func crossSlots(p *plan.Plan) []int {
	recPos := make([]int, p.Events) // issue position of each event's latest record in an iteration
	waitPos := map[[2]int]int{}     // (event, lag) → latest issue position of such a wait
	for k, so := range p.IssueOrder {
		switch o := p.Streams[so[0]].Ops[so[1]]; {
		case o.Kind == plan.OpRecord:
			recPos[o.Event] = k
		case o.Kind == plan.OpWait && o.Lag > 0:
			waitPos[[2]int{o.Event, o.Lag}] = k
		}
	}
	slots := make([]int, p.Events)
	for e := range slots {
		slots[e] = 1
	}
	for k, wp := range waitPos {
		e, d := k[0], k[1]
		need := d
		if recPos[e] < wp {
			need = d + 1
		}
		slots[e] = max(slots[e], need)
	}
	return slots
}
