package verify

import (
	"fmt"
	"slices"
	"sort"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/plan"
)

// Rules that order work without an event: each names a CUDA rule, and a
// race report names the one that did not apply (Race.Rule).
const (
	// RuleLegacy: the legacy default stream and every blocking stream of
	// its context wait for each other's earlier-issued work; non-blocking
	// streams are not ordered with it.
	RuleLegacy = "legacy default stream"
	// RuleHostReturn: a host stage, a host wait, and a synchronous copy
	// that completes before it returns order the work its thread issues
	// after it, and only that thread's.
	RuleHostReturn = "host return"
	// RuleStaged: a synchronous copy from pageable memory returns once its
	// source is staged; its write to the device may still be in flight.
	RuleStaged = "pageable staging"
	// RuleAsyncCopy: an asynchronous copy returns before it runs: the host
	// is ordered after it only by an event.
	RuleAsyncCopy = "asynchronous copy"
	// RulePageableSource: an asynchronous copy from pageable memory to
	// the device (cuMemcpyHtoDAsync) stages its source when the host calls
	// it, not in its stream's order: it reads what the host has seen
	// done by then, and its stream's earlier work may not have run.
	RulePageableSource = "pageable source"
	// RuleHostFunc: a host function (cuLaunchHostFunc) runs in its
	// stream's order on a driver thread, not when the host issues it.
	RuleHostFunc = "host function"
	// RuleThreads: each host thread has its own issue order; another
	// thread's work is ordered only through a host event handed over.
	RuleThreads = "host threads"
	// RuleRendezvous: a collective's ranks (NCCL's) complete only after
	// every rank has started, so what precedes any rank on its stream
	// happens-before what follows every rank on its own.
	RuleRendezvous = "collective rendezvous"
)

// implicitOrder is the happens-before that CUDA adds to stream order and
// record→wait, derived from the plan alone in one walk over IssueOrder:
//
//   - the legacy default stream waits, at each op, for the latest op issued
//     before it on every blocking stream, and each blocking stream waits
//     for the latest op issued on the legacy stream before its own
//     ("Stream synchronization behavior");
//   - an op that the host waits for before the call returns (a host stage,
//     a host wait, a synchronous copy that completes before returning; for
//     a synchronous copy from pageable memory the stream's earlier work,
//     with the copy's reads: "API synchronization behavior") happens-before
//     every op its thread issues later;
//   - a host function on a device stream is ordered by its stream only;
//   - host threads: each thread issues its streams' ops in its own order;
//     another thread's ops are ordered after a thread's only through a host
//     event (a record on a host stream waited for on another thread's host
//     stream), and a device wait on an event recorded by another thread
//     captures that record only when such a handoff orders the record
//     before the wait and every other record of the event before the
//     record or after the wait.
//
// Each edge from → to means: op from and every op before it on its stream
// complete before op to starts, exactly what a record right after from and
// a wait right before to would give. hbEdges adds them to Verify's
// happens-before graph next to the record→wait edges (one happens-before
// construction); the simulator implements the same rules at its API (executor/sim).
type implicitOrder struct {
	base  []int32 // per stream: global id of its op 0 (Verify's numbering)
	start []int32 // per op g: edges into g are from[start[g]:start[g+1]]
	from  []int32

	// early, per stage: its reads are done when the launch call returns
	// (a copy from pageable memory stages its source).
	early []bool
	// hostRead, per asynchronous copy from pageable memory (early too):
	// the host completions its read is ordered after, the tail of its
	// thread's from its last host-stream op on (every earlier completion
	// happens-before that op). Its read is not ordered after its stream's
	// earlier work.
	hostRead map[int][]int32

	// Host threads (nil with one): per op its thread and its position in
	// the thread's issue order; per op the row of tclock (T entries: how
	// many of each thread's issues precede it on the host).
	threads int
	thread  []int32 // per stream
	seq     []int32
	trow    []int32
	tclock  []int32
	// unordered marks waits whose captured record is another thread's and
	// not ordered before them by a handoff: Verify takes them as waiting
	// for nothing.
	unordered map[int32]bool
}

// deriveImplicit builds p's implicit order, or returns nil when p has none
// (then Verify costs what it did without it). p must be valid.
func deriveImplicit(p *plan.Plan) *implicitOrder {
	if !plan.HasImplicit(p) {
		return nil
	}
	b := new(implicitBuilder) // on the heap: its edges and captures start in its own arrays
	b.init(p)
	for _, so := range p.IssueOrder {
		b.issue(so)
	}
	return b.finish()
}

// implicitEdge is one edge of the implicit order, between global op ids.
type implicitEdge struct{ from, to int32 }

// implicitBuilder replays p's issue order on the host for deriveImplicit:
// what each stream and host thread has issued and waited for, and the
// edges the rules above add.
type implicitBuilder struct {
	p  *plan.Plan
	im *implicitOrder
	T  int // host threads

	legacy   int32 // the legacy default stream, -1 when p has none
	edges    []implicitEdge
	lastOp   []int32 // per stream: latest op issued, -1
	opStream []int32 // per op: its stream
	// Host completions per thread, in issue order; got[s] is how many of
	// its thread's completions stream s has been given.
	done [][]int32
	got  []int32
	// Legacy rule: per blocking stream, its latest op given to the legacy
	// stream (toLegacy) and the legacy stream's latest op given to it
	// (fromLegacy).
	toLegacy, fromLegacy []int32
	lastRec              []int32   // per event: latest record issued
	records              [][]int32 // per event, with several threads: its records
	tcur                 []int32   // per thread: its row in tclock
	tcount               []int32   // per thread: ops issued
	tmp                  []int32   // a tclock row being built
	ranks                map[int][]int32
	capture              [][3]int32 // waits on another thread's record r: r, the wait, the event (handedOver)
	// The first edges and captures, which most plans with an implicit
	// order do not outgrow: one allocation (the builder's) instead of
	// an append's growing ones.
	edgesBuf   [4]implicitEdge
	captureBuf [2][3]int32
	doneBuf    [4][]int32 // done, for up to 4 threads
}

// init numbers p's ops, maps streams to host threads and sizes the
// replay's state.
func (b *implicitBuilder) init(p *plan.Plan) {
	S := len(p.Streams)
	st := make([]int32, 2*S+1) // base and thread in one array
	im := &implicitOrder{base: st[: S+1 : S+1], thread: st[S+1:], early: make([]bool, len(p.Stages))}
	for s := range p.Streams {
		im.base[s+1] = im.base[s] + int32(len(p.Streams[s].Ops))
	}
	nops := int(im.base[S])
	threadID := map[string]int32{"": 0}
	for s, st := range p.Streams {
		t, ok := threadID[st.Thread]
		if !ok {
			t = int32(len(threadID))
			threadID[st.Thread] = t
		}
		im.thread[s] = t
	}
	T := len(threadID)
	im.threads = T
	if T > 1 {
		im.seq = make([]int32, nops)
		im.trow = make([]int32, nops)
		im.tclock = make([]int32, T) // row 0: nothing
		im.unordered = map[int32]bool{}
	}
	b.p, b.im, b.T, b.legacy = p, im, T, -1
	for s, st := range p.Streams {
		if st.Kind == plan.StreamLegacy {
			b.legacy = int32(s)
		}
	}
	// One array holds the int32 tables of streams, threads, events and ops.
	tab := make([]int32, 4*S+3*T+p.Events+nops)
	carve := func(n int) []int32 {
		t := tab[:n:n]
		tab = tab[n:]
		return t
	}
	b.lastOp, b.toLegacy, b.fromLegacy, b.got = carve(S), carve(S), carve(S), carve(S)
	b.tcur, b.tcount, b.tmp = carve(T), carve(T), carve(T)
	b.lastRec, b.opStream = carve(p.Events), carve(nops)
	for s := range b.lastOp {
		b.lastOp[s] = -1
	}
	for s := range p.Streams {
		for j := im.base[s]; j < im.base[s+1]; j++ {
			b.opStream[j] = int32(s)
		}
	}
	b.done = b.doneBuf[:0]
	if T > len(b.doneBuf) {
		b.done = make([][]int32, 0, T)
	}
	b.done = b.done[:T]
	for s := range b.toLegacy {
		b.toLegacy[s], b.fromLegacy[s] = -1, -1
	}
	for e := range b.lastRec {
		b.lastRec[e] = -1
	}
	if T > 1 {
		b.records = make([][]int32, p.Events)
		for _, so := range p.IssueOrder {
			if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpRecord {
				b.records[o.Event] = append(b.records[o.Event], im.base[so[0]]+int32(so[1]))
			}
		}
	}
	b.ranks = rankLaunches(p, im.base) // devices_verify.go: per collective, its ranks' launch ops
	b.edges, b.capture = b.edgesBuf[:0], b.captureBuf[:0]
}

// add records the edge from → to; rule names which of the rules above
// adds it (for readers).
func (b *implicitBuilder) add(from, to int32, rule string) {
	b.edges = append(b.edges, implicitEdge{from, to})
}

// latestBefore returns the latest op of stream s that the host issued
// before op g (of another stream): with one thread the latest issued,
// with several the latest whose issue a handoff orders before g's.
func (b *implicitBuilder) latestBefore(s int32, g int32) int32 {
	im := b.im
	l := b.lastOp[s]
	if l < 0 || b.T == 1 || im.thread[s] == im.thread[b.opStream[g]] {
		return l
	}
	// Ops of s are in their thread's order: the last with seq < limit.
	limit := im.tclock[int(im.trow[g])*b.T+int(im.thread[s])]
	lo, hi := im.base[s], l+1
	k := int32(sort.Search(int(hi-lo), func(i int) bool { return im.seq[lo+int32(i)] >= limit }))
	return lo + k - 1 // lo-1 when none: < base[s]
}

// issue replays the host's call that issues op so (stream, index): the
// edges it gets, then what the host has waited for once the call returns.
func (b *implicitBuilder) issue(so [2]int) {
	p, im := b.p, b.im
	s := int32(so[0])
	g := im.base[s] + int32(so[1])
	t := im.thread[s]
	st := &p.Streams[s]
	o := st.Ops[so[1]]
	if b.T > 1 {
		b.threadClock(g, s, t, o)
	}
	// The thread's host completions this stream has not been given.
	if d := b.done[t]; int(b.got[s]) < len(d) {
		for _, h := range d[b.got[s]:] {
			if b.opStream[h] != s {
				b.add(h, g, RuleHostReturn)
			}
		}
		b.got[s] = int32(len(d))
	}
	b.legacyRule(g, s)
	if so[1] > 0 {
		b.rendezvous(g, st.Ops[so[1]-1])
	}
	b.hostDone(g, s, t, o)
	if o.Kind == plan.OpRecord {
		b.lastRec[o.Event] = g
	}
	b.lastOp[s] = g
}

// threadClock places op g (stream s, thread t) in its thread's issue order
// and, when it waits for another thread's host record, joins that thread's
// clock (a handoff) or notes the wait for handedOver.
func (b *implicitBuilder) threadClock(g, s, t int32, o plan.Op) {
	p, im, T := b.p, b.im, b.T
	im.seq[g] = b.tcount[t]
	b.tcount[t]++
	r := int32(-1)
	if o.Kind == plan.OpWait {
		r = b.lastRec[o.Event]
	}
	handoff := r >= 0 && im.thread[b.opStream[r]] != t && p.Streams[s].Host && p.Streams[b.opStream[r]].Host
	if handoff {
		// A host event handed over: this thread now knows what the
		// other had issued up to the record.
		row := im.tclock[int(b.tcur[t])*T : int(b.tcur[t]+1)*T]
		rrow := im.tclock[int(im.trow[r])*T : int(im.trow[r]+1)*T]
		for a := range T {
			b.tmp[a] = max(row[a], rrow[a])
		}
		rt := im.thread[b.opStream[r]]
		b.tmp[rt] = max(b.tmp[rt], im.seq[r]+1)
		b.tcur[t] = int32(len(im.tclock) / T)
		im.tclock = append(im.tclock, b.tmp...)
	}
	im.trow[g] = b.tcur[t]
	if r >= 0 && !handoff && im.thread[b.opStream[r]] != t {
		b.capture = append(b.capture, [3]int32{r, g, int32(o.Event)})
	}
}

// legacyRule adds the edges between the legacy default stream and the
// blocking streams into op g of stream s.
func (b *implicitBuilder) legacyRule(g, s int32) {
	p, im := b.p, b.im
	switch {
	case s == b.legacy:
		for o := range p.Streams {
			if o == int(s) || !plan.BlockingKind(p.Streams[o].Kind) {
				continue
			}
			if l := b.latestBefore(int32(o), g); l >= im.base[o] && l != b.toLegacy[o] {
				b.add(l, g, RuleLegacy)
				b.toLegacy[o] = l
			}
		}
	case b.legacy >= 0 && plan.BlockingKind(p.Streams[s].Kind):
		if l := b.latestBefore(b.legacy, g); l >= im.base[b.legacy] && l != b.fromLegacy[s] {
			b.add(l, g, RuleLegacy)
			b.fromLegacy[s] = l
		}
	}
}

// rendezvous adds a collective's rendezvous edges into op g, whose stream's
// previous op is prev: the op after a rank on its stream follows the op
// before each other rank on that rank's stream (only when that op was
// issued before: otherwise the ranks are not one group, which Verify
// reports as a deadlock first).
func (b *implicitBuilder) rendezvous(g int32, prev plan.Op) {
	p, im := b.p, b.im
	if prev.Kind != plan.OpLaunch || p.Stages[prev.Stage].Collective == nil {
		return
	}
	for _, l := range b.ranks[p.Stages[prev.Stage].Collective.Group] {
		// Op l-1 is issued once its stream's latest op is (stream order).
		if s := b.opStream[l]; l != g-1 && l > im.base[s] && b.lastOp[s] >= l-1 {
			b.add(l-1, g, RuleRendezvous)
		}
	}
}

// hostDone records what thread t's host has waited for once the call
// issuing op g (stream s) returns, and marks the stages whose reads are
// done by then.
func (b *implicitBuilder) hostDone(g, s, t int32, o plan.Op) {
	p, im := b.p, b.im
	switch {
	case p.Streams[s].Host:
		b.done[t] = append(b.done[t], g)
		b.got[s] = int32(len(b.done[t]))
	case o.Kind == plan.OpLaunch && plan.PageableAsync(p, o.Stage):
		if im.hostRead == nil {
			im.hostRead = map[int][]int32{}
		}
		d := b.done[t]
		k := len(d) - 1
		for k > 0 && !p.Streams[b.opStream[d[k]]].Host {
			k--
		}
		im.hostRead[o.Stage] = slices.Clone(d[max(k, 0):])
		im.early[o.Stage] = true
	case o.Kind == plan.OpLaunch && p.Stages[o.Stage].Copy == plan.CopySync:
		switch syncCopyReturn(p, o.Stage) {
		case returnsComplete:
			b.done[t] = append(b.done[t], g)
		case returnsStaged:
			// A stream sync before the copy: what precedes it on its
			// stream, and what the legacy rule ordered before it.
			if g > im.base[s] {
				b.done[t] = append(b.done[t], g-1)
			}
			for k := len(b.edges) - 1; k >= 0 && b.edges[k].to == g; k-- {
				b.done[t] = append(b.done[t], b.edges[k].from)
			}
			im.early[o.Stage] = true
		}
	}
}

// finish marks the cross-thread waits no handoff orders and stores the
// edges by target (CSR).
func (b *implicitBuilder) finish() *implicitOrder {
	im := b.im
	for _, c := range b.capture {
		if !im.handedOver(c[0], c[1], b.records[c[2]], b.opStream) {
			im.unordered[c[1]] = true
		}
	}
	nops := len(b.opStream)
	im.start = make([]int32, nops+1)
	for _, e := range b.edges {
		im.start[e.to+1]++
	}
	for g := range nops {
		im.start[g+1] += im.start[g]
	}
	im.from = make([]int32, len(b.edges))
	fill := slices.Clone(im.start[:nops])
	for _, e := range b.edges {
		im.from[fill[e.to]] = e.from
		fill[e.to]++
	}
	return im
}

// handedOver reports whether wait g (one thread) surely captures record r
// (another thread's): a host handoff orders r's issue before g's, and
// every other record of the event is ordered before r or after g. It is
// asked once the walk has issued every op, as a record later in issue
// order than g may still be issued before it (by another thread) or
// surely after (by a thread a handoff tells of g first).
func (im *implicitOrder) handedOver(r, g int32, recs []int32, opStream []int32) bool {
	if !im.issueHB(r, g, opStream) {
		return false
	}
	for _, x := range recs {
		if x != r && !im.issueHB(x, r, opStream) && !im.issueHB(g, x, opStream) {
			return false
		}
	}
	return true
}

// issueHB reports whether the host issues op a before op b on every run:
// the same thread in its order, or another thread's through handoffs.
// Ops not issued yet in the walk have seq and trow 0 (then false).
func (im *implicitOrder) issueHB(a, b int32, opStream []int32) bool {
	ta, tb := im.thread[opStream[a]], im.thread[opStream[b]]
	if ta == tb {
		return im.seq[a] < im.seq[b]
	}
	return im.tclock[int(im.trow[b])*im.threads+int(ta)] > im.seq[a]
}

// copyReturn is what a synchronous copy has done when its call returns.
type copyReturn uint8

const (
	returnsNothing  copyReturn = iota // device to device: no host-side synchronization
	returnsComplete                   // to host memory, or from pinned memory to the device: the copy is done
	returnsStaged                     // from pageable memory to the device: the source is staged, the write may be in flight
)

// syncCopyReturn applies the synchronous rows of CUDA's "API
// synchronization behavior" table to stage i, a synchronous copy.
func syncCopyReturn(p *plan.Plan, i int) copyReturn {
	st := &p.Stages[i]
	if len(st.Reads) != 1 || len(st.Writes) != 1 {
		return returnsNothing
	}
	src, dst := p.Where(st.Reads[0].Buffer), p.Where(st.Writes[0].Buffer)
	switch {
	case dst.Host():
		return returnsComplete // device→host, host→host
	case src == contract.WhereHostPinned:
		return returnsComplete
	case src == contract.WhereHostPageable:
		return returnsStaged
	}
	return returnsNothing
}

// hostTimeRead reports whether race r's second access is the read of an
// asynchronous copy from pageable memory, which the host makes when it
// issues the copy: no device wait orders it.
func hostTimeRead(p *plan.Plan, r *Race) bool {
	return plan.PageableAsync(p, r.Second) && p.Stages[r.Second].Reads[0].Buffer == r.Buffer && r.Kind == plan.RaceRAW
}

// readAfter reports whether stage i's read, made by the host when it
// issues i (hostRead), is ordered after op a: a happens-before a host
// completion that the host had seen before issuing i. ok is false when
// i's read is made in stream order (then Verify's happens-before of the
// launches decides).
func (v *verifier) readAfter(a int32, i int) (after, ok bool) {
	im := v.hb.im
	if im == nil || im.hostRead == nil {
		return false, false
	}
	hs, ok := im.hostRead[i]
	if !ok {
		return false, false
	}
	for _, h := range hs {
		if v.opHB(a, h) {
			return true, true
		}
	}
	return false, true
}

// readsDoneBefore reports whether stage a's reads are done before op b is
// issued: a stages its source when its launch returns (a synchronous copy
// from pageable memory) and the host issues b after that.
func (im *implicitOrder) readsDoneBefore(p *plan.Plan, a int, la, b int32, opStream []int32, opIssue []int32) bool {
	if im == nil || !im.early[a] {
		return false
	}
	if im.threads == 1 || im.thread[opStream[la]] == im.thread[opStream[b]] {
		return opIssue[la] < opIssue[b]
	}
	return im.issueHB(la, b, opStream)
}

// explain sets r.Rule when one of CUDA's implicit rules might have been
// expected to order the pair and does not, and puts the edit that rule
// suggests in front of r.Fix.
func (v *verifier) explain(r *Race) {
	p := v.p
	a, b := &p.Streams[r.FirstStream], &p.Streams[r.SecondStream]
	fi, se := &p.Stages[r.First], &p.Stages[r.Second]
	also := func(edit string) {
		if r.Fix == "" {
			r.Fix = edit
			return
		}
		r.Fix = edit + ", or " + r.Fix
	}
	blocking := func(s *plan.Stream) {
		text := fmt.Sprintf("declare stream %s with kind: blocking (the legacy default stream and blocking streams wait for each other's earlier work)", s.Name)
		also(text)
		r.edit = &ruleEdit{stream: s.ID, stage: -1, text: text}
	}
	switch {
	case a.Thread != b.Thread:
		r.Rule = fmt.Sprintf("%s: %s is issued by thread %s and %s by thread %s; a host wait orders only its own thread's later issues, and a wait on another thread's record captures it only after a host event hands it over",
			RuleThreads, fi.Name, plan.ThreadLabel(a.Thread), se.Name, plan.ThreadLabel(b.Thread))
		r.Rule += v.conservativeWait(r.Second)
		r.Fix = fmt.Sprintf("hand over with a host event: record an event on thread %s's host stream after it has waited for %s, and wait on that event on thread %s's host stream before %s", plan.ThreadLabel(a.Thread), stageAt(p, int32(r.First)), plan.ThreadLabel(b.Thread), stageAt(p, int32(r.Second)))
	case fi.Copy == plan.CopySync && syncCopyReturn(p, r.First) == returnsStaged && v.stageWrites(r.First, r.Buffer):
		r.Rule = fmt.Sprintf("%s: %s, a synchronous copy from pageable memory, returns once its source is staged; its write to %s may still be in flight", RuleStaged, fi.Name, r.Buffer)
		if !b.Host && !plan.BlockingKind(b.Kind) && b.Kind != plan.StreamLegacy {
			r.Rule += fmt.Sprintf(", and stream %s is non_blocking: not ordered with the legacy default stream", b.Name)
			blocking(b)
		}
	case a.Kind == plan.StreamLegacy && !b.Host && !plan.BlockingKind(b.Kind) && b.Kind != plan.StreamLegacy,
		b.Kind == plan.StreamLegacy && !a.Host && !plan.BlockingKind(a.Kind) && a.Kind != plan.StreamLegacy:
		nb := b
		if b.Kind == plan.StreamLegacy {
			nb = a
		}
		r.Rule = fmt.Sprintf("%s: stream %s is non_blocking, and non-blocking streams are not ordered with the legacy default stream", RuleLegacy, nb.Name)
		blocking(nb)
	case fi.Copy != plan.CopySync && fi.Kernel == "copy" && !a.Host && !fi.HostFunc && b.Host && p.Where(r.Buffer).Host():
		r.Rule = fmt.Sprintf("%s: %s (cuMemcpyAsync) returns before the copy runs; the host is ordered after it only by waiting for an event", RuleAsyncCopy, fi.Name)
		if a.Kind == plan.StreamLegacy || a.Kind == plan.StreamPerThread {
			text := fmt.Sprintf("make %s a synchronous copy (copy: sync), which returns once the copy is done", fi.Name)
			also(text)
			r.edit = &ruleEdit{stream: -1, stage: r.First, text: text}
		}
	case hostTimeRead(p, r):
		after := fmt.Sprintf("%s has not run by then unless the host waited for it", fi.Name)
		if fi.HostFunc {
			after = fmt.Sprintf("%s, a host function, runs on a driver thread in stream %s's order, and may not have run by then", fi.Name, a.Name)
		}
		r.Rule = fmt.Sprintf("%s: %s (cuMemcpyHtoDAsync from pageable memory) reads %s when the host issues it, not in stream %s's order: %s", RulePageableSource, se.Name, r.Buffer, b.Name, after)
		r.Fix = fmt.Sprintf("make %s where: host_pinned (an asynchronous copy from pinned memory reads it in stream order), or have the host wait for %s before it issues %s (a host stage with waits: [%s] before it)", r.Buffer, fi.Name, se.Name, fi.Name)
	case fi.HostFunc && b.Host, se.HostFunc && a.Host:
		h := fi
		if se.HostFunc {
			h = se
		}
		r.Rule = fmt.Sprintf("%s: %s runs on a driver thread in stream %s's order, not when the host issues it", RuleHostFunc, h.Name, p.Streams[h.Stream].Name)
	}
}

// conservativeWait returns a clause for a race whose second stage i comes
// after a wait, on its stream, that a handoff orders after one record of
// its event while another record of it is not ordered with the wait: the
// wait takes one of them, which the verifier cannot tell, so it orders i
// after none (handedOver); the race may be a false positive. "" otherwise.
func (v *verifier) conservativeWait(i int) string {
	im := v.hb.im
	if im == nil || len(im.unordered) == 0 {
		return ""
	}
	g0 := v.launchOp[i]
	s := v.opStream[g0]
	for g := v.opBase[s]; g < g0; g++ {
		o := v.p.Streams[s].Ops[v.opIndex(g)]
		if o.Kind != plan.OpWait || !im.unordered[g] {
			continue
		}
		for _, x := range v.records[o.Event] {
			if im.thread[v.opStream[x]] != im.thread[s] && im.issueHB(x, g, v.opStream) {
				return fmt.Sprintf("; conservative: the wait before %s takes one of several records of its event, one handed over and one not ordered with the wait, and the check orders %s after neither (record the event once per handoff to make it exact)", v.p.Stages[i].Name, v.p.Stages[i].Name)
			}
		}
	}
	return ""
}

// stageWrites reports whether stage i writes buffer name.
func (v *verifier) stageWrites(i int, name string) bool {
	for _, a := range v.p.Stages[i].Writes {
		if a.Buffer == name {
			return true
		}
	}
	return false
}

// ruleEdit is a plan edit that an implicit rule offers instead of a wait:
// a stream made blocking, or a copy stage made synchronous.
type ruleEdit struct {
	stream, stage int // the stream to make blocking, or -1; the stage to make a synchronous copy, or -1
	text          string
}

// apply makes the edit on q, a clonePlan copy: its streams are its own,
// its stages the original's, so a stage edit first gives q stages of its
// own (the plan Verify was given stays as it was).
func (e *ruleEdit) apply(q *plan.Plan) {
	if e.stream >= 0 {
		q.Streams[e.stream].Kind = plan.StreamBlocking
	}
	if e.stage >= 0 {
		q.Stages = slices.Clone(q.Stages)
		q.Stages[e.stage].Copy = plan.CopySync
	}
}

// insteadOf returns the rule edit that orders every race of f without
// its wait, proven on a copy of p, or "".
func insteadOf(p *plan.Plan, races []Race, f *Fix) string {
	var e *ruleEdit
	for _, k := range f.Races {
		re := races[k].edit
		if re == nil || e != nil && *re != *e {
			return ""
		}
		e = re
	}
	if e == nil {
		return ""
	}
	q := clonePlan(p)
	fixSteps.Add(int64(len(q.IssueOrder) * (max(len(q.Streams), 1) + 1)))
	e.apply(q)
	if q.ValidateShape() != nil {
		return ""
	}
	v := &verifier{p: q}
	v.clocks()
	for _, k := range f.Races {
		if !v.stageHB(int32(races[k].First), int32(races[k].Second)) {
			return ""
		}
	}
	return e.text
}
