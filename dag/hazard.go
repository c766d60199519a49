package dag

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/dagrun/dagrun/contract"
	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/topo"
)

// HazardKind is why one stage must happen before another
// (contract.HazardKind).
type HazardKind = contract.HazardKind

const (
	RAW   = contract.RAW   // read after write: the later stage reads bytes the earlier one wrote
	WAR   = contract.WAR   // write after read: the later stage overwrites bytes the earlier one read
	WAW   = contract.WAW   // write after write: both write the same bytes; the later value must win
	After = contract.After // control dependency from the later stage's `after:` list
)

// Hazard labels one reason for an edge: its kind and the bytes
// [Offset, Offset+Bytes) of Buffer that both stages touch (the intersection
// of the two accesses). After hazards have no buffer (Buffer "", Bytes 0).
type Hazard = contract.Hazard

// StageNode is a stage of a HazardGraph; its ID is the stage's declaration index.
type StageNode struct {
	Index int
	Name  string
}

// ID returns the stage's declaration index.
func (n StageNode) ID() int64 { return int64(n.Index) }

// DOTID names the node by its stage name in DOT output.
func (n StageNode) DOTID() string { return n.Name }

// HazardEdge is a dependency From → To with its reasons.
type HazardEdge struct {
	F, T    StageNode
	Hazards []Hazard // sorted by kind, buffer, offset
}

func (e HazardEdge) From() graph.Node         { return e.F }
func (e HazardEdge) To() graph.Node           { return e.T }
func (e HazardEdge) ReversedEdge() graph.Edge { return HazardEdge{F: e.T, T: e.F, Hazards: e.Hazards} }

// HazardGraph is the hazard DAG of a spec: node i is Spec.Stages[i]; an edge u → v
// means stage u must complete before stage v starts. It is immutable once
// built and safe for concurrent readers. It satisfies gonum's graph.Directed.
//
// Adjacency is stored in compressed sparse rows (int32 stage indices), so a
// graph of E edges and H hazard labels takes about 12E + 40H bytes.
type HazardGraph struct {
	spec    *Spec
	predOff []int32 // len n+1; pred[predOff[v]:predOff[v+1]] are v's predecessors, ascending
	pred    []int32
	hzOff   []int32 // len(pred)+1; hazards of edge id e (= index into pred) are hz[hzOff[e]:hzOff[e+1]]
	hz      []Hazard
	succOff []int32 // len n+1
	succ    []int32 // ascending per row
	order   []int32 // a stable topological order
	forward bool    // every edge goes from an earlier to a later declared stage
	accOff  []int32 // len n+1; accBuf[accOff[v]:accOff[v+1]] are v's accesses' buffers (AccessBuffers)
	accBuf  []int32
}

var _ graph.Directed = (*HazardGraph)(nil)

// Spec returns the spec the graph was built from.
func (g *HazardGraph) Spec() *Spec { return g.spec }

// Len returns the number of stages.
func (g *HazardGraph) Len() int { return len(g.predOff) - 1 }

// NumEdges returns the number of edges.
func (g *HazardGraph) NumEdges() int { return len(g.pred) }

// Pred returns the predecessors of stage v in ascending declaration index.
// The slice is shared: do not modify it.
func (g *HazardGraph) Pred(v int) []int32 { return g.pred[g.predOff[v]:g.predOff[v+1]] }

// AccessBuffers returns the buffer of each of stage v's reads, then
// writes, as its index in Spec.Buffers (an index of len(Spec.Buffers) or
// more names no declared buffer): the lookups of the analysis, for passes
// that would otherwise look every access's buffer up by name again. The
// slice is shared: do not modify it.
func (g *HazardGraph) AccessBuffers(v int) []int32 { return g.accBuf[g.accOff[v]:g.accOff[v+1]] }

// Succ returns the successors of stage u in ascending declaration index.
// The slice is shared: do not modify it.
func (g *HazardGraph) Succ(u int) []int32 { return g.succ[g.succOff[u]:g.succOff[u+1]] }

// Order returns a stable topological order of the stages: declaration order
// when every edge points forward (the usual case), otherwise gonum's
// topo.SortStabilized with declaration index as tiebreak. Do not modify it.
func (g *HazardGraph) Order() []int32 { return g.order }

// Forward reports whether every edge goes from an earlier to a later declared
// stage, i.e. whether declaration order is topological.
func (g *HazardGraph) Forward() bool { return g.forward }

// EdgeHazards returns the reasons for edge u → v, or nil if there is none.
func (g *HazardGraph) EdgeHazards(u, v int) []Hazard {
	e := g.edgeID(u, v)
	if e < 0 {
		return nil
	}
	return g.hz[g.hzOff[e]:g.hzOff[e+1]]
}

func (g *HazardGraph) edgeID(u, v int) int {
	if u < 0 || v < 0 || u >= g.Len() || v >= g.Len() {
		return -1
	}
	lo, hi := int(g.predOff[v]), int(g.predOff[v+1])
	i, ok := slices.BinarySearch(g.pred[lo:hi], int32(u))
	if !ok {
		return -1
	}
	return lo + i
}

func (g *HazardGraph) node(i int) StageNode { return StageNode{Index: i, Name: g.spec.Stages[i].Name} }

// Node returns the stage with the given id, or nil.
func (g *HazardGraph) Node(id int64) graph.Node {
	if id < 0 || id >= int64(g.Len()) {
		return nil
	}
	return g.node(int(id))
}

// Nodes returns all stages in declaration order.
func (g *HazardGraph) Nodes() graph.Nodes { return &nodeIter{g: g, n: g.Len(), i: -1} }

// From returns the successors of id.
func (g *HazardGraph) From(id int64) graph.Nodes {
	if id < 0 || id >= int64(g.Len()) {
		return &nodeIter{g: g, i: -1}
	}
	s := g.Succ(int(id))
	return &nodeIter{g: g, ids: s, n: len(s), i: -1}
}

// To returns the predecessors of id.
func (g *HazardGraph) To(id int64) graph.Nodes {
	if id < 0 || id >= int64(g.Len()) {
		return &nodeIter{g: g, i: -1}
	}
	p := g.Pred(int(id))
	return &nodeIter{g: g, ids: p, n: len(p), i: -1}
}

// HasEdgeBetween reports whether there is an edge between x and y in either direction.
func (g *HazardGraph) HasEdgeBetween(xid, yid int64) bool {
	return g.HasEdgeFromTo(xid, yid) || g.HasEdgeFromTo(yid, xid)
}

// HasEdgeFromTo reports whether there is an edge uid → vid.
func (g *HazardGraph) HasEdgeFromTo(uid, vid int64) bool { return g.edgeID(int(uid), int(vid)) >= 0 }

// Edge returns the edge uid → vid as a HazardEdge, or nil.
func (g *HazardGraph) Edge(uid, vid int64) graph.Edge {
	e := g.edgeID(int(uid), int(vid))
	if e < 0 {
		return nil
	}
	return HazardEdge{F: g.node(int(uid)), T: g.node(int(vid)), Hazards: g.hz[g.hzOff[e]:g.hzOff[e+1]]}
}

// nodeIter iterates over ids (or 0..n-1 when ids is nil).
type nodeIter struct {
	g   *HazardGraph
	ids []int32
	n   int
	i   int
}

func (it *nodeIter) Next() bool {
	if it.i+1 >= it.n {
		it.i = it.n
		return false
	}
	it.i++
	return true
}

func (it *nodeIter) Len() int {
	if it.i >= it.n {
		return 0
	}
	return it.n - it.i - 1
}

func (it *nodeIter) Reset() { it.i = -1 }

func (it *nodeIter) Node() graph.Node {
	if it.i < 0 || it.i >= it.n {
		return nil
	}
	if it.ids == nil {
		return it.g.node(it.i)
	}
	return it.g.node(int(it.ids[it.i]))
}

// accRef names one access of a stage: Writes[acc] if write, else Reads[acc].
type accRef struct {
	stage int32
	acc   int32
	write bool
}

// segment is a maximal byte range [lo, hi) of a buffer with one access
// history: the last write that covers it and the reads of it since.
type segment struct {
	lo, hi  int64
	writer  accRef // stage -1: never written
	readers []accRef
}

// bufState is the live state of one buffer: disjoint segments sorted by lo,
// covering exactly the bytes some stage has touched.
type bufState struct{ segs []segment }

// touch makes the segments tile [lo, hi) exactly, splitting boundary
// segments and filling gaps, and returns the index range of that tiling.
func (b *bufState) touch(lo, hi int64) (int, int) {
	i := sort.Search(len(b.segs), func(k int) bool { return b.segs[k].hi > lo })
	// Split a segment straddling lo.
	if i < len(b.segs) && b.segs[i].lo < lo {
		s := b.segs[i]
		left := segment{lo: s.lo, hi: lo, writer: s.writer, readers: slices.Clone(s.readers)}
		b.segs[i].lo = lo
		b.segs = slices.Insert(b.segs, i, left)
		i++
	}
	j := i
	cur := lo
	for cur < hi {
		if j < len(b.segs) && b.segs[j].lo == cur {
			if b.segs[j].hi > hi { // split a segment straddling hi
				s := b.segs[j]
				right := segment{lo: hi, hi: s.hi, writer: s.writer, readers: slices.Clone(s.readers)}
				b.segs[j].hi = hi
				b.segs = slices.Insert(b.segs, j+1, right)
			}
			cur = b.segs[j].hi
			j++
			continue
		}
		// Gap [cur, next) of untouched bytes.
		next := hi
		if j < len(b.segs) && b.segs[j].lo < next {
			next = b.segs[j].lo
		}
		b.segs = slices.Insert(b.segs, j, segment{lo: cur, hi: next, writer: accRef{stage: -1}})
		cur = next
		j++
	}
	return i, j
}

type pendingHazard struct {
	from int32
	h    Hazard
}

// Hazards builds the hazard graph of s: for each pair of stages whose
// accesses conflict (read/write or write/write on overlapping bytes of one
// buffer), an edge from the earlier to the later declared stage, labelled
// RAW, WAR or WAW with the overlapping bytes, plus an After edge for each
// `after:` entry.
//
// The analysis walks stages in declaration order and keeps, per buffer, a
// segment map (disjoint byte ranges, each with the last write covering it and
// the reads since). An access only meets the live history of the bytes it
// touches, so an earlier access whose bytes were all overwritten since is
// superseded: its order with later stages follows transitively through the
// overwriting stage, and that edge is left out.
//
// Edges that other edges imply are left out too, where that is cheap to
// prove: of a stage's conflicting earlier stages (its candidates), one that
// happens before another candidate through the edges already found (a
// search back from the candidates over earlier stages, at most 16 edges per
// candidate) gets no edge, and a read of
// a byte range drops that range's earlier readers that happen before the
// reading stage (a later write of the range is ordered after them through
// it). Such an edge is one the transitive reduction drops (for a DAG it is
// unique and is the minimum equivalent graph, Aho, Garey & Ullman 1972), so
// the graph's reachability, and so its transitive reduction, are those of
// the graph with an edge per conflicting pair; but a stage that reads what
// every earlier stage wrote (a prefix of a buffer each stage appends to, as
// a concatenation does) gets one edge, not one per earlier stage. Edges
// whose implication the bounded search does not find stay in. Cost is
// O(A log S + M) for A accesses, S live segments and M overlaps examined
// (segments met and candidates found, MaxHazardOverlaps); the graph takes
// O(E) for E edges kept (MaxHazards).
//
// Errors: an `after:` entry naming no stage or the stage itself, dependency
// cycles (possible only when `after:` names a later stage), reported with the
// stage names of each cycle, and a spec past MaxHazards or
// MaxHazardOverlaps, at the stage where it passes.
func Hazards(s *Spec) (*HazardGraph, error) { return hazards(s, false) }

// AllHazards is Hazards with the implied edges kept: an edge for every
// conflicting pair that meets in the live history (superseded accesses
// still leave none), the hazard DAG as a CUDA graph built from it has
// it, redundant edges included (the hazard-dag strategy). Its
// reachability is Hazards'; it may have an edge per pair of stages where
// Hazards has one per stage, within the same limits and errors.
func AllHazards(s *Spec) (*HazardGraph, error) { return hazards(s, true) }

func hazards(s *Spec, keepImplied bool) (*HazardGraph, error) {
	w := newHazardWalk(s, keepImplied)
	for v := range s.Stages {
		if err := w.stage(v); err != nil {
			return nil, err
		}
	}
	g := w.g
	g.linkSuccessors()
	if err := g.sortOrder(); err != nil {
		return nil, err
	}
	return g, nil
}

// hazardWalk is the state of the walk over a spec's stages in declaration
// order that Hazards makes: the buffers' segment maps, the graph built so
// far, and the stage being analysed's candidate hazards.
type hazardWalk struct {
	s           *Spec
	keepImplied bool
	g           *HazardGraph
	index       map[string]int32 // stage name → index, built at the first after: entry
	// Buffers by their index in s.Buffers; an undeclared name gets one
	// past them.
	bufIdx map[string]int32
	bufs   []bufState
	// Most accesses' buffers are found by a guess (bufferGuess), where no
	// name is declared twice (the map holds a name's last declaration).
	guess *bufferGuess

	limit        int // MaxHazards
	overlapLimit int // MaxHazardOverlaps
	overlaps     int // overlaps examined so far

	pend []pendingHazard // the hazards of the stage being analysed
	// Per stage v: cand[u] == v when earlier stage u is one of v's
	// candidates (a conflict or after: entry), reached[u] == v when the
	// search found that u happens before one of them.
	cand, reached []int32
	cands, stack  []int32
}

func newHazardWalk(s *Spec, keepImplied bool) *hazardWalk {
	n := len(s.Stages)
	w := &hazardWalk{s: s, keepImplied: keepImplied, bufIdx: make(map[string]int32, len(s.Buffers)), bufs: make([]bufState, len(s.Buffers))}
	for i := range s.Buffers {
		w.bufIdx[s.Buffers[i].Name] = int32(i)
	}
	if len(w.bufIdx) == len(s.Buffers) {
		w.guess = new(bufferGuess)
	}
	g := &HazardGraph{spec: s, forward: true}
	g.accOff = make([]int32, 1, n+1)
	g.predOff = make([]int32, 1, n+1)
	na := 0 // accesses and after: entries, a good guess at the edges found
	for i := range s.Stages {
		na += len(s.Stages[i].Reads) + len(s.Stages[i].Writes) + len(s.Stages[i].After)
	}
	w.limit = max(maxHazards, HazardsPerAccess*na)
	w.overlapLimit = max(maxHazardOverlaps, OverlapsPerAccess*na)
	g.pred = make([]int32, 0, na)
	g.accBuf = make([]int32, 0, na)
	g.hz = make([]Hazard, 0, na)
	g.hzOff = make([]int32, 1, na+1)
	w.g = g
	w.cand, w.reached = make([]int32, n), make([]int32, n)
	for i := range n {
		w.cand[i], w.reached[i] = -1, -1
	}
	return w
}

// bufOf returns the index of the buffer named name, accessed by access j
// of a stage's reads or writes.
func (w *hazardWalk) bufOf(name string, write bool, j int) int32 {
	if w.guess != nil {
		if bi, ok := w.guess.find(name, write, j); ok {
			w.guess.found(w.s.Buffers, write, j, bi, nil)
			return int32(bi)
		}
	}
	k, ok := w.bufIdx[name]
	if !ok {
		k = int32(len(w.bufs))
		w.bufIdx[name] = k
		w.bufs = append(w.bufs, bufState{})
	} else if w.guess != nil {
		w.guess.found(w.s.Buffers, write, j, int(k), nil)
	}
	return k
}

// tooMany is the error of a spec past MaxHazards at stage st.
func (w *hazardWalk) tooMany(st *StageSpec) error {
	hint := "its stages meet too many unordered earlier accesses each, as when each of many stages reads what many unordered earlier stages wrote (an edge per pair): have each stage read only the slices it needs, or one buffer that a single stage gathers them into"
	if w.keepImplied {
		hint = "the whole hazard DAG has an edge per conflicting pair, implied ones included, as when every stage reads what every earlier stage wrote (n²/2 pairs): plan it with a strategy other than hazard-dag, or have each stage read only the slices it needs"
	}
	return ErrorList{{Pos: st.Pos, Msg: fmt.Sprintf("stage %s: the spec's hazards (pairs of conflicting accesses the hazard graph keeps) pass %d here, its limit (%d per read, write and after: entry, or %d, whichever is more; each takes about 160 bytes through planning)",
		st.Name, w.limit, HazardsPerAccess, maxHazards),
		Hint: hint}}
}

// tooManyOverlaps is the error of a spec past MaxHazardOverlaps at stage st.
func (w *hazardWalk) tooManyOverlaps(st *StageSpec) error {
	return ErrorList{{Pos: st.Pos, Msg: fmt.Sprintf("stage %s: the spec's overlaps (byte ranges of earlier accesses that an access meets) pass %d here, its limit (%d per read, write and after: entry, or %d, whichever is more)",
		st.Name, w.overlapLimit, OverlapsPerAccess, maxHazardOverlaps),
		Hint: "its stages each meet what many earlier stages wrote or read, in many separate byte ranges: have each stage read only the slices it needs, or one buffer that a single stage gathers them into"}}
}

func (w *hazardWalk) access(r accRef) Access {
	if r.write {
		return w.s.Stages[r.stage].Writes[r.acc]
	}
	return w.s.Stages[r.stage].Reads[r.acc]
}

// overlap counts k overlaps examined and reports whether they pass their
// limit.
func (w *hazardWalk) overlap(k int) bool {
	w.overlaps += k
	return w.overlaps > w.overlapLimit
}

// addHz adds a candidate hazard of the stage being analysed and reports
// whether the overlaps examined pass their limit.
func (w *hazardWalk) addHz(kind HazardKind, from accRef, a Access) bool {
	r := a.Range().Intersect(w.access(from).Range())
	w.pend = append(w.pend, pendingHazard{from.stage, Hazard{Kind: kind, Buffer: r.Buffer, Offset: r.Offset, Bytes: r.Bytes}})
	return w.overlap(1)
}

// stage analyses stage v: its candidate hazards with earlier stages, less
// the implied ones, become its edges.
func (w *hazardWalk) stage(v int) error {
	st := &w.s.Stages[v]
	w.pend = w.pend[:0]
	if err := w.after(v, st); err != nil {
		return err
	}
	if !w.reads(v, st) || !w.writes(v, st) {
		return w.tooManyOverlaps(st)
	}
	w.dropImplied(v, st)
	return w.addEdges(v, st)
}

// after adds the candidates of stage v's after: entries.
func (w *hazardWalk) after(v int, st *StageSpec) error {
	for _, name := range st.After {
		if w.index == nil {
			w.index = make(map[string]int32, len(w.s.Stages))
			for i := range w.s.Stages {
				w.index[w.s.Stages[i].Name] = int32(i)
			}
		}
		u, ok := w.index[name]
		switch {
		case !ok:
			return fmt.Errorf("%s: stage %s: after: names no stage %q; name a declared stage", st.Pos, st.Name, name)
		case int(u) == v:
			return fmt.Errorf("%s: stage %s: after: names the stage itself; remove it", st.Pos, st.Name)
		case int(u) > v:
			w.g.forward = false
		}
		w.pend = append(w.pend, pendingHazard{u, Hazard{Kind: After}})
	}
	return nil
}

// reads adds the RAW candidates of stage v's reads and records each read
// in the segments it touches. It reports false when the overlaps examined
// pass their limit.
func (w *hazardWalk) reads(v int, st *StageSpec) bool {
	for r, a := range st.Reads {
		k := w.bufOf(a.Buffer, false, r)
		w.g.accBuf = append(w.g.accBuf, k)
		if a.Bytes <= 0 {
			continue
		}
		b := &w.bufs[k]
		i, j := b.touch(a.Offset, a.End())
		if w.overlap(j - i) {
			return false
		}
		me := accRef{int32(v), int32(r), false}
		for k := i; k < j; k++ {
			sg := &b.segs[k]
			if sg.writer.stage >= 0 && int(sg.writer.stage) != v {
				if w.addHz(RAW, sg.writer, a) {
					return false
				}
			}
			sg.readers = append(sg.readers, me)
		}
	}
	return true
}

// writes adds the WAW and WAR candidates of stage v's writes, each write
// superseding the history of the bytes it covers. It reports false when
// the overlaps examined pass their limit.
func (w *hazardWalk) writes(v int, st *StageSpec) bool {
	for wi, a := range st.Writes {
		k := w.bufOf(a.Buffer, true, wi)
		w.g.accBuf = append(w.g.accBuf, k)
		if a.Bytes <= 0 {
			continue
		}
		b := &w.bufs[k]
		i, j := b.touch(a.Offset, a.End())
		if w.overlap(j - i) {
			return false
		}
		for k := i; k < j; k++ {
			sg := &b.segs[k]
			if sg.writer.stage >= 0 && int(sg.writer.stage) != v {
				if w.addHz(WAW, sg.writer, a) {
					return false
				}
			}
			for _, r := range sg.readers {
				if int(r.stage) != v {
					if w.addHz(WAR, r, a) {
						return false
					}
				}
			}
		}
		// The write supersedes the history of [i, j): merge into one segment.
		b.segs[i] = segment{lo: b.segs[i].lo, hi: b.segs[j-1].hi, writer: accRef{int32(v), int32(wi), true}}
		b.segs = slices.Delete(b.segs, i+1, j)
	}
	return true
}

// dropImplied leaves out the candidates of stage v that happen before
// another candidate: it searches back from the candidates, latest first,
// over the edges of earlier stages (forward edges only, so every path
// found descends in declaration order and ends at a later candidate),
// marking the stages found. A marked candidate's edge is implied by the
// path through the candidate the search started from.
func (w *hazardWalk) dropImplied(v int, st *StageSpec) {
	g, cand, reached := w.g, w.cand, w.reached
	w.cands = w.cands[:0]
	minC := int32(v)
	for _, p := range w.pend {
		if u := p.from; !w.keepImplied && int(u) < v && cand[u] != int32(v) {
			cand[u] = int32(v)
			w.cands = append(w.cands, u)
			minC = min(minC, u)
		}
	}
	cands := w.cands
	if !slices.IsSorted(cands) {
		slices.Sort(cands)
	}
	budget := hazardSearchPerCandidate * len(cands)
	for k := len(cands) - 1; k >= 0 && budget > 0; k-- {
		if reached[cands[k]] == int32(v) {
			continue // its ancestors are searched from where it was found
		}
		w.stack = append(w.stack[:0], cands[k])
		for len(w.stack) > 0 && budget > 0 {
			x := w.stack[len(w.stack)-1]
			w.stack = w.stack[:len(w.stack)-1]
			row := g.Pred(int(x))
			for e := len(row) - 1; e >= 0 && row[e] >= minC && budget > 0; e-- {
				budget--
				if u := row[e]; u < x && reached[u] != int32(v) {
					reached[u] = int32(v)
					w.stack = append(w.stack, u)
				}
			}
		}
	}
	w.pend = slices.DeleteFunc(w.pend, func(p pendingHazard) bool { return int(p.from) < v && reached[p.from] == int32(v) })
	// A range this stage read keeps none of its earlier readers that
	// happen before this stage: a later write of the range conflicts
	// with this stage's read too, so it is ordered after them through
	// this stage. (A range this stage also wrote has no readers left.)
	if len(cands) > 0 {
		for r, a := range st.Reads {
			if a.Bytes <= 0 {
				continue
			}
			b := &w.bufs[g.accBuf[int(g.accOff[v])+r]]
			for i := sort.Search(len(b.segs), func(k int) bool { return b.segs[k].hi > a.Offset }); i < len(b.segs) && b.segs[i].lo < a.End(); i++ {
				if sg := &b.segs[i]; len(sg.readers) > 1 {
					sg.readers = slices.DeleteFunc(sg.readers, func(x accRef) bool {
						return int(x.stage) != v && (cand[x.stage] == int32(v) || reached[x.stage] == int32(v))
					})
				}
			}
		}
	}
}

// addEdges adds stage v's hazards left, sorted by earlier stage, kind,
// buffer and bytes, as its edges.
func (w *hazardWalk) addEdges(v int, st *StageSpec) error {
	g, pend := w.g, w.pend
	slices.SortFunc(pend, func(x, y pendingHazard) int {
		return cmp.Or(cmp.Compare(x.from, y.from), cmp.Compare(x.h.Kind, y.h.Kind),
			strings.Compare(x.h.Buffer, y.h.Buffer), cmp.Compare(x.h.Offset, y.h.Offset), cmp.Compare(x.h.Bytes, y.h.Bytes))
	})
	pend = slices.Compact(pend)
	w.pend = pend
	if len(g.hz)+len(pend) > w.limit {
		return w.tooMany(st)
	}
	for k, p := range pend {
		if k == 0 || pend[k-1].from != p.from {
			if k > 0 {
				g.hzOff = append(g.hzOff, int32(len(g.hz)))
			}
			g.pred = append(g.pred, p.from)
		}
		g.hz = append(g.hz, p.h)
	}
	if len(pend) > 0 {
		g.hzOff = append(g.hzOff, int32(len(g.hz)))
	}
	g.predOff = append(g.predOff, int32(len(g.pred)))
	g.accOff = append(g.accOff, int32(len(g.accBuf)))
	return nil
}

// linkSuccessors builds the successor rows from the predecessor rows, by
// counting sort; rows come out ascending because v ascends.
func (g *HazardGraph) linkSuccessors() {
	n := len(g.predOff) - 1
	g.succOff = make([]int32, n+1)
	for _, u := range g.pred {
		g.succOff[u+1]++
	}
	for i := 0; i < n; i++ {
		g.succOff[i+1] += g.succOff[i]
	}
	g.succ = make([]int32, len(g.pred))
	fill := slices.Clone(g.succOff[:n])
	for v := 0; v < n; v++ {
		for _, u := range g.Pred(v) {
			g.succ[fill[u]] = int32(v)
			fill[u]++
		}
	}
}

// sortOrder sets g.order: declaration order when every edge points
// forward, otherwise gonum's topo.SortStabilized with declaration index as
// tiebreak. A cycle is an error listing each cycle's stages.
func (g *HazardGraph) sortOrder() error {
	n := len(g.predOff) - 1
	if g.forward {
		g.order = make([]int32, n)
		for i := range g.order {
			g.order[i] = int32(i)
		}
		return nil
	}
	sorted, err := topo.SortStabilized(g, func(ns []graph.Node) {
		slices.SortFunc(ns, func(a, b graph.Node) int { return cmp.Compare(a.ID(), b.ID()) })
	})
	if err != nil {
		if u, ok := err.(topo.Unorderable); ok {
			return cycleError(g.spec, u)
		}
		return err
	}
	g.order = make([]int32, n)
	for i, nd := range sorted {
		g.order[i] = int32(nd.ID())
	}
	return nil
}

// cycleError lists each strongly connected component of u by stage names
// in declaration order.
func cycleError(s *Spec, u topo.Unorderable) error {
	var b strings.Builder
	b.WriteString("dependency cycle")
	if len(u) > 1 {
		b.WriteString("s")
	}
	for k, c := range u {
		ids := make([]int, len(c))
		for i, nd := range c {
			ids[i] = int(nd.ID())
		}
		slices.Sort(ids)
		names := make([]string, len(ids))
		for i, id := range ids {
			names[i] = s.Stages[id].Name
		}
		if k > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " through stages %s (first at %s)", strings.Join(names, ", "), s.Stages[ids[0]].Pos)
	}
	b.WriteString(": an after: entry names a later stage that itself depends on this one; remove one of the after: entries")
	return fmt.Errorf("%s", b.String())
}
