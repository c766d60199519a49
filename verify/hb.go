package verify

import (
	"slices"

	"github.com/dagrun/dagrun/plan"
)

// hbGraph is a plan's happens-before relation over its ops, as Verify sees
// it: stream order plus the cross-stream edges that hbEdges resolves, kept
// as vector clocks over chains of ops. Ops are numbered globally: op g is
// Streams[opStream[g]].Ops[g-opBase[opStream[g]]] (hbGraph.index).
//
// Chains: every op is on one chain (opChain) at a position (opPos), and
// the ops of a chain are totally ordered by happens-before; the chains
// are a path cover of the happens-before order, built greedily in issue
// order (place): an op continues its stream's chain while it can, and a
// stream's first op, or an op whose chain another stream took, continues
// a chain whose last op it is ordered after and whose stream is finished
// or goes on with a wait. So plans of many short streams (uncapped plans)
// have clocks over far fewer chains than streams, and a stream may hand
// its chain on when it waits. Reachability over a chain decomposition is
// Jagadish's ("A compression technique to materialize transitive
// closure", ACM TODS 15(4), 1990, §3): op a happens-before op b iff a and
// b are on one chain with a at or before b, or b knows a's chain up to
// a's position or further.
//
// Clocks (Fidge 1988, Mattern 1989): each op with an incoming edge whose
// sources tell its stream something new starts a row, the clock of that
// op: per chain, how many of its ops happen-before the op. An op's clock is
// the row of the latest such op of its stream at or before it (rowOf), and
// on its own chain its own position (an op that leaves its stream
// predecessor's chain starts a row that counts that chain). A row is stored as its parent row
// and the entries that changed from it (deltas): the parent is the
// stream's previous row, or, when the op's first source knows the op of
// that row (so that its clock covers the stream's), the source's row,
// adopted as is (a stream waking up after others synchronized, a reader
// waiting on a writer that saw every reader: no copy of the clock). Rows
// are expanded to dense int32 rows when that is no larger than the
// deltas, and always for plans of few chains (O(1) a query); otherwise
// the deltas are indexed per stream by (chain, row), and a query is a
// binary search per adoption followed (at most hbMaxHops). While the rows
// are built, the latest delta of each stream and chain is kept in
// per-stream tables indexed by chain (hbFlatHeads entries at most, then a
// map).
type hbGraph struct {
	opBase   []int32 // per stream, global id of its op 0 (S+1 entries)
	opStream []int32
	opIssue  []int32 // position in IssueOrder
	// opCaptured, per op: for a wait, the record op it orders after (the
	// latest record of its event issued before it), or -1; -1 for others.
	// Nil for a derived plan (UnrollDerived), whose races are not explained.
	opCaptured []int32

	im *implicitOrder // CUDA's implicit order, nil if the plan has none

	opChain []int32 // per op: its chain
	opPos   []int32 // per op: its position on its chain
	chains  int
	rowOf   []int32 // per op: the row of its clock, or -1 (it knows no other chain)
	rows    int

	// Dense layout: row r's entry for chain c is dense[r*chains+c].
	dense []int32
	// Sparse layout: stream s's deltas are k in sparseBase[s]:sparseBase[s+1],
	// sorted by sparseKey[k] = chain<<32 | row, setting the chain's count
	// to sparseVal[k]; row r is stream rowStream[r]'s, its segment begins
	// at row rowSeg[r], and a segment's first row adopted the clock of row
	// rowBase (-1: none).
	sparseKey                  []uint64
	sparseVal                  []int32
	sparseBase                 []int32
	rowStream, rowSeg, rowBase []int32

	// over is set when buildHB stopped at its bound: h answers nothing.
	over  bool
	steps int64 // buildHB's steps
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
// over IssueOrder builds every clock. A stream that does not adopt joins
// an edge's source clock incrementally (the differential technique of
// Singhal and Kshemkalyani, "An efficient implementation of vector
// clocks", IPL 43(1), 1992): it takes the deltas of the source's rows back
// to the first one whose op it already knows, so each row is read at most
// once per stream that syncs with it. Cost: O(ops + D·(f + log D)) time and
// O(ops + D) memory for D deltas and f the streams that sync directly
// with a stream, plus implicitOrder's. D ≤ rows × chains; it is about the
// rows times the chains that advance between a stream's syncs when the
// stream cannot adopt (few streams: at most streams per row; uncapped plans
// whose streams each run a few stages per iteration: up to streams² per
// unrolled iteration).
func hbEdges(p *plan.Plan) *hbGraph { return buildHB(p, hbAuto, 0) }

// buildHB stops once it has taken more than maxSteps steps (clock entries
// read and written; 0: no bound), leaving h.over set and h unusable.
func buildHB(p *plan.Plan, layout hbLayout, maxSteps int64) *hbGraph {
	S := len(p.Streams)
	c := plan.OpsOf(p)
	h := &hbGraph{opBase: slices.Clone(c.Base)}
	nops := int(h.opBase[S])
	h.opStream = make([]int32, nops)
	h.opIssue = make([]int32, nops)
	if !p.Derived {
		h.opCaptured = make([]int32, nops)
	}
	h.rowOf = make([]int32, nops)
	h.opChain, h.opPos = make([]int32, nops), make([]int32, nops)
	for s := range S {
		for g := h.opBase[s]; g < h.opBase[s+1]; g++ {
			h.opStream[g] = int32(s)
		}
	}
	for g := range h.opCaptured {
		h.opCaptured[g] = -1
	}
	var im *implicitOrder
	if p.Ops == nil {
		im = deriveImplicit(p) // CUDA's implicit order (implicit.go), nil if none; none in a plan of Ops alone
	}
	h.im = im
	b := hbBuilder{h: h, lastRow: make([]int32, S), rowStart: []int32{0}, kind: c.Kind}
	if im == nil {
		// Without implicit order only a wait starts a row (a wait's
		// record, or a stream predecessor's chain that another stream
		// took as it went on with this wait): room for them all, made
		// once (push grows past it, should that not hold).
		waits := 0
		for _, k := range c.Kind {
			if k == plan.OpWait {
				waits++
			}
		}
		b.rowStream, b.rowOp, b.rowParent, b.rowSeg, b.rowHops = make([]int32, 0, waits), make([]int32, 0, waits), make([]int32, 0, waits), make([]int32, 0, waits), make([]int32, 0, waits)
		b.adopted = make([]bool, 0, waits)
		b.rowStart = append(make([]int32, 0, waits+1), 0)
	}
	for s := range S {
		b.lastRow[s] = -1
	}
	b.headOf = make([][]int32, S)
	last := make([]int32, p.Events) // per event: its latest record issued so far
	for e := range last {
		last[e] = -1
	}
	var src []int32
	for k, g := range c.Issue {
		s := h.opStream[g]
		h.opIssue[g] = int32(k)
		src = src[:0]
		switch c.Kind[g] {
		case plan.OpRecord:
			last[c.Arg[g]] = g
		case plan.OpWait:
			r := last[c.Arg[g]]
			if r >= 0 && im != nil && im.unordered[g] {
				r = -1 // another thread's record, not handed over (implicit.go)
			}
			if h.opCaptured != nil {
				h.opCaptured[g] = r
			}
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
		if maxSteps > 0 && b.steps > maxSteps {
			h.over = true
			return h
		}
	}
	h.chains = len(b.chainLen)
	h.rows = len(b.rowStream)
	h.steps = b.steps
	dense := layout == hbDense || layout == hbAuto && (h.chains <= hbDenseChains || int64(h.rows)*int64(h.chains) <= 4*int64(len(b.dChain)))
	b.dPrev, b.dJump, b.dDepth, b.headOf, b.headMap = nil, nil, nil, nil, nil // build-time only
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
	// chainLen, per chain: its length, in ops of the streams it holds.
	chainLen []int32
	// Rows, by id in creation (issue) order: row r is made by op rowOp[r]
	// of stream rowStream[r]; its clock is its parent's (rowParent: the
	// stream's previous row, or the base row it adopted, or none) with its
	// deltas dChain/dVal[rowStart[r]:rowStart[r+1]] raised. rowSeg[r] is
	// the first row of r's segment (rows of one stream since its last
	// adoption); rowHops[r] is how many adoptions a query from r may
	// follow.
	rowStream, rowOp, rowParent, rowSeg, rowHops []int32
	rowStart                                     []int32
	adopted                                      []bool // per row: it adopted its parent (another stream's row)
	dChain, dVal, dRow                           []int32
	// dPrev, per delta: the previous delta of the same stream and chain,
	// or -1; head(s, c) is the latest (build-time queries). dJump and
	// dDepth make each such list a random-access stack (Myers, "An
	// applicative random-access stack", IPL 17(5), 1983): the latest delta
	// at or before a row is found in O(log n) steps.
	dPrev, dJump, dDepth []int32
	// headOf[s][c] is head(s, c) for the chains below len(headOf[s]);
	// the rest, once the slices hold hbFlatHeads entries, are in headMap.
	headOf  [][]int32
	headLen int
	headMap map[uint64]int32
	lastRow []int32 // per stream: its latest row, or -1
	// at, per chain: 1 + the index in dChain of its delta in the row being
	// built, when atOp is that row's op.
	at, atOp []int32
	kind     []plan.OpKind // per op: its kind
	tail     []int32       // per chain: its last op
	steps    int64         // clock entries read (query) and written (raise)
}

// hbMaxHops bounds the adoptions a query follows: a stream adopts a row
// whose queries follow more only by taking its deltas instead. (A
// variable for tests.)
var hbMaxHops int32 = 8

// hbFlatHeads is the most build-time heads kept in per-stream tables
// indexed by chain (64 MiB); the rest are in a map. (A variable for tests.)
var hbFlatHeads = 1 << 24

func (b *hbBuilder) head(s, c int32) int32 {
	if t := b.headOf[s]; int(c) < len(t) {
		return t[c]
	}
	if k, ok := b.headMap[uint64(s)<<32|uint64(c)]; ok {
		return k
	}
	return -1
}

func (b *hbBuilder) setHead(s, c, k int32) {
	t := b.headOf[s]
	if int(c) >= len(t) && b.headLen+int(c)+1-len(t) <= hbFlatHeads {
		n := max(int(c)+1, 2*len(t))
		if b.headLen+n-len(t) > hbFlatHeads {
			n = int(c) + 1
		}
		b.headLen += n - len(t)
		t = append(t, make([]int32, n-len(t))...)
		for x := len(b.headOf[s]); x < n; x++ {
			t[x] = -1
		}
		b.headOf[s] = t
	}
	if int(c) < len(t) {
		t[c] = k
		return
	}
	if b.headMap == nil {
		b.headMap = map[uint64]int32{}
	}
	b.headMap[uint64(s)<<32|uint64(c)] = k
}

// query returns row r's entry for chain c while the rows are being built
// (r may be the row being built): the latest delta of c in r's segment, or
// else in the row its segment adopted.
func (b *hbBuilder) query(r, c int32) int32 {
	for r >= 0 {
		b.steps++
		s, seg := b.rowStream[r], b.rowSeg[r]
		k := b.head(s, c)
		for k >= 0 && b.dRow[k] > r {
			b.steps++
			if j := b.dJump[k]; j >= 0 && b.dRow[j] > r {
				k = j // every delta skipped is after r too
			} else {
				k = b.dPrev[k]
			}
		}
		if k >= 0 && b.dRow[k] >= seg {
			return b.dVal[k]
		}
		if !b.adopted[seg] {
			return 0
		}
		r = b.rowParent[seg]
	}
	return 0
}

// issue handles op g of stream s, ordered after its stream predecessor and
// the ops of src (other streams', issued earlier): it places g on a chain,
// and makes a new row when g adopts a source's row or learns something new
// (from src, or its stream predecessor's chain when g leaves it).
func (b *hbBuilder) issue(s, g int32, src []int32) {
	h := b.h
	p := int32(-1) // g's stream predecessor
	if g > h.opBase[s] {
		p = g - 1
	}
	h.opChain[g] = -1 // not placed yet: joins skip no chain
	start := int32(len(b.dChain))
	prev := b.lastRow[s]
	r := int32(-1)
	if len(src) > 0 {
		r = b.newRow(s, g, prev)
		for _, x := range src {
			b.join(s, g, p, r, prev, x)
		}
	}
	b.place(g, p, start, src)
	if p >= 0 && h.opChain[p] != h.opChain[g] {
		// g's clock counts p's chain, which g left, explicitly.
		if r < 0 {
			r = b.newRow(s, g, prev)
		}
		b.raise(s, g, r, h.opChain[p], h.opPos[p]+1)
	}
	if r >= 0 {
		if int32(len(b.dChain)) == start && !b.adopted[r] { // nothing new: no row
			n := len(b.rowStream) - 1
			b.rowStream, b.rowOp, b.rowParent, b.rowSeg, b.rowHops, b.adopted = b.rowStream[:n], b.rowOp[:n], b.rowParent[:n], b.rowSeg[:n], b.rowHops[:n], b.adopted[:n]
		} else {
			b.rowStart = push(b.rowStart, int32(len(b.dChain)))
			b.lastRow[s] = r
		}
	}
	h.rowOf[g] = b.lastRow[s]
}

// newRow begins op g's row, tentatively a continuation of stream s's rows
// (prev its latest, or -1).
func (b *hbBuilder) newRow(s, g, prev int32) int32 {
	r := int32(len(b.rowStream))
	seg, hops := r, int32(0)
	if prev >= 0 {
		seg, hops = b.rowSeg[prev], b.rowHops[prev]
	}
	b.rowStream = push(b.rowStream, s)
	b.rowOp = push(b.rowOp, g)
	b.rowParent = push(b.rowParent, prev)
	b.rowSeg = push(b.rowSeg, seg)
	b.rowHops = push(b.rowHops, hops)
	b.adopted = push(b.adopted, false)
	return r
}

// place puts op g (stream predecessor p, or -1; its row's deltas from
// start on) on a chain, greedily in issue order: g continues a chain whose
// last op happens-before it, else it begins a new one (a chain
// decomposition built as in Jagadish 1990, §3, and Simon, "An improved
// algorithm for transitive closure on acyclic digraphs", TCS 58(1–3),
// 1988, §2). In turn: p's chain, when p is still its last op (a stream
// keeps its chain); the chain of a source in src that is still its last
// op, or of a chain whose end g learnt in this row, when that last op is
// its stream's last or is followed by a wait (so that its stream, which
// then has a wait to continue another chain from, is not left without
// one). A stream whose chain another stream took continues a chain it
// learnt the end of, as a stream's first op does.
func (b *hbBuilder) place(g, p, start int32, src []int32) {
	h := b.h
	last := func(x int32) bool { return b.chainLen[h.opChain[x]] == h.opPos[x]+1 }
	c := int32(-1)
	if p >= 0 && last(p) {
		c = h.opChain[p] // a stream keeps its chain
	}
	for _, x := range src {
		if c < 0 && last(x) && b.waitsNext(x) {
			c = h.opChain[x]
		}
	}
	for k := start; c < 0 && k < int32(len(b.dChain)); k++ {
		if d := b.dChain[k]; b.dVal[k] == b.chainLen[d] && b.waitsNext(b.tail[d]) {
			c = d // g learnt the end of chain d
		}
	}
	if c < 0 {
		c = int32(len(b.chainLen))
		b.chainLen = append(b.chainLen, 0)
		b.at, b.atOp = append(b.at, 0), append(b.atOp, -1)
		b.tail = append(b.tail, g)
	}
	h.opChain[g], h.opPos[g] = c, b.chainLen[c]
	b.tail[c] = g
	b.chainLen[c]++
}

// waitsNext reports whether op x's stream ends at x or goes on with a
// wait, which may continue another chain: only then does an op of another
// stream take x's chain.
func (b *hbBuilder) waitsNext(x int32) bool {
	h := b.h
	s := h.opStream[x]
	return x+1 == h.opBase[s+1] || b.kind[x+1] == plan.OpWait
}

// knowsBefore reports whether the clock of a stream's op p (-1: none),
// whose latest row is prev, knows op z: z is on p's chain at or before p,
// or prev counts z.
func (b *hbBuilder) knowsBefore(p, prev, z int32) bool {
	h := b.h
	zc := h.opChain[z]
	if p >= 0 && zc == h.opChain[p] {
		return h.opPos[z] <= h.opPos[p]
	}
	return prev >= 0 && b.query(prev, zc) > h.opPos[z]
}

// join orders op g of stream u (its stream predecessor p, its row being
// built r, its previous row prev) after op x of another stream t. When
// x's clock covers u's previous row (x knows that row's op) and the hop
// bound allows, r adopts x's row; else r takes the deltas of x's rows,
// walking from x's row to its parents until one whose op p's clock knows
// (it knows all that row knows), so that each row is taken at most once
// per stream.
func (b *hbBuilder) join(u, g, p, r, prev, x int32) {
	h := b.h
	ct, q := h.opChain[x], h.opPos[x]+1 // x's chain, x's count on it
	if p >= 0 && ct == h.opChain[p] && q <= h.opPos[p]+1 || b.query(r, ct) >= q {
		return // u knows x already, and so all x knows
	}
	rx := h.rowOf[x]
	if !b.adopted[r] && int32(len(b.dChain)) == b.rowStart[len(b.rowStart)-1] {
		covers := prev < 0 || b.knowsBefore(x, rx, b.rowOp[prev])
		if covers && (rx < 0 || b.rowHops[rx] < hbMaxHops) {
			b.adopted[r], b.rowParent[r], b.rowSeg[r] = true, rx, r
			b.rowHops[r] = 0
			if rx >= 0 {
				b.rowHops[r] = b.rowHops[rx] + 1
			}
			b.raise(u, g, r, ct, q)
			return
		}
	}
	for k := rx; k >= 0; k = b.rowParent[k] {
		if b.knowsBefore(p, prev, b.rowOp[k]) {
			break // p's clock knows row k's op
		}
		for d := b.rowStart[k]; d < b.rowStart[k+1]; d++ {
			b.raise(u, g, r, b.dChain[d], b.dVal[d])
		}
	}
	b.raise(u, g, r, ct, q)
}

// raise sets u's entry for chain c to at least val in row r (of op g).
// Its entry for g's own chain is never read (reach compares positions).
func (b *hbBuilder) raise(u, g, r, c, val int32) {
	if c == b.h.opChain[g] {
		return
	}
	if b.atOp[c] == g {
		if k := b.at[c] - 1; b.dVal[k] < val {
			b.dVal[k] = val
		}
		return
	}
	if b.query(r, c) >= val {
		return
	}
	k := int32(len(b.dChain))
	b.steps++
	b.atOp[c], b.at[c] = g, k+1
	b.dChain = push(b.dChain, c)
	b.dVal = push(b.dVal, val)
	b.dRow = push(b.dRow, r)
	p := b.head(u, c)
	depth, jump := int32(0), p
	if p >= 0 {
		depth = b.dDepth[p] + 1
		if j := b.dJump[p]; j >= 0 && b.dJump[j] >= 0 && b.dDepth[p]-b.dDepth[j] == b.dDepth[j]-b.dDepth[b.dJump[j]] {
			jump = b.dJump[j]
		}
	}
	b.dPrev = push(b.dPrev, p)
	b.dJump = push(b.dJump, jump)
	b.dDepth = push(b.dDepth, depth)
	b.setHead(u, c, k)
}

// push appends x to s, doubling its capacity when it is full: the
// builder's row and delta tables grow to millions of entries, and append's
// growth by a quarter for large slices would allocate about five times
// their final size in all (twice with doubling).
func push[T any](s []T, x T) []T {
	if len(s) == cap(s) {
		s = slices.Grow(s, max(len(s), 256))
	}
	return append(s, x)
}

// expand stores the rows dense: each row is its parent's with its deltas
// applied.
func (b *hbBuilder) expand() {
	h := b.h
	W := h.chains
	h.dense = make([]int32, h.rows*W)
	for r := range h.rows {
		row := h.dense[r*W : (r+1)*W]
		if pr := b.rowParent[r]; pr >= 0 {
			copy(row, h.dense[int(pr)*W:(int(pr)+1)*W])
		}
		for k := b.rowStart[r]; k < b.rowStart[r+1]; k++ {
			row[b.dChain[k]] = b.dVal[k]
		}
	}
}

// index sorts the deltas by (stream, chain, row): a counting sort by chain,
// then a stable one by stream (rows are already in order); queries follow
// a segment's adoption (rowSeg, rowParent of adopted rows).
func (b *hbBuilder) index() {
	h := b.h
	S := len(h.opBase) - 1
	D := len(b.dChain)
	byChain := make([]hbDelta, D)
	count := make([]int32, h.chains+1)
	for _, c := range b.dChain {
		count[c+1]++
	}
	for c := range h.chains {
		count[c+1] += count[c]
	}
	for k, c := range b.dChain {
		byChain[count[c]] = hbDelta{chain: c, row: b.dRow[k], val: b.dVal[k]}
		count[c]++
	}
	h.sparseBase = make([]int32, S+1)
	for _, d := range byChain {
		h.sparseBase[b.rowStream[d.row]+1]++
	}
	for s := range S {
		h.sparseBase[s+1] += h.sparseBase[s]
	}
	fill := slices.Clone(h.sparseBase[:S])
	h.sparseKey, h.sparseVal = make([]uint64, D), make([]int32, D)
	for _, d := range byChain {
		s := b.rowStream[d.row]
		h.sparseKey[fill[s]], h.sparseVal[fill[s]] = uint64(d.chain)<<32|uint64(d.row), d.val
		fill[s]++
	}
	h.rowStream, h.rowSeg = b.rowStream, b.rowSeg
	h.rowBase = make([]int32, h.rows)
	for r := range h.rows {
		h.rowBase[r] = -1
		if b.adopted[r] {
			h.rowBase[r] = b.rowParent[r]
		}
	}
}

// reach reports whether op a happens-before op b, or is b: everything up
// to and including a on its stream completes before b starts. Cost: O(1)
// with dense rows, O(log D) with sparse ones.
func (h *hbGraph) reach(a, b int32) bool {
	sa, sb := h.opStream[a], h.opStream[b]
	if sa == sb {
		return a <= b // a stream's ops are numbered in its order
	}
	ca, pa := h.opChain[a], h.opPos[a]
	if ca == h.opChain[b] {
		return pa <= h.opPos[b]
	}
	r := h.rowOf[b]
	if r < 0 {
		return false
	}
	return h.count(r, ca) > pa
}

// count returns row r's entry for chain c: how many of c's ops
// happen-before the row's op. Sparse: the latest delta of c in r's
// segment, else in the row the segment adopted (at most hbMaxHops).
func (h *hbGraph) count(r, c int32) int32 {
	if h.sparseBase == nil {
		return h.dense[int(r)*h.chains+int(c)]
	}
	for r >= 0 {
		s, seg := h.rowStream[r], h.rowSeg[r]
		// The first delta after (c, r); the one before it is c's latest at r.
		key := uint64(c)<<32 | uint64(r+1)
		lo, hi := h.sparseBase[s], h.sparseBase[s+1]
		for lo < hi {
			m := int32(uint32(lo+hi) >> 1)
			if h.sparseKey[m] < key {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo > h.sparseBase[s] && h.sparseKey[lo-1] >= uint64(c)<<32|uint64(seg) {
			return h.sparseVal[lo-1]
		}
		r = h.rowBase[seg]
	}
	return 0
}
