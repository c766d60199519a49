package planner

import (
	"fmt"
	"strings"
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

// Hazard is one conflicting pair of accesses: Kind RAW (the earlier stage
// writes, the later reads), WAR (the earlier reads, the later writes) or
// WAW (both write), on Buffer's bytes [Offset, Offset+Bytes) where the two
// accesses overlap. Stage is the earlier stage. Shared, when the later
// access is to another buffer that shares arena bytes with Buffer, names
// that buffer.
type Hazard struct {
	Kind   string `json:"kind"`
	Buffer string `json:"buffer"`
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
	Stage  string `json:"stage"`
	Shared string `json:"shared,omitempty"`
}

func (h Hazard) String() string {
	s := fmt.Sprintf("%s %s[%d:%d]", h.Kind, h.Buffer, h.Offset, h.Offset+h.Bytes)
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
	prod := p.producers()
	// Position of each stage on its stream, for the walk back.
	type pos struct{ stream, idx int }
	at := make([]pos, len(p.Stages))
	launches := make([][]int, len(p.Streams))
	for s, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == OpLaunch && o.Stage >= 0 && o.Stage < len(p.Stages) {
				at[o.Stage] = pos{s, len(launches[s])}
				launches[s] = append(launches[s], o.Stage)
			}
		}
	}
	bufs := make(map[string]whyBuf, len(p.Buffers))
	for _, b := range p.Buffers {
		wb := whyBuf{copies: max(b.Copies, 1), arena: -1}
		if b.ArenaOffset != nil {
			wb.arena = *b.ArenaOffset
		}
		bufs[b.Name] = wb
	}
	out := make([][]*WaitReason, len(p.Streams))
	for s, str := range p.Streams {
		out[s] = make([]*WaitReason, len(str.Ops))
		for j, o := range str.Ops {
			if o.Kind != OpWait || o.Event < 0 || o.Event >= len(prod) || prod[o.Event] < 0 {
				continue
			}
			to := -1
			for _, n := range str.Ops[j+1:] {
				if n.Kind == OpLaunch {
					to = n.Stage
					break
				}
			}
			if to < 0 {
				continue
			}
			from := prod[o.Event]
			r := &WaitReason{From: p.Stages[from].Name, To: p.Stages[to].Name, Lag: o.Lag}
			r.Hazards = p.hazards(from, to, o.Lag, bufs)
			if len(r.Hazards) == 0 {
				// Stream order before From is awaited too.
				ps := at[from]
				for k := ps.idx - 1; k >= 0 && len(r.Hazards) == 0; k-- {
					r.Hazards = p.hazards(launches[ps.stream][k], to, o.Lag, bufs)
				}
			}
			out[s][j] = r
		}
	}
	return out
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
func (p *Plan) hazards(a, b, lag int, bufs map[string]whyBuf) []Hazard {
	x, y := &p.Stages[a], &p.Stages[b]
	var hz []Hazard
	add := func(kind string, u, v Access) {
		bu, bv := bufs[u.Buffer], bufs[v.Buffer]
		if lag%max(bu.copies, 1) != 0 || lag%max(bv.copies, 1) != 0 {
			return
		}
		shared := ""
		if u.Buffer != v.Buffer {
			if bu.arena < 0 || bv.arena < 0 {
				return
			}
			shared = v.Buffer
			// v in u's bytes.
			v = Access{Buffer: u.Buffer, Offset: bv.arena + v.Offset - bu.arena, Bytes: v.Bytes}
		}
		if !u.Overlaps(v) {
			return
		}
		lo, hi := max(u.Offset, v.Offset), min(u.Offset+u.Bytes, v.Offset+v.Bytes)
		for k := range hz { // one entry per kind and buffer: the union of ranges
			if h := &hz[k]; h.Kind == kind && h.Buffer == u.Buffer && h.Shared == shared {
				end := max(h.Offset+h.Bytes, hi)
				h.Offset = min(h.Offset, lo)
				h.Bytes = end - h.Offset
				return
			}
		}
		if len(hz) < maxWhyHazards {
			hz = append(hz, Hazard{Kind: kind, Buffer: u.Buffer, Offset: lo, Bytes: hi - lo, Stage: x.Name, Shared: shared})
		}
	}
	for _, w := range x.Writes {
		for _, r := range y.Reads {
			add(RaceRAW, w, r)
		}
		for _, w2 := range y.Writes {
			add(RaceWAW, w, w2)
		}
	}
	for _, r := range x.Reads {
		for _, w := range y.Writes {
			add(RaceWAR, r, w)
		}
	}
	return hz
}
