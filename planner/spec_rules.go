package planner

import (
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// applySpecRules carries the spec's stream declarations (kind, host
// thread, host streams of other threads), copy modes, host functions,
// lazy and producer-allocated buffers and capture regions into p, whose streams the manual build
// or the sync pass has made.
func applySpecRules(s *dag.Spec, p *plan.Plan) {
	for i := range p.Streams {
		str := &p.Streams[i]
		d := s.StreamOf(str.Name)
		if d == nil {
			continue
		}
		switch d.Kind {
		case dag.KindHost:
			str.Host = true
		case dag.KindNonBlocking:
		default:
			str.Kind = strings.Clone(d.Kind) // the plan's own copy, none of the spec's memory
		}
		if d.Thread != dag.MainThread {
			str.Thread = strings.Clone(d.Thread)
		}
	}
	for i := range s.Stages {
		sg := &s.Stages[i]
		if sg.Copy == dag.CopySync {
			p.Stages[i].Copy = plan.CopySync
		}
		p.Stages[i].HostFunc = sg.HostFunc
	}
	for i, b := range s.Buffers {
		if i >= len(p.Buffers) || p.Buffers[i].Name != b.Name {
			continue
		}
		switch b.Alloc {
		case dag.AllocLazy:
			p.Buffers[i].Alloc = plan.AllocLazy
		case dag.AllocProducer:
			p.Buffers[i].Alloc = plan.AllocProducer
		}
	}
	p.Captures = nil
	for _, c := range s.Captures {
		id := -1
		for k := range p.Streams {
			if p.Streams[k].Name == c.Stream {
				id = k
			}
		}
		if id < 0 {
			continue // the loader reports a capture on a stream no stage uses
		}
		mode := c.Mode
		if mode == dag.CaptureGlobal {
			mode = plan.CaptureGlobal
		}
		src := ""
		if c.Pos.Line > 0 {
			src = c.Pos.String()
		}
		p.Captures = append(p.Captures, plan.Capture{Stream: id, First: c.First, Last: c.Last, Mode: mode, Source: src})
	}
}
