package plan

// IdealMakespan is the latest end of IdealSchedule(p), in µs.
func IdealMakespan(p *Plan) float64 {
	_, end := IdealSchedule(p)
	var m float64
	for _, e := range end {
		m = max(m, e)
	}
	return m
}

// CostUS is the time in µs the planner counts for a stage of duration_us
// us: us itself, or 1 µs for a stage without one (0 or less), so that
// every stage lengthens the paths it is on.
func CostUS(us float64) float64 {
	if us <= 0 {
		return 1
	}
	return us
}

// IdealSchedule simulates one iteration of p with each stage taking its
// DurationUS, a duration of 0 or less counting as 1 µs (as everywhere in
// Stats), no launch or event cost and unlimited hardware, and returns each
// stage's start and end in µs from the start of the iteration. Its latest
// end is Stats.IdealMakespanUS; executor/trace draws it as the plan's
// timeline.
//
// Ops are taken in issue order: a launch starts when its stream's previous
// op is done; a record completes with the stream's previous op (it carries
// the stream's earlier waits); a wait holds its stream until the latest
// record of its event issued before it has completed, and does nothing
// when there is none (CUDA's semantics). A wait with a lag orders an
// earlier iteration and is left out, as in iteration 0. Ops, stages and
// events out of range are skipped; a stage that is not launched has start
// and end 0, and one launched twice the times of its last launch.
func IdealSchedule(p *Plan) (start, end []float64) {
	start = make([]float64, len(p.Stages))
	end = make([]float64, len(p.Stages))
	clock := make([]float64, len(p.Streams))
	rec := make([]float64, max(p.Events, 0))
	recorded := make([]bool, len(rec))
	for _, so := range p.IssueOrder {
		s, j := so[0], so[1]
		if s < 0 || s >= len(p.Streams) || j < 0 || j >= len(p.Streams[s].Ops) {
			continue
		}
		o := p.Streams[s].Ops[j]
		switch o.Kind {
		case OpLaunch:
			if o.Stage < 0 || o.Stage >= len(p.Stages) {
				continue
			}
			d := CostUS(p.Stages[o.Stage].DurationUS)
			start[o.Stage] = clock[s]
			clock[s] += d
			end[o.Stage] = clock[s]
		case OpRecord:
			if o.Event >= 0 && o.Event < len(rec) {
				rec[o.Event], recorded[o.Event] = clock[s], true
			}
		case OpWait:
			if o.Lag == 0 && o.Event >= 0 && o.Event < len(rec) && recorded[o.Event] {
				clock[s] = max(clock[s], rec[o.Event])
			}
		}
	}
	return start, end
}
