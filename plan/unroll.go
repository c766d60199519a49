package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxUnroll bounds the iterations Verify unrolls.
const MaxUnroll = 64

// UnrollIterations returns how many iterations Verify unrolls p over: one
// more than the period P of its iteration map (IterationMap.Period: stream
// sets, ring copies, event slots), or 2P+1 when several host threads issue
// its ops; at most MaxUnroll (64; Build notes a plan that needs
// more); 1 without iteration info. Iterations 0 to P hold a race of every
// pair of iterations that has one:
//
//   - Order. Issue order is iteration-major and a wait orders only a record
//     issued before it, so a happens-before path from iteration i to j runs
//     through iterations i to j only, and nothing of a later iteration
//     happens before an earlier one: accesses x@i and y@j, i < j, race
//     exactly when they conflict and x@i does not happen-before y@j.
//   - Shift. Iterations i to j and 0 to j−i are alike but for names: the
//     stream set, event slot and ring copy of iteration k are those of k−i,
//     renamed one to one (IterationMap). Only the lagged waits left out in
//     the first iterations (IterationMap.Wait) differ, and 0 to j−i lacks
//     more of them: it has the fewer orders, so a race of x@i and y@j is
//     also one of x@0 and y@(j−i).
//   - Distance. A race of x@0 and y@d with d > P gives one of x@0 and
//     y@(d−P): the two y run on one physical stream in stream order and on
//     the same ring copies, so if x@0 happened before y@(d−P) it would
//     happen before y@d; and d−P > 0 keeps the pair in that order.
//
// Lags do not enter: a wait of any lag only adds orders within the
// iterations it spans. With several host threads, whether a wait on
// another thread's record captures it also depends on the next record of
// its event (the one thread's, and later in its order than any before):
// for a wait of iterations 0 to P that record is in iterations up to 2P,
// which are unrolled too.
func UnrollIterations(p *Plan) int { return min(unrollNeed(p), MaxUnroll) }

// unrollNeed is UnrollIterations without its bound (saturating past 2^30).
func unrollNeed(p *Plan) int {
	if p.Iteration == nil {
		return 1
	}
	m, _ := NewIterationMap(p, nil) // no error without slot bounds
	period := m.Period(1 << 30)
	for _, s := range p.Streams {
		if s.Thread != p.Streams[0].Thread {
			return 2*period + 1
		}
	}
	return period + 1
}

// UnrollNotePrefix begins UnrollNote's note.
const UnrollNotePrefix = "verify unrolls "

// SetUnrollNote makes p.Notes hold UnrollNote's note where it applies and
// only then (Build, and Recount for a plan read back).
func SetUnrollNote(p *Plan) {
	p.Notes = slices.DeleteFunc(p.Notes, func(n string) bool { return strings.HasPrefix(n, UnrollNotePrefix) })
	if n := UnrollNote(p); n != "" {
		p.Notes = append(p.Notes, n)
	}
}

// UnrollNote is the note of a plan that needs more iterations than Verify
// unrolls (UnrollIterations), or "".
func UnrollNote(p *Plan) string {
	need := unrollNeed(p)
	if need <= MaxUnroll {
		return ""
	}
	n := strconv.Itoa(need)
	if need > 1<<30 {
		n = "over " + strconv.Itoa(1<<30)
	}
	return fmt.Sprintf(UnrollNotePrefix+"%d iterations, and a proof that every pair of iterations is race-free needs %s (one more than the period of the stream sets, ring copies and event slots, or twice the period and one with several host threads): races only between iterations further apart go unchecked; a least common multiple of ring copies, event slots and stream sets of at most %d (%d with several host threads) is checked in full",
		MaxUnroll, n, MaxUnroll-1, (MaxUnroll-1)/2)
}

// Unroll returns a plan without iteration info that issues iterations
// iterations of p exactly as the executor does (see Iteration): stage v of
// iteration i is stage i·len(p.Stages)+v, named "NAME@i"; copy c of a ring
// buffer is the buffer "NAME#c"; physical stream s + len(p.Streams)·r is
// named "NAME/r" when there are several stream sets; slot k of event e is
// event base(e)+k; lagged waits of the first iterations, with nothing to
// wait for, are left out. A one-copy buffer in the arena is a buffer
// "NAME@i" per iteration at the same arena offset (its contents never
// carry over, so each iteration's use is a lifetime of its own, which
// Verify's arena check orders against the others). The result has no lifetimes. Without iteration
// info p is unrolled with one stream set, one slot per event and no lag.
func Unroll(p *Plan, iterations int) (*Plan, error) {
	if err := p.ValidateShape(); err != nil {
		return nil, err
	}
	return UnrollDerived(p, iterations, true)
}

// UnrollDerived is Unroll of a plan whose shape is valid. Without named, the
// result is only for Verify to prove race-free (verifyIterations): stages
// and buffers keep their names in p (no "@i" or "#c" names are made),
// stages share p's access lists (Plan.AccBuf says which buffer copy each
// access is), and, where no stages are made, the ops are only Ops
// (Plan.Ops, 9 bytes an op instead of 48 with its issue order entry); it is
// marked derived, so that Verify does not check again the shape that p's
// check implies.
func UnrollDerived(p *Plan, iterations int, named bool) (*Plan, error) {
	if iterations < 1 {
		return nil, fmt.Errorf("plan: unroll %d iterations: want ≥ 1", iterations)
	}
	m, err := NewIterationMap(p, nil)
	if err != nil {
		return nil, err
	}
	n := len(p.Stages)
	q := &Plan{Version: p.Version, Spec: p.Spec, Dir: p.Dir, Strategy: p.Strategy, Devices: p.Devices, Kernels: p.Kernels, Events: m.Events(), Memo: Memo{Unrolled: true, Derived: !named}}
	// Without names and without implicit order to derive (which reads
	// stages), neither stages nor buffers are made: Verify reads p's
	// (Memo.Base).
	u := &unroller{p: p, q: q, m: m, iterations: iterations, named: named, bare: !named && !HasImplicit(p)}
	// Per buffer of p and iteration: its index in q's buffers (a parameter,
	// not a field, so that it stays on the stack while small).
	qOf := make([]int32, len(p.Buffers)*iterations)
	u.buffers(qOf)
	u.accessNames()
	u.streams()
	if !u.bare {
		q.Stages = make([]Stage, 0, n*iterations)
	}
	for it := 0; it < iterations; it++ {
		u.stages(it, qOf)
		u.ops(it)
	}
	for s := range u.fill {
		if u.fill[s] != u.c.Base[s+1] {
			return nil, fmt.Errorf("plan: internal error: unrolled stream %d has %d ops, want %d", s, u.fill[s]-u.c.Base[s], u.c.Base[s+1]-u.c.Base[s])
		}
	}
	q.Stats = Stats{Stages: len(q.Stages), Streams: len(q.Streams), Events: q.Events}
	return q, nil
}

// unroller is UnrollDerived's state: p, the plan q it makes, and how p's
// buffers, accesses and ops map into q.
type unroller struct {
	p, q       *Plan
	m          *IterationMap
	iterations int
	named      bool
	bare       bool // q has neither stages nor buffers, and its ops are only Ops

	name  [][]string // per buffer of p and iteration: its name in q (nil: its own name)
	pbuf  []int32    // per access of p: its buffer's index, or -1
	names [][]string // per access of p, with named: its buffer's names by iteration (name), or nil
	slab  []Access   // the iterations' accesses, carved as rename goes
	at    int        // rename's next access of p

	c    *Ops    // a bare plan's ops (Plan.Ops)
	fill []int32 // with c: the next op of each stream
}

// nq is how many buffers q has so far.
func (u *unroller) nq() int { return len(u.q.Buffers) + len(u.q.BufOrig) }

// addBuffer appends b, a copy of p's buffer bi, to q's buffers.
func (u *unroller) addBuffer(b Buffer, bi int) {
	if u.bare {
		u.q.BufOrig = append(u.q.BufOrig, int32(bi))
	} else {
		u.q.Buffers = append(u.q.Buffers, b)
	}
}

// buffers makes q's buffers: a ring buffer's copies, a one-copy arena
// buffer's per iteration, and every other buffer once; qOf gets, per
// buffer of p and iteration, its index in q's buffers.
func (u *unroller) buffers(qOf []int32) {
	p, q, m, iterations := u.p, u.q, u.m, u.iterations
	u.name = make([][]string, len(p.Buffers))
	nb := 0
	for bi, b := range p.Buffers {
		switch k := m.Copies[bi]; {
		case k == 1 && b.ArenaOffset != nil:
			nb += iterations
		default:
			nb += k
		}
	}
	if u.bare {
		q.Base, q.BaseStages = p, len(p.Stages)*iterations
		q.BufOrig = make([]int32, 0, nb)
	} else {
		q.Buffers = make([]Buffer, 0, nb)
		q.IssueOrder = make([][2]int, 0, len(p.IssueOrder)*iterations)
	}
	for bi, b := range p.Buffers {
		k := m.Copies[bi]
		b.Copies = 0
		for it := range iterations {
			x := &qOf[bi*iterations+it]
			switch {
			case k == 1 && b.ArenaOffset != nil:
				*x = int32(u.nq() + it)
			case k == 1:
				*x = int32(u.nq())
			default:
				*x = int32(u.nq() + m.Copy(it, bi))
			}
		}
		switch {
		case k == 1 && b.ArenaOffset != nil && !u.named:
			for range iterations {
				u.addBuffer(b, bi)
			}
		case k == 1 && b.ArenaOffset != nil:
			u.name[bi] = make([]string, iterations)
			for it := range iterations {
				bc := b
				bc.Name = b.Name + "@" + strconv.Itoa(it)
				u.name[bi][it] = bc.Name
				u.addBuffer(bc, bi)
			}
		case k == 1:
			u.addBuffer(b, bi)
		case !u.named:
			for range k {
				u.addBuffer(b, bi)
			}
		default:
			copies := make([]string, k)
			for c := range k {
				bc := b
				bc.Name = b.Name + "#" + strconv.Itoa(c)
				copies[c] = bc.Name
				u.addBuffer(bc, bi)
			}
			u.name[bi] = make([]string, iterations)
			for it := range iterations {
				u.name[bi][it] = copies[m.Copy(it, bi)]
			}
		}
	}
}

// accessNames sets, per access of p (stage by stage, reads then writes),
// its buffer's names by iteration, or nil to keep its name; the
// iterations' accesses are carved from one array (slab).
func (u *unroller) accessNames() {
	u.pbuf = AccessBuffers(u.p)
	if u.named {
		u.names = make([][]string, len(u.pbuf))
		for k, bi := range u.pbuf {
			if bi >= 0 {
				u.names[k] = u.name[bi]
			}
		}
	}
	u.slab = make([]Access, len(u.names)*u.iterations)
	u.q.AccBuf, u.q.AccOwn = make([]int32, 0, len(u.pbuf)*u.iterations), true
}

// rename returns the accesses as of iteration it, naming their buffers'
// copies (qOf: buffers') in q.AccBuf (and, with named, in their Buffer).
func (u *unroller) rename(as []Access, it int, qOf []int32) []Access {
	q := u.q
	for i := range as {
		qb := int32(-1)
		if bi := u.pbuf[u.at+i]; bi >= 0 {
			qb = qOf[int(bi)*u.iterations+it]
		}
		q.AccBuf = append(q.AccBuf, qb)
	}
	if !u.named {
		u.at += len(as)
		return as // p's: AccBuf names the copies
	}
	if len(as) == 0 {
		return []Access{}
	}
	out := u.slab[:len(as):len(as)]
	u.slab = u.slab[len(as):]
	copy(out, as)
	for i := range out {
		if nm := u.names[u.at+i]; nm != nil {
			out[i].Buffer = nm[it]
		}
	}
	u.at += len(as)
	return out
}

// streams makes q's streams (one per stream of each stream set, "NAME/r"
// with several sets) with room for every iteration's ops: in Ops for a
// bare plan, exactly the ops issued (less the lagged waits skipped).
func (u *unroller) streams() {
	p, q, m, iterations := u.p, u.q, u.m, u.iterations
	R := len(m.Sets)
	q.Streams = make([]Stream, m.Streams)
	for r := range m.Sets {
		for s, ps := range m.Sets[r] {
			str := p.Streams[s]
			if r > 0 && ps == s {
				continue // not replicated
			}
			str.ID, str.Ops = ps, nil
			if R > 1 && ps != s {
				str.Name = fmt.Sprintf("%s/%d", str.Name, r)
			}
			q.Streams[ps] = str
		}
	}
	need := make([]int, len(q.Streams)) // room for every iteration's ops
	for it := range iterations {
		for s := range p.Streams {
			need[m.Stream(it, s)] += len(p.Streams[s].Ops)
		}
	}
	if !u.bare {
		for s := range q.Streams {
			q.Streams[s].Ops = make([]Op, 0, need[s])
		}
		return
	}
	for _, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == OpWait && o.Lag > 0 {
			for it := range iterations {
				if _, ok := m.Wait(it, o.Event, o.Lag); !ok {
					need[m.Stream(it, so[0])]--
				}
			}
		}
	}
	c := &Ops{Base: make([]int32, len(q.Streams)+1)}
	for s := range q.Streams {
		c.Base[s+1] = c.Base[s] + int32(need[s])
	}
	c.Kind, c.Arg = make([]OpKind, c.Base[len(q.Streams)]), make([]int32, c.Base[len(q.Streams)])
	c.Issue = make([]int32, 0, c.Base[len(q.Streams)])
	u.fill = slices.Clone(c.Base[:len(q.Streams)])
	u.c, q.Ops = c, c
}

// stages appends iteration it's stages to q ("NAME@i" with named; each
// iteration's collectives are groups of their own), or for a bare plan
// only names its accesses' buffer copies (qOf: buffers').
func (u *unroller) stages(it int, qOf []int32) {
	n := len(u.p.Stages)
	u.at = 0
	for _, sg := range u.p.Stages {
		if u.bare {
			u.rename(sg.Reads, it, qOf)
			u.rename(sg.Writes, it, qOf)
			continue
		}
		if u.named {
			sg.Name = sg.Name + "@" + strconv.Itoa(it)
		}
		sg.Stream = u.m.Stream(it, sg.Stream)
		sg.Reads, sg.Writes = u.rename(sg.Reads, it, qOf), u.rename(sg.Writes, it, qOf)
		if c := sg.Collective; c != nil { // each iteration's collectives are groups of their own
			cc := *c
			cc.Group += it * n
			sg.Collective = &cc
		}
		u.q.Stages = append(u.q.Stages, sg)
	}
}

// ops issues iteration it's ops into q, on its stream set, with its event
// slots; a lagged wait with nothing to wait for is left out.
func (u *unroller) ops(it int) {
	p, q, m := u.p, u.q, u.m
	n := len(p.Stages)
	for _, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		ps := m.Stream(it, so[0])
		switch o.Kind {
		case OpLaunch:
			o.Stage += it * n
		case OpRecord:
			o.Event = m.Record(it, o.Event)
		case OpWait:
			e, ok := m.Wait(it, o.Event, o.Lag)
			if !ok {
				continue
			}
			o.Event, o.Lag = e, 0
		}
		if u.bare {
			c := u.c
			g := u.fill[ps]
			u.fill[ps]++
			c.Kind[g], c.Arg[g] = o.Kind, int32(o.Event)
			if o.Kind == OpLaunch {
				c.Arg[g] = int32(o.Stage)
			}
			c.Issue = append(c.Issue, g)
			continue
		}
		ops := &q.Streams[ps].Ops
		q.IssueOrder = append(q.IssueOrder, [2]int{ps, len(*ops)})
		*ops = append(*ops, o)
	}
}
