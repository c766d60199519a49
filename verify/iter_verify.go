package verify

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/dagrun/dagrun/plan"
)

// verifyIterations is Verify for a plan with iteration info. It first
// verifies one iteration alone (cross-iteration waits left out), so that
// races within an iteration are reported in the plan's own names; then the
// plan unrolled over UnrollIterations(p) iterations, whose races name
// stages as "NAME@i" (iteration i) and ring copies as "NAME#c", and whose
// fixes are waits across iterations: Fix.Lag iterations back. q is p
// unrolled without names over UnrollIterations(p) iterations (UnrollDerived).
func verifyIterations(p, q *plan.Plan, withFixes bool) error {
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
	if q, err = plan.UnrollDerived(p, plan.UnrollIterations(p), true); err != nil {
		return err
	}
	one := p.WithoutOps(func(_, _ int, o plan.Op) bool { return o.Lag > 0 })
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
func moreCopies(p *plan.Plan, races []Race, fixes []Fix, i int) string {
	if fixes[i].Lag == 0 || len(fixes) > 4 || plan.UnrollIterations(p) > 32 {
		return ""
	}
	bufs := map[int]bool{}
	for _, k := range fixes[i].Races {
		r := races[k]
		if r.Kind == plan.RaceRAW || r.Shared != "" {
			return ""
		}
		b := slices.IndexFunc(p.Buffers, func(b plan.Buffer) bool { return b.Name == BufferSiteOf(r.Buffer) })
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
func relaxRecords(p *plan.Plan, fixes []Fix) {
	if len(fixes) == 0 || len(fixes) > 4 || plan.UnrollIterations(p) > 32 {
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
			if ops[j].Kind != plan.OpLaunch {
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
func relaxLags(p *plan.Plan, fixes []Fix) bool {
	if len(fixes) == 0 {
		return true
	}
	if len(fixes) > 4 || plan.UnrollIterations(p) > 32 {
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
func existingLag(p *plan.Plan, x, y int) int {
	if _, lag, _, ok := existingWait(p, x, y); ok {
		return lag
	}
	return 0
}

// existingWait finds a wait op among those right before stage y's launch
// on an event recorded right after stage x's launch: its event, lag and
// index in y's stream's ops, the one with a lag first.
func existingWait(p *plan.Plan, x, y int) (ev, lag, at int, ok bool) {
	sx, sy := p.Stages[x].Stream, p.Stages[y].Stream
	jx, jy := streamPos(p, x), streamPos(p, y)
	after := map[int]bool{}
	for _, o := range p.Streams[sx].Ops[jx+1:] {
		if o.Kind != plan.OpRecord {
			break
		}
		after[o.Event] = true
	}
	for j := jy - 1; j >= 0; j-- {
		o := p.Streams[sy].Ops[j]
		if o.Kind != plan.OpWait {
			break
		}
		if after[o.Event] && (!ok || o.Lag > 0 && lag == 0) {
			ev, lag, at, ok = o.Event, o.Lag, j, true
		}
	}
	return ev, lag, at, ok
}
