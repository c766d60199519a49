package planner

import "github.com/dagrun/dagrun/plan"

// stats fills Plan.Stats: counts, the reduced graph's size, Nimble's lower
// bound on waits (reduced edges − maximum matching), the critical path, the
// one-stream time, and the simulated ideal makespan (Build stamps the planning time).
// Durations of 0 count as 1 µs throughout. docs/design/stats.md has the
// design.
func stats(st *state) error {
	p := st.plan
	if st.matching < 0 {
		// Pins and strategies aside, no stream chains stages of two
		// devices: the bound's matching keeps to one device, as the
		// path cover's does.
		m := newMatcher(st.n, st.red)
		if st.dev != nil {
			m.ok = st.sameDevice
		}
		st.matching = m.match(st.topo)
	}
	s := &p.Stats
	s.Stages = len(p.Stages)
	s.Streams = len(p.Streams)
	s.Events = p.Events
	s.Waits = 0
	for _, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == plan.OpWait && o.Lag == 0 {
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
	s.IdealMakespanUS = plan.IdealMakespan(p)
	return nil
}
