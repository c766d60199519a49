package verify

import "github.com/dagrun/dagrun/plan"

// Internals for the tests of package verify_test, which build their plans
// with the planner.

var (
	HBEdges        = hbEdges
	BuildHB        = buildHB
	WithWaits      = withWaits
	ClonePlan      = clonePlan
	AddWait        = addWait
	LifetimeGaps   = lifetimeGaps
	NewFix         = newFix
	SpecStageName  = specStageName
	VerifyWith     = verifyWith
	NewSiteWaits   = newSiteWaits
	VerifyKindRank = verifyKindRank
	WaitOps        = waitOps

	// Bounds and counters the tests set or read.
	VerifyMaxClock      = &verifyMaxClock
	VerifyMaxArenaPairs = &verifyMaxArenaPairs
	ArenaPairsLast      = &arenaPairsLast
	FixMaxWork          = &fixMaxWork
	FixSteps            = &fixSteps
)

const (
	HBAuto           = hbAuto
	VerifyMaxPrinted = verifyMaxPrinted
	VerifyMaxRaces   = verifyMaxRaces

	StrategyManual    = strategyManual
	StrategyHazardDAG = strategyHazardDAG
)

func (h *hbGraph) Steps() int64 { return h.steps }
func (h *hbGraph) Over() bool   { return h.over }

func (sw *siteWaits) Places(p *plan.Plan, w [2]int) [][2]int { return sw.places(p, w) }
