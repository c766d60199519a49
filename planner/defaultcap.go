package planner

import (
	"cmp"
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// Stream caps of Options.MaxStreams besides a positive cap.
const (
	// DefaultMaxStreams is the stream cap Build applies when neither the
	// options nor the spec set one (Options.MaxStreams 0, no max_streams),
	// for the default strategy of an automatically synchronized spec. The
	// value was chosen by measurement on an H200 (docs/performance.md,
	// "Default stream cap"): stream mode was never slower than one stream
	// on the eight model graphs at 8 (uncapped it was 1.67× slower on
	// nasnetalarge), graph mode within 2% of uncapped, and the device has
	// 8 hardware queues by default (CUDA_DEVICE_MAX_CONNECTIONS).
	DefaultMaxStreams = 8
	// Uncapped as Options.MaxStreams plans without a stream cap, whatever
	// the spec says (`--max-streams 0` on the command line). Any negative
	// value means the same.
	Uncapped = -1
)

// withDefaultCap returns o with DefaultMaxStreams applied where it
// applies, and whether it was.
func withDefaultCap(spec *dag.Spec, o Options) (Options, bool) {
	if DefaultMaxStreams == 0 || o.MaxStreams != 0 || spec.Options.MaxStreams != 0 || spec.Sync == dag.SyncManual {
		return o, false
	}
	if cmp.Or(o.Strategy, Strategy(spec.Options.Strategy), StrategyDefault) != StrategyDefault {
		return o, false
	}
	o.MaxStreams = DefaultMaxStreams
	return o, true
}

// capNote notes on p that the default cap folded its chains, where it
// did: how many chains the uncapped plan has (a minimum path cover has
// stages − its maximum matching chains; Stats.LowerBoundWaits is reduced
// edges − that matching), and what the cap costs: its ideal makespan
// against the critical path (µs). Both are the spec's own: with
// memory_budget steps, those of the plan before the first (p.BudgetStart),
// since the orders the steps added are the capped plan's, not the
// uncapped one's. The note names the setting in both the command line's
// and Go's words, as the plan is the same for both.
func capNote(p *plan.Plan) {
	st, own := p.Stats, p.Stats
	if p.BudgetStart != nil {
		own = *p.BudgetStart
	}
	chains := own.Stages - own.ReducedEdges + own.LowerBoundWaits
	if st.Streams < DefaultMaxStreams || chains <= st.Streams {
		return // the cap did not bind
	}
	cost := "the same ideal makespan as uncapped (the critical path)"
	if cp := own.CriticalPathUS; st.IdealMakespanUS > cp*1.0005 && cp > 0 {
		reach := "that the uncapped plan reaches"
		if p.BudgetStart != nil {
			reach = "of the spec, before memory_budget's orders (each budget step gives its own cost)"
		}
		cost = fmt.Sprintf("an ideal makespan of %.1f µs, %.2f× the critical path's %.1f µs %s", st.IdealMakespanUS, st.IdealMakespanUS/cp, cp, reach)
	}
	per := ""
	if p.DeviceCount() > 1 {
		per = " per device" // the fold caps each device's streams
	}
	uncapped := "plans uncapped"
	if int64(chains)*int64(st.Stages) >= uncappedWarn {
		uncapped = fmt.Sprintf("plans uncapped (%d streams over %d stages: the planner's and verifier's happens-before clocks grow with their product, so that plan takes far more time and memory than this one)",
			chains, st.Stages)
	}
	p.Notes = append(p.Notes, fmt.Sprintf("streams capped at %d%s by default (the uncapped plan has %d): %s; --max-streams 0 (in Go, MaxStreams: dagrun.Uncapped) %s, --max-streams N or the spec's max_streams sets another cap",
		DefaultMaxStreams, per, chains, cost, uncapped))
}

// uncappedWarn is the product of streams and stages of an uncapped plan
// from which capNote warns what planning it costs: 100,000,000 (layered
// 30k uncapped, 4,354 streams, is past it; layered 10k, 1,494, is not).
// A variable for tests.
var uncappedWarn int64 = 100_000_000
