package verify

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/plan"
)

// Fix is one wait that orders a group of races: before stage Before's
// launch, stream WaitStream waits on an event recorded on stream
// RecordStream right after stage After's launch. In a `sync: manual` spec
// it is the edit "add After to the waits: of Before".
type Fix struct {
	After      int    `json:"after"`  // stage index
	Before     int    `json:"before"` // stage index
	AfterName  string `json:"after_name"`
	BeforeName string `json:"before_name"`
	// BeforeSource is Before's position in its spec (file:line:col), "" for
	// plans without one.
	BeforeSource string `json:"before_source,omitempty"`
	// RecordStream and WaitStream are the streams' names.
	RecordStream string `json:"record_stream"`
	WaitStream   string `json:"wait_stream"`
	// Races indexes RaceError.Races: the races this wait orders (with the
	// fixes listed before it).
	Races []int `json:"races"`
	// Lag > 0 makes it a wait across iterations: Before waits on After of
	// Lag iterations back.
	Lag int `json:"lag,omitempty"`
	// OldLag > 0: Before already waits on After OldLag iterations back; the
	// fix is to change that lag to Lag.
	OldLag int `json:"old_lag,omitempty"`
	// Taken, for a wait Before already has on the event recorded after
	// After (lag 0), names the stage after which the event's latest record
	// issued before that wait comes: the record the wait takes instead.
	Taken string `json:"taken,omitempty"`
	// Edit is the fix as the spec edit, with its CUDA form (String).
	Edit string `json:"edit"`
	// Places is the number of places the wait goes in the program's
	// source terms: each run of Before's line (a recorded trace's
	// FILE:LINE, siteWaits) waits on the latest run of After's line; 1 for
	// a spec whose stages are each their own site.
	Places int `json:"places"`
	// Instead is an edit that orders the same races without the wait, by
	// one of CUDA's implicit rules (a stream made blocking, a copy made
	// synchronous), checked on the plan; "" when none does.
	Instead string `json:"instead,omitempty"`
	// Isolation, for a wait inside a capture region on a record the
	// capture does not make, says that the wait breaks capture isolation
	// (CUDA_ERROR_STREAM_CAPTURE_ISOLATION) and gives the edit that works
	// instead (isolationNote); "" otherwise.
	Isolation string `json:"isolation,omitempty"`

	// afterSpec and beforeSpec name the stages as the spec does, for the
	// edit: a collective's rank (stage NAME/r of the plan) is stage NAME.
	afterSpec, beforeSpec string
	// form is where the edit is made: a sync: manual spec's waits
	// (formWaits), a sync: auto spec's after: (formAfter), or a plan
	// file's ops (formOps).
	form fixForm
}

type fixForm int

const (
	formWaits fixForm = iota
	formAfter
	formOps
)

// fixFormOf is the form of p's fixes: a plan file's are edits of its ops;
// a sync: manual spec's, of its waits; other specs' (dagrun places their
// waits), of the stages' after: lists.
func fixFormOf(p *plan.Plan) fixForm {
	switch {
	case p.FromFile:
		return formOps
	case p.Strategy != "" && p.Strategy != strategyManual:
		return formAfter
	}
	return formWaits
}

// newFix is the fix "before stage y, wait on a record after stage x" of p
// (Races, Lag and the edit left to the caller).
func newFix(p *plan.Plan, x, y int) Fix {
	s, t := p.Stages[x].Stream, p.Stages[y].Stream
	return Fix{After: x, Before: y, AfterName: p.Stages[x].Name, BeforeName: p.Stages[y].Name, BeforeSource: p.Stages[y].Source,
		RecordStream: streamLabel(p.Streams[s].Name, s), WaitStream: streamLabel(p.Streams[t].Name, t), Places: 1,
		afterSpec: specStageName(&p.Stages[x]), beforeSpec: specStageName(&p.Stages[y]), form: fixFormOf(p)}
}

// specStageName is the name of the spec stage st comes from: the
// collective's for one of its ranks (named contract.RankName(NAME, rank) by the
// planner), else st's own.
func specStageName(st *plan.Stage) string {
	if c := st.Collective; c != nil {
		if i := strings.LastIndexByte(st.Name, '/'); i > 0 && contract.RankName(st.Name[:i], c.Rank) == st.Name {
			return st.Name[:i]
		}
	}
	return st.Name
}

// fixMaxWork bounds the fix search's work, in steps of one op × one
// stream: each plan the search tries, with w waits added to a plan of n
// ops and S streams, costs (n + 2w)·(S + 1) steps (the copy, and Verify's
// clocks at most) plus one per race it checks. The cost of each phase is
// counted before the phase runs; past the bound the search falls back to
// one wait per race it did not reach (RaceError.FixesPartial), or keeps
// the greedy set unproven (RaceError.FixesMinimal false). The bound is a
// few seconds of one core. A variable for tests.
var fixMaxWork = 50_000_000

// fixSteps counts the steps the fix search did, as fixMaxWork counts them
// (for tests: the search must do no more than it counted).
var fixSteps atomic.Int64

// fixMaxExact bounds the sets of candidate waits the exact search tries
// (per size); past it the greedy set stands and RaceError.FixesMinimal is
// false.
const fixMaxExact = 2_000

// fixBudget is the fix search's work left, in fixMaxWork's steps.
type fixBudget struct{ left int }

// take spends n steps, keeping reserve for later, and reports whether
// they fit (nothing is spent when they do not).
func (b *fixBudget) take(n, reserve int) bool {
	if n < 0 || n > b.left-reserve {
		return false
	}
	b.left -= n
	return true
}

// minimalFixes finds the fewest waits that, added to p, order every race
// of races that a wait can order (different streams, not ordered the
// wrong way round, no shared arena bytes). A candidate wait is "before
// stage y, wait on a record after x", with x the latest stage of its
// stream issued before y: it orders a superset of what any earlier x on
// that stream would, so these candidates (one per stage and other stream
// launched before it) suffice.
//
// First a greedy search: second stages in issue order; for each, the
// candidate that orders the most pending races (its own among them), with
// Verify's vector clocks recomputed after each added wait, so that order
// through stream order and other waits is counted. Then, while the number
// of candidate sets stays under fixMaxExact, an exact search over every
// smaller set proves the count minimal or finds a smaller set. A wait
// stands for the same wait at every run of its lines (siteWaits: one fix
// per line of a recorded program), so candidates are one per source key.
// Every
// phase's cost is counted against fixMaxWork before it runs: when the
// greedy search would pass it, each race it did not reach gets its own
// candidate wait (partial); when the exact search would, the greedy set
// stands unproven (minimal false).
//
// It returns the fixes, the races left without one (ordered backwards, on
// one stream, through shared arena bytes, or whose first stage is issued
// after every place the wait could go), whether the work bound stopped the
// greedy search, and whether the count is proven minimal.
func minimalFixes(p *plan.Plan, races []Race) (fixes []Fix, unfixed []int, partial, minimal bool) {
	var need []int
	for k, r := range races {
		if r.Reversed || r.FirstStream == r.SecondStream || r.Shared != "" || hostTimeRead(p, &r) {
			unfixed = append(unfixed, k)
			continue
		}
		need = append(need, k)
	}
	if len(need) == 0 {
		return nil, unfixed, false, true
	}
	f := fixSearch{p: p, races: races, need: need, unfixed: unfixed}
	f.init()
	nCands, least, direct := f.countCandidates()
	// Greedy: its cost is at least one try per candidate of a stage with
	// races, counted first.
	f.partial = least > fixMaxWork/f.cost(0)
	if !f.partial {
		f.greedy(f.candidatesOf())
	}
	if f.partial {
		f.fixUnreached(direct)
		slices.Sort(f.unfixed)
		return fixesBy(p, races, f.waits, f.by, &f.b, f.sw), f.unfixed, true, false
	}
	slices.Sort(f.unfixed)
	fixes, minimal = f.exact(nCands)
	return fixes, f.unfixed, false, minimal
}

// fixSearch is minimalFixes' state: the races to fix (need), the waits
// chosen so far and, per wait, the races it is the first to order.
type fixSearch struct {
	p         *plan.Plan
	races     []Race
	need      []int // indices into races of those a wait can order
	b         fixBudget
	streams   int // len(p.Streams), at least 1
	launchPos []int
	sw        *siteWaits
	order     []int         // stages in issue order of their launches
	bySecond  map[int][]int // the races to fix, by second stage

	waits     [][2]int
	by        [][]int // per wait, the races it is the first to order
	done      []bool  // per race: ordered by a wait, or found unfixable
	isUnfixed []bool  // per race: no wait issued before its second stage orders it
	unfixed   []int
	partial   bool // the work bound stopped the greedy search
}

// init orders p's stages by launch and groups need by second stage.
func (f *fixSearch) init() {
	p := f.p
	launchPos := plan.LaunchPositions(p)
	f.b = fixBudget{left: fixMaxWork}
	f.streams = max(len(p.Streams), 1)
	f.launchPos = launchPos
	f.sw = newSiteWaits(p, launchPos)
	f.order = make([]int, len(p.Stages))
	f.bySecond = map[int][]int{}
	f.done = make([]bool, len(f.races))
	f.isUnfixed = make([]bool, len(f.races))
	for i := range f.order {
		f.order[i] = i
	}
	slices.SortFunc(f.order, func(x, y int) int { return launchPos[x] - launchPos[y] })
	for _, k := range f.need {
		f.bySecond[f.races[k].Second] = append(f.bySecond[f.races[k].Second], k)
	}
}

// cost is the work of one try with w waits placed: clocks over the issue
// order and its waits, plus a look at each race.
func (f *fixSearch) cost(w int) int {
	return (len(f.p.IssueOrder)+2*w)*(f.streams+1) + len(f.need)
}

// ordered reports, per race, whether q orders it (Verify's vector clocks).
func (f *fixSearch) ordered(q *plan.Plan) []bool {
	fixSteps.Add(int64(len(q.IssueOrder)*f.streams + len(f.need)))
	v := &verifier{p: q}
	v.clocks()
	ok := make([]bool, len(f.races))
	for _, k := range f.need {
		ok[k] = v.stageHB(int32(f.races[k].First), int32(f.races[k].Second))
	}
	return ok
}

// with is the plan with the waits ws (each at every run of its lines).
func (f *fixSearch) with(ws [][2]int) *plan.Plan { return withWaits(f.p, f.sw.all(f.p, ws)) }

// target reports whether ok orders every race a wait can order.
func (f *fixSearch) target(ok []bool) bool {
	for _, k := range f.need {
		if !ok[k] && !f.isUnfixed[k] {
			return false
		}
	}
	return true
}

// countCandidates counts the candidates, in issue order of y, streams
// ascending: how many there are in all (nCands), and how many of them the
// second stages with races have (least); per race, the latest launch of
// its first stream issued before its second stage (direct, or -1).
func (f *fixSearch) countCandidates() (nCands, least int, direct []int) {
	p, sw := f.p, f.sw
	direct = make([]int, len(f.races))
	// With repeated sites, candidates of one source key (siteWaits.key)
	// count once: keys, and tried for those of stages with races.
	keys, tried := map[[4]int]bool{}, map[[4]int]bool{}
	walkCandidates(p, f.order, func(y int, last []int, started []int) {
		own := 0
		if last[p.Stages[y].Stream] >= 0 {
			own = 1
		}
		_, racy := f.bySecond[y]
		if sw.site == nil {
			nCands += len(started) - own
			if racy {
				least += len(started) - own
			}
		} else {
			for _, s := range started {
				if s == p.Stages[y].Stream {
					continue
				}
				k := sw.key(p, [2]int{last[s], y})
				if !keys[k] {
					keys[k] = true
					nCands++
				}
				if racy && !tried[k] {
					tried[k] = true
					least++
				}
			}
		}
		if ks, ok := f.bySecond[y]; ok {
			for _, k := range ks {
				direct[k] = last[f.races[k].FirstStream]
			}
		}
	})
	return nCands, least, direct
}

// candidatesOf lists, per second stage with races, its candidate waits
// (the first of each source key).
func (f *fixSearch) candidatesOf() map[int][][2]int {
	p := f.p
	candsOf := map[int][][2]int{}
	rep := map[[4]int][2]int{} // per source key, its first candidate
	walkCandidates(p, f.order, func(y int, last []int, started []int) {
		if _, ok := f.bySecond[y]; ok {
			for _, s := range started {
				if s != p.Stages[y].Stream {
					candsOf[y] = append(candsOf[y], f.sw.first(p, rep, [2]int{last[s], y}))
				}
			}
		}
	})
	return candsOf
}

// greedy visits second stages in issue order and adds waits until each
// stage's races are ordered or found unfixable, or the work bound stops
// it (partial).
func (f *fixSearch) greedy(candsOf map[int][][2]int) {
	for _, y := range f.order {
		if f.partial {
			break
		}
		f.greedyStage(y, candsOf[y])
	}
}

// greedyStage adds, while a race of second stage y is pending, the
// candidate among cands that orders the most pending races (its own among
// them).
func (f *fixSearch) greedyStage(y int, cands [][2]int) {
	p, races, sw := f.p, f.races, f.sw
	mine := f.bySecond[y]
	for {
		own := false
		for _, k := range mine {
			own = own || !f.done[k]
		}
		if !own {
			return
		}
		best, bestN, bestOK := -1, 0, []bool(nil)
		for c, w := range cands {
			if !f.b.take(f.cost(sw.count(p, f.waits)+sw.count(p, [][2]int{w})), 0) {
				f.partial = true
				return
			}
			ok := f.ordered(f.with(append(f.waits[:len(f.waits):len(f.waits)], w)))
			n, ours := 0, false
			for _, k := range f.need {
				if ok[k] && !f.done[k] {
					n++
					ours = ours || races[k].Second == y
				}
			}
			if ours && n > bestN {
				best, bestN, bestOK = c, n, ok
			}
		}
		if best < 0 {
			// Nothing issued before y orders its pairs.
			for _, k := range mine {
				if !f.done[k] {
					f.done[k], f.isUnfixed[k] = true, true
					f.unfixed = append(f.unfixed, k)
				}
			}
			continue
		}
		f.waits = append(f.waits, cands[best])
		var got []int
		for _, k := range f.need {
			if bestOK[k] && !f.done[k] {
				f.done[k] = true
				got = append(got, k)
			}
		}
		f.by = append(f.by, got)
	}
}

// fixUnreached runs past the work bound: each race not reached gets the
// candidate wait before its second stage on its first stream (direct),
// which orders it through stream order when its first stage is issued
// earlier.
func (f *fixSearch) fixUnreached(direct []int) {
	at := map[[2]int]int{}
	rep := map[[4]int][2]int{}
	for _, k := range f.need {
		if f.done[k] {
			continue
		}
		r := f.races[k]
		w := [2]int{direct[k], r.Second}
		if w[0] < 0 || f.launchPos[r.First] > f.launchPos[w[0]] {
			f.unfixed = append(f.unfixed, k)
			continue
		}
		w = f.sw.first(f.p, rep, w)
		i, ok := at[w]
		if !ok {
			i = len(f.waits)
			at[w] = i
			f.waits = append(f.waits, w)
			f.by = append(f.by, nil)
		}
		f.by[i] = append(f.by[i], k)
	}
}

// exact looks for a smaller set than the greedy one among the nCands
// candidates, then relaxes the waits; each size's tries are counted before
// it is tried, beside describing the fixes (fixesOf). It returns the fixes
// and whether their count is proven minimal.
func (f *fixSearch) exact(nCands int) ([]Fix, bool) {
	p, b, sw := f.p, &f.b, f.sw
	waits := f.waits
	placed := sw.count(p, waits)
	reserve := len(waits) * (f.cost(placed) + f.cost(0))
	if !b.take(0, reserve) {
		return fixesBy(p, f.races, waits, f.by, b, sw), false
	}
	minimal := true
	fixed := func(q *plan.Plan) bool { return f.target(f.ordered(q)) }
	var cands [][2]int
	for size := 0; size < len(waits); size++ {
		n := binomial(nCands, size)
		if n > fixMaxExact || !b.take(n*f.cost(size*max(placed/max(len(waits), 1), 1)), reserve) {
			minimal = false
			break
		}
		if size == 1 {
			cands = allCandidates(p, f.order, sw)
		}
		if set := firstSubset(cands, size, func(ws [][2]int) bool { return fixed(f.with(ws)) }); set != nil || size == 0 && fixed(p) {
			waits = set
			break
		}
	}
	if !p.Unrolled { // an unrolled plan's waits are relaxed in spec terms (verifyIterations)
		waits = relaxFixes(p, waits, f.with, sw.site, fixed, func() bool { return b.take(f.cost(placed), reserve) })
	}
	b.take(reserve, 0)
	return fixesOf(p, f.races, f.need, waits, sw), minimal
}

// allCandidates is every candidate wait of minimalFixes, in issue order of
// y (order), streams ascending, one per source key (sw.key).
func allCandidates(p *plan.Plan, order []int, sw *siteWaits) [][2]int {
	var cands [][2]int
	seen := map[[4]int]bool{}
	walkCandidates(p, order, func(y int, last []int, started []int) {
		for _, s := range started {
			if k := sw.key(p, [2]int{last[s], y}); s != p.Stages[y].Stream && !seen[k] {
				seen[k] = true
				cands = append(cands, [2]int{last[s], y})
			}
		}
	})
	return cands
}

// walkCandidates calls f for each stage y in issue order (order) with,
// per stream, its latest launch issued before y (last, −1 for none), and
// the streams that have one (started, ascending): y's candidate waits
// are (last[s], y) for s in started but y's own stream.
func walkCandidates(p *plan.Plan, order []int, f func(y int, last, started []int)) {
	last := make([]int, len(p.Streams))
	for s := range last {
		last[s] = -1
	}
	var started []int
	for _, y := range order {
		f(y, last, started)
		sy := p.Stages[y].Stream
		if last[sy] < 0 {
			i, _ := slices.BinarySearch(started, sy)
			started = slices.Insert(started, i, sy)
		}
		last[sy] = y
	}
}

// relaxFixes moves each wait's record as early on its stream as the set
// still orders every race (fixed reports it): the same number of waits,
// with no more order than the races need (a ring's wait two iterations
// back rather than one, say). with makes the plan with a set of waits
// (each at its places); with site (stageSites) set, records at a line
// already tried are skipped (the places of a wait depend on its lines
// only). Each try is paid for by more, which reports false when the work
// bound leaves none.
func relaxFixes(p *plan.Plan, waits [][2]int, with func([][2]int) *plan.Plan, site []int32, fixed func(*plan.Plan) bool, more func() bool) [][2]int {
	waits = slices.Clone(waits)
	for i, w := range waits {
		s := p.Stages[w[0]].Stream
		ops := p.Streams[s].Ops
		tried := map[int32]bool{}
		if site != nil {
			tried[site[w[0]]] = true
		}
		for j := streamPos(p, w[0]) - 1; j >= 0; j-- {
			if ops[j].Kind != plan.OpLaunch {
				continue
			}
			if site != nil {
				if tried[site[ops[j].Stage]] {
					continue
				}
				tried[site[ops[j].Stage]] = true
			}
			if !more() {
				return waits
			}
			try := slices.Clone(waits)
			try[i][0] = ops[j].Stage
			if !fixed(with(try)) {
				break
			}
			waits = try
		}
	}
	return waits
}

// withWaits is a copy of p with the waits ws added (addWait of each in
// turn: the same ops, events and issue order), in one pass over p's ops.
func withWaits(p *plan.Plan, ws [][2]int) *plan.Plan {
	q := &plan.Plan{Stages: p.Stages, Buffers: p.Buffers, Lifetimes: p.Lifetimes, Streams: slices.Clone(p.Streams), Events: p.Events + len(ws)}
	if p.Iteration != nil {
		it := *p.Iteration
		it.Slots = slices.Clone(it.Slots)
		for range ws {
			it.Slots = append(it.Slots, 1)
		}
		q.Iteration = &it
	}
	// Per stage, the events recorded after it (latest added first, as
	// addWait puts each right after the launch) and waited on before it.
	recs, waitsOn := map[int][]int{}, map[int][]int{}
	for k, w := range ws {
		e := p.Events + k
		recs[w[0]] = append([]int{e}, recs[w[0]]...)
		waitsOn[w[1]] = append(waitsOn[w[1]], e)
	}
	at := make([][]int, len(p.Streams)) // per stream, old op index → new
	for s := range p.Streams {
		old := p.Streams[s].Ops
		ops := make([]plan.Op, 0, len(old))
		at[s] = make([]int, len(old))
		for j, o := range old {
			if o.Kind == plan.OpLaunch {
				for _, e := range waitsOn[o.Stage] {
					ops = append(ops, plan.Op{Kind: plan.OpWait, Event: e})
				}
			}
			at[s][j] = len(ops)
			ops = append(ops, o)
			if o.Kind == plan.OpLaunch {
				for _, e := range recs[o.Stage] {
					ops = append(ops, plan.Op{Kind: plan.OpRecord, Event: e})
				}
			}
		}
		q.Streams[s].Ops = ops
	}
	fixSteps.Add(int64(len(p.IssueOrder) + 2*len(ws)))
	q.IssueOrder = make([][2]int, 0, len(p.IssueOrder)+2*len(ws))
	for _, so := range p.IssueOrder {
		s, j := so[0], at[so[0]][so[1]]
		o := p.Streams[s].Ops[so[1]]
		if o.Kind != plan.OpLaunch {
			q.IssueOrder = append(q.IssueOrder, [2]int{s, j})
			continue
		}
		nw, nr := len(waitsOn[o.Stage]), len(recs[o.Stage])
		for i := j - nw; i <= j+nr; i++ {
			q.IssueOrder = append(q.IssueOrder, [2]int{s, i})
		}
	}
	return q
}

// fixesBy describes waits as fixes, each with the races by lists for it,
// as fixesOf does without recomputing them; a fix's Instead is tried
// while b has work left.
func fixesBy(p *plan.Plan, races []Race, waits [][2]int, by [][]int, b *fixBudget, sw *siteWaits) []Fix {
	fixes := make([]Fix, 0, len(waits))
	cost := len(p.IssueOrder) * (max(len(p.Streams), 1) + 1)
	var pos []int
	if len(p.Captures) > 0 {
		pos = plan.LaunchPositions(p)
	}
	for i, w := range waits {
		f := newFix(p, w[0], w[1])
		f.Places = len(sw.places(p, w))
		existing(p, &f)
		f.Races = slices.Sorted(slices.Values(by[i]))
		if b.take(cost, 0) {
			f.Instead = insteadOf(p, races, &f) // implicit.go
		}
		if pos != nil && b.take(cost, 0) {
			f.Isolation = isolationNote(p, &f, pos) // capture.go
		}
		f.Edit = f.String()
		fixes = append(fixes, f)
	}
	return fixes
}

// fixesOf describes waits as fixes, in order, each with the races it is
// the first to order.
func fixesOf(p *plan.Plan, races []Race, need []int, waits [][2]int, sw *siteWaits) []Fix {
	got := make([]bool, len(races))
	q := clonePlan(p)
	var fixes []Fix
	var pos []int
	if len(p.Captures) > 0 {
		pos = plan.LaunchPositions(p)
	}
	for _, w := range waits {
		x, y := w[0], w[1]
		at := sw.places(p, w)
		for _, v := range at {
			addWait(q, v[0], v[1])
		}
		fixSteps.Add(int64(len(q.IssueOrder)*(max(len(q.Streams), 1)+1) + len(need)))
		v := &verifier{p: q}
		v.clocks()
		f := newFix(p, x, y)
		f.Places = len(at)
		existing(p, &f)
		for _, k := range need {
			if !got[k] && v.stageHB(int32(races[k].First), int32(races[k].Second)) {
				got[k] = true
				f.Races = append(f.Races, k)
			}
		}
		f.Instead = insteadOf(p, races, &f) // implicit.go
		if pos != nil {
			f.Isolation = isolationNote(p, &f, pos) // capture.go
		}
		f.Edit = f.String()
		fixes = append(fixes, f)
	}
	return fixes
}

// existing sets f's OldLag or Taken when Before already waits on the
// event recorded right after After: with a lag (the fix is lag 0), or
// taking a later record of that event.
func existing(p *plan.Plan, f *Fix) {
	ev, lag, j, ok := existingWait(p, f.After, f.Before)
	if !ok || f.Lag != 0 {
		return
	}
	if lag > 0 {
		f.OldLag = lag
		return
	}
	// The latest record of ev issued before the wait op (stream s, op j).
	s := p.Stages[f.Before].Stream
	taken := -1
	for _, so := range p.IssueOrder {
		if so[0] == s && so[1] == j {
			break
		}
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpRecord && o.Event == ev {
			taken = -1
			for k := so[1] - 1; k >= 0; k-- {
				if ok := p.Streams[so[0]].Ops[k]; ok.Kind == plan.OpLaunch {
					taken = ok.Stage
					break
				}
			}
		}
	}
	if taken >= 0 && taken != f.After {
		f.Taken = p.Stages[taken].Name
	}
}

// firstSubset returns the first set of size k of cands (in lexicographic
// order) for which ok holds, or nil.
func firstSubset(cands [][2]int, k int, ok func([][2]int) bool) [][2]int {
	if k == 0 {
		return nil
	}
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	set := make([][2]int, k)
	for {
		for i, j := range idx {
			set[i] = cands[j]
		}
		if ok(set) {
			return slices.Clone(set)
		}
		i := k - 1
		for i >= 0 && idx[i] == len(cands)-k+i {
			i--
		}
		if i < 0 {
			return nil
		}
		idx[i]++
		for j := i + 1; j < k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}

func binomial(n, k int) int {
	if k < 0 || k > n {
		return 0
	}
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
		if r > 1<<40 {
			return r
		}
	}
	return r
}

func clonePlan(p *plan.Plan) *plan.Plan {
	q := &plan.Plan{Stages: p.Stages, Buffers: p.Buffers, Lifetimes: p.Lifetimes, Streams: slices.Clone(p.Streams), IssueOrder: slices.Clone(p.IssueOrder), Events: p.Events}
	if p.Iteration != nil {
		it := *p.Iteration
		it.Slots = slices.Clone(it.Slots)
		q.Iteration = &it
	}
	for s := range q.Streams {
		q.Streams[s].Ops = slices.Clone(p.Streams[s].Ops)
	}
	return q
}

// streamPos is the index of stage i's launch in its stream's ops.
func streamPos(p *plan.Plan, i int) int {
	for j, o := range p.Streams[p.Stages[i].Stream].Ops {
		if o.Kind == plan.OpLaunch && o.Stage == i {
			return j
		}
	}
	return -1
}

// addWait adds to p a record right after stage x's launch (a new event)
// and a wait on it right before stage y's launch, in stream order and in
// issue order.
func addWait(p *plan.Plan, x, y int) { addLaggedWait(p, x, y, 0) }

// addLaggedWait is addWait for a wait lag iterations back (the event gets
// lag+1 slots).
func addLaggedWait(p *plan.Plan, x, y, lag int) {
	e := p.Events
	p.Events++
	if p.Iteration != nil {
		p.Iteration.Slots = append(p.Iteration.Slots, lag+1)
	}
	insert := func(stage int, op plan.Op, after bool) {
		s := p.Stages[stage].Stream
		j := streamPos(p, stage)
		if after {
			j++
		}
		ops := &p.Streams[s].Ops
		*ops = slices.Insert(*ops, j, op)
		pos := -1
		for k, so := range p.IssueOrder {
			if so[0] == s && so[1] >= j {
				p.IssueOrder[k][1]++
			}
			if so[0] == s && so[1] == j-1 && after || so[0] == s && so[1] == j && !after && pos < 0 {
				pos = k
			}
		}
		if after {
			pos++ // right after the launch
		}
		p.IssueOrder = slices.Insert(p.IssueOrder, pos, [2]int{s, j})
	}
	insert(x, plan.Op{Kind: plan.OpRecord, Event: e}, true)
	insert(y, plan.Op{Kind: plan.OpWait, Event: e, Lag: lag}, false)
}

// String is the fix as the edit to make, in the spec's stage names (a
// collective's, not its rank's), with its CUDA form in the plan's, and
// the edit that would do instead (Instead) when there is one.
func (f Fix) String() string {
	s := f.edit()
	if f.Instead != "" {
		s += "; or instead " + f.Instead
	}
	if f.Isolation != "" {
		s += "; " + f.Isolation
	}
	return s
}

// edit is String without Instead.
func (f Fix) edit() string {
	at, after := cmp.Or(f.beforeSpec, f.BeforeName), cmp.Or(f.afterSpec, f.AfterName)
	switch f.form {
	case formOps:
		lag := ""
		if f.Lag > 0 {
			lag = fmt.Sprintf(" %d iteration%s back (lag %d, one more slot for the event)", f.Lag, plural(f.Lag), f.Lag)
		}
		return fmt.Sprintf("%s: in the plan file, add a record of a new event to stream %s's ops right after the launch of %s, and a wait on it%s to stream %s's ops right before the launch of %s (and the two to issue_order there)",
			at, f.RecordStream, f.AfterName, lag, f.WaitStream, f.BeforeName)
	case formAfter:
		if f.BeforeSource != "" {
			at = cmp.Or(f.beforeSpec, f.BeforeName) + " (" + f.BeforeSource + ")"
		}
		if f.Lag > 0 {
			return fmt.Sprintf("%s: nothing orders %s %d iteration%s earlier before it, and a sync: auto spec cannot name a wait across iterations (stream %s would wait, before %s, on the event recorded on stream %s after %s); write the spec with sync: manual and waits: [{stage: %s, lag: %d}]",
				at, after, f.Lag, plural(f.Lag), f.WaitStream, f.BeforeName, f.RecordStream, f.AfterName, after, f.Lag)
		}
		return fmt.Sprintf("%s: add %s to after (dagrun then places the wait: stream %s waits, before %s, on an event recorded on stream %s after %s)",
			at, after, f.WaitStream, f.BeforeName, f.RecordStream, f.AfterName)
	}
	if f.BeforeSource != "" {
		at += " (" + f.BeforeSource + ")"
	}
	if f.Lag == 0 && f.OldLag > 0 {
		return fmt.Sprintf("%s: change {stage: %s, lag: %d} in waits to %s (lag 0: stream %s waits, before %s, on the event recorded on stream %s after %s of this iteration, not of %d iteration%s earlier)",
			at, after, f.OldLag, after, f.WaitStream, f.BeforeName, f.RecordStream, f.AfterName, f.OldLag, plural(f.OldLag))
	}
	if f.Lag == 0 && f.Taken != "" {
		return fmt.Sprintf("%s: it already waits on the event recorded after %s, but a wait takes the event's latest record issued before it, the one after %s: give %s an event of its own and wait on that (stream %s waits, before %s, on an event recorded on stream %s after %s)",
			at, after, f.Taken, after, f.WaitStream, f.BeforeName, f.RecordStream, f.AfterName)
	}
	if f.Lag > 0 && f.OldLag > 0 {
		return fmt.Sprintf("%s: change {stage: %s, lag: %d} in waits to lag: %d (stream %s waits, before %s, on the event recorded on stream %s after %s %d iteration%s earlier)",
			at, after, f.OldLag, f.Lag, f.WaitStream, f.BeforeName, f.RecordStream, f.AfterName, f.Lag, plural(f.Lag))
	}
	if f.Lag > 0 {
		return fmt.Sprintf("%s: add {stage: %s, lag: %d} to waits (stream %s waits, before %s, on the event recorded on stream %s after %s %d iteration%s earlier)",
			at, after, f.Lag, f.WaitStream, f.BeforeName, f.RecordStream, f.AfterName, f.Lag, plural(f.Lag))
	}
	return fmt.Sprintf("%s: add %s to waits (stream %s waits, before %s, on an event recorded on stream %s after %s)",
		at, after, f.WaitStream, f.BeforeName, f.RecordStream, f.AfterName)
}
