package backendtest

import (
	"fmt"

	"github.com/dagrun/dagrun/plan"
)

// Builder builds a plan.Plan by hand, for tests: stages, records and
// waits are issued in the order of the calls.
//
//	b := backendtest.NewBuilder(2)
//	b.Buffer(plan.Buffer{Name: "x", Bytes: 64, Role: dag.RoleOutput})
//	b.Launch(0, plan.Stage{Name: "one", Kernel: "fill", Args: map[string]any{"value": 1.0}, Writes: b.All("x")})
//	b.Record(0, 0)
//	b.Wait(1, 0)
//	b.Launch(1, plan.Stage{Name: "two", Kernel: "fill", Args: map[string]any{"value": 2.0}, Writes: b.All("x")})
//	p := b.Plan()
type Builder struct {
	p plan.Plan
}

// NewBuilder starts a plan with streams streams (named s0, s1, …).
func NewBuilder(streams int) *Builder {
	b := &Builder{p: plan.Plan{Version: plan.PlanVersion, Spec: "test"}}
	for i := range streams {
		b.p.Streams = append(b.p.Streams, plan.Stream{ID: i, Name: fmt.Sprintf("s%d", i)})
	}
	return b
}

// Buffer adds a buffer (Where defaults to device, Role to temp).
func (b *Builder) Buffer(buf plan.Buffer) *Builder {
	if buf.Where == "" {
		buf.Where = "device"
	}
	if buf.Role == "" {
		buf.Role = "temp"
	}
	b.p.Buffers = append(b.p.Buffers, buf)
	return b
}

// Kernel adds a user kernel declaration.
func (b *Builder) Kernel(k plan.Kernel) *Builder {
	b.p.Kernels = append(b.p.Kernels, k)
	return b
}

// Dir sets the directory that init files resolve against.
func (b *Builder) Dir(dir string) *Builder {
	b.p.Dir = dir
	return b
}

// All returns a one-access list covering all of buffer name (which must
// have been added).
func (b *Builder) All(name string) []plan.Access {
	for _, buf := range b.p.Buffers {
		if buf.Name == name {
			return []plan.Access{{Buffer: name, Bytes: buf.Bytes}}
		}
	}
	panic("backendtest: no buffer " + name)
}

// Range returns a one-access list of bytes [off, off+n) of buffer name.
func Range(name string, off, n int64) []plan.Access {
	return []plan.Access{{Buffer: name, Offset: off, Bytes: n}}
}

// Launch adds stage st on stream and issues its launch; it returns the
// stage's index.
func (b *Builder) Launch(stream int, st plan.Stage) int {
	st.Stream = stream
	i := len(b.p.Stages)
	b.p.Stages = append(b.p.Stages, st)
	b.op(stream, plan.Op{Kind: plan.OpLaunch, Stage: i})
	return i
}

// Record issues a record of event on stream.
func (b *Builder) Record(stream, event int) {
	b.op(stream, plan.Op{Kind: plan.OpRecord, Event: event})
}

// Wait issues a wait of stream on event.
func (b *Builder) Wait(stream, event int) {
	b.op(stream, plan.Op{Kind: plan.OpWait, Event: event})
}

func (b *Builder) op(stream int, o plan.Op) {
	s := &b.p.Streams[stream]
	b.p.IssueOrder = append(b.p.IssueOrder, [2]int{stream, len(s.Ops)})
	s.Ops = append(s.Ops, o)
	if o.Kind != plan.OpLaunch && o.Event >= b.p.Events {
		b.p.Events = o.Event + 1
	}
}

// Plan returns the plan built so far (shared with the builder).
func (b *Builder) Plan() *plan.Plan {
	b.p.Stats.Stages = len(b.p.Stages)
	b.p.Stats.Streams = len(b.p.Streams)
	b.p.Stats.Events = b.p.Events
	return &b.p
}

// OnDevice puts stream on device dev (the plan's device count grows to
// include it).
func (b *Builder) OnDevice(stream, dev int) *Builder {
	b.p.Streams[stream].Device = dev
	b.p.Devices = max(b.p.Devices, dev+1, 1)
	return b
}
