package executor

// The refusal of a plan whose iterations repeat only after more than
// MaxPeriod (phaseCount, lower.go).

import (
	"fmt"

	"github.com/dagrun/dagrun/plan"
)

// PeriodError is lowering's refusal of a run of several iterations of a
// plan whose iterations resolve streams, event slots and ring copies alike
// only after more than maxPhases (1024) iterations (the least common
// multiple of its stream sets, event slots and ring sizes), or whose
// phases take more than maxInstrs instructions. `dagrun check` gives the
// same refusal, before its verdict. Its fields name what takes the period
// past the bound, where one thing does.
type PeriodError struct {
	msg string
	// Stage and Stream name the wait whose lag (lag + 1 event slots) takes
	// the period past the bound: the wait before Stage's launch on Stream.
	// Source is Stage's position in its spec (file:line:col), "" when the
	// plan has none.
	Stage, Stream, Source string
	// Buffer names the ring whose copies take the period past the bound.
	Buffer string
}

func (e *PeriodError) Error() string { return e.msg }

// periodHint is what to do about a PeriodError.
const periodHint = "use fewer distinct ring sizes (copies), shorter lags (each event keeps lag + 1 slots) or fewer stream sets"

// periodTooLong is the PeriodError of a period of m past maxPhases. It
// names the first of the ring sizes, event slots and stream sets (in that
// order, as the planner derives stream sets and lags from rings; ring
// sizes alone in graph mode) at which their least common multiple passes
// the bound: a ring buffer, the wait with the longest lag of an event (the
// wait before which stage on which stream), or the stream sets, and says
// when that one is within the bound alone.
func periodTooLong(p *plan.Plan, m *plan.IterationMap, graph bool) error {
	e := &PeriodError{}
	l := 1 // the least common multiple so far
	// passes reports whether k takes l past the bound, and updates l.
	passes := func(k int) (bool, int) {
		before := l
		l = plan.LCM(maxPhases, l, []int{k})
		if k > maxPhases {
			before = 1 // past the bound alone
		}
		return l > maxPhases, before
	}
	what, before := "", 1
	for b := 0; what == "" && b < len(m.Copies); b++ {
		if ok, bf := passes(m.Copies[b]); ok {
			e.Buffer, before = p.Buffers[b].Name, bf
			what = fmt.Sprintf("buffer %s's %d ring copies", e.Buffer, m.Copies[b])
		}
	}
	for ev := 0; !graph && what == "" && ev < len(m.Slots); ev++ {
		ok, b := passes(m.Slots[ev])
		if !ok {
			continue
		}
		what, before = fmt.Sprintf("event e%d's %d slots", ev, m.Slots[ev]), b
		if w, st, lag := longestWait(p, ev); w >= 0 {
			e.Stage, e.Stream, e.Source = p.Stages[w].Name, p.Streams[st].Name, p.Stages[w].Source
			what = fmt.Sprintf("the wait of stage %s on stream %s on event e%d with lag %d (%d event slots)", e.Stage, e.Stream, ev, lag, m.Slots[ev])
		}
	}
	if !graph && what == "" {
		if ok, b := passes(len(m.Sets)); ok {
			what, before = fmt.Sprintf("its %d stream sets", len(m.Sets)), b
		}
	}
	kinds := "stream sets, event slots and ring sizes"
	if graph {
		kinds = "ring sizes (graph mode replays one iteration at a time)"
	}
	switch {
	case what == "":
		e.msg = fmt.Sprintf("executor: the plan's %s repeat only after more than %d iterations: %s", kinds, maxPhases, periodHint)
	case before == 1:
		e.msg = fmt.Sprintf("executor: the plan's %s repeat only after more than %d iterations, by %s: %s", kinds, maxPhases, what, periodHint)
	default:
		e.msg = fmt.Sprintf("executor: the plan's %s repeat only after more than %d iterations, by %s together with those before it (which repeat every %d iterations): %s", kinds, maxPhases, what, before, periodHint)
	}
	return e
}

// longestWait finds the wait on event ev with the longest lag: the stage
// whose launch follows it on its stream, that stream, and the lag; w is -1
// when no wait on ev has a lag (the executor's own slots, as a host wait
// across a ring, gave it its slots).
func longestWait(p *plan.Plan, ev int) (w, stream, lag int) {
	w = -1
	for si := range p.Streams {
		ops := p.Streams[si].Ops
		for i, o := range ops {
			if o.Kind != plan.OpWait || o.Event != ev || o.Lag <= lag {
				continue
			}
			for _, n := range ops[i+1:] {
				if n.Kind == plan.OpLaunch {
					w, stream, lag = n.Stage, si, o.Lag
					break
				}
			}
		}
	}
	return w, stream, lag
}
