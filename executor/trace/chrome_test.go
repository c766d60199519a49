package trace

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/executor/trace/internal/plantest"
)

type testEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat"`
	Ph   string         `json:"ph"`
	PID  *int           `json:"pid"`
	TID  *int           `json:"tid"`
	TS   *float64       `json:"ts"`
	Dur  *float64       `json:"dur"`
	ID   *int           `json:"id"`
	BP   string         `json:"bp"`
	Args map[string]any `json:"args"`
}

func decodeTrace(t *testing.T, b []byte) []testEvent {
	t.Helper()
	var doc struct {
		TraceEvents []testEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("trace is not valid JSON: %v\n%s", err, b)
	}
	return doc.TraceEvents
}

func TestChromeTraceForkJoin(t *testing.T) {
	p := plantest.New("s0", "s1").
		Launch(0, "a", 2).Record(0, 0).
		Wait(1, 0).Launch(1, "b", 5).Record(1, 1).
		Launch(0, "c", 1).Wait(0, 1).Launch(0, "d", 1).
		Plan(t)
	tl := FromPlan(p, Ideal(p))
	var buf bytes.Buffer
	if err := tl.WriteChromeTrace(&buf); err != nil {
		t.Fatal(err)
	}
	evs := decodeTrace(t, buf.Bytes())

	threadName := map[int]string{}
	var xs, starts, finishes []testEvent
	for _, e := range evs {
		if e.PID == nil || *e.PID != chromePID {
			t.Errorf("event %+v: pid != %d", e, chromePID)
		}
		switch e.Ph {
		case "M":
			switch e.Name {
			case "process_name":
				if e.Args["name"] != "dagrun" {
					t.Errorf("process_name = %v, want dagrun", e.Args["name"])
				}
			case "thread_name":
				threadName[*e.TID] = e.Args["name"].(string)
			}
		case "X":
			xs = append(xs, e)
		case "s":
			starts = append(starts, e)
		case "f":
			finishes = append(finishes, e)
		default:
			t.Errorf("unexpected phase %q in %+v", e.Ph, e)
		}
	}
	if len(threadName) != 2 || threadName[TID(0)] != "s0" || threadName[TID(1)] != "s1" {
		t.Errorf("thread names = %v, want s0 and s1 on tids %d, %d", threadName, TID(0), TID(1))
	}
	if len(xs) != 4 {
		t.Fatalf("%d X events, want 4", len(xs))
	}
	byName := map[string]testEvent{}
	for _, x := range xs {
		byName[x.Name] = x
		if x.TS == nil || x.Dur == nil || x.Cat != "stage" {
			t.Errorf("X event %+v lacks ts, dur or cat", x)
		}
	}
	if b := byName["b"]; *b.TID != TID(1) || *b.TS != 2 || *b.Dur != 5 || b.Args["stage"] != 1.0 {
		t.Errorf("b = tid %d ts %g dur %g args %v, want tid %d ts 2 dur 5 stage 1", *b.TID, *b.TS, *b.Dur, b.Args, TID(1))
	}
	if len(starts) != 2 || len(finishes) != 2 {
		t.Fatalf("%d s and %d f flow events, want 2 each", len(starts), len(finishes))
	}
	// Each pair shares an id; s sits inside the producer's span near its end
	// on its lane, f inside the consumer's span near its start, with bp=e.
	within := func(e testEvent, x testEvent) bool {
		return *e.TID == *x.TID && *e.TS >= *x.TS && *e.TS <= *x.TS+*x.Dur
	}
	pairs := []struct{ from, to string }{{"a", "b"}, {"b", "d"}}
	for i, pr := range pairs {
		s, f := starts[i], finishes[i]
		if s.ID == nil || f.ID == nil || *s.ID != *f.ID {
			t.Errorf("pair %d: ids %v, %v differ", i, s.ID, f.ID)
		}
		if f.BP != "e" || s.Cat != "wait" || f.Cat != "wait" {
			t.Errorf("pair %d: bp %q, cats %q %q", i, f.BP, s.Cat, f.Cat)
		}
		from, to := byName[pr.from], byName[pr.to]
		if !within(s, from) || *from.TS+*from.Dur-*s.TS > 0.0011 {
			t.Errorf("pair %d: s at tid %d ts %g, want at the end of %s (tid %d, [%g, %g])", i, *s.TID, *s.TS, pr.from, *from.TID, *from.TS, *from.TS+*from.Dur)
		}
		if !within(f, to) || *f.TS-*to.TS > 0.0011 {
			t.Errorf("pair %d: f at tid %d ts %g, want at the start of %s (tid %d, ts %g)", i, *f.TID, *f.TS, pr.to, *to.TID, *to.TS)
		}
	}

	var again bytes.Buffer
	if err := tl.WriteChromeTrace(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("two writes of one timeline differ")
	}
}

func TestChromeTraceRandomCounts(t *testing.T) {
	p, _ := plantest.Random(t, 7, 500, 9)
	tl := FromPlan(p, Ideal(p))
	var buf bytes.Buffer
	if err := tl.WriteChromeTrace(&buf); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	ids := map[int]string{}
	for _, e := range decodeTrace(t, buf.Bytes()) {
		counts[e.Ph+"/"+e.Name]++
		counts[e.Ph]++
		if e.Ph == "s" || e.Ph == "f" {
			ids[*e.ID] += e.Ph
		}
	}
	if counts["X"] != len(tl.Spans) || counts["M/thread_name"] != 9 || counts["s"] != len(tl.Flows) || counts["f"] != len(tl.Flows) {
		t.Errorf("counts %v; want %d X, 9 thread names, %d s and f", counts, len(tl.Spans), len(tl.Flows))
	}
	for id, phs := range ids {
		if phs != "sf" {
			t.Errorf("flow id %d has phases %q, want s then f", id, phs)
		}
	}
}

func TestChromeTraceSkipsFlowsWithoutSpans(t *testing.T) {
	tl := &Timeline{
		Streams: []string{"x", "y"},
		Spans:   []Span{{Name: "a", Stage: 0, Stream: 0, StartUS: 0, EndUS: 1}},
		Flows:   []Flow{{FromStage: 0, ToStage: 1, Event: 0}},
	}
	var buf bytes.Buffer
	if err := tl.WriteChromeTrace(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `"ph":"s"`) {
		t.Errorf("flow to a stage without a span was written:\n%s", buf.String())
	}
}

func TestChromeTraceRejectsBadSpans(t *testing.T) {
	for _, s := range []Span{
		{Name: "a", Stream: 2, EndUS: 1},
		{Name: "a", Stream: -1, EndUS: 1},
		{Name: "a", StartUS: 2, EndUS: 1},
	} {
		tl := &Timeline{Streams: []string{"x", "y"}, Spans: []Span{s}}
		if err := tl.WriteChromeTrace(&bytes.Buffer{}); err == nil || !strings.HasPrefix(err.Error(), "trace: span 0 (a") {
			t.Errorf("span %+v: err = %v, want one naming the span", s, err)
		}
	}
}
