package planner

import "time"

// stats fills Plan.Stats: counts, the reduced graph's size, Nimble's lower
// bound on waits (reduced edges − maximum matching), the critical path, the
// one-stream time, the simulated ideal makespan and the planning time.
// Durations of 0 count as 1 µs throughout.
func stats(st *state) error {
	p := st.plan
	if st.red == nil { // manual specs skip reduce; the bound still needs it
		if err := reduce(st); err != nil {
			return err
		}
	}
	if st.matching < 0 {
		st.matching = newMatcher(st.n, st.red).match(st.topo)
	}
	s := &p.Stats
	s.Stages = len(p.Stages)
	s.Streams = len(p.Streams)
	s.Events = p.Events
	s.Waits = 0
	for _, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == OpWait {
				s.Waits++
			}
		}
	}
	s.ReducedEdges = st.red.edges()
	s.LowerBoundWaits = s.ReducedEdges - st.matching
	s.CrossStreamEdges = 0
	for u := 0; u < st.n; u++ {
		for _, v := range st.red.row(u) {
			if p.Stages[u].Stream != p.Stages[v].Stream {
				s.CrossStreamEdges++
			}
		}
	}
	_, eft := st.asap()
	s.CriticalPathUS, s.SumUS = 0, 0
	for v := range eft {
		s.CriticalPathUS = max(s.CriticalPathUS, eft[v])
		s.SumUS += st.dur[v]
	}
	s.IdealMakespanUS = idealMakespan(p, st.dur)
	s.PlanningMS = float64(time.Since(st.start).Nanoseconds()) / 1e6
	return nil
}

// idealMakespan is the latest end of idealSchedule(p, dur), in µs.
func idealMakespan(p *Plan, dur []float64) float64 {
	_, end := idealSchedule(p, dur)
	var m float64
	for _, e := range end {
		m = max(m, e)
	}
	return m
}

// idealSchedule simulates p with durations dur (µs per stage), no launch
// cost and unlimited hardware, and returns each stage's start and end: ops
// are taken in issue order; a launch starts when its stream's previous op is
// done, a wait holds the stream until the latest record of its event issued
// before it has completed (no such record: no effect, as in CUDA), and a
// record completes with the stream's previous op.
func idealSchedule(p *Plan, dur []float64) (start, end []float64) {
	start = make([]float64, len(p.Stages))
	end = make([]float64, len(p.Stages))
	clock := make([]float64, len(p.Streams))
	rec := make([]float64, p.Events)
	recorded := make([]bool, p.Events)
	for _, so := range p.IssueOrder {
		s := so[0]
		o := p.Streams[s].Ops[so[1]]
		switch o.Kind {
		case OpLaunch:
			start[o.Stage] = clock[s]
			clock[s] += dur[o.Stage]
			end[o.Stage] = clock[s]
		case OpRecord:
			rec[o.Event], recorded[o.Event] = clock[s], true
		case OpWait:
			if recorded[o.Event] {
				clock[s] = max(clock[s], rec[o.Event])
			}
		}
	}
	return start, end
}
