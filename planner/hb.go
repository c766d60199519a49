package planner

import (
	"cmp"
	"math"
	"slices"
)

// hbGraph is a plan's happens-before relation over its ops, as Verify sees
// it: stream order plus the cross-stream edges of hbEdges. Ops are numbered
// globally: op g is Streams[opStream[g]].Ops[opIndex[g]].
//
// An edge x → y means x and every op before it on its stream complete
// before y and every op after it on its stream start. Every edge goes from
// an op issued earlier to one issued later (hbEdges keeps that invariant),
// so a path from a to b only passes through ops issued between them.
type hbGraph struct {
	opBase   []int32 // per stream, global id of its op 0 (S+1 entries)
	opStream []int32
	opIndex  []int32
	opIssue  []int32 // position in IssueOrder
	// opCaptured, per op: for a wait, the record op it orders after (the
	// latest record of its event issued before it), or -1; -1 for others.
	opCaptured []int32

	// The cross-stream edges x → y, by y: pred[predOff[y]:predOff[y+1]].
	predOff, pred []int32
	cross         []hbCross // the edges by streams (direct)
	crossBase     []int32   // per stream: its first entry in cross
	// edgeOps lists the ops with at least one incoming edge, in op-id order
	// (so per stream in stream order); edgeBase[s] is stream s's first.
	edgeOps  []int32
	edgeBase []int32

	im *implicitOrder // CUDA's implicit order, nil if the plan has none

	cones [4]hbCone // the latest targets' cones (reach)
	tick  int
}

// hbEdges builds p's happens-before graph: this function is the one place
// that decides which ops order which. Happens-before is
//
//   - stream program order;
//   - record → wait, resolved in IssueOrder with CUDA semantics
//     (cudaStreamWaitEvent): a wait orders its stream after the most
//     recent record of its event issued before the wait; a wait with no
//     earlier record orders nothing; lags are not read (Verify runs on
//     plans without iteration info, or unrolled ones);
//   - CUDA's implicit order (implicitOrder, implicit.go): host streams and
//     host threads, the legacy default stream and blocking streams,
//     synchronous copies; a wait on another thread's record that no host
//     handoff orders captures nothing.
//
// Every edge goes from an earlier-issued op to a later one. Cost: O(ops +
// edges) time and memory, and implicitOrder's.
func hbEdges(p *Plan) *hbGraph {
	S := len(p.Streams)
	h := &hbGraph{opBase: make([]int32, S+1)}
	for s := range p.Streams {
		h.opBase[s+1] = h.opBase[s] + int32(len(p.Streams[s].Ops))
	}
	nops := int(h.opBase[S])
	h.opStream = make([]int32, nops)
	h.opIndex = make([]int32, nops)
	h.opIssue = make([]int32, nops)
	h.opCaptured = make([]int32, nops)
	for s := range p.Streams {
		for j := range p.Streams[s].Ops {
			g := h.opBase[s] + int32(j)
			h.opStream[g], h.opIndex[g], h.opCaptured[g] = int32(s), int32(j), -1
		}
	}
	im := deriveImplicit(p) // CUDA's implicit order (implicit.go), nil if none
	h.im = im
	type edge struct{ to, from int32 }
	var edges []edge
	last := make([]int32, p.Events) // per event: its latest record issued so far
	for e := range last {
		last[e] = -1
	}
	for k, so := range p.IssueOrder {
		s := so[0]
		g := h.opBase[s] + int32(so[1])
		h.opIssue[g] = int32(k)
		switch o := p.Streams[s].Ops[so[1]]; o.Kind {
		case OpRecord:
			last[o.Event] = g
		case OpWait:
			r := last[o.Event]
			if r >= 0 && im != nil && im.unordered[g] {
				r = -1 // another thread's record, not handed over (implicit.go)
			}
			h.opCaptured[g] = r
			if r >= 0 && int(h.opStream[r]) != s {
				edges = append(edges, edge{g, r})
			}
		}
		if im != nil {
			for _, f := range im.from[im.start[g]:im.start[g+1]] {
				if int(h.opStream[f]) != s {
					edges = append(edges, edge{g, f})
				}
			}
		}
	}
	// CSR by target op.
	h.predOff = make([]int32, nops+1)
	for _, e := range edges {
		h.predOff[e.to+1]++
	}
	for g := range nops {
		if h.predOff[g+1] > 0 {
			h.edgeOps = append(h.edgeOps, int32(g))
		}
		h.predOff[g+1] += h.predOff[g]
	}
	h.pred = make([]int32, len(edges))
	fill := slices.Clone(h.predOff[:nops])
	for _, e := range edges {
		h.pred[fill[e.to]] = e.from
		fill[e.to]++
	}
	h.edgeBase = make([]int32, S+1)
	for s := range S + 1 {
		i, _ := slices.BinarySearch(h.edgeOps, h.opBase[s])
		h.edgeBase[s] = int32(i)
	}
	// The edges by (target stream, source stream, target op), with the
	// running maximum of the source op's index in each group (direct).
	h.cross = make([]hbCross, len(edges))
	for k, e := range edges {
		h.cross[k] = hbCross{to: h.opStream[e.to], from: h.opStream[e.from], toIndex: h.opIndex[e.to], fromMax: h.opIndex[e.from]}
	}
	slices.SortFunc(h.cross, func(x, y hbCross) int {
		return cmp.Or(cmp.Compare(x.to, y.to), cmp.Compare(x.from, y.from), cmp.Compare(x.toIndex, y.toIndex))
	})
	for k := 1; k < len(h.cross); k++ {
		if x, y := &h.cross[k-1], &h.cross[k]; x.to == y.to && x.from == y.from {
			y.fromMax = max(y.fromMax, x.fromMax)
		}
	}
	h.crossBase = make([]int32, S+1)
	for s := range S + 1 {
		i, _ := slices.BinarySearchFunc(h.cross, int32(s), func(x hbCross, s int32) int { return cmp.Compare(x.to, s) })
		h.crossBase[s] = int32(i)
	}
	for c := range h.cones {
		h.cones[c].target = -1
	}
	return h
}

// hbHub is the incoming edges from which a stream is looked up directly
// when the search reaches it (a barrier's join, a reducer); the search
// explores the edges of other streams soon enough.
const hbHub = 32

// hbCross is one edge by its streams: an op of stream to at toIndex has a
// predecessor on stream from; fromMax is the latest source index of the
// edges into ops 0..toIndex of to from that stream.
type hbCross struct{ to, from, toIndex, fromMax int32 }

// direct reports whether an edge into ops 0..j of stream u comes from op
// i or later of stream t: then ops 0..i of t happen-before op j of u.
func (h *hbGraph) direct(u, j, t, i int32) bool {
	list := h.cross[h.crossBase[u]:h.crossBase[u+1]]
	k, _ := slices.BinarySearchFunc(list, [2]int32{t, j + 1}, func(x hbCross, key [2]int32) int {
		return cmp.Or(cmp.Compare(x.from, key[0]), cmp.Compare(x.toIndex, key[1]))
	})
	return k > 0 && list[k-1].from == t && list[k-1].fromMax >= i
}

// hbCone is the part of one target op's backward cone explored so far:
// top[s] is the latest op index of stream s known to happen-before the
// target (-1: none yet). Each stream of the cone has a stack of ranges of
// its edge ops still to explore (a range per rise of its top, the latest
// on top, each explored from its latest op down); streams with such work
// wait in a queue, and those whose next op was issued before the current
// window (stop) wait in blocked until a query lowers the window.
type hbCone struct {
	target  int32
	used    int
	stop    int32 // ops issued before stop are not explored yet
	top     []int32
	head    []int32 // per stream: its latest range to explore (index into ranges), or -1
	queued  []bool
	touched []int32
	ranges  []hbRange
	queue   []int32
	qhead   int
	blocked []int32
	// The query in progress (reach): a's stream and index, and whether a
	// stream raised since has a direct edge from them.
	askStream, askIndex int32
	hit                 bool
}

// hbRange is a range [lo, hi] of positions in edgeOps, on one stream.
type hbRange struct{ lo, hi, next int32 }

// reach reports whether op a happens-before op b, or is b: everything up
// to and including a on its stream completes before b starts.
//
// Algorithm: a breadth-first search backward from b over the edges, stream
// by stream (a stream's edge ops from its latest down, then the streams
// they reach), keeping per stream only the latest op known to reach b (ops
// of a stream before one that reaches b reach it too, by stream order), and
// not going below a's issue position (no path from a passes an op issued
// before a). It stops as soon as a's stream is reached at or after a. The
// explored cone is kept for the next query on the same b, so the queries
// of one target share one search. Cost per target: O(E' log S) for the E'
// edges into the part of its cone issued after the earliest op asked about.
func (h *hbGraph) reach(a, b int32) bool {
	sa, sb := h.opStream[a], h.opStream[b]
	if sa == sb {
		return h.opIndex[a] <= h.opIndex[b]
	}
	if h.opIssue[a] > h.opIssue[b] {
		return false
	}
	c := h.cone(b)
	want, stop := h.opIndex[a], h.opIssue[a]
	if stop < c.stop {
		c.stop = stop
		for _, s := range c.blocked {
			h.enqueue(c, s)
		}
		c.blocked = c.blocked[:0]
	}
	// Streams of the cone with a direct edge from a's stream at or after a
	// (a hub such as a barrier's join is found in one step); a shortcut
	// only, tried while the cone is small.
	for _, u := range c.touched[:min(len(c.touched), 16)] {
		if h.crossBase[u+1]-h.crossBase[u] >= hbHub && h.direct(u, c.top[u], sa, want) {
			return true
		}
	}
	c.askStream, c.askIndex, c.hit = sa, want, false
	for c.top[sa] < want && !c.hit {
		if c.qhead == len(c.queue) {
			return false
		}
		s := c.queue[c.qhead]
		r := c.head[s]
		if r < 0 || h.opIssue[h.edgeOps[c.ranges[r].hi]] < c.stop {
			c.qhead++
			c.queued[s] = false
			if r >= 0 {
				c.blocked = append(c.blocked, s)
			}
			continue
		}
		y := h.edgeOps[c.ranges[r].hi]
		if c.ranges[r].hi--; c.ranges[r].hi < c.ranges[r].lo {
			c.head[s] = c.ranges[r].next
		}
		for _, x := range h.pred[h.predOff[y]:h.predOff[y+1]] {
			h.raise(c, h.opStream[x], h.opIndex[x])
		}
	}
	return true
}

func (h *hbGraph) enqueue(c *hbCone, s int32) {
	if !c.queued[s] {
		c.queued[s] = true
		c.queue = append(c.queue, s)
	}
}

// cone returns b's cone, starting a new one (in the least recently used
// slot) if b is not one of the latest targets.
func (h *hbGraph) cone(b int32) *hbCone {
	h.tick++
	k := 0
	for i := range h.cones {
		if h.cones[i].target == b {
			h.cones[i].used = h.tick
			return &h.cones[i]
		}
		if h.cones[i].used < h.cones[k].used {
			k = i
		}
	}
	c := &h.cones[k]
	S := len(h.opBase) - 1
	if c.top == nil {
		c.top, c.head, c.queued = make([]int32, S), make([]int32, S), make([]bool, S)
		for s := range S {
			c.top[s], c.head[s] = -1, -1
		}
	}
	for _, s := range c.touched {
		c.top[s], c.head[s], c.queued[s] = -1, -1, false
	}
	if cap(c.queue) > 1<<16 && len(c.queue) < cap(c.queue)/8 {
		c.queue, c.ranges = nil, nil // do not keep a big search's memory for small ones
	}
	c.touched, c.ranges, c.queue, c.qhead, c.blocked = c.touched[:0], c.ranges[:0], c.queue[:0], 0, c.blocked[:0]
	c.target, c.used, c.stop, c.askStream = b, h.tick, math.MaxInt32, -1
	h.raise(c, h.opStream[b], h.opIndex[b])
	return c
}

// raise records that ops 0..i of stream s happen-before c's target and
// queues the stream's edge ops after its previous top, up to i.
func (h *hbGraph) raise(c *hbCone, s, i int32) {
	old := c.top[s]
	if i <= old {
		return
	}
	if old < 0 {
		c.touched = append(c.touched, s)
	}
	c.top[s] = i
	if !c.hit && c.askStream >= 0 && h.crossBase[s+1]-h.crossBase[s] >= hbHub && h.direct(s, i, c.askStream, c.askIndex) {
		c.hit = true // the query in progress is answered
	}
	lo, hi := h.edgeBase[s], h.edgeBase[s+1]
	list := h.edgeOps[lo:hi]
	from, _ := slices.BinarySearch(list, h.opBase[s]+old+1)
	to, _ := slices.BinarySearch(list, h.opBase[s]+i+1)
	if from == to {
		return
	}
	c.ranges = append(c.ranges, hbRange{lo + int32(from), lo + int32(to) - 1, c.head[s]})
	c.head[s] = int32(len(c.ranges) - 1)
	h.enqueue(c, s)
}
