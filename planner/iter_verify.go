package planner

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// verifyMaxUnroll bounds the iterations Verify unrolls.
const MaxUnroll = 64

// UnrollIterations returns how many iterations Verify unrolls p over: one
// more than the period P of its iteration map (IterationMap.Period: stream
// sets, ring copies, event slots), or 2P+1 when several host threads issue
// its ops; at most verifyMaxUnroll (64; Build notes a plan that needs
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

// unrollNotePrefix begins unrollNote's note.
const UnrollNotePrefix = "verify unrolls "

// setUnrollNote makes p.Notes hold unrollNote's note where it applies and
// only then (Build, and Recount for a plan read back).
func SetUnrollNote(p *Plan) {
	p.Notes = slices.DeleteFunc(p.Notes, func(n string) bool { return strings.HasPrefix(n, UnrollNotePrefix) })
	if n := UnrollNote(p); n != "" {
		p.Notes = append(p.Notes, n)
	}
}

// unrollNote is the note of a plan that needs more iterations than Verify
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

// unroll is Unroll of a plan whose shape is valid. Without named, the
// result is only for Verify to prove race-free (verifyIterations): stages
// and buffers keep their names in p (no "@i" or "#c" names are made),
// stages share p's access lists (Plan.accBuf says which buffer copy each
// access is), and, where no stages are made, the ops are only planOps
// (Plan.ops, 9 bytes an op instead of 48 with its issue order entry); it is
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
	// (Plan.stage, Plan.buffer).
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
			return as // p's: accBuf names the copies
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
	var c *Ops // a bare plan's ops (Plan.ops), fill[s] the next of stream s
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

// verifyIterations is Verify for a plan with iteration info. It first
// verifies one iteration alone (cross-iteration waits left out), so that
// races within an iteration are reported in the plan's own names; then the
// plan unrolled over UnrollIterations(p) iterations, whose races name
// stages as "NAME@i" (iteration i) and ring copies as "NAME#c", and whose
// fixes are waits across iterations: Fix.Lag iterations back. q is p
// unrolled without names over UnrollIterations(p) iterations (unroll).
func verifyIterations(p, q *Plan, withFixes bool) error {
	// Iteration 0 of q is one (p without its lagged waits: they have
	// nothing to wait for), so a race-free q needs no look at one but for
	// its lifetimes (q has none), which are p's: lifetimeGaps reads records
	// and launches, and lags are only on waits.
	// q's and one's launches are p's, whose arena aliases verify checked.
	var gaps []LifetimeGap // beside the check of q
	var wg sync.WaitGroup
	wg.Go(func() { gaps = lifetimeGaps(p) })
	err := verifyWith(q, false, false)
	wg.Wait()
	if err == nil {
		if len(gaps) > 0 {
			return &RaceError{Lifetimes: gaps, FixesMinimal: true}
		}
		return nil
	}
	// Races: the unrolled plan with names, for the report.
	if q, err = UnrollDerived(p, UnrollIterations(p), true); err != nil {
		return err
	}
	one := p.WithoutOps(func(_, _ int, o Op) bool { return o.Lag > 0 })
	one.Iteration = nil
	if err := verifyWith(one, withFixes, false); err != nil {
		// Races within an iteration are reported first; say how many
		// more the unrolled iterations show between iterations.
		if re, ok := err.(*RaceError); ok && len(re.Races) > 0 {
			// The fixes are one's: a wait p has with a lag is one they
			// may change (existing).
			for i := range re.Fixes {
				if f := &re.Fixes[i]; f.OldLag == 0 && f.Taken == "" {
					existing(p, f)
					f.Edit = f.String()
				}
			}
			if qe, ok := verifyWith(q, false, false).(*RaceError); ok {
				n := len(p.Stages)
				for _, r := range qe.Races {
					if r.First/n != r.Second/n {
						re.AcrossIterations++
					}
				}
				re.MoreAcross = re.AcrossIterations > 0 && qe.Truncated
			}
		}
		return err
	}
	err = verifyWith(q, withFixes, false)
	re, ok := err.(*RaceError)
	if !ok || !withFixes {
		return err
	}
	for i := range re.Races {
		r := &re.Races[i]
		r.Fix = "across iterations (stage@iteration, buffer#copy, stream/set): " + r.Fix
	}
	// One fix per (stage, stage, lag), in the plan's own names.
	n := len(p.Stages)
	seen := map[[3]int]int{}
	var fixes []Fix
	for _, f := range re.Fixes {
		x, y := f.After%n, f.Before%n
		lag := f.Before/n - f.After/n
		key := [3]int{x, y, lag}
		if k, ok := seen[key]; ok {
			fixes[k].Races = append(fixes[k].Races, f.Races...)
			continue
		}
		seen[key] = len(fixes)
		fx := newFix(p, x, y)
		fx.Races, fx.Lag = f.Races, lag
		fixes = append(fixes, fx)
	}
	relaxRecords(p, fixes)
	if !relaxLags(p, fixes) {
		for _, f := range fixes {
			re.LagsShortest = re.LagsShortest || f.Lag > 0
		}
	}
	for i := range fixes {
		fixes[i].OldLag = existingLag(p, fixes[i].After, fixes[i].Before)
		if fixes[i].Instead == "" {
			fixes[i].Instead = moreCopies(p, re.Races, fixes, i)
		}
		fixes[i].Edit = fixes[i].String()
	}
	re.Fixes, re.Unrolled = fixes, true
	return re
}

// moreCopies is the edit that orders fix i's races without its wait when
// they are all WAR or WAW across iterations on buffers of p: a ring of
// more copies (double buffering), each iteration on its own copy in turn,
// so that the two accesses touch different bytes. It tries up to three
// more copies, with the other fixes applied, and keeps the fewest that
// verify; "" when none does, for races of other kinds, or past relaxLags'
// bounds (more than 4 fixes or 32 iterations unrolled).
func moreCopies(p *Plan, races []Race, fixes []Fix, i int) string {
	if fixes[i].Lag == 0 || len(fixes) > 4 || UnrollIterations(p) > 32 {
		return ""
	}
	bufs := map[int]bool{}
	for _, k := range fixes[i].Races {
		r := races[k]
		if r.Kind == RaceRAW || r.Shared != "" {
			return ""
		}
		b := slices.IndexFunc(p.Buffers, func(b Buffer) bool { return b.Name == BufferSiteOf(r.Buffer) })
		if b < 0 || p.Buffers[b].ArenaOffset != nil {
			return ""
		}
		bufs[b] = true
	}
	ids := slices.Sorted(maps.Keys(bufs))
	for more := 1; more <= 3; more++ {
		q := clonePlan(p)
		q.Kernels, q.Dir, q.Spec = p.Kernels, p.Dir, p.Spec
		q.Buffers = slices.Clone(p.Buffers)
		for _, b := range ids {
			q.Buffers[b].Copies = max(p.Buffers[b].Copies, 1) + more
		}
		for j, f := range fixes {
			if j != i {
				addLaggedWait(q, f.After, f.Before, f.Lag)
			}
		}
		if verify(q, false) == nil {
			var parts []string
			for _, b := range ids {
				parts = append(parts, fmt.Sprintf("buffer %s copies: %d", p.Buffers[b].Name, q.Buffers[b].Copies))
			}
			return fmt.Sprintf("give %s (a ring: each iteration writes its own copy in turn, so these accesses of different iterations touch different bytes, with no new order)",
				strings.Join(parts, " and "))
		}
	}
	return ""
}

// relaxRecords moves each fix's record as early on its stream as the plan
// with every fix applied still verifies (the latest launch before the
// wait is the candidate the search takes; the producer's own record, an
// earlier one, orders no more than the races need: a wait on the upload
// that a step reads, not on the whole step after it). Tried within
// relaxLags' bounds (at most 4 fixes, 32 iterations unrolled), up to 16
// records per fix, stopping at the first that does not verify.
func relaxRecords(p *Plan, fixes []Fix) {
	if len(fixes) == 0 || len(fixes) > 4 || UnrollIterations(p) > 32 {
		return
	}
	verifies := func() bool {
		q := clonePlan(p)
		q.Kernels, q.Dir, q.Spec = p.Kernels, p.Dir, p.Spec
		for _, f := range fixes {
			addLaggedWait(q, f.After, f.Before, f.Lag)
		}
		return verify(q, false) == nil
	}
	if !verifies() {
		return
	}
	for i := range fixes {
		ops := p.Streams[p.Stages[fixes[i].After].Stream].Ops
		tries := 0
		for j := streamPos(p, fixes[i].After) - 1; j >= 0 && tries < 16; j-- {
			if ops[j].Kind != OpLaunch {
				continue
			}
			tries++
			old := fixes[i]
			moved := newFix(p, ops[j].Stage, old.Before)
			moved.Races, moved.Lag, moved.Places = old.Races, old.Lag, old.Places
			fixes[i] = moved
			if !verifies() {
				fixes[i] = old
				break
			}
		}
	}
}

// relaxLags lengthens each cross-iteration fix's lag as far as the plan with
// every fix applied still verifies: the same waits, with no more order
// between iterations than the races need. Tried on plans of a few fixes
// only (each try verifies the plan over unrolled iterations): it reports
// false when it did not try, with more than 4 fixes or more than 32
// iterations unrolled.
func relaxLags(p *Plan, fixes []Fix) bool {
	if len(fixes) == 0 {
		return true
	}
	if len(fixes) > 4 || UnrollIterations(p) > 32 {
		return false
	}
	verifies := func() bool {
		q := clonePlan(p)
		q.Kernels, q.Dir, q.Spec = p.Kernels, p.Dir, p.Spec
		for _, f := range fixes {
			addLaggedWait(q, f.After, f.Before, f.Lag)
		}
		return verify(q, false) == nil
	}
	if !verifies() {
		return true
	}
	for i := range fixes {
		if fixes[i].Lag == 0 {
			continue
		}
		for tries := 0; tries < 8; tries++ {
			fixes[i].Lag++
			if !verifies() {
				fixes[i].Lag--
				break
			}
		}
	}
	return true
}

// existingLag returns the lag of a wait of stage y's stream, just before
// y's launch, on an event recorded right after stage x's launch, or 0.
func existingLag(p *Plan, x, y int) int {
	if _, lag, _, ok := existingWait(p, x, y); ok {
		return lag
	}
	return 0
}

// existingWait finds a wait op among those right before stage y's launch
// on an event recorded right after stage x's launch: its event, lag and
// index in y's stream's ops, the one with a lag first.
func existingWait(p *Plan, x, y int) (ev, lag, at int, ok bool) {
	sx, sy := p.Stages[x].Stream, p.Stages[y].Stream
	jx, jy := streamPos(p, x), streamPos(p, y)
	after := map[int]bool{}
	for _, o := range p.Streams[sx].Ops[jx+1:] {
		if o.Kind != OpRecord {
			break
		}
		after[o.Event] = true
	}
	for j := jy - 1; j >= 0; j-- {
		o := p.Streams[sy].Ops[j]
		if o.Kind != OpWait {
			break
		}
		if after[o.Event] && (!ok || o.Lag > 0 && lag == 0) {
			ev, lag, at, ok = o.Event, o.Lag, j, true
		}
	}
	return ev, lag, at, ok
}
