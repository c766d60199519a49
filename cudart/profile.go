//go:build cuda

// Stage timings (executor.Profiler): the timed events recorded around the
// launches, read back after a run as StageTimes and StageSpans.

package cudart

import (
	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/executor"
)

type profRec struct {
	stage      string
	idx        int // stage index (LaunchDesc.Stage)
	start, end cu.Event
}

// StageTimes returns, with Options.Profile, the GPU time in ms of each stage
// launched since the last call, summed by stage name; it is filled in by
// Synchronize.
func (b *backend) StageTimes() map[string]float64 {
	var out map[string]float64
	b.call("stage times", func(w *worker) error {
		out = w.times
		w.times = map[string]float64{}
		return nil
	})
	return out
}

func (w *worker) timedEvent() (cu.Event, error) {
	if n := len(w.evPool); n > 0 {
		e := w.evPool[n-1]
		w.evPool = w.evPool[:n-1]
		return e, nil
	}
	e, err := cu.MakeEvent(cu.DefaultEvent)
	return e, wrap(err, "cuEventCreate (timed)")
}

// collectProfile reads the timed events of the stages run since the last
// Synchronize (in stream mode, and of the last replay of each profiled graph)
// into times and spans, and recycles the stream-mode events.
func (w *worker) collectProfile() error {
	add := func(origin *cu.Event, recs []profRec) {
		for _, p := range recs {
			ms, err := p.start.Elapsed(p.end)
			if err != nil {
				continue
			}
			w.times[p.stage] += ms
			if origin == nil {
				continue
			}
			s0, err1 := origin.Elapsed(p.start)
			s1, err2 := origin.Elapsed(p.end)
			if err1 == nil && err2 == nil {
				w.spans = append(w.spans, executor.StageSpan{Stage: p.idx, Name: p.stage, StartUS: s0 * 1000, EndUS: max(s1, s0) * 1000})
			}
		}
	}
	var origin *cu.Event
	if w.hasOrigin {
		origin = &w.origin
	}
	add(origin, w.prof)
	for _, p := range w.prof {
		w.evPool = append(w.evPool, p.start, p.end)
	}
	w.prof = w.prof[:0]
	if w.hasOrigin {
		w.evPool = append(w.evPool, w.origin)
		w.hasOrigin = false
	}
	var err error
	if sb := w.b.stamps; sb != nil {
		err = w.readStamps(sb, true)
	}
	for _, g := range w.timedGraphs {
		if g.timed {
			add(&g.start, g.prof)
		}
		if g.stamps != nil && err == nil {
			err = w.readStamps(g.stamps, false)
		}
	}
	w.timedGraphs = w.timedGraphs[:0]
	return err
}

// StageSpans returns, with Options.Profile, the stage spans gathered by the
// Synchronize calls since the last call (executor.Profiler). In stream mode
// they are µs from a timed event recorded just before the first stage issued
// after the previous Synchronize; in graph mode, from the graph's first
// node, for the last replay before each Synchronize. A stage's span covers
// all its work (a mix stage's snapshot copies, a checksum's zeroing).
func (b *backend) StageSpans() []executor.StageSpan {
	var out []executor.StageSpan
	b.call("stage spans", func(w *worker) error {
		out = w.spans
		w.spans = nil
		return nil
	})
	return out
}

var _ executor.Profiler = (*backend)(nil)
