// Package plantest builds plans for the timeline packages' tests: by hand,
// op by op in host issue order (Builder), or at random (Random).
package plantest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dagrun/dagrun/plan"
)

// Builder makes plans by hand, op by op in host issue order.
type Builder struct{ p *plan.Plan }

func New(streams ...string) *Builder {
	p := &plan.Plan{Version: plan.PlanVersion, Spec: "test"}
	for i, name := range streams {
		p.Streams = append(p.Streams, plan.Stream{ID: i, Name: name})
	}
	return &Builder{p: p}
}

func (b *Builder) Op(stream int, o plan.Op) *Builder {
	s := &b.p.Streams[stream]
	b.p.IssueOrder = append(b.p.IssueOrder, [2]int{stream, len(s.Ops)})
	s.Ops = append(s.Ops, o)
	if o.Kind != plan.OpLaunch && o.Event >= b.p.Events {
		b.p.Events = o.Event + 1
	}
	return b
}

// Launch adds stage name on stream with duration dur µs and launches it.
func (b *Builder) Launch(stream int, name string, dur float64) *Builder {
	b.p.Stages = append(b.p.Stages, plan.Stage{Name: name, Stream: stream, DurationUS: dur, Kernel: "spin"})
	return b.Op(stream, plan.Op{Kind: plan.OpLaunch, Stage: len(b.p.Stages) - 1})
}

func (b *Builder) Record(stream, event int) *Builder {
	return b.Op(stream, plan.Op{Kind: plan.OpRecord, Event: event})
}

func (b *Builder) Wait(stream, event int) *Builder {
	return b.Op(stream, plan.Op{Kind: plan.OpWait, Event: event})
}

func (b *Builder) Plan(t testing.TB) *plan.Plan {
	t.Helper()
	if err := b.p.Validate(); err != nil {
		t.Fatalf("hand-built plan is invalid: %v", err)
	}
	return b.p
}

// Random is a layered random DAG of n stages on k streams: each stage
// depends on up to three earlier ones; a dependency on another stream is an
// event recorded right after the producer and waited on right before the
// consumer. It returns the plan and each stage's predecessors.
func Random(t testing.TB, seed uint64, n, k int) (*plan.Plan, [][]int) {
	r := rand.New(rand.NewPCG(seed, 0))
	names := make([]string, k)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
	}
	b := New(names...)
	deps := make([][]int, n)
	streamOf := make([]int, n)
	event := make([]int, n) // event recorded after stage i, -1 if none yet
	for i := range n {
		streamOf[i] = r.IntN(k)
		event[i] = -1
		if i > 0 {
			for range r.IntN(4) {
				j := max(0, i-1-r.IntN(min(i, 3*k)))
				deps[i] = append(deps[i], j)
			}
		}
	}
	// A producer records once, right after its launch, if a consumer on
	// another stream needs it; decide that before issuing.
	needs := make([]bool, n)
	for i, ds := range deps {
		for _, j := range ds {
			if streamOf[j] != streamOf[i] {
				needs[j] = true
			}
		}
	}
	events := 0
	for i := range n {
		s := streamOf[i]
		for _, j := range deps[i] {
			if streamOf[j] != s {
				b.Wait(s, event[j])
			}
		}
		b.Launch(s, fmt.Sprintf("op%d_%s", i, []string{"conv", "relu", "add", "pool_3x3", "concat"}[r.IntN(5)]), 1+r.Float64()*20)
		if needs[i] {
			event[i] = events
			events++
			b.Record(s, event[i])
		}
	}
	return b.Plan(t), deps
}
