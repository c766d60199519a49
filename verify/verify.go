package verify

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/dagrun/dagrun/plan"
)

// verifyMaxRaces bounds the races Verify collects; it stops the sweep there
// and sets RaceError.Truncated. A plan with that many races is wholly unsynchronized.
const verifyMaxRaces = 10000

// verifyMaxPrinted bounds the races RaceError.Error prints.
const verifyMaxPrinted = 20

// verifyMaxHints bounds the races whose Fix is searched in detail (waits
// issued too early or placed too late); later ones get the generic fix.
const verifyMaxHints = 256

// Race is one pair of conflicting accesses that the plan does not order as
// declaration order does: stage First's launch does not happen-before stage
// Second's launch. One Race is reported per (First, Second, Buffer).
type Race struct {
	First  int `json:"first"`  // stage index, First < Second (declaration order)
	Second int `json:"second"` // stage index
	// FirstName and SecondName are the stages' names.
	FirstName    string `json:"first_name"`
	SecondName   string `json:"second_name"`
	FirstStream  int    `json:"first_stream"`
	SecondStream int    `json:"second_stream"`
	// FirstStreamName, SecondStreamName are the streams' names in the plan
	// (a spec's pinned names, or s0, s1, … for planned streams).
	FirstStreamName  string `json:"first_stream_name"`
	SecondStreamName string `json:"second_stream_name"`
	// Buffer is the buffer of First's access. Offset and Bytes are the
	// smallest byte range of Buffer that holds every conflicting byte.
	Buffer string `json:"buffer"`
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
	// Shared, when Second's access is to another buffer that shares arena
	// bytes with Buffer, names that buffer (the arena pass's mistake, or an
	// arena laid out by hand).
	Shared string `json:"shared,omitempty"`
	// Kind is RaceWAW if any conflicting access pair is write/write, else
	// RaceRAW if First writes, else RaceWAR.
	Kind string `json:"kind"`
	// Reversed is true when the plan orders Second before First (a
	// happens-before path from Second's launch to First's): ordered, but the
	// wrong way round.
	Reversed bool `json:"reversed,omitempty"`
	// Fix says which record/wait would order the pair (or what to move).
	Fix string `json:"fix"`
	// Rule, when CUDA's implicit order was expected to order the pair,
	// names the rule that does not (implicit.go) and why.
	Rule string `json:"rule,omitempty"`

	// Site indexes RaceError.Sites: the race's identity in the program's
	// source (RaceSite).
	Site int `json:"site"`

	edit *ruleEdit // the plan edit Rule suggests instead of a wait (implicit.go)
}

func (r Race) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "race (%s) on %s[%d:%d]: ", r.Kind, r.Buffer, r.Offset, r.Offset+r.Bytes)
	if r.Shared != "" {
		fmt.Fprintf(&b, "(arena bytes shared with %s) ", r.Shared)
	}
	if r.Reversed {
		fmt.Fprintf(&b, "stage %s (stream %s) runs before stage %s (stream %s), the reverse of declaration order",
			r.SecondName, streamLabel(r.SecondStreamName, r.SecondStream), r.FirstName, streamLabel(r.FirstStreamName, r.FirstStream))
	} else {
		fmt.Fprintf(&b, "stage %s (stream %s) and stage %s (stream %s) are not ordered",
			r.FirstName, streamLabel(r.FirstStreamName, r.FirstStream), r.SecondName, streamLabel(r.SecondStreamName, r.SecondStream))
	}
	if r.Rule != "" {
		b.WriteString(" (")
		b.WriteString(r.Rule)
		b.WriteString(")")
	}
	if r.Fix != "" {
		b.WriteString("; fix: ")
		b.WriteString(r.Fix)
	}
	return b.String()
}

// RaceError is Verify's error when a plan has races. Races are sorted by
// (First, Second, Buffer).
type RaceError struct {
	Races []Race `json:"races"`
	// Sites groups the races by their identity in the program's source
	// (RaceSite): the iterations of a loop and the repeated calls of a
	// recorded program are one site, with a count and an example.
	Sites []RaceSite `json:"sites,omitempty"`
	// Handoffs order races between host threads, one host event per pair
	// of threads (Handoff), for the Unfixed races no device wait orders.
	Handoffs []Handoff `json:"handoffs,omitempty"`
	// Truncated is true when Verify stopped after verifyMaxRaces races; more exist.
	Truncated bool `json:"truncated,omitempty"`
	// Fixes are few waits that, added to the plan, order every race but
	// the Unfixed ones, each with the races it orders (see Fix).
	Fixes []Fix `json:"fixes"`
	// Unfixed indexes the races no added wait orders: ordered the wrong way
	// round, on one stream, through shared arena bytes, or needing a
	// record that is issued after the wait; each Race's Fix says what to do.
	Unfixed []int `json:"unfixed"`
	// FixesPartial is set when the fix search stopped at its work bound
	// (fixMaxWork steps): each race it did not reach has a wait of its
	// own, so fewer waits may do.
	FixesPartial bool `json:"fixes_partial,omitempty"`
	// Lifetimes are lifetime records that end before a stream's last use
	// of their buffer.
	Lifetimes []LifetimeGap `json:"lifetimes,omitempty"`
	// Unrolled is set for races across iterations: stages are named
	// NAME@iteration and ring copies NAME#copy.
	Unrolled bool `json:"unrolled,omitempty"`
	// LagsShortest is set when the fixes across iterations keep the
	// shortest lag that orders their races, not lengthened as far as the
	// plan stays race-free (more than 4 fixes, or more than 32 iterations
	// unrolled): a longer lag, with less order between iterations, may
	// also do.
	LagsShortest bool `json:"lags_shortest,omitempty"`
	// AcrossIterations counts the races between stages of different
	// iterations that the plan, unrolled, also has when these races are
	// within one iteration: not listed, as they may change once these are
	// fixed; check again after fixing these. MoreAcross is set when the
	// count is a lower bound (the race list was truncated).
	AcrossIterations int  `json:"across_iterations,omitempty"`
	MoreAcross       bool `json:"more_across,omitempty"`
	// FixesMinimal is set when an exhaustive search proved that no fewer
	// waits order these races; otherwise the fixes are a greedy set (plans
	// with more candidate sets than fixMaxExact, or more work than
	// fixMaxWork, to try), or one wait per race (FixesPartial).
	FixesMinimal bool `json:"fixes_minimal"`
	// Captures are broken stream-capture rules (capture.go).
	Captures []CaptureViolation `json:"captures,omitempty"`
	// Deadlocks are collectives whose ranks are not issued as one group
	// (devices_verify.go); with them, Races is empty (the plan would not
	// finish).
	Deadlocks []Deadlock `json:"deadlocks,omitempty"`
}

// Error is the report grouped by fix: one block per wait with the races it
// orders, then the races no wait fixes.
func (e *RaceError) Error() string {
	if e.AcrossIterations > 0 {
		c := *e
		c.AcrossIterations = 0
		more := ""
		if e.MoreAcross {
			more = " or more"
		}
		return c.Error() + fmt.Sprintf("\nnote: iterations unrolled show %d%s race%s between stages of different iterations besides these, not listed as they may change once these are fixed: run check again after fixing these", e.AcrossIterations, more, plural(e.AcrossIterations))
	}
	if len(e.Races) == 0 {
		var b strings.Builder
		e.reportLifetimes(&b)
		return strings.TrimPrefix(b.String(), "\n")
	}
	if len(e.Fixes) > 0 || len(e.Unfixed) > 0 {
		var b strings.Builder
		e.report(&b)
		return b.String()
	}
	if len(e.Races) == 1 && !e.Truncated {
		return e.Races[0].String()
	}
	var b strings.Builder
	more := ""
	if e.Truncated {
		more = " or more"
	}
	fmt.Fprintf(&b, "%d%s races", len(e.Races), more)
	for i, r := range e.Races {
		if i == verifyMaxPrinted {
			fmt.Fprintf(&b, "\n\t... and %d more", len(e.Races)-i)
			break
		}
		b.WriteString("\n\t")
		b.WriteString(r.String())
	}
	return b.String()
}

// Verify proves from the plan alone that every pair of conflicting accesses
// (write/write, or read/write, on overlapping bytes of the same buffer) by
// stages i < j (declaration order, the one-stream reference semantics) is
// ordered: stage i's launch happens-before stage j's launch. It does not
// trust the passes that built p: it uses only the stages' reads and writes,
// the streams' ops, IssueOrder and Events.
//
// Happens-before is stream program order plus record→wait edges resolved in
// IssueOrder with CUDA semantics (cudaStreamWaitEvent): a wait orders
// the waiting stream after the most recent record of its event issued
// before the wait; a wait with no earlier record orders nothing. Events may
// be recorded many times.
//
// Algorithm: vector clocks over chains of the plan's ops (hbEdges, hb.go:
// Fidge/Mattern clocks over a chain cover, built in one walk over
// IssueOrder) answer "i happens-before j" in O(1) for plans of few streams
// and O(log) otherwise (hbGraph.reach); a sweep over the
// accesses in declaration order keeps, per byte segment of each buffer,
// only the frontier — the writes not yet ordered before a later covering
// write, and the latest read per stream since — as in FastTrack (Flanagan
// and Freund, PLDI 2009, §3), so that a race-free plan asks
// O(accesses × segments touched × streams reading a segment) queries.
// Accesses leaving the frontier are kept in a shadow list of the access
// that superseded them, which is searched only when that access itself
// races, so the set of reported races is exact (every racy pair, no false
// ones). Memory is O(ops + accesses × segments touched) plus the clocks'
// deltas (hb.go: about the rows times the chains that advance between a
// stream's syncs), never streams × ops. The arena's lifetimes are checked
// by an interval sweep (arenaLifetimes), and a plan with iteration info
// unrolled (verifyIterations). Buffer names are looked up once; the clocks
// are built beside the accesses, and the arena and lifetime checks run
// beside the sweep, on other goroutines (the arena check before the sweep
// for an unrolled plan without names, whose ops are dropped once its
// clocks are built).
//
// It returns a *PlanError for a malformed plan (the shape checks of
// Validate, which do not need the plan's buffer and kernel declarations)
// and for a launch whose accesses to different buffers share arena bytes
// (launchAliases: no wait can fix that), nil for a race-free plan, and
// otherwise a *RaceError listing every race (up to verifyMaxRaces).
func Verify(p *plan.Plan) error { return withCaptures(p, verify(p, true)) }

// Races is Verify without the fix search and the capture rules: nil, or
// a *RaceError of p's races without Fixes (for checks that only ask
// whether a plan is race-free).
func Races(p *plan.Plan) error { return verify(p, false) }

// verify is Verify without the capture rules; withFixes false leaves the fix search out (for the
// searches that only ask whether a plan is race-free).
func verify(p *plan.Plan, withFixes bool) error { return verifyWith(p, withFixes, true) }

// verifyWith is verify; aliases false skips launchAliases, for plans whose
// launches are those of a plan it passed (iterations of it: verifyIterations).
func verifyWith(p *plan.Plan, withFixes, aliases bool) error {
	if p == nil {
		return errors.New("plan: nil plan")
	}
	if p.Derived {
		return verifyBounded(p, withFixes, aliases)
	}
	// The shape's bounds first (the checks read the plan by them); its
	// names beside the checks, which do not read them, and ahead of what
	// the checks find, as a plan that fails ValidateShape is refused.
	if err := p.ValidateBounds(); err != nil {
		return err
	}
	var names error
	var wg sync.WaitGroup
	wg.Go(func() { names = p.ValidateNames() })
	err := verifyBounded(p, withFixes, aliases)
	wg.Wait()
	if names != nil {
		return names
	}
	return err
}

// verifyBounded is verifyWith of a plan whose bounds are valid
// (ValidateBounds).
func verifyBounded(p *plan.Plan, withFixes, aliases bool) error {
	// Buffer names are resolved once for every check below (in a shallow
	// copy: p is not changed).
	if !p.AccOwn {
		c := *p
		c.AccBuf, c.AccOwn = plan.AccessBuffers(p), true
		p = &c
	}
	var wg sync.WaitGroup
	// A plan with iteration info is unrolled beside the checks of its
	// launches (each only reads p, whose shape is valid).
	var q *plan.Plan
	var qerr error
	if p.Iteration != nil {
		wg.Go(func() { q, qerr = plan.UnrollDerived(p, plan.UnrollIterations(p), false) })
	}
	if aliases {
		err := launchAliases(p) // alias_verify.go
		if err == nil {
			err = deviceAccesses(p) // devices_verify.go
		}
		if err == nil {
			if dl := collectiveDeadlocks(p); len(dl) > 0 {
				err = &RaceError{Deadlocks: dl, FixesMinimal: true}
			}
		}
		if err != nil {
			wg.Wait()
			return err
		}
	}
	if p.Iteration != nil {
		wg.Wait()
		if qerr != nil {
			return qerr
		}
		return verifyIterations(p, q, withFixes) // across iterations: iter_verify.go
	}
	// The clocks beside the accesses; then the arena's pieces (which read
	// the clocks' op tables); then the arena and lifetime checks beside
	// the sweep: each side reads the plan and what the other does not
	// write.
	v := &verifier{p: p, maxSteps: verifyMaxClock}
	wg.Go(v.clocks)
	err := v.accesses()
	wg.Wait()
	if err != nil {
		return err
	}
	if v.hb.over {
		return clockBoundError(p)
	}
	var arena []Race
	var gaps []LifetimeGap
	var pieces *arenaSweep
	if p.Derived {
		// A derived plan is the verifier's own (UnrollDerived's), as large as
		// the iterations it unrolls: what the checks below read of its
		// ops is in the clocks, so its ops and issue order go before the
		// arena's pieces are made; and the arena check runs before the
		// sweep, its pieces gone when the sweep's frontiers are made, so
		// that none of these take memory at once.
		if v.hb.im == nil {
			p.IssueOrder, p.Ops = nil, nil
			for s := range p.Streams {
				p.Streams[s].Ops = nil
			}
		}
		// Read by accesses alone; the segments' bytes, by the arena's
		// pieces alone (the sweep reads segment indices, and reports no
		// race of a derived plan).
		p.AccBuf = nil
		pieces = v.arenaPieces()
		v.bounds = nil
		arena = pieces.check() // arena_verify.go
	} else {
		pieces = v.arenaPieces()
		wg.Go(func() { arena = pieces.check() })
	}
	wg.Go(func() { gaps = lifetimeGaps(p) })
	v.sweep()
	wg.Wait()
	if pieces != nil && pieces.over {
		return arenaBoundError(p)
	}
	if p.Derived && (v.racy || len(arena) > 0) {
		return errDerivedRaces
	}
	v.races = append(v.races, arena...)
	if len(v.races) == 0 {
		if len(gaps) > 0 {
			return &RaceError{Lifetimes: gaps, FixesMinimal: true}
		}
		return nil
	}
	races := v.races
	slices.SortFunc(races, func(a, b Race) int {
		if a.First != b.First {
			return a.First - b.First
		}
		if a.Second != b.Second {
			return a.Second - b.Second
		}
		if c := strings.Compare(a.Buffer, b.Buffer); c != 0 {
			return c
		}
		return strings.Compare(a.Shared, b.Shared)
	})
	v.records = make([][]int32, p.Events)
	for g, s := range v.opStream {
		if o := p.Streams[s].Ops[int32(g)-v.opBase[s]]; o.Kind == plan.OpRecord {
			v.records[o.Event] = append(v.records[o.Event], int32(g))
		}
	}
	for k := range races {
		races[k].Fix = v.fix(&races[k], k < verifyMaxHints)
		v.explain(&races[k]) // implicit.go's rules: Race.Rule, and the edit a rule suggests
	}
	re := &RaceError{Races: races, Sites: raceSites(races), Truncated: v.truncated, Lifetimes: gaps}
	if withFixes {
		re.Fixes, re.Unfixed, re.FixesPartial, re.FixesMinimal = minimalFixes(p, races)
		re.Handoffs = handoffs(p, races, re.Unfixed)
	}
	return re
}

// verifyMaxClock bounds the work of Verify's happens-before clocks, in
// buildHB's steps (clock entries read and written: a few seconds on one
// core, and at most 24 bytes each while the clocks are built, 1.1 GiB).
// Plans of a few streams take a few steps per op (a 100,000-stage plan of
// 8 streams, 3 million); plans of thousands of streams that each sync
// with many others take up to streams × waits, and past the bound Verify
// refuses them (clockBoundError). A variable for tests.
var verifyMaxClock int64 = 48_000_000

// clockBoundError is Verify's refusal of a plan whose clocks pass
// verifyMaxClock entries, with the plan's size and what to do.
func clockBoundError(p *plan.Plan) error {
	waits := 0
	for s := range p.Streams {
		for _, o := range p.Streams[s].Ops {
			if o.Kind == plan.OpWait {
				waits++
			}
		}
	}
	if p.Ops != nil {
		waits = 0
		for _, k := range p.Ops.Kind {
			if k == plan.OpWait {
				waits++
			}
		}
	}
	unrolled := ""
	if p.Derived && p.Base != nil && len(p.Base.Stages) > 0 {
		unrolled = fmt.Sprintf(", %d iterations unrolled", p.BaseStages/len(p.Base.Stages))
	}
	return &WorkBoundError{Streams: len(p.Streams), Waits: waits, Msg: fmt.Sprintf("verify: refused: the happens-before clocks of this plan (%d streams, %d waits%s) take more than %d steps (clock entries read and written, up to streams × waits = %d; the bound is a few seconds and about 1 GiB): too many streams that sync with one another to verify; plan it with fewer streams (--max-streams 8, the default, or options: {max_streams: 8} in the spec)",
		len(p.Streams), waits, unrolled, verifyMaxClock, int64(len(p.Streams))*int64(waits))}
}

// verifyMaxArenaPairs bounds the happens-before queries of Verify's arena
// check (arenaLifetimes): buffers that share arena bytes are compared
// stream by stream, so two of them that thousands of streams use take
// streams² queries (about 8 ns each: 800 million, about 6 s). Past it
// Verify refuses the plan (arenaBoundError). A variable for tests.
var verifyMaxArenaPairs int64 = 800_000_000

// arenaBoundError is Verify's refusal of a plan whose arena check would
// pass verifyMaxArenaPairs queries.
func arenaBoundError(p *plan.Plan) error {
	return &WorkBoundError{Streams: len(p.Streams), Msg: fmt.Sprintf("verify: refused: checking the arena of this plan (%d streams) takes more than %d happens-before queries (two buffers that share arena bytes are compared stream by stream: the product of the streams that use each; the bound is a few seconds): plan it with fewer streams (--max-streams 8, the default, or options: {max_streams: 8} in the spec)",
		len(p.Streams), verifyMaxArenaPairs)}
}

// WorkBoundError is Verify's refusal of a plan whose checks would take
// more than their bound of work (verifyMaxClock steps of happens-before
// clocks, verifyMaxArenaPairs queries of the arena check): plans of
// thousands of streams. Planning with fewer streams (Options.MaxStreams)
// makes such a plan verifiable.
type WorkBoundError struct {
	Streams, Waits int // the refused plan's (Waits 0 for the arena's bound)
	Msg            string
}

func (e *WorkBoundError) Error() string { return e.Msg }

// verifier holds Verify's working state for one plan.
type verifier struct {
	p  *plan.Plan
	hb *hbGraph // happens-before (hb.go)
	// maxSteps bounds the clocks' work (buildHB), 0 for none.
	maxSteps int64

	// Ops, numbered globally as in hbGraph (the same slices).
	opBase     []int32 // per stream, global id of its op 0
	opStream   []int32
	opIssue    []int32   // position in IssueOrder
	opCaptured []int32   // waits: the record op captured, or -1
	launchOp   []int32   // per stage, global op id of its launch
	records    [][]int32 // per event, its record ops (built only for Fix)

	acc      []verifyAccess
	accStart []int32  // per stage: its first access in acc (len(Stages)+1 entries)
	bufName  []string // per buffer index: p.Buffers' first, then undeclared ones (nil for a derived plan)
	bufSpace []int32  // per buffer index: its address space
	spaces   []verifySpace
	bounds   []int64
	states   []*verifyState
	segments int     // the spaces' segments (len(states))
	checked  []int32 // per access: the access it was last checked against
	shadowed []int32 // per access: the access whose shadow it last joined
	joined   []int32 // per access: the access last added to its shadow
	raceIdx  map[[3]int32]int
	races    []Race

	// Shadows: per access, a list of the accesses it superseded (all
	// happen-before it), as linked nodes: shadow[a] is the first node or -1.
	shadow []int32
	links  []verifyLink
	// noShadows: a derived plan's check keeps no shadows (nor
	// shadowed, joined, links): it stops at its first race.
	noShadows bool

	// pool and slab hand out frontier storage in chunks.
	pool       []int32
	slab       []verifyState
	free       []*verifyState // frontiers no segment holds
	tmpW, tmpR []int32

	truncated bool
	racy      bool // a race was found in a derived plan (report)
}

// errDerivedRaces is verifyWith's answer for a derived plan (UnrollDerived
// without names) with races: its caller verifies the plan with names, to
// report them.
var errDerivedRaces = errors.New("plan: races across iterations")

// verifyAccess is one read or write of a stage, in the segments of its
// buffer's address space (the buffer's bytes: accesses to different
// buffers that share arena bytes are arenaLifetimes' to check), 16 bytes.
type verifyAccess struct {
	// lo, hi: its segments [lo, hi) of its space (verifier.bufSpace of
	// its buffer), whose bytes are [bounds[lo], bounds[hi]) of the
	// space's bounds (verifier.accBytes).
	lo, hi int32
	stage  int32
	// bw is its buffer's index (< len(p.Buffers): p.Buffers'; then the
	// undeclared ones, verifier.bufName), times two, plus one for a write.
	bw int32
}

// buf is a's buffer index.
func (a *verifyAccess) buf() int32 { return a.bw >> 1 }

// write reports whether a writes.
func (a *verifyAccess) write() bool { return a.bw&1 != 0 }

// space is access a's address space.
func (v *verifier) space(a *verifyAccess) int32 { return v.bufSpace[a.bw>>1] }

// accBytes returns access a's bytes [lo, hi) in its space.
func (v *verifier) accBytes(a *verifyAccess) (lo, hi int64) {
	s := v.spaces[v.space(a)]
	return v.bounds[s.at+a.lo], v.bounds[s.at+a.hi]
}

// planBytes returns access k's bytes [lo, hi) in its space, as the plan
// gives them (its stage's reads, then writes).
func (v *verifier) planBytes(k int32) (lo, hi int64) {
	a := &v.acc[k]
	st := planStage(v.p, int(a.stage))
	j := int(k - v.accStart[a.stage])
	x := st.Writes
	if j < len(st.Reads) {
		x = st.Reads
	} else {
		j -= len(st.Reads)
	}
	return x[j].Offset, x[j].Offset + x[j].Bytes
}

type verifyLink struct{ acc, next int32 }

// verifySpace is one address space and its frontier, per elementary segment
// [bounds[k], bounds[k+1]).
// Space k's bounds are verifier.bounds[at:at+n], its n-1 segments'
// frontiers verifier.states[at-k:at-k+n-1] (the spaces before it have
// one segment fewer than bounds each); last is its last access, after
// which the sweep frees its frontiers.
type verifySpace struct{ at, n, last int32 }

// verifyState is the frontier of one segment. Segments may share one; a
// step changes a frontier in place only when no other segment holds it.
type verifyState struct {
	w []int32 // writes not happening-before a later write of the segment
	r []int32 // reads since the last write that they happen-before; at most one per stream (the latest in stream order)
	// byStream indexes r by stream when r is long (readOf).
	byStream map[int32]int32
	refs     int32 // segments holding this frontier
}

// stageCount is how many stages p has: len(p.Stages), or for a derived
// plan without them (UnrollDerived), its stages.
func stageCount(p *plan.Plan) int {
	if p.Base != nil {
		return p.BaseStages
	}
	return len(p.Stages)
}

// stage returns stage i of p, or for a derived plan without stages the
// stage of its base whose reads and writes stage i has (only those are
// its: Verify reads no other field of it before a race is found).
func planStage(p *plan.Plan, i int) *plan.Stage {
	if p.Base != nil {
		return &p.Base.Stages[i%len(p.Base.Stages)]
	}
	return &p.Stages[i]
}

// bufferCount is how many buffers p has: len(p.Buffers), or for a
// derived plan without them (UnrollDerived), its copies of its base's.
func bufferCount(p *plan.Plan) int {
	if p.Base != nil {
		return len(p.BufOrig)
	}
	return len(p.Buffers)
}

// buffer returns buffer i of p, or for a derived plan without buffers the
// base's buffer it is a copy of (Copies aside: Verify reads its name,
// bytes and arena address).
func planBuffer(p *plan.Plan, i int) *plan.Buffer {
	if p.Base != nil {
		return &p.Base.Buffers[p.BufOrig[i]]
	}
	return &p.Buffers[i]
}

// accesses collects every access in declaration order (per stage: reads,
// then writes) and builds the address spaces' segments.
func (v *verifier) accesses() error {
	p := v.p
	n := 0
	for i := range stageCount(p) {
		st := planStage(p, i)
		n += len(st.Reads) + len(st.Writes)
	}
	// Buffers: p.Buffers' by their index (the last of a name), then the
	// undeclared ones a stage names; a buffer's space is set at its first
	// access.
	// An unrolled plan names each access's buffer by index (Plan.AccBuf):
	// then only undeclared names go through the map.
	hint := len(p.AccBuf) == n && p.AccBuf != nil && p.AccOwn
	nb := bufferCount(p)
	bufOf := map[string]int32{}
	if !hint {
		bufOf = make(map[string]int32, max(nb, n/8))
	}
	// Names serve only to report races, which a derived plan does not.
	named := !p.Derived
	if named {
		v.bufName = make([]string, nb)
	}
	v.bufSpace = make([]int32, nb)
	for i := range nb {
		v.bufSpace[i] = -1
		if !hint || named {
			b := planBuffer(p, i)
			if !hint {
				bufOf[b.Name] = int32(i)
			}
			if named {
				v.bufName[i] = b.Name
			}
		}
	}
	v.acc = make([]verifyAccess, 0, n)
	v.accStart = make([]int32, stageCount(p)+1)
	// Per space: its first and last access (at, last) and its accesses'
	// ends (n, two an access); varied marks the spaces whose accesses do
	// not all cover the same bytes. first holds each space's first
	// access's ends: the bounds of every space that is not varied.
	v.spaces = make([]verifySpace, 0, nb)
	first := make([]int64, 0, 2*nb)
	var varied []bool
	nvaried := 0
	for i := range stageCount(p) {
		st := planStage(p, i)
		v.accStart[i] = int32(len(v.acc))
		for k, list := range [2][]plan.Access{st.Reads, st.Writes} {
			for _, a := range list {
				if a.Offset < 0 || a.Bytes <= 0 {
					verb := [2]string{"reads", "writes"}[k]
					return fmt.Errorf("plan: stage %s %s %s[%d:%d]: want offset ≥ 0 and bytes > 0", st.Name, verb, a.Buffer, a.Offset, a.Offset+a.Bytes)
				}
				var b int32
				ok := false
				if hint && p.AccBuf[len(v.acc)] >= 0 {
					b, ok = p.AccBuf[len(v.acc)], true
				} else {
					b, ok = bufOf[a.Buffer]
				}
				if !ok {
					b = int32(len(v.bufSpace))
					bufOf[a.Buffer] = b
					if named {
						v.bufName = append(v.bufName, a.Buffer)
					}
					v.bufSpace = append(v.bufSpace, -1)
				}
				d := int32(len(v.acc))
				lo := a.Offset
				if v.bufSpace[b] < 0 {
					// Its space, at its first access: a buffer is a space
					// of its own (buffers of one name in an unrolled plan
					// without names, unroll, are distinct copies; buffers
					// sharing arena bytes are arenaLifetimes' to check).
					v.bufSpace[b] = int32(len(v.spaces))
					v.spaces = append(v.spaces, verifySpace{at: d, last: d})
					varied = append(varied, false)
					first = append(first, lo, lo+a.Bytes)
				}
				sp := v.bufSpace[b]
				// Segments 0 to 1 of its space: the first access's bytes
				// (set below for the spaces whose accesses vary).
				v.acc = append(v.acc, verifyAccess{stage: int32(i), bw: b<<1 | int32(k), lo: 0, hi: 1})
				s := &v.spaces[sp]
				s.n += 2
				s.last = d
				if !varied[sp] && (first[2*sp] != lo || first[2*sp+1] != lo+a.Bytes) {
					varied[sp] = true
					nvaried++
				}
			}
		}
	}
	v.accStart[stageCount(p)] = int32(len(v.acc))
	// Each space's segment bounds: the sorted distinct ends of its
	// accesses; a space whose accesses all cover the same bytes (most:
	// buffers accessed whole) has those two, its first access's.
	if nvaried == 0 {
		v.bounds = first
		for sp := range v.spaces {
			v.spaces[sp].at, v.spaces[sp].n = 2*int32(sp), 2
		}
	} else {
		at := int32(0)
		for sp, s := range v.spaces {
			if varied[sp] {
				at += s.n
			} else {
				at += 2
			}
		}
		v.bounds = make([]int64, at)
		at = 0
		for sp := range v.spaces {
			s := &v.spaces[sp]
			if varied[sp] {
				s.at, at, s.n = at, at+s.n, 0 // filled below
				continue
			}
			s.at, s.n = at, 2
			v.bounds[at], v.bounds[at+1] = first[2*sp], first[2*sp+1]
			at += 2
		}
		first = nil
		for k := range v.acc {
			a := &v.acc[k]
			if sp := v.space(a); varied[sp] {
				s := &v.spaces[sp]
				lo, hi := v.planBytes(int32(k))
				v.bounds[s.at+s.n], v.bounds[s.at+s.n+1] = lo, hi
				s.n += 2
			}
		}
		// Each varied space's distinct bounds, moved down to the end of
		// the previous space's.
		at = 0
		for k := range v.spaces {
			s := &v.spaces[k]
			b := v.bounds[s.at : s.at+s.n]
			if varied[k] {
				slices.Sort(b)
				b = slices.Compact(b)
			}
			copy(v.bounds[at:], b)
			s.at, s.n = at, int32(len(b))
			at += s.n
		}
		if int(at) < len(v.bounds)*3/4 {
			v.bounds = slices.Clone(v.bounds[:at])
		}
		v.bounds = v.bounds[:at]
		// The varied spaces' accesses in segment indices.
		for k := range v.acc {
			a := &v.acc[k]
			if sp := v.space(a); varied[sp] {
				s := v.spaces[sp]
				b := v.bounds[s.at : s.at+s.n]
				lo, hi := v.planBytes(int32(k))
				l, _ := slices.BinarySearch(b, lo)
				h, _ := slices.BinarySearch(b, hi)
				a.lo, a.hi = int32(l), int32(h)
			}
		}
	}
	v.segments = len(v.bounds) - len(v.spaces) // a segment fewer than bounds a space
	return nil
}

// frontiers makes the sweep's tables: a frontier slot per segment, and
// per access the marks of the checks (and its shadow), made as the sweep
// begins (after the arena check, for a derived plan, whose tables are
// gone by then).
func (v *verifier) frontiers() {
	p, n := v.p, len(v.acc)
	v.states = make([]*verifyState, v.segments)
	// A derived plan's verdict is all that is asked (report): it keeps
	// no shadows, which only serve to list every race.
	v.noShadows = p.Derived
	lists := 4
	if v.noShadows {
		lists = 1
	}
	v.checked = make([]int32, lists*n)
	for k := range v.checked {
		v.checked[k] = -1
	}
	if !v.noShadows {
		v.checked, v.shadowed, v.joined, v.shadow = v.checked[:n], v.checked[n:2*n], v.checked[2*n:3*n], v.checked[3*n:]
		v.links = make([]verifyLink, 0, n)
	}
	v.raceIdx = map[[3]int32]int{}
}

// clocks builds the plan's happens-before clocks (hbEdges) and each
// stage's launch op.
func (v *verifier) clocks() {
	p := v.p
	h := buildHB(p, hbAuto, v.maxSteps)
	v.hb = h
	if h.over {
		return
	}
	v.opBase, v.opStream, v.opIssue, v.opCaptured = h.opBase, h.opStream, h.opIssue, h.opCaptured
	v.launchOp = make([]int32, stageCount(p))
	if c := p.Ops; c != nil {
		for g, k := range c.Kind {
			if k == plan.OpLaunch {
				v.launchOp[c.Arg[g]] = int32(g)
			}
		}
		return
	}
	for s := range p.Streams {
		for j, o := range p.Streams[s].Ops {
			if o.Kind == plan.OpLaunch {
				v.launchOp[o.Stage] = h.opBase[s] + int32(j)
			}
		}
	}
}

// opIndex returns op g's index in its stream's ops.
func (v *verifier) opIndex(g int32) int32 { return g - v.opBase[v.opStream[g]] }

// stageHB reports whether stage i's launch happens-before stage j's launch
// (true for i == j).
func (v *verifier) stageHB(i, j int32) bool {
	return v.opHB(v.launchOp[i], v.launchOp[j])
}

// opHB reports whether op a happens-before op b, or is b: everything up to
// and including a on its stream completes before b starts.
func (v *verifier) opHB(a, b int32) bool { return v.hb.reach(a, b) }

func (v *verifier) accHB(a, d int32) bool {
	if !v.acc[d].write() {
		// A pageable source read when the host issues the copy.
		if after, ok := v.readAfter(v.launchOp[v.acc[a].stage], int(v.acc[d].stage)); ok {
			return after
		}
	}
	return v.stageHB(v.acc[a].stage, v.acc[d].stage) || !v.acc[a].write() && v.readsDone(a, d)
}

// sweep runs every access, in declaration order, against the frontier of
// the segments it touches.
func (v *verifier) sweep() {
	v.frontiers()
	for d := range v.acc {
		ad := &v.acc[d]
		x := v.space(ad)
		sp := v.spaces[x]
		states := v.states[sp.at-x : sp.at-x+sp.n-1]
		lo, hi := int(ad.lo), int(ad.hi)
		for k := lo; k < hi; {
			// A run of segments with the same frontier takes one step; a
			// frontier no other segment holds is updated in place.
			st := states[k]
			end := k + 1
			for end < hi && states[end] == st {
				end++
			}
			own := st != nil && int(st.refs) == end-k
			next := v.step(st, int32(d), own)
			if next != st {
				if st != nil {
					if st.refs -= int32(end - k); st.refs == 0 {
						v.free = append(v.free, st)
					}
				}
				next.refs += int32(end - k)
				for ; k < end; k++ {
					states[k] = next
				}
			}
			k = end
		}
		if sp.last == int32(d) {
			// No later access touches the space: its frontiers go to
			// the free list, for the spaces accessed later.
			for k, st := range states {
				if st != nil {
					if st.refs--; st.refs == 0 {
						v.free = append(v.free, st)
					}
					states[k] = nil
				}
			}
		}
		if len(v.races) >= verifyMaxRaces || v.racy {
			v.truncated = d < len(v.acc)-1
			return
		}
	}
}

// step checks access d against one segment's frontier st and returns the
// segment's frontier after d: st itself, changed, when own is set (no
// other segment holds st).
func (v *verifier) step(st *verifyState, d int32, own bool) *verifyState {
	ad := &v.acc[d]
	if st != nil {
		for _, a := range st.w {
			v.check(a, d)
		}
		if ad.write() {
			for _, a := range st.r {
				v.check(a, d)
			}
		}
	}
	if ad.write() {
		w, r := append(v.tmpW[:0], d), v.tmpR[:0]
		if st != nil {
			for _, a := range st.w {
				if v.accHB(a, d) {
					v.supersede(d, a)
				} else {
					w = append(w, a)
				}
			}
			for _, a := range st.r {
				if v.accHB(a, d) {
					v.supersede(d, a)
				} else {
					r = append(r, a)
				}
			}
		}
		v.tmpW, v.tmpR = w, r
		if own {
			st.w, st.r, st.byStream = append(st.w[:0], w...), append(st.r[:0], r...), nil
			return st
		}
		return v.state(w, r)
	}
	var w, r []int32
	if st != nil {
		w, r = st.w, st.r
	}
	ld := v.launchOp[ad.stage]
	sd := v.opStream[ld]
	k := v.readOf(st, sd)
	if k < 0 {
		if own {
			st.r = append(st.r, d)
			if st.byStream != nil {
				st.byStream[sd] = int32(len(st.r) - 1)
			}
			return st
		}
		nr := append(append(v.tmpR[:0], r...), d)
		v.tmpR = nr
		return v.state(w, nr)
	}
	a := r[k]
	if v.launchOp[v.acc[a].stage] >= ld { // d is before a (or of a's stage) on their stream (numbered in its order)
		if !v.noShadows && v.joined[a] != d {
			v.joined[a] = d
			v.link(a, d)
		}
		return st
	}
	v.supersede(d, a)
	if own {
		st.r[k] = d
		return st
	}
	nr := append(v.tmpR[:0], r...)
	nr[k] = d
	v.tmpR = nr
	return v.state(w, nr)
}

// readOf returns the position in st.r of the read on stream s, or -1. A
// frontier of many reads keeps an index by stream.
func (v *verifier) readOf(st *verifyState, s int32) int {
	if st == nil {
		return -1
	}
	stream := func(a int32) int32 { return v.opStream[v.launchOp[v.acc[a].stage]] }
	if len(st.r) < 16 {
		for k, a := range st.r {
			if stream(a) == s {
				return k
			}
		}
		return -1
	}
	if st.byStream == nil {
		st.byStream = make(map[int32]int32, len(st.r))
		for k, a := range st.r {
			st.byStream[stream(a)] = int32(k)
		}
	}
	if k, ok := st.byStream[s]; ok {
		return int(k)
	}
	return -1
}

// state returns a new frontier holding copies of w and r (w is shared as
// is when it is the pool's already).
func (v *verifier) state(w, r []int32) *verifyState {
	if k := len(v.free) - 1; k >= 0 {
		// A frontier's lists are its own (ints copies): reused as they are.
		st := v.free[k]
		v.free = v.free[:k]
		st.w, st.r, st.byStream = append(st.w[:0], w...), append(st.r[:0], r...), nil
		return st
	}
	if len(v.slab) == 0 {
		v.slab = make([]verifyState, 1024)
	}
	st := &v.slab[0]
	v.slab = v.slab[1:]
	st.w, st.r = v.ints(w), v.ints(r)
	return st
}

// ints copies x into the pool.
func (v *verifier) ints(x []int32) []int32 {
	if len(x) == 0 {
		return nil
	}
	if len(v.pool) < len(x) {
		v.pool = make([]int32, max(1<<14, len(x)))
	}
	out := v.pool[:len(x):len(x)]
	v.pool = v.pool[len(x):]
	copy(out, x)
	return out
}

// link adds b to a's shadow.
func (v *verifier) link(a, b int32) {
	v.links = append(v.links, verifyLink{acc: b, next: v.shadow[a]})
	v.shadow[a] = int32(len(v.links) - 1)
}

// supersede moves a, which happens-before d, into d's shadow.
func (v *verifier) supersede(d, a int32) {
	if v.noShadows || v.shadowed[a] == d {
		return
	}
	v.shadowed[a] = d
	v.link(d, a)
}

// check tests frontier access a against d (a conflicting pair of different
// stages unless a == d's stage) and, if they race, searches a's shadow.
func (v *verifier) check(a, d int32) {
	if v.checked[a] == d {
		return
	}
	v.checked[a] = d
	if v.acc[a].stage == v.acc[d].stage || v.accHB(a, d) {
		return
	}
	v.report(a, d)
	if v.noShadows {
		return // a derived plan: the verdict is known
	}
	stack := []int32{a}
	dw := v.acc[d].write()
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for l := v.shadow[x]; l >= 0; l = v.links[l].next {
			b := v.links[l].acc
			if v.checked[b] == d {
				continue
			}
			v.checked[b] = d
			ab := &v.acc[b]
			if ab.stage == v.acc[d].stage || !v.overlap(b, d) || v.accHB(b, d) {
				continue
			}
			if !ab.write() && !dw {
				continue // reads' shadows hold only reads
			}
			v.report(b, d)
			stack = append(stack, b)
		}
	}
}

func (v *verifier) overlap(a, b int32) bool {
	x, y := &v.acc[a], &v.acc[b]
	return v.space(x) == v.space(y) && x.lo < y.hi && y.lo < x.hi
}

// report records the race between earlier access a and access d.
func (v *verifier) report(a, d int32) {
	if v.p.Derived {
		v.racy = true // the caller verifies the plan with names to report
		return
	}
	x, y := &v.acc[a], &v.acc[d]
	kind := plan.RaceWAR
	switch {
	case x.write() && y.write():
		kind = plan.RaceWAW
	case x.write():
		kind = plan.RaceRAW
	}
	// x and y are of one space: its bounds are in order.
	s := v.spaces[v.space(x)]
	lo, hi := v.bounds[s.at+max(x.lo, y.lo)], v.bounds[s.at+min(x.hi, y.hi)]
	key := [3]int32{x.stage, y.stage, v.space(x)}
	if k, ok := v.raceIdx[key]; ok {
		r := &v.races[k]
		if verifyKindRank(kind) > verifyKindRank(r.Kind) {
			r.Kind = kind
		}
		end := max(r.Offset+r.Bytes, hi)
		r.Offset = min(r.Offset, lo)
		r.Bytes = end - r.Offset
		return
	}
	p := v.p
	i, j := int(x.stage), int(y.stage)
	v.raceIdx[key] = len(v.races)
	v.races = append(v.races, Race{
		First: i, Second: j,
		FirstName: p.Stages[i].Name, SecondName: p.Stages[j].Name,
		FirstStream: p.Stages[i].Stream, SecondStream: p.Stages[j].Stream,
		FirstStreamName: p.Streams[p.Stages[i].Stream].Name, SecondStreamName: p.Streams[p.Stages[j].Stream].Name,
		Buffer: v.bufName[x.buf()], Offset: lo, Bytes: hi - lo,
		Kind:     kind,
		Reversed: v.stageHB(y.stage, x.stage),
	})
}

func verifyKindRank(k string) int {
	switch k {
	case plan.RaceWAW:
		return 2
	case plan.RaceRAW:
		return 1
	}
	return 0
}

// fix says how to order race r. With detail, it looks for the usual
// mistakes first: a wait issued before the record it needs, a wait placed
// after the launch it should guard, a wait that orders the pair backwards.
func (v *verifier) fix(r *Race, detail bool) string {
	if r.Shared != "" {
		return v.arenaFix(r) // arena_verify.go
	}
	p := v.p
	li, lj := v.launchOp[r.First], v.launchOp[r.Second]
	a, b := r.FirstStream, r.SecondStream
	sa, sb := streamLabel(r.FirstStreamName, a), streamLabel(r.SecondStreamName, b)
	generic := fmt.Sprintf("record an event on stream %s after %s and wait on it on stream %s before %s", sa, r.FirstName, sb, r.SecondName)
	if a == b {
		return fmt.Sprintf("launch %s before %s on stream %s (declaration order)", r.FirstName, r.SecondName, sa)
	}
	if !detail {
		if r.Reversed {
			return "remove what orders " + r.SecondName + " before " + r.FirstName + ", then " + generic
		}
		return generic
	}
	ops := p.Streams
	if r.Reversed {
		// The first wait on a before First whose clock covers Second.
		for g := v.opBase[a]; g < li; g++ {
			o := ops[a].Ops[v.opIndex(g)]
			if o.Kind == plan.OpWait && v.opHB(lj, g) {
				return fmt.Sprintf("stream %s waits on e%d before %s, which orders it after %s; remove that ordering, then %s",
					sa, o.Event, r.FirstName, r.SecondName, generic)
			}
		}
		return "remove what orders " + r.SecondName + " before " + r.FirstName + ", then " + generic
	}
	// A wait before Second on its stream whose event is recorded after
	// First, but issued only after the wait (the wait-before-record trap).
	for g := v.opBase[b]; g < lj; g++ {
		o := ops[b].Ops[v.opIndex(g)]
		if o.Kind != plan.OpWait {
			continue
		}
		for _, h := range v.records[o.Event] {
			if v.opIssue[h] > v.opIssue[g] && v.opHB(li, h) && !v.opHB(lj, h) {
				return fmt.Sprintf("the wait on e%d (stream %s) is issued before its record (stream %s, after %s): move the record earlier in the issue order, before the wait",
					o.Event, sb, streamLabel(p.Streams[v.opStream[h]].Name, int(v.opStream[h])), r.FirstName)
			}
		}
	}
	// A wait after Second that would have ordered it.
	for g := lj + 1; g < v.opBase[b+1]; g++ {
		o := ops[b].Ops[v.opIndex(g)]
		if o.Kind == plan.OpWait && v.opCaptured[g] >= 0 && v.opHB(li, v.opCaptured[g]) {
			return fmt.Sprintf("the wait on e%d on stream %s comes after %s: move it before %s's launch", o.Event, sb, r.SecondName, r.SecondName)
		}
	}
	return generic
}

// streamLabel names a stream in messages: its plan name when it has one, else
// its id.
func streamLabel(name string, id int) string {
	if name == "" {
		return fmt.Sprint(id)
	}
	return name
}
