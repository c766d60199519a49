package dagrun

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
)

// streamsSpec is n independent stages, each on a stream of its own: named
// streams of a hand-synchronized spec (manual), or a planned spec whose
// cap lets the planner give each one.
func streamsSpec(t *testing.T, n int, manual bool) *dag.Spec {
	var b strings.Builder
	b.WriteString("version: 1\nname: streams\n")
	if manual {
		b.WriteString("sync: manual\n")
	} else {
		fmt.Fprintf(&b, "options: {max_streams: %d}\n", n)
	}
	b.WriteString("buffers:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: b%d, bytes: 64}\n", i)
	}
	b.WriteString("stages:\n")
	for i := range n {
		stream := ""
		if manual {
			stream = fmt.Sprintf(", stream: s%d", i)
		}
		fmt.Fprintf(&b, "  - {name: t%d, kernel: fill, args: {value: 1.0}, writes: [b%d]%s}\n", i, i, stream)
	}
	s, err := dag.LoadWith([]byte(b.String()), "streams.yaml", ".", dag.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSimClocksBounded: a run on the simulator whose race detector's
// vector clocks (streams × (streams + events) × 8 bytes) pass their bound
// is refused by CheckRun and Run before any stream is made,
// naming the bytes and the streams that fit; at the bound it passes.
func TestSimClocksBounded(t *testing.T) {
	const n = 40
	p, err := Plan(streamsSpec(t, n, true), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	for _, k := range p.Iteration.Slots {
		events += k
	}
	streams := len(p.Streams) * p.Iteration.StreamSets
	need := float64(streams * (streams + events) * 8)
	defer func(m float64) { maxSimClockBytes = m }(maxSimClockBytes)
	ro := RunOptions{Backend: BackendSim}
	maxSimClockBytes = need
	if err := CheckRun(p, ro); err != nil {
		t.Errorf("clocks of %.0f bytes, bound %.0f: %v", need, maxSimClockBytes, err)
	}
	maxSimClockBytes = need - 1
	want := fmt.Sprintf("for each of its %d streams and %d events", streams, events)
	if err := CheckRun(p, ro); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "use at most about 39 streams") {
		t.Errorf("clocks of %.0f bytes, bound %.0f: %v", need, maxSimClockBytes, err)
	}
	if res, err := Run(context.Background(), p, ro); res != nil || err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Run: %v, %v", res, err)
	}
}
