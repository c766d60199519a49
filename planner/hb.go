package planner

import "slices"

// hbGraph is a plan's happens-before relation over its ops, as Verify sees
// it: stream order plus the cross-stream edges that hbEdges resolves, kept
// as vector clocks over chains of ops. Ops are numbered globally: op g is
// Streams[opStream[g]].Ops[opIndex[g]].
//
// Chains: a stream is a chain of its ops in happens-before order, and a
// stream whose first op is ordered after the last op of a finished chain
// continues that chain (its ops take the positions after the chain's), so
// that plans of many short streams (uncapped plans) have clocks over far
// fewer chains than streams. A chain is a path cover of the happens-before
// order; reachability over a chain decomposition is Jagadish's ("A
// compression technique to materialize transitive closure", ACM TODS 15(4),
// 1990, §3): op a happens-before op b iff b knows a's chain up to a's
// position or further.
//
// Clocks (Fidge 1988, Mattern 1989): each op with an incoming edge whose
// sources tell its stream something new starts a row, the clock of that
// op: per chain, how many of its ops happen-before the op. An op's clock is
// the row of the latest such op of its stream at or before it (rowOf), and
// on its own chain its own position. A row is stored as the entries that
// changed (deltas), and is expanded to dense int32 rows when that is no
// larger than the deltas, and always for plans of few chains (O(1) a query);
// otherwise the deltas are indexed per stream by (chain, row), and a query
// is a binary search.
type hbGraph struct {
	opBase   []int32 // per stream, global id of its op 0 (S+1 entries)
	opStream []int32
	opIndex  []int32
	opIssue  []int32 // position in IssueOrder
	// opCaptured, per op: for a wait, the record op it orders after (the
	// latest record of its event issued before it), or -1; -1 for others.
	opCaptured []int32

	im *implicitOrder // CUDA's implicit order, nil if the plan has none

	chain    []int32 // per stream: its chain
	chainOff []int32 // per stream: the chain position of its op 0
	chains   int
	rowOf    []int32 // per op: the row of its clock, or -1 (it knows no other chain)
	rows     int

	// Dense layout: row r's entry for chain c is dense[r*chains+c].
	dense []int32
	// Sparse layout: stream s's deltas are sparse[sparseBase[s]:sparseBase[s+1]],
	// sorted by (chain, row).
	sparse     []hbDelta
	sparseBase []int32
}

// hbDelta is one clock entry set at a row: chain's count became val.
type hbDelta struct{ chain, row, val int32 }

// hbDenseChains is the most chains for which rows are always dense (128
// bytes a row at most); with more, rows are dense only when that takes no
// more than 4/3 the memory of the indexed deltas (12 bytes each).
const hbDenseChains = 32

// hbLayout picks how hbEdges stores its rows.
type hbLayout uint8

const (
	hbAuto   hbLayout = iota // dense for few chains or when no larger than the deltas
	hbDense                  // dense rows (tests)
	hbSparse                 // indexed deltas (tests)
)

// hbEdges builds p's happens-before relation: this function is the one
// place that decides which ops order which. Happens-before is
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
// Every edge goes from an earlier-issued op to a later one, so one walk
// over IssueOrder builds every clock. A stream joins an edge's source
// clock incrementally (the differential technique of Singhal and
// Kshemkalyani, "An efficient implementation of vector clocks", IPL 43(1),
// 1992): only the rows of the source's stream after the one whose op it
// already knows, so each delta of a stream is read at most once per stream
// that syncs with it. Cost: O(ops + D·f) time and O(ops + D) memory for D
// deltas and f the streams that sync directly with a stream (D ≤ rows ×
// chains; about rows × chains that advance between a stream's syncs), plus
// the live clocks of the streams being issued (O(chains) each), and
// implicitOrder's.
func hbEdges(p *Plan) *hbGraph { return buildHB(p, hbAuto) }

func buildHB(p *Plan, layout hbLayout) *hbGraph {
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
	h.rowOf = make([]int32, nops)
	for s := range p.Streams {
		for j := range p.Streams[s].Ops {
			g := h.opBase[s] + int32(j)
			h.opStream[g], h.opIndex[g], h.opCaptured[g] = int32(s), int32(j), -1
		}
	}
	im := deriveImplicit(p) // CUDA's implicit order (implicit.go), nil if none
	h.im = im
	h.chain, h.chainOff = make([]int32, S), make([]int32, S)
	b := hbBuilder{h: h, live: make([][]int32, S), lastRow: make([]int32, S), rowStart: []int32{0}}
	for s := range S {
		b.lastRow[s] = -1
	}
	last := make([]int32, p.Events) // per event: its latest record issued so far
	for e := range last {
		last[e] = -1
	}
	var src []int32
	for k, so := range p.IssueOrder {
		s := int32(so[0])
		g := h.opBase[s] + int32(so[1])
		h.opIssue[g] = int32(k)
		src = src[:0]
		switch o := p.Streams[s].Ops[so[1]]; o.Kind {
		case OpRecord:
			last[o.Event] = g
		case OpWait:
			r := last[o.Event]
			if r >= 0 && im != nil && im.unordered[g] {
				r = -1 // another thread's record, not handed over (implicit.go)
			}
			h.opCaptured[g] = r
			if r >= 0 && h.opStream[r] != s {
				src = append(src, r)
			}
		}
		if im != nil {
			for _, f := range im.from[im.start[g]:im.start[g+1]] {
				if h.opStream[f] != s {
					src = append(src, f)
				}
			}
		}
		b.issue(s, g, src)
	}
	h.chains = len(b.chainLen)
	h.rows = len(b.rowStream)
	dense := layout == hbDense || layout == hbAuto && (h.chains <= hbDenseChains || int64(h.rows)*int64(h.chains) <= 4*int64(len(b.dChain)))
	if dense {
		b.expand()
	} else {
		b.index()
	}
	return h
}

// hbBuilder is buildHB's working state.
type hbBuilder struct {
	h *hbGraph
	// live, per stream being issued: its clock so far, by chain (grown on
	// demand; handed back to pool after its last op).
	live [][]int32
	pool [][]int32
	// chainLen, per chain: its length, in ops of the streams it holds.
	chainLen []int32
	// Rows: row r belongs to stream rowStream[r]; its deltas are
	// dChain/dVal[rowStart[r]:rowStart[r+1]].
	rowStream, rowStart []int32
	rowPrev             []int32 // per row: its stream's row before it, or -1
	dChain, dVal        []int32
	lastRow             []int32 // per stream: its latest row, or -1
	// at, per chain: 1 + the index in dChain of its delta in the row being
	// built, when atOp is that row's op.
	at, atOp []int32
}

// issue handles op g of stream s, ordered after the ops of src (other
// streams', issued earlier).
func (b *hbBuilder) issue(s, g int32, src []int32) {
	h := b.h
	first := h.opIndex[g] == 0
	if first {
		if n := len(b.pool); n > 0 {
			b.live[s], b.pool = b.pool[n-1], b.pool[:n-1]
		}
		h.chain[s] = -1 // not chosen yet: joins below skip nothing
	}
	start := int32(len(b.dChain))
	for _, x := range src {
		b.join(s, g, x)
	}
	if first {
		b.place(s, start)
	}
	if int32(len(b.dChain)) > start {
		b.rowStream = append(b.rowStream, s)
		b.rowPrev = append(b.rowPrev, b.lastRow[s])
		b.rowStart = append(b.rowStart, int32(len(b.dChain)))
		b.lastRow[s] = int32(len(b.rowStream) - 1)
	}
	h.rowOf[g] = b.lastRow[s]
	if int(g) == int(h.opBase[s+1])-1 { // the stream's last op
		l := b.live[s]
		clear(l)
		b.pool = append(b.pool, l[:0])
		b.live[s] = nil
	}
}

// place chooses stream s's chain at its first op, whose clock is the
// deltas from start: a chain whose last op g knows (then that chain's
// streams are finished) is continued; else a new one begins.
func (b *hbBuilder) place(s, start int32) {
	h := b.h
	n := int32(h.opBase[s+1] - h.opBase[s])
	for k := start; k < int32(len(b.dChain)); k++ {
		if c := b.dChain[k]; b.dVal[k] == b.chainLen[c] {
			h.chain[s], h.chainOff[s] = c, b.chainLen[c]
			b.chainLen[c] += n
			// Its own chain is known by position: drop the entry.
			last := int32(len(b.dChain)) - 1
			b.dChain[k], b.dVal[k] = b.dChain[last], b.dVal[last]
			b.dChain, b.dVal = b.dChain[:last], b.dVal[:last]
			if k < last {
				b.at[b.dChain[k]] = k + 1
			}
			return
		}
	}
	h.chain[s], h.chainOff[s] = int32(len(b.chainLen)), 0
	b.chainLen = append(b.chainLen, n)
	b.at, b.atOp = append(b.at, 0), append(b.atOp, -1)
}

// join orders op g of stream u after op x of another stream t: u's clock
// takes the entries of t's rows after the last one u already had, up to
// x's, and x's own position.
func (b *hbBuilder) join(u, g, x int32) {
	h := b.h
	t := h.opStream[x]
	ct := h.chain[t]
	if ct == h.chain[u] {
		return // issued earlier on u's own chain: before g
	}
	q := h.chainOff[t] + h.opIndex[x] + 1 // x's count on its chain
	p := b.get(u, ct)
	if p >= q {
		return // u knows x already, and so all x knows
	}
	// The latest row of t that u already has: the one of the op of t at
	// u's count p (it knows that op, and so its clock).
	r0 := int32(-1)
	if k := p - h.chainOff[t]; k > 0 {
		r0 = h.rowOf[h.opBase[t]+k-1]
	}
	if rx := h.rowOf[x]; rx > r0 {
		// t's rows in (r0, rx]: from rx back along t's rows.
		for r := rx; r > r0; r = b.prevRow(r) {
			for k := b.rowStart[r]; k < b.rowStart[r+1]; k++ {
				b.raise(u, g, b.dChain[k], b.dVal[k])
			}
		}
	}
	b.raise(u, g, ct, q)
}

// prevRow returns the row of r's stream before r, or -1.
func (b *hbBuilder) prevRow(r int32) int32 { return b.rowPrev[r] }

// get returns u's live clock entry for chain c.
func (b *hbBuilder) get(u, c int32) int32 {
	if l := b.live[u]; int(c) < len(l) {
		return l[c]
	}
	return 0
}

// raise sets u's entry for chain c to at least val, recording the delta
// in the row of op g.
func (b *hbBuilder) raise(u, g, c, val int32) {
	if c == b.h.chain[u] {
		return
	}
	l := b.live[u]
	if int(c) >= len(l) {
		l = append(l, make([]int32, int(c)+1-len(l))...)
		b.live[u] = l
	}
	if l[c] >= val {
		return
	}
	l[c] = val
	if b.atOp[c] == g {
		b.dVal[b.at[c]-1] = val
		return
	}
	b.atOp[c], b.at[c] = g, int32(len(b.dChain))+1
	b.dChain = append(b.dChain, c)
	b.dVal = append(b.dVal, val)
}

// expand stores the rows dense: each row is its stream's previous row with
// its deltas applied.
func (b *hbBuilder) expand() {
	h := b.h
	W := h.chains
	h.dense = make([]int32, h.rows*W)
	for r := range h.rows {
		row := h.dense[r*W : (r+1)*W]
		if pr := b.rowPrev[r]; pr >= 0 {
			copy(row, h.dense[int(pr)*W:(int(pr)+1)*W])
		}
		for k := b.rowStart[r]; k < b.rowStart[r+1]; k++ {
			row[b.dChain[k]] = b.dVal[k]
		}
	}
}

// index sorts the deltas by (stream, chain, row): a counting sort by chain,
// then a stable one by stream (rows are already in order).
func (b *hbBuilder) index() {
	h := b.h
	S := len(h.opBase) - 1
	D := len(b.dChain)
	byChain := make([]hbDelta, D)
	count := make([]int32, max(h.chains, S)+1)
	for _, c := range b.dChain {
		count[c+1]++
	}
	for c := range h.chains {
		count[c+1] += count[c]
	}
	for r := range h.rows {
		for k := b.rowStart[r]; k < b.rowStart[r+1]; k++ {
			c := b.dChain[k]
			byChain[count[c]] = hbDelta{chain: c, row: int32(r), val: b.dVal[k]}
			count[c]++
		}
	}
	b.dChain, b.dVal = nil, nil
	h.sparseBase = make([]int32, S+1)
	for _, d := range byChain {
		h.sparseBase[b.rowStream[d.row]+1]++
	}
	for s := range S {
		h.sparseBase[s+1] += h.sparseBase[s]
	}
	fill := slices.Clone(h.sparseBase[:S])
	h.sparse = make([]hbDelta, D)
	for _, d := range byChain {
		s := b.rowStream[d.row]
		h.sparse[fill[s]] = d
		fill[s]++
	}
}

// reach reports whether op a happens-before op b, or is b: everything up
// to and including a on its stream completes before b starts. Cost: O(1)
// with dense rows, O(log D) with sparse ones.
func (h *hbGraph) reach(a, b int32) bool {
	sa, sb := h.opStream[a], h.opStream[b]
	if sa == sb {
		return h.opIndex[a] <= h.opIndex[b]
	}
	ca := h.chain[sa]
	pa := h.chainOff[sa] + h.opIndex[a]
	if ca == h.chain[sb] {
		return pa <= h.chainOff[sb]+h.opIndex[b]
	}
	r := h.rowOf[b]
	if r < 0 {
		return false
	}
	return h.count(r, sb, ca) > pa
}

// count returns row r's (of stream s) entry for chain c: how many of c's
// ops happen-before the row's op.
func (h *hbGraph) count(r, s, c int32) int32 {
	if h.sparseBase == nil {
		return h.dense[int(r)*h.chains+int(c)]
	}
	list := h.sparse[h.sparseBase[s]:h.sparseBase[s+1]]
	// The first delta after (c, r); the one before it is c's latest at r.
	k, _ := slices.BinarySearchFunc(list, [2]int32{c, r + 1}, func(d hbDelta, key [2]int32) int {
		if d.chain != key[0] {
			return int(d.chain - key[0])
		}
		return int(d.row - key[1])
	})
	if k > 0 && list[k-1].chain == c {
		return list[k-1].val
	}
	return 0
}
