package plan

import (
	"strings"

	"github.com/dagrun/dagrun/contract"
)

// WaitReason says why a wait is in the plan, from the plan alone: the stage
// whose completion it awaits (From: the launch right before the awaited
// record, on the other stream), the stage it comes before (To: the next
// launch on the waiting stream) and the conflicting accesses the wait
// orders between them.
type WaitReason struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Lag is the wait's lag: From ran that many iterations before To.
	Lag int `json:"lag,omitempty"`
	// Hazards are the conflicting access pairs, From's (or, when From and
	// To do not conflict, those of the latest earlier stage on From's
	// stream that does: Hazard.Stage) before To's. Empty when the stages
	// touch no common byte: an order the spec asks for (after:, a memory
	// budget's edge) or a wait that orders nothing.
	Hazards []Hazard `json:"hazards,omitempty"`
}

// Hazard is one conflicting pair of accesses: a contract.Hazard of Kind
// RAW (the earlier stage writes, the later reads), WAR (the earlier reads,
// the later writes) or WAW (both write), on Buffer's bytes
// [Offset, Offset+Bytes) where the two accesses overlap. Stage is the
// earlier stage. Shared, when the later access is to another buffer that
// shares arena bytes with Buffer, names that buffer.
type Hazard struct {
	contract.Hazard
	Stage  string `json:"stage"`
	Shared string `json:"shared,omitempty"`
}

func (h Hazard) String() string {
	s := h.Hazard.String()
	if h.Shared != "" {
		s += " (arena bytes shared with " + h.Shared + ")"
	}
	return s
}

// String is the reason in a line: "RAW x[0:64], WAR y[0:8]" (each hazard
// of another stage than From says "after STAGE"), or "no shared bytes
// (ordering only)".
func (r *WaitReason) String() string {
	if len(r.Hazards) == 0 {
		return "no shared bytes (ordering only)"
	}
	parts := make([]string, 0, len(r.Hazards))
	for _, h := range r.Hazards {
		s := h.String()
		if h.Stage != r.From {
			s += " after " + h.Stage
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// maxWhyHazards bounds the hazards a reason lists (the largest stages touch
// hundreds of buffers); the rest are counted in the last one's place.
const maxWhyHazards = 8

// WaitReasons returns the reason of every wait op, indexed like the
// streams' ops (reasons[s][j] for Streams[s].Ops[j]; nil for launches,
// records and a wait with no launch after it or no launch before its
// record). Cost: O(accesses of the two stages) per wait, plus a walk back
// along the recording stream when they do not conflict.
func (p *Plan) WaitReasons() [][]*WaitReason {
	wr := p.waitReasoner()
	out := make([][]*WaitReason, len(p.Streams))
	for s, str := range p.Streams {
		out[s] = make([]*WaitReason, len(str.Ops))
		for j := range str.Ops {
			if r := new(WaitReason); wr.reason(s, j, r) {
				out[s][j] = r
			}
		}
	}
	return out
}

// reasoner answers WaitReasons one wait at a time, so that the plan
// encoder need not hold every reason of a big plan at once.
type reasoner struct {
	p        *Plan
	prod     []int    // per event, the stage launched right before its last record
	at       []whyAt  // per stage, its stream and index among the stream's launches
	launches [][]int  // per stream, its launched stages in order
	bufs     []whyBuf // per buffer of p
	arena    bool     // some buffer has an arena offset
	// The next launch after the last wait asked about (ops are asked
	// about in order: a run of waits is scanned once).
	nextStream, nextOp int
	// The buffer of each stage's accesses (Writes, then Reads), filled
	// in at a stage's first wait: info[off[i]:off[i+1]], known[i]; acc:
	// each access's buffer (AccessBuffers), made at the first.
	info  []whyBuf
	off   []int32
	known []bool
	acc   []int32
	// scratch is the plan encoder's reason, reused wait after wait.
	scratch WaitReason
}

// infoOf returns the buffers of stage i's writes, then reads.
func (wr *reasoner) infoOf(i int) []whyBuf {
	if wr.off == nil {
		st := wr.p.Stages
		wr.off = make([]int32, len(st)+1)
		for k := range st {
			wr.off[k+1] = wr.off[k] + int32(len(st[k].Writes)+len(st[k].Reads))
		}
		wr.info = make([]whyBuf, wr.off[len(st)])
		wr.known = make([]bool, len(st))
		wr.acc = AccessBuffers(wr.p) // per stage: reads, then writes
	}
	out := wr.info[wr.off[i]:wr.off[i+1]]
	if !wr.known[i] {
		wr.known[i] = true
		x := &wr.p.Stages[i]
		acc := wr.acc[wr.off[i]:wr.off[i+1]]
		for k, b := range acc {
			wb := whyBuf{} // an undeclared buffer
			if b >= 0 {
				wb = wr.bufs[b]
			}
			if k < len(x.Reads) {
				out[len(x.Writes)+k] = wb
			} else {
				out[k-len(x.Reads)] = wb
			}
		}
	}
	return out
}

type whyAt struct{ stream, idx int32 }

func (p *Plan) waitReasoner() *reasoner {
	wr := &reasoner{p: p, prod: p.Producers(), at: make([]whyAt, len(p.Stages)), launches: make([][]int, len(p.Streams)), nextStream: -1}
	for s, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == OpLaunch && o.Stage >= 0 && o.Stage < len(p.Stages) {
				wr.at[o.Stage] = whyAt{int32(s), int32(len(wr.launches[s]))}
				wr.launches[s] = append(wr.launches[s], o.Stage)
			}
		}
	}
	wr.bufs = make([]whyBuf, len(p.Buffers))
	for i, b := range p.Buffers {
		wb := whyBuf{copies: max(b.Copies, 1), arena: -1}
		if b.ArenaOffset != nil {
			wb.arena = b.ArenaAt()
			wr.arena = true
		}
		wr.bufs[i] = wb
	}
	return wr
}

// reason sets r to WaitReasons()[s][j] and reports whether there is
// one (false for nil); r's hazards are appended to r.Hazards[:0], so that
// a caller may reuse one r.
func (wr *reasoner) reason(s, j int, r *WaitReason) bool {
	p := wr.p
	ops := p.Streams[s].Ops
	o := ops[j]
	if o.Kind != OpWait || o.Event < 0 || o.Event >= len(wr.prod) || wr.prod[o.Event] < 0 {
		return false
	}
	if wr.nextStream != s || wr.nextOp <= j || wr.nextOp > len(ops) {
		wr.nextStream, wr.nextOp = s, j+1
		for wr.nextOp < len(ops) && ops[wr.nextOp].Kind != OpLaunch {
			wr.nextOp++
		}
	}
	if wr.nextOp == len(ops) {
		return false
	}
	to := ops[wr.nextOp].Stage
	from := wr.prod[o.Event]
	r.From, r.To, r.Lag = p.Stages[from].Name, p.Stages[to].Name, o.Lag
	r.Hazards = wr.hazards(from, to, o.Lag, r.Hazards[:0])
	if len(r.Hazards) == 0 {
		// Stream order before From is awaited too.
		ps := wr.at[from]
		for k := int(ps.idx) - 1; k >= 0 && len(r.Hazards) == 0; k-- {
			r.Hazards = wr.hazards(wr.launches[ps.stream][k], to, o.Lag, r.Hazards)
		}
	}
	return true
}

// whyBuf is what WaitReasons needs of a buffer: its ring copies and its
// arena offset (-1: its own allocation).
type whyBuf struct {
	copies int
	arena  int64
}

// hazards lists the conflicting access pairs of stage a (lag iterations
// earlier) before stage b, in a's buffer's bytes: on the same buffer, or
// on two buffers that share arena bytes. A ring buffer's copies differ
// between iterations lag apart unless lag is a multiple of its copies.
// Each access's buffer is looked up once per call, and only when the
// plan has an arena or the wait a lag. The hazards are appended to hz
// (empty).
func (wr *reasoner) hazards(a, b, lag int, hz []Hazard) []Hazard {
	p := wr.p
	x, y := &p.Stages[a], &p.Stages[b]
	look := wr.arena || lag != 0
	var xi, yi []whyBuf // x's and y's buffers, writes then reads
	if look {
		xi, yi = wr.infoOf(a), wr.infoOf(b)
	}
	// Indices into xi (iu) and yi (iv).
	xw, xr := 0, len(x.Writes)
	yw, yr := 0, len(y.Writes)
	add := func(kind contract.HazardKind, u, v Access, iu, iv int) {
		shared := ""
		if u.Buffer != v.Buffer {
			if !wr.arena {
				return
			}
			bu, bv := xi[iu], yi[iv]
			if bu.arena < 0 || bv.arena < 0 || lag%max(bu.copies, 1) != 0 || lag%max(bv.copies, 1) != 0 {
				return
			}
			shared = v.Buffer
			// v in u's bytes.
			v = Access{Buffer: u.Buffer, Offset: bv.arena + v.Offset - bu.arena, Bytes: v.Bytes}
		}
		if !u.Overlaps(v) {
			return
		}
		if look && shared == "" && lag%max(xi[iu].copies, 1) != 0 {
			return
		}
		in := u.Range().Intersect(v.Range())
		lo, hi := in.Offset, in.End()
		for k := range hz { // one entry per kind and buffer: the union of ranges
			if h := &hz[k]; h.Kind == kind && h.Buffer == u.Buffer && h.Shared == shared {
				end := max(h.Offset+h.Bytes, hi)
				h.Offset = min(h.Offset, lo)
				h.Bytes = end - h.Offset
				return
			}
		}
		if len(hz) < maxWhyHazards {
			hz = append(hz, Hazard{Hazard: contract.Hazard{Kind: kind, Buffer: u.Buffer, Offset: lo, Bytes: hi - lo}, Stage: x.Name, Shared: shared})
		}
	}
	for i, w := range x.Writes {
		for j, r := range y.Reads {
			add(contract.RAW, w, r, xw+i, yr+j)
		}
		for j, w2 := range y.Writes {
			add(contract.WAW, w, w2, xw+i, yw+j)
		}
	}
	for i, r := range x.Reads {
		for j, w := range y.Writes {
			add(contract.WAR, r, w, xr+i, yw+j)
		}
	}
	return hz
}
