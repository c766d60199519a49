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

// verifyMaxHints bounds the races whose Fix is searched in detail (waits
// issued too early or placed too late); later ones get the generic fix.
const verifyMaxHints = 256

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
// streams² queries; the bound is a few seconds of them. Past it Verify
// refuses the plan (arenaBoundError). A variable for tests.
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
