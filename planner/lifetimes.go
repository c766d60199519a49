package planner

import (
	"cmp"
	"slices"
)

// lifetimes records, for each buffer, the streams whose stages touch it and
// the event after whose record each stream is done with it: the first
// record on that stream at or after its last launch that touches the
// buffer, or else one record appended at the end of the stream (at most one
// new event per stream, shared by all buffers). It is the planned form of
// CUDA's record_stream: the bytes may be reused once every listed event has
// completed.
func lifetimes(st *state) error {
	p := st.plan
	// Position of each stage's launch within its stream.
	opAt := make([]int, len(p.Stages))
	for s := range p.Streams {
		for j, o := range p.Streams[s].Ops {
			if o.Kind == OpLaunch {
				opAt[o.Stage] = j
			}
		}
	}
	// Last use per (buffer, stream), as an op index on the stream.
	bufIdx := make(map[string]int, len(p.Buffers))
	for i, b := range p.Buffers {
		bufIdx[b.Name] = i
	}
	type use struct{ buf, stream, op int }
	var uses []use
	for v, sg := range p.Stages {
		for _, list := range [][]Access{sg.Reads, sg.Writes} {
			for _, a := range list {
				if b, ok := bufIdx[a.Buffer]; ok {
					uses = append(uses, use{b, sg.Stream, opAt[v]})
				}
			}
		}
	}
	slices.SortFunc(uses, func(x, y use) int {
		return cmp.Or(cmp.Compare(x.buf, y.buf), cmp.Compare(x.stream, y.stream), cmp.Compare(y.op, x.op))
	})
	// nextRecord[s][j]: the event of the first record at or after op j on stream s.
	nextRecord := make([][]int, len(p.Streams))
	for s := range p.Streams {
		ops := p.Streams[s].Ops
		nr := make([]int, len(ops))
		next := -1
		for j := len(ops) - 1; j >= 0; j-- {
			if ops[j].Kind == OpRecord {
				next = ops[j].Event
			}
			nr[j] = next
		}
		nextRecord[s] = nr
	}
	endEvent := make([]int, len(p.Streams))
	for i := range endEvent {
		endEvent[i] = -1
	}
	p.Lifetimes = make([]Lifetime, len(p.Buffers))
	for i, b := range p.Buffers {
		p.Lifetimes[i] = Lifetime{Buffer: b.Name, Done: []StreamAt{}}
	}
	for k, u := range uses {
		if k > 0 && uses[k-1].buf == u.buf && uses[k-1].stream == u.stream {
			continue // not the last use on this stream
		}
		e := nextRecord[u.stream][u.op]
		if e < 0 {
			if endEvent[u.stream] < 0 {
				endEvent[u.stream] = p.Events
				p.Events++
				ops := &p.Streams[u.stream].Ops
				p.IssueOrder = append(p.IssueOrder, [2]int{u.stream, len(*ops)})
				*ops = append(*ops, Op{Kind: OpRecord, Event: endEvent[u.stream]})
			}
			e = endEvent[u.stream]
		}
		p.Lifetimes[u.buf].Done = append(p.Lifetimes[u.buf].Done, StreamAt{Stream: u.stream, Event: e})
	}
	return nil
}
