package trace

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"strconv"
)

// chromePID is the process id of every event; the process is named "dagrun".
const chromePID = 1

// flowInsetUS is how far inside a span (µs) its flow events sit, so that the
// viewers bind them to that span and not to a neighbour that ends or starts
// at the same instant: 1 ns, or half the span if it is shorter than 2 ns.
const flowInsetUS = 0.001

// chromeEvent is one entry of the traceEvents array. Field order is the
// output order.
type chromeEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	TS   *float64       `json:"ts,omitempty"`
	Dur  *float64       `json:"dur,omitempty"`
	ID   int            `json:"id,omitempty"`
	BP   string         `json:"bp,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// TID is the Chrome trace thread id of stream s: s+1, because Perfetto
// treats tid 0 as the idle task.
func TID(stream int) int { return stream + 1 }

// WriteChromeTrace writes t as Chrome trace-event JSON, the
// {"traceEvents": [...]} object format that Perfetto (ui.perfetto.dev) and
// chrome://tracing open (format: "Trace Event Format", Google, 2016 —
// https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).
//
// All events belong to process 1, named "dagrun". Stream s is thread TID(s)
// with a thread_name metadata event (the lane name) and a thread_sort_index
// of s, so lanes appear in stream order. Each span is a complete event
// ("ph":"X", ts and dur in µs, args {"stage": index}, category "stage").
// Each flow whose two stages have spans is a flow pair with a shared id,
// category "wait", named "e<event>": "s" on the producer's lane at its end
// and "f" with "bp":"e" on the consumer's lane at its start. Both sit 1 ns
// inside their span so that viewers bind them to it rather than to a
// back-to-back neighbour. Times are rounded to the nanosecond.
//
// The output is deterministic: metadata by stream, spans by (stream, start,
// stage), then flow pairs in t.Flows order with ids 1, 2, .... It returns
// an error for a span on a stream outside t.Streams, a non-finite time or
// a negative duration, and any error from w.
func (t *Timeline) WriteChromeTrace(w io.Writer) error {
	if err := t.Check(); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	first := true
	var werr error
	emit := func(e chromeEvent) {
		if werr != nil {
			return
		}
		b, err := json.Marshal(e)
		if err != nil {
			werr = err
			return
		}
		if !first {
			bw.WriteString(",\n")
		}
		first = false
		_, werr = bw.Write(b)
	}

	bw.WriteString(`{"traceEvents":[` + "\n")
	emit(chromeEvent{Name: "process_name", Ph: "M", PID: chromePID, Args: map[string]any{"name": "dagrun"}})
	if t.Title != "" {
		emit(chromeEvent{Name: "process_labels", Ph: "M", PID: chromePID, Args: map[string]any{"labels": t.Title}})
	}
	for s, name := range t.Streams {
		emit(chromeEvent{Name: "thread_name", Ph: "M", PID: chromePID, TID: TID(s), Args: map[string]any{"name": name}})
		emit(chromeEvent{Name: "thread_sort_index", Ph: "M", PID: chromePID, TID: TID(s), Args: map[string]any{"sort_index": s}})
	}

	order := t.LaneOrder()
	for _, i := range order {
		s := &t.Spans[i]
		ts, dur := roundNS(s.StartUS), roundNS(roundNS(s.EndUS)-roundNS(s.StartUS))
		emit(chromeEvent{Name: s.Name, Cat: "stage", Ph: "X", PID: chromePID, TID: TID(s.Stream),
			TS: &ts, Dur: &dur, Args: map[string]any{"stage": s.Stage}})
	}

	for k, df := range t.DrawnFlows() {
		f := t.Flows[df.Flow]
		from, to := &t.Spans[df.From], &t.Spans[df.To]
		name := "e" + strconv.Itoa(f.Event)
		sTS := roundNS(from.EndUS - inset(*from))
		fTS := roundNS(to.StartUS + inset(*to))
		emit(chromeEvent{Name: name, Cat: "wait", Ph: "s", PID: chromePID, TID: TID(from.Stream), TS: &sTS, ID: k + 1})
		emit(chromeEvent{Name: name, Cat: "wait", Ph: "f", PID: chromePID, TID: TID(to.Stream), TS: &fTS, ID: k + 1, BP: "e"})
	}
	if werr != nil {
		return werr
	}
	bw.WriteString("\n],\"displayTimeUnit\":\"ns\"}\n")
	return bw.Flush()
}

// inset is how far inside span s its flow events sit, in µs.
func inset(s Span) float64 { return math.Min(flowInsetUS, s.DurationUS()/2) }

// roundNS rounds µs to whole nanoseconds (and -0 to 0).
func roundNS(us float64) float64 { return math.Round(us*1000)/1000 + 0 }
