// Package trace turns a run of a plan into a timeline — one lane per stream,
// one span per stage, one flow arrow per cross-stream wait — and writes it as
// Chrome trace-event JSON (for Perfetto or chrome://tracing). Package
// tracepng draws it as a PNG with gonum.org/v1/plot, for machines where no
// trace viewer is reachable; it is apart so that what imports trace (the
// root package's Run, through RunResult.Timeline) does not link the
// plotting library.
//
// Spans come from the executor's timed events (profile mode) or, without a
// GPU, from Ideal, the planner's simulation of the plan with each stage's
// duration_us (plan.IdealSchedule, the schedule behind
// Stats.IdealMakespanUS):
//
//	tl := trace.FromPlan(p, trace.Ideal(p))
//	err := tl.WriteChromeTrace(w)
//	err = tracepng.Write(tl, "plan.png", 0, 0) // a PNG; sizes chosen from the lane count
//
// Times are float64 microseconds from the start of the run.
package trace
