package spectest

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"pgregory.net/rapid"
)

// Gen draws a random spec: stages reading and writing byte ranges of a
// few buffers, with durations, optionally after: edges and stream pins.
func Gen(t *rapid.T, withAfter, withPins bool) *dag.Spec {
	nb := rapid.IntRange(1, 5).Draw(t, "buffers")
	s := &dag.Spec{Name: "prop", Sync: dag.SyncAuto}
	for b := 0; b < nb; b++ {
		s.Buffers = append(s.Buffers, dag.BufferSpec{Name: fmt.Sprintf("b%d", b), Bytes: 64})
	}
	acc := func(label string) dag.Access {
		b := rapid.IntRange(0, nb-1).Draw(t, label+"buf")
		if rapid.Bool().Draw(t, label+"whole") {
			return dag.Access{Buffer: s.Buffers[b].Name, Bytes: 64}
		}
		lo := rapid.IntRange(0, 15).Draw(t, label+"lo")
		hi := rapid.IntRange(lo+1, 16).Draw(t, label+"hi")
		return dag.Access{Buffer: s.Buffers[b].Name, Offset: int64(4 * lo), Bytes: int64(4 * (hi - lo))}
	}
	n := rapid.IntRange(1, 40).Draw(t, "stages")
	for i := 0; i < n; i++ {
		st := dag.StageSpec{Name: fmt.Sprintf("st%d", i), Kernel: dag.BuiltinMix,
			DurationUS: float64(rapid.IntRange(0, 9).Draw(t, "dur"))}
		for k := rapid.IntRange(0, 2).Draw(t, "nreads"); k > 0; k-- {
			st.Reads = append(st.Reads, acc("r"))
		}
		for k := rapid.IntRange(0, 2).Draw(t, "nwrites"); k > 0; k-- {
			st.Writes = append(st.Writes, acc("w"))
		}
		if withAfter && i > 0 && rapid.IntRange(0, 4).Draw(t, "after?") == 0 {
			st.After = []string{fmt.Sprintf("st%d", rapid.IntRange(0, i-1).Draw(t, "after"))}
		}
		if withPins && rapid.IntRange(0, 3).Draw(t, "pin?") == 0 {
			st.Stream = fmt.Sprintf("p%d", rapid.IntRange(0, 2).Draw(t, "pin"))
		}
		s.Stages = append(s.Stages, st)
	}
	return s
}

// Describe lists a spec's stages, one a line.
func Describe(s *dag.Spec) string {
	var b strings.Builder
	for _, st := range s.Stages {
		fmt.Fprintf(&b, "%s r=%v w=%v after=%v stream=%q dur=%v\n", st.Name, st.Reads, st.Writes, st.After, st.Stream, st.DurationUS)
	}
	return b.String()
}

// Ops renders each stream's ops as "stream: op op ...", launches by stage name.
func Ops(p *plan.Plan) string {
	var b strings.Builder
	for _, s := range p.Streams {
		b.WriteString(s.Name + ":")
		for _, o := range s.Ops {
			switch o.Kind {
			case plan.OpLaunch:
				b.WriteString(" " + p.Stages[o.Stage].Name)
			case plan.OpRecord:
				b.WriteString(" rec" + strconv.Itoa(o.Event))
			case plan.OpWait:
				b.WriteString(" wait" + strconv.Itoa(o.Event))
				if o.Lag > 0 {
					b.WriteString("@-" + strconv.Itoa(o.Lag))
				}
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ReportPerStage reports a benchmark's time (ns/stage) and allocated bytes
// (B/stage) per stage of its spec, from MemStats read before and after.
func ReportPerStage(b *testing.B, stages int, ms0, ms1 *runtime.MemStats) {
	n := float64(stages)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/stage")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/n, "B/stage")
}
