package planner

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sort"

	"github.com/dagrun/dagrun/plan"
)

// spans are conservative lifetimes of the arena buffers on one axis,
// half-open [lo[k], hi[k]) per a.bufs index: two buffers whose spans are
// disjoint are ordered (either way) by the relation the layout shares bytes
// along. The layout then compares a buffer only with the placed buffers
// whose spans overlap its own (spanIndex), so its cost is near-linear in
// temps when few spans overlap, as in a DNN's schedule.
type spans struct{ lo, hi []float64 }

// issueSpans are the spans of happens-before: buffer b spans from its first
// launch's issue position to the issue position, plus one, of the latest
// first use of a temp (on any stream) that b's last uses do not all
// happen-before. A temp first used after that is therefore after every use
// of b. Two bounds find that position without asking every stream:
//
//   - cuts: launches after which every op issued later happens-after them
//     (in the op graph of stream order and record→wait, every later op has
//     a predecessor issued at or after the cut: one suffix minimum over
//     issue order, linear). The first cut after b's last uses that they
//     happen-before bounds b's span; in a chain of models, each model's
//     last stage is one.
//   - per stream whose temps' first uses fall between b's last use and
//     that cut, a binary search for the first of them after b (first uses
//     are in stream order there, and happens-before is monotone along a
//     stream).
//
// Cost: O(temps × (streams live in the span + 1) × log d) happens-before
// tests, d the first uses on a stream within the span.
func (a *arenaInfo) issueSpans() spans { return a.issueSpansBy(true) }

// spanColumnsMax bounds the streams for which issueSpans keeps, per stream,
// the clock column of each stream over its temps' first launches (streams²
// × first launches / streams entries).
const spanColumnsMax = 64

// issueSpansBy is issueSpans, with columns: for plans of dense clocks
// (launchHB) and at most spanColumnsMax streams, the clock entries of each
// stream's first launches, in a column per stream (nondecreasing along the
// stream, as happens-before is monotone), give each last use its first
// later first launch on every stream by one merge per pair of streams
// (firstAfter), and a temp's search on a stream starts from the latest of
// its last uses' (O(streams) per last use), instead of a happens-before
// test per launch and last use; without, by the tests. The spans are the
// same.
func (a *arenaInfo) issueSpansBy(columns bool) spans {
	p := a.p
	S := len(p.Streams)
	// fl, per stream: temps' first launches on it, in issue order (each
	// once); fi: their issue positions. One walk of the issue order.
	isFirst := make([]bool, len(p.Stages))
	count := make([]int, S)
	for _, b := range a.bufs {
		for j, v := range b.firsts() {
			if !isFirst[v] {
				isFirst[v] = true
				count[b.streams()[j]]++
			}
		}
	}
	fl, fi := make([][]int32, S), make([][]int32, S)
	total := 0
	for _, c := range count {
		total += c
	}
	flat := make([]int32, 2*total)
	for s, c := range count {
		fl[s], fi[s], flat = flat[:0:c], flat[c:c:2*c], flat[2*c:]
	}
	for k, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpLaunch && isFirst[o.Stage] && a.issue[o.Stage] == int32(k) {
			s := so[0]
			fl[s], fi[s] = append(fl[s], int32(o.Stage)), append(fi[s], int32(k))
		}
	}
	// Streams as spans of their temps' first uses, for the query below.
	ss := spans{lo: make([]float64, S), hi: make([]float64, S)}
	for s := range fl {
		ss.lo[s], ss.hi[s] = math.Inf(1), math.Inf(1) // empty: never overlaps
		if l := len(fl[s]); l > 0 {
			ss.lo[s], ss.hi[s] = float64(fi[s][0]), float64(fi[s][l-1])+1
		}
	}
	streams := newSpanIndex(ss)
	for s := range S {
		streams.add(s)
	}
	// cols[t][σ·n+i], n = len(fl[t]): how many ops of stream σ happen-before
	// the launch fl[t][i] (of stream t itself: its op index), so that u on
	// σ happens-before it iff that is above u's op index.
	h, dense := a.hb.(*launchHB)
	var cols [][]int32
	var reach, slot, jt []int32 // firstAfter's, and per stream the search's start
	if columns && dense && S <= spanColumnsMax {
		cols = make([][]int32, S)
		for t, list := range fl {
			n := len(list)
			c := make([]int32, S*n)
			for i, v := range list {
				at := h.at[v]
				row := h.clocks.at(at.row)
				for q, x := range row {
					c[q*n+i] = x
				}
				c[t*n+i] = at.index
			}
			cols[t] = c
		}
		reach, slot = a.firstAfter(h, fl, cols)
		jt = make([]int32, S)
	}
	cuts := a.cuts()
	sp := spans{lo: make([]float64, len(a.bufs)), hi: make([]float64, len(a.bufs))}
	var live []int32
	// Temps by last use: the first first use after it moves forward on
	// every stream (cur), no search needed.
	byLast := stableOrder(len(a.bufs), func(k int) int { return a.bufs[k].lastIssue })
	cur := make([]int, S)
	for _, k := range byLast {
		b := a.bufs[k]
		after := func(v int32) bool {
			for _, u := range b.lasts() {
				if !a.hb.before(u, v) {
					return false
				}
			}
			return true
		}
		last := int32(b.lastIssue)
		limit := int32(len(p.IssueOrder)) // first uses at or after limit are after b
		c, _ := slices.BinarySearchFunc(cuts, last+1, func(v, at int32) int { return cmp.Compare(a.issue[v], at) })
		for tries := 0; c < len(cuts) && tries < 4; c, tries = c+1, tries+1 {
			if after(cuts[c]) {
				limit = a.issue[cuts[c]]
				break
			}
		}
		end := last
		live = streams.query(live[:0], float64(last)+1, float64(limit), -1)
		if cols != nil && len(live) > 0 {
			// jt[t]: the first of t's first launches that every last
			// use of b happens-before.
			clear(jt)
			for _, u := range b.lasts() {
				for t, x := range reach[int(slot[u])*S : int(slot[u]+1)*S] {
					jt[t] = max(jt[t], x)
				}
			}
		}
		for _, t := range live {
			list, iss := fl[t], fi[t]
			done := func(i int) bool { return iss[i] >= limit || after(list[i]) }
			i := cur[t]
			for i < len(iss) && iss[i] <= last {
				i++
			}
			cur[t] = i
			if cols != nil {
				// The first done from i: the first not before limit, or
				// the first that every last use of b happens-before.
				j := max(i, int(jt[t]))
				if j > i && iss[j-1] >= limit {
					j = firstAbove(iss, i, j, limit-1)
				}
				if j > i {
					end = max(end, iss[j-1]) // the last one not after b
				}
				continue
			}
			if i == len(list) || done(i) {
				continue
			}
			// Galloping search (Bentley and Yao 1976) for the first done
			// after i: temps die soon after their last use, so it is near.
			lo, hi := i, i+1 // lo is not done; the first done is past lo
			for step := 1; hi < len(list) && !done(hi); step *= 2 {
				lo, hi = hi, hi+step
			}
			hi = min(hi, len(list))
			j := lo + 1 + sort.Search(hi-lo-1, func(k int) bool { return done(lo + 1 + k) })
			end = max(end, iss[j-1]) // the last one not after b
		}
		sp.lo[k], sp.hi[k] = float64(b.firstIssue), float64(end)+1
	}
	return sp
}

// firstAfter returns, for each launch u that is a last use of a temp and
// each stream t, the first of t's first launches fl[t] that u
// happens-before (len(fl[t]) if none): reach[slot[u]·S + t]. Along a
// stream σ the launches' op indices grow and each column cols[t] of σ is
// nondecreasing, so one merge per (σ, t) finds them all: O(S × (first
// launches + last uses)).
func (a *arenaInfo) firstAfter(h *launchHB, fl [][]int32, cols [][]int32) (reach, slot []int32) {
	p := a.p
	S := len(p.Streams)
	slot = make([]int32, len(p.Stages))
	for v := range slot {
		slot[v] = -1
	}
	count := make([]int, S)
	lasts := 0
	for _, b := range a.bufs {
		for _, u := range b.lasts() {
			if slot[u] < 0 {
				slot[u] = 0 // numbered below, in stream order
				count[h.at[u].stream]++
				lasts++
			}
		}
	}
	order := make([]int32, 0, lasts) // per stream, its last uses in stream order
	for σ := range S {
		if count[σ] == 0 {
			continue
		}
		for _, o := range p.Streams[σ].Ops {
			if o.Kind == plan.OpLaunch && slot[o.Stage] == 0 && h.at[o.Stage].stream == int32(σ) {
				slot[o.Stage] = int32(len(order)) + 1 // 0 is "not numbered yet"
				order = append(order, int32(o.Stage))
			}
		}
	}
	reach = make([]int32, len(order)*S)
	index := make([]int32, len(order)) // per numbered launch: its op index
	for j, u := range order {
		index[j] = h.at[u].index
	}
	start := 0
	for σ := range S {
		ks := index[start : start+count[σ]] // σ's last uses, slots start+1…
		for t := range S {
			n := len(fl[t])
			col := cols[t][σ*n : (σ+1)*n]
			i := 0
			for j, k := range ks {
				for i < n && col[i] <= k {
					i++
				}
				reach[(start+j)*S+t] = int32(i)
			}
		}
		start += count[σ]
	}
	for v, x := range slot {
		if x > 0 {
			slot[v] = x - 1
		}
	}
	return reach, slot
}

// firstAbove returns the first index in [lo, hi) of the nondecreasing col
// whose value is above k, or hi: a galloping search from lo (Bentley and
// Yao 1976), O(log d) for an answer d places on.
func firstAbove(col []int32, lo, hi int, k int32) int {
	if lo >= hi || col[lo] > k {
		return lo
	}
	prev := lo // col[prev] ≤ k
	for step := 1; ; step *= 2 {
		next := prev + step
		if next >= hi {
			break
		}
		if col[next] > k {
			hi = next
			break
		}
		prev = next
	}
	lo = prev + 1 // col[lo-1] ≤ k; the answer is in [lo, hi]
	for lo < hi {
		if mid := int(uint(lo+hi) >> 1); col[mid] > k {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// cuts returns the stages whose launch is a cut of the plan, in issue
// order: every op issued after it happens-after it, by stream order and
// record→wait edges alone (CUDA's implicit orders add to happens-before,
// so leaving them out only misses cuts). An op issued at q has
// predecessors: the op before it on its stream, and for a wait with no
// lag, the latest record of its event issued before it on another stream.
// The launch at p is a cut iff every op issued after p has a predecessor
// issued at p or later (then, by induction in issue order, p reaches it).
func (a *arenaInfo) cuts() []int32 {
	p := a.p
	n := len(p.IssueOrder)
	maxPred := make([]int32, n)
	prev := make([]int32, len(p.Streams)) // per stream: issue position of its latest op
	for s := range prev {
		prev[s] = -1
	}
	rec := make([]int32, p.Events) // per event: issue position of its latest record
	recStream := make([]int32, p.Events)
	for e := range rec {
		rec[e] = -1
	}
	for q, so := range p.IssueOrder {
		s := so[0]
		o := p.Streams[s].Ops[so[1]]
		m := prev[s]
		switch o.Kind {
		case plan.OpRecord:
			rec[o.Event], recStream[o.Event] = int32(q), int32(s)
		case plan.OpWait:
			if r := rec[o.Event]; o.Lag == 0 && r >= 0 && int(recStream[o.Event]) != s {
				m = max(m, r)
			}
		}
		maxPred[q], prev[s] = m, int32(q)
	}
	var cuts []int32
	sufMin := int32(math.MaxInt32) // min of maxPred over the ops issued after q
	for q := n - 1; q >= 0; q-- {
		so := p.IssueOrder[q]
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpLaunch && sufMin >= int32(q) {
			cuts = append(cuts, int32(o.Stage))
		}
		sufMin = min(sufMin, maxPred[q])
	}
	slices.Reverse(cuts)
	return cuts
}

// spanIndex finds the placed buffers whose spans overlap a given one: a
// max-segment tree over the buffers in order of span start, holding each
// placed buffer's span end. A query reports the placed buffers that start
// before the given span ends and end after it starts, in O((k+1) log n)
// for k reported.
type spanIndex struct {
	byLo []int32   // a.bufs indices by span start
	los  []float64 // span starts in that order
	rank []int32   // per a.bufs index: its place in byLo
	size int       // leaves (a power of two)
	tree []float64 // max span end of placed buffers per node; -Inf if none
	hi   []float64 // span ends per a.bufs index
	// stack is query's, reused from query to query.
	stack []int
}

func newSpanIndex(sp spans) *spanIndex {
	n := len(sp.lo)
	ix := &spanIndex{byLo: make([]int32, n), los: make([]float64, n), rank: make([]int32, n), size: 1}
	for i := range ix.byLo {
		ix.byLo[i] = int32(i)
	}
	slices.SortStableFunc(ix.byLo, func(i, j int32) int { return cmp.Compare(sp.lo[i], sp.lo[j]) })
	for r, k := range ix.byLo {
		ix.rank[k], ix.los[r] = int32(r), sp.lo[k]
	}
	for ix.size < n {
		ix.size *= 2
	}
	ix.tree = make([]float64, 2*ix.size)
	ix.hi = sp.hi
	ix.reset()
	return ix
}

// reset marks every buffer unplaced.
func (ix *spanIndex) reset() {
	for i := range ix.tree {
		ix.tree[i] = math.Inf(-1)
	}
}

// add marks buffer k placed.
func (ix *spanIndex) add(k int) {
	i := ix.size + int(ix.rank[k])
	for h := ix.hi[k]; i >= 1 && ix.tree[i] < h; i /= 2 {
		ix.tree[i] = h
	}
}

// overlapping appends to out the placed buffers other than k whose spans
// overlap k's.
func (ix *spanIndex) overlapping(out []int32, sp spans, k int) []int32 {
	return ix.query(out, sp.lo[k], sp.hi[k], k)
}

// query appends to out the placed items other than skip whose spans
// overlap [lo, hi).
func (ix *spanIndex) query(out []int32, lo, hi float64, skip int) []int32 {
	r, _ := slices.BinarySearch(ix.los, hi) // ranks [0, r) start before hi
	// A depth-first walk, left subtree first, by a stack of nodes; a node
	// at depth d of the tree covers ranks [(node−2^d)·size/2^d, …).
	stack := append(ix.stack[:0], 1)
	for len(stack) > 0 {
		node := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		width := ix.size >> (bits.Len(uint(node)) - 1) // leaves under node
		if (node-ix.size/width)*width >= r || ix.tree[node] <= lo {
			continue
		}
		if node >= ix.size {
			if j := ix.byLo[node-ix.size]; int(j) != skip {
				out = append(out, j)
			}
			continue
		}
		stack = append(stack, 2*node+1, 2*node)
	}
	ix.stack = stack
	return out
}

// sub returns the spans of members (a.bufs indices), indexed 0..len(members)-1.
func (sp spans) sub(members []int) spans {
	out := spans{lo: make([]float64, len(members)), hi: make([]float64, len(members))}
	for i, k := range members {
		out.lo[i], out.hi[i] = sp.lo[k], sp.hi[k]
	}
	return out
}

// overlapPairs counts the pairs of spans that overlap (spans sorted by
// lo), by a galloping search from each span (few spans overlap one).
func overlapPairs(sp spans) int {
	pairs := 0
	for i, h := range sp.hi {
		// The spans after i that start before h: [i+1, j).
		lo, hi := i+1, i+2 // sp.lo[lo-1] < h, if lo-1 > i
		for step := 1; hi <= len(sp.lo) && sp.lo[hi-1] < h; step *= 2 {
			lo, hi = hi, hi+step
		}
		hi = min(hi, len(sp.lo)+1) - 1 // the first start ≥ h is in [lo, hi]
		for lo < hi {
			if mid := int(uint(lo+hi) >> 1); sp.lo[mid] >= h {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		pairs += lo - (i + 1)
	}
	return pairs
}
