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
	name := make([][]string, len(p.Buffers)) // per buffer and iteration (nil: its own name)
	nb := 0
	for bi, b := range p.Buffers {
		switch k := m.Copies[bi]; {
		case k == 1 && b.ArenaOffset != nil:
			nb += iterations
		default:
			nb += k
		}
	}
	// Without names and without implicit order to derive (which reads
	// stages), neither stages nor buffers are made: Verify reads p's
	// (Memo.Base).
	bare := !named && !HasImplicit(p)
	if bare {
		q.Base, q.BaseStages = p, n*iterations
		q.BufOrig = make([]int32, 0, nb)
	} else {
		q.Buffers = make([]Buffer, 0, nb)
	}
	nq := func() int { return len(q.Buffers) + len(q.BufOrig) }
	add := func(b Buffer, bi int) {
		if bare {
			q.BufOrig = append(q.BufOrig, int32(bi))
		} else {
			q.Buffers = append(q.Buffers, b)
		}
	}
	if !bare {
		q.IssueOrder = make([][2]int, 0, len(p.IssueOrder)*iterations)
	}
	qOf := make([]int32, len(p.Buffers)*iterations) // per buffer and iteration: its index in q's buffers
	for bi, b := range p.Buffers {
		k := m.Copies[bi]
		b.Copies = 0
		for it := range iterations {
			x := &qOf[bi*iterations+it]
			switch {
			case k == 1 && b.ArenaOffset != nil:
				*x = int32(nq() + it)
			case k == 1:
				*x = int32(nq())
			default:
				*x = int32(nq() + m.Copy(it, bi))
			}
		}
		switch {
		case k == 1 && b.ArenaOffset != nil && !named:
			for range iterations {
				add(b, bi)
			}
		case k == 1 && b.ArenaOffset != nil:
			name[bi] = make([]string, iterations)
			for it := range iterations {
				bc := b
				bc.Name = b.Name + "@" + strconv.Itoa(it)
				name[bi][it] = bc.Name
				add(bc, bi)
			}
		case k == 1:
			add(b, bi)
		case !named:
			for range k {
				add(b, bi)
			}
		default:
			copies := make([]string, k)
			for c := range k {
				bc := b
				bc.Name = b.Name + "#" + strconv.Itoa(c)
				copies[c] = bc.Name
				add(bc, bi)
			}
			name[bi] = make([]string, iterations)
			for it := range iterations {
				name[bi][it] = copies[m.Copy(it, bi)]
			}
		}
	}
	// Per access of p (stage by stage, reads then writes), its buffer's
	// names by iteration, or nil to keep its name; the iterations' accesses
	// are carved from one array.
	var names [][]string
	pbuf := AccessBuffers(p) // per access of p: its buffer's index, or -1
	if named {
		names = make([][]string, len(pbuf))
		for k, bi := range pbuf {
			if bi >= 0 {
				names[k] = name[bi]
			}
		}
	}
	slab := make([]Access, len(names)*iterations)
	q.AccBuf, q.AccOwn = make([]int32, 0, len(pbuf)*iterations), true
	at := 0
	rename := func(as []Access, it int) []Access {
		for i := range as {
			qb := int32(-1)
			if bi := pbuf[at+i]; bi >= 0 {
				qb = qOf[int(bi)*iterations+it]
			}
			q.AccBuf = append(q.AccBuf, qb)
		}
		if !named {
			at += len(as)
			return as // p's: AccBuf names the copies
		}
		if len(as) == 0 {
			return []Access{}
		}
		out := slab[:len(as):len(as)]
		slab = slab[len(as):]
		copy(out, as)
		for i := range out {
			if nm := names[at+i]; nm != nil {
				out[i].Buffer = nm[it]
			}
		}
		at += len(as)
		return out
	}
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
	var c *Ops // a bare plan's ops (Plan.Ops), fill[s] the next of stream s
	var fill []int32
	if bare {
		// Exactly the ops issued: less the lagged waits skipped.
		for _, so := range p.IssueOrder {
			if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == OpWait && o.Lag > 0 {
				for it := range iterations {
					if _, ok := m.Wait(it, o.Event, o.Lag); !ok {
						need[m.Stream(it, so[0])]--
					}
				}
			}
		}
		c = &Ops{Base: make([]int32, len(q.Streams)+1)}
		for s := range q.Streams {
			c.Base[s+1] = c.Base[s] + int32(need[s])
		}
		c.Kind, c.Arg = make([]OpKind, c.Base[len(q.Streams)]), make([]int32, c.Base[len(q.Streams)])
		c.Issue = make([]int32, 0, c.Base[len(q.Streams)])
		fill = slices.Clone(c.Base[:len(q.Streams)])
		q.Ops = c
	} else {
		for s := range q.Streams {
			q.Streams[s].Ops = make([]Op, 0, need[s])
		}
	}
	if !bare {
		q.Stages = make([]Stage, 0, n*iterations)
	}
	for it := 0; it < iterations; it++ {
		at = 0
		for _, sg := range p.Stages {
			if bare {
				rename(sg.Reads, it)
				rename(sg.Writes, it)
				continue
			}
			if named {
				sg.Name = sg.Name + "@" + strconv.Itoa(it)
			}
			sg.Stream = m.Stream(it, sg.Stream)
			sg.Reads, sg.Writes = rename(sg.Reads, it), rename(sg.Writes, it)
			if c := sg.Collective; c != nil { // each iteration's collectives are groups of their own
				cc := *c
				cc.Group += it * n
				sg.Collective = &cc
			}
			q.Stages = append(q.Stages, sg)
		}
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
			if bare {
				g := fill[ps]
				fill[ps]++
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
	for s := range fill {
		if fill[s] != c.Base[s+1] {
			return nil, fmt.Errorf("plan: internal error: unrolled stream %d has %d ops, want %d", s, fill[s]-c.Base[s], c.Base[s+1]-c.Base[s])
		}
	}
	q.Stats = Stats{Stages: len(q.Stages), Streams: len(q.Streams), Events: q.Events}
	return q, nil
}
