package verify

import (
	"fmt"
	"strings"
)

// report writes e grouped by fix: one block per wait with the races it
// orders, then the races no wait fixes with their own advice.
func (e *RaceError) report(b *strings.Builder) {
	more := ""
	if e.Truncated {
		more = " or more"
	}
	fmt.Fprintf(b, "%d%s race%s", len(e.Races), more, plural(len(e.Races)))
	if len(e.Sites) > 0 && len(e.Sites) < len(e.Races) {
		fmt.Fprintf(b, " at %d site%s (each site: one hazard, buffer, pair of lines and streams)", len(e.Sites), plural(len(e.Sites)))
	}
	if len(e.Fixes) > 0 {
		verb := "fixes"
		if len(e.Fixes) > 1 {
			verb = "fix"
		}
		them := "them"
		if len(e.Races) == 1 {
			them = "it"
		}
		if e.Truncated {
			// The fixes order the races found; those past verifyMaxRaces
			// were never looked at, so more waits may be needed.
			verb, them = "fix", fmt.Sprintf("the first %d (the races past them are not listed and may need more waits: run check again after adding these)", len(e.Races))
			if len(e.Fixes) == 1 {
				verb = "fixes"
			}
		}
		fmt.Fprintf(b, "; %d wait%s %s %s", len(e.Fixes), plural(len(e.Fixes)), verb, them)
		if len(e.Unfixed) > 0 {
			fmt.Fprintf(b, "; %d other%s no one wait fixes (each with its advice, below)", len(e.Unfixed), plural(len(e.Unfixed)))
		}
	}
	if n := len(e.Handoffs); n > 0 {
		k := 0
		for _, h := range e.Handoffs {
			k += len(h.Races)
		}
		fmt.Fprintf(b, "; %d host handoff%s order%s %d of them", n, plural(n), map[bool]string{true: "s", false: ""}[n == 1], k)
	}
	switch {
	case e.FixesPartial:
		b.WriteString(" (the fix search stopped at its work bound: one wait per race it did not reach, so fewer may do)")
	case len(e.Fixes) > 1 && !e.FixesMinimal:
		b.WriteString(" (the fewest a greedy search found: proving that none fewer do is past the search's work bound, so fewer may do)")
	}
	if e.Unrolled {
		b.WriteString(", across iterations (stage@iteration, buffer#copy, stream/set)")
	}
	if e.LagsShortest {
		b.WriteString("; each lag is the shortest that orders its races (with more than 4 fixes or 32 iterations unrolled, lags are not lengthened), so a longer one may also do, with less order between iterations")
	}
	// An edit that would do instead of several fixes is said once, after
	// them (it orders each one's races, tried with that fix alone).
	instead := map[string][]int{}
	for i, f := range e.Fixes {
		if f.Instead != "" {
			instead[f.Instead] = append(instead[f.Instead], i)
		}
	}
	printed := 0
	for i, f := range e.Fixes {
		fmt.Fprintf(b, "\nfix %d", i+1)
		if f.Places > 1 {
			fmt.Fprintf(b, " (at %d places: each run of %s on stream %s waits on the latest run of %s on stream %s before it)",
				f.Places, SiteOf(f.BeforeName), f.WaitStream, SiteOf(f.AfterName), f.RecordStream)
		}
		text := f.String()
		if len(instead[f.Instead]) > 1 {
			text = f.edit()
		}
		fmt.Fprintf(b, ": %s\n  orders:", text)
		e.reportRaces(b, f.Races, "\n    ", true, &printed)
	}
	for i, f := range e.Fixes {
		if ks := instead[f.Instead]; len(ks) > 1 && ks[0] == i {
			nums := make([]string, len(ks))
			for j, k := range ks {
				nums[j] = fmt.Sprint(k + 1)
			}
			fmt.Fprintf(b, "\ninstead of fixes %s: %s", strings.Join(nums, ", "), f.Instead)
		}
	}
	// Races a handoff orders are listed under it, once.
	handed := map[int]bool{}
	for _, h := range e.Handoffs {
		for _, k := range h.Races {
			handed[k] = true
		}
	}
	var rest []int
	for _, k := range e.Unfixed {
		if !handed[k] {
			rest = append(rest, k)
		}
	}
	for _, h := range e.Handoffs {
		fmt.Fprintf(b, "\n%s\n  orders:", h)
		e.reportRaces(b, h.Races, "\n    ", true, &printed)
	}
	e.reportRaces(b, rest, "\n  ", false, &printed)
	e.reportLifetimes(b)
}

// reportRaces writes races ks, one line each (Race.pair with pairs, else
// Race.String, with its own fix), or one line per site (siteLineOf) for a
// site of several of them, up to verifyMaxPrinted lines in all (printed
// counts them).
func (e *RaceError) reportRaces(b *strings.Builder, ks []int, indent string, pairs bool, printed *int) {
	n := map[int]int{} // per site, its races among ks
	for _, k := range ks {
		if e.Races[k].Site < len(e.Sites) {
			n[e.Races[k].Site]++
		}
	}
	done := map[int]bool{}
	for j, k := range ks {
		r := e.Races[k]
		grouped := r.Site < len(e.Sites) && e.Sites[r.Site].Count > 1 && len(e.Sites) < len(e.Races)
		if grouped && done[r.Site] {
			continue
		}
		if *printed == verifyMaxPrinted {
			rest := 0
			for _, k2 := range ks[j:] {
				if r2 := e.Races[k2]; !(r2.Site < len(e.Sites) && done[r2.Site]) {
					rest++
				}
			}
			fmt.Fprintf(b, "%s… and %d more", indent, rest)
			return
		}
		b.WriteString(indent)
		if grouped {
			done[r.Site] = true
			b.WriteString(e.siteLineOf(r.Site, n[r.Site]))
			if ex := e.Races[e.Sites[r.Site].Example]; !pairs && ex.Fix != "" {
				b.WriteString("; fix, for the example: ")
				b.WriteString(ex.Fix)
			}
		} else if pairs {
			b.WriteString(r.pair())
		} else {
			b.WriteString(r.String())
		}
		*printed++
	}
}

func (e *RaceError) reportLifetimes(b *strings.Builder) {
	for _, g := range e.Lifetimes {
		b.WriteString("\n")
		b.WriteString(g.String())
	}
	e.reportCaptures(b)  // capture.go
	e.reportDeadlocks(b) // devices_verify.go
}

// pair describes a race without its fix: kind, bytes, first → second.
func (r Race) pair() string {
	s := fmt.Sprintf("%s on %s[%d:%d]: %s (stream %s) → %s (stream %s)", r.Kind, r.Buffer, r.Offset, r.Offset+r.Bytes,
		r.FirstName, streamLabel(r.FirstStreamName, r.FirstStream), r.SecondName, streamLabel(r.SecondStreamName, r.SecondStream))
	if r.Rule != "" {
		s += " (" + r.Rule + ")"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
