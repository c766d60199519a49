package trace

import (
	"fmt"
	"math"
	"sort"

	"github.com/dagrun/dagrun/plan"
)

// Timeline is what a run looked like: named lanes (streams), the stages' spans
// on them and the waits between them. It is plain data; build it with FromPlan
// or by hand.
type Timeline struct {
	Title string
	// Streams are the lane names; the index is the stream id (Span.Stream).
	Streams []string
	Spans   []Span
	Flows   []Flow
}

// Span is one stage's execution on its stream. StartUS and EndUS are
// microseconds from the start of the run, StartUS ≤ EndUS.
type Span struct {
	Name    string
	Stage   int // index into the plan's stages
	Stream  int // index into Timeline.Streams
	StartUS float64
	EndUS   float64
	// Iteration is the iteration of the run the span belongs to (0 for
	// a timeline of one iteration).
	Iteration int
}

// DurationUS is EndUS − StartUS, in µs.
func (s Span) DurationUS() float64 { return s.EndUS - s.StartUS }

// Flow is one wait of the plan: stage ToStage's stream waits on Event, which
// was recorded after stage FromStage. It is drawn from the end of FromStage's
// span to the start of ToStage's span.
type Flow struct {
	FromStage, ToStage int
	Event              int
	// Iteration is ToStage's iteration; FromIteration is FromStage's,
	// earlier by the wait's lag (0 for a wait in one iteration).
	Iteration, FromIteration int
}

// FromPlan builds the timeline of plan p with the given spans (which it
// copies). Lanes are p.Streams, named by Stream.Name ("stream N" when empty),
// with the device in a plan of several ("s1 · device 1"); the title is the
// spec name and strategy.
//
// Flows come from the plan's record and wait ops, walked in p.IssueOrder with
// CUDA's event semantics: a wait on event e pairs with the latest record of e
// issued before it. The producer is the last launch before that record on the
// recording stream; the consumer is the first launch after the wait on the
// waiting stream. A wait that pairs with no record (it waits for nothing), a
// record with no launch before it, or a wait with no launch after it gives no
// flow. Flows are in issue order of their waits. Ops with out-of-range stream,
// op, stage or event indices are skipped; run p.Validate first to reject them.
func FromPlan(p *plan.Plan, spans []Span) *Timeline {
	t := &Timeline{
		Title:   p.Spec,
		Streams: make([]string, len(p.Streams)),
		Spans:   append([]Span(nil), spans...),
	}
	if p.Strategy != "" {
		if t.Title != "" {
			t.Title += " "
		}
		t.Title += "(" + p.Strategy + ")"
	}
	for i, s := range p.Streams {
		t.Streams[i] = s.Name
		if s.Name == "" {
			t.Streams[i] = fmt.Sprintf("stream %d", i)
		}
		if p.DeviceCount() > 1 && !s.Host {
			t.Streams[i] += fmt.Sprintf(" · device %d", s.Device)
		}
	}

	lastLaunch := make([]int, len(p.Streams))    // per stream: last stage launched so far, -1 if none
	pendingWait := make([][]int, len(p.Streams)) // per stream: producers of waits not yet followed by a launch
	pendingEvt := make([][]int, len(p.Streams))  // their events
	for i := range lastLaunch {
		lastLaunch[i] = -1
	}
	recordedAfter := make([]int, p.Events) // per event: producer stage of its latest record, -1 if none
	for i := range recordedAfter {
		recordedAfter[i] = -1
	}
	pendingLag := make([][]int, len(p.Streams)) // their lags
	// The producer of each event's last record, for waits with a lag
	// (their record was issued in an earlier iteration).
	producer := make([]int, p.Events)
	for i := range producer {
		producer[i] = -1
	}
	for _, str := range p.Streams {
		last := -1
		for _, o := range str.Ops {
			switch {
			case o.Kind == plan.OpLaunch && o.Stage >= 0 && o.Stage < len(p.Stages):
				last = o.Stage
			case o.Kind == plan.OpRecord && o.Event >= 0 && o.Event < p.Events && last >= 0:
				producer[o.Event] = last
			}
		}
	}
	var flows []Flow // of one iteration; FromIteration holds −lag
	for _, so := range p.IssueOrder {
		op, ok := opAt(p, so)
		if !ok {
			continue
		}
		s := so[0]
		switch op.Kind {
		case plan.OpLaunch:
			if op.Stage < 0 || op.Stage >= len(p.Stages) {
				continue
			}
			for k, from := range pendingWait[s] {
				flows = append(flows, Flow{FromStage: from, ToStage: op.Stage, Event: pendingEvt[s][k], FromIteration: -pendingLag[s][k]})
			}
			pendingWait[s], pendingEvt[s], pendingLag[s] = pendingWait[s][:0], pendingEvt[s][:0], pendingLag[s][:0]
			lastLaunch[s] = op.Stage
		case plan.OpRecord:
			if op.Event >= 0 && op.Event < p.Events {
				recordedAfter[op.Event] = lastLaunch[s]
			}
		case plan.OpWait:
			if op.Event < 0 || op.Event >= p.Events {
				continue
			}
			from := recordedAfter[op.Event]
			if op.Lag > 0 {
				from = producer[op.Event]
			}
			if from >= 0 {
				pendingWait[s] = append(pendingWait[s], from)
				pendingEvt[s] = append(pendingEvt[s], op.Event)
				pendingLag[s] = append(pendingLag[s], op.Lag)
			}
		}
	}
	// Each iteration of the spans gets the plan's flows; a flow whose
	// producer's iteration has no spans (before the first) is left out.
	its := map[int]bool{}
	for _, sp := range spans {
		its[sp.Iteration] = true
	}
	if len(its) == 0 {
		its[0] = true
	}
	order := make([]int, 0, len(its))
	for it := range its {
		order = append(order, it)
	}
	sort.Ints(order)
	for _, it := range order {
		for _, f := range flows {
			f.Iteration, f.FromIteration = it, it+f.FromIteration
			if f.FromIteration != it && !its[f.FromIteration] {
				continue
			}
			t.Flows = append(t.Flows, f)
		}
	}
	return t
}

// Iterations is the number of distinct iterations of t's spans (1 for a
// timeline of one iteration, 0 without spans).
func (t *Timeline) Iterations() int {
	its := map[int]bool{}
	for _, s := range t.Spans {
		its[s.Iteration] = true
	}
	return len(its)
}

// Ideal returns plan p's ideal timeline, one span per launched stage,
// ordered by stage index, starting at 0 µs: the times of
// plan.IdealSchedule (each stage takes its DurationUS, a duration of 0
// or less counting as 1 µs; no launch or event cost; unlimited hardware;
// ops in issue order with CUDA's event semantics; waits with a lag, which
// order earlier iterations, left out). Its Makespan is the planner's
// Stats.IdealMakespanUS. Invalid indices are skipped, as in FromPlan.
func Ideal(p *plan.Plan) []Span {
	start, end := plan.IdealSchedule(p)
	var spans []Span
	for _, so := range p.IssueOrder {
		op, ok := opAt(p, so)
		if !ok || op.Kind != plan.OpLaunch || op.Stage < 0 || op.Stage >= len(p.Stages) {
			continue
		}
		spans = append(spans, Span{Name: p.Stages[op.Stage].Name, Stage: op.Stage, Stream: so[0], StartUS: start[op.Stage], EndUS: end[op.Stage]})
	}
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].Stage < spans[j].Stage })
	return spans
}

// Makespan is the largest EndUS of spans (0 for none): the run's length in µs
// when spans are measured from its start.
func Makespan(spans []Span) float64 {
	m := 0.0
	for _, s := range spans {
		m = math.Max(m, s.EndUS)
	}
	return m
}

// opAt returns the op that an issue-order entry names, ok=false when the entry
// is out of range.
func opAt(p *plan.Plan, so [2]int) (plan.Op, bool) {
	s, j := so[0], so[1]
	if s < 0 || s >= len(p.Streams) || j < 0 || j >= len(p.Streams[s].Ops) {
		return plan.Op{}, false
	}
	return p.Streams[s].Ops[j], true
}

// Check returns an error naming the first span that cannot be drawn: a
// stream outside the lanes, a non-finite time or an end before its start.
// WriteChromeTrace and the picture writers (package tracepng) check first.
func (t *Timeline) Check() error {
	for i, s := range t.Spans {
		if s.Stream < 0 || s.Stream >= len(t.Streams) {
			return fmt.Errorf("trace: span %d (%s, stage %d) is on stream %d, timeline has %d streams", i, s.Name, s.Stage, s.Stream, len(t.Streams))
		}
		if math.IsNaN(s.StartUS) || math.IsInf(s.StartUS, 0) || math.IsNaN(s.EndUS) || math.IsInf(s.EndUS, 0) {
			return fmt.Errorf("trace: span %d (%s, stage %d) has time [%g, %g] µs, want finite", i, s.Name, s.Stage, s.StartUS, s.EndUS)
		}
		if s.EndUS < s.StartUS {
			return fmt.Errorf("trace: span %d (%s, stage %d) ends at %g µs before it starts at %g µs", i, s.Name, s.Stage, s.EndUS, s.StartUS)
		}
	}
	return nil
}

// LaneOrder returns the indices of t.Spans lane by lane: by stream, then
// start time (µs), then stage. The Chrome trace writes its complete events
// in this order and the PNG draws its bars in it.
func (t *Timeline) LaneOrder() []int {
	order := make([]int, len(t.Spans))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := &t.Spans[order[a]], &t.Spans[order[b]]
		if x.Stream != y.Stream {
			return x.Stream < y.Stream
		}
		if x.StartUS != y.StartUS {
			return x.StartUS < y.StartUS
		}
		return x.Stage < y.Stage
	})
	return order
}

// spanOfStage maps a (stage index, iteration) to the index of its first
// span in t.Spans; flows attach to that span.
func (t *Timeline) spanOfStage() map[[2]int]int {
	m := make(map[[2]int]int, len(t.Spans))
	for i, s := range t.Spans {
		k := [2]int{s.Stage, s.Iteration}
		if _, ok := m[k]; !ok {
			m[k] = i
		}
	}
	return m
}

// DrawnFlows returns the flows whose two stages both have a span in the
// flow's iterations, as pairs of span indices (producer, consumer), with
// the flow's index in t.Flows: the arrows a picture of t draws.
func (t *Timeline) DrawnFlows() []DrawnFlow {
	at := t.spanOfStage()
	var out []DrawnFlow
	for i, f := range t.Flows {
		from, ok1 := at[[2]int{f.FromStage, f.FromIteration}]
		to, ok2 := at[[2]int{f.ToStage, f.Iteration}]
		if ok1 && ok2 {
			out = append(out, DrawnFlow{Flow: i, From: from, To: to})
		}
	}
	return out
}

// DrawnFlow is a flow a picture draws: Flow indexes Timeline.Flows, From
// and To index Timeline.Spans (the producer's span and the consumer's).
type DrawnFlow struct{ Flow, From, To int }
