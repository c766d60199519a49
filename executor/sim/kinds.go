package sim

import (
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
)

// CUDA's implicit ordering at the simulator's API, as the driver does it
// (the verifier derives the same order from a plan: verify/implicit.go):
//
//   - The legacy default stream (one per backend) and blocking streams: an
//     op issued on the legacy stream first waits for the latest op issued
//     on every blocking stream, and an op issued on a blocking stream first
//     waits for the latest op issued on the legacy stream ("Stream
//     synchronization behavior"). Both are an implicit record and wait.
//   - Synchronous copies (LaunchDesc.Copy): the issuing call returns as
//     the "API synchronization behavior" table says: once the copy is done
//     (to host memory, or from pinned memory), once the source is staged
//     (from pageable memory: the stream's earlier work done, the source
//     snapshot taken at the call, the device write later), or at once
//     (device to device).
//   - Asynchronous copies from pageable memory to the device: the source
//     is staged when the host calls the copy, not in the stream's order
//     (the table's "host memory is copied to a staging buffer
//     immediately"; verify.RulePageableSource): the host reads it then
//     (checked as the stage's access at the host's clock), the device
//     write comes in stream order. A graph replay stages it at the launch
//     (seen on the H100: the replay copied the bytes of the launch).

var _ executor.StreamKinder = (*Backend)(nil)

// NewStreamKind creates a stream of a planner kind. The legacy default
// stream is one per backend: each call returns it (counted; it ends when
// every holder destroyed it).
func (b *Backend) NewStreamKind(kind string) (executor.Stream, error) {
	switch kind {
	case plan.StreamNonBlocking:
		return b.NewStream()
	case plan.StreamBlocking, plan.StreamPerThread:
	case plan.StreamLegacy:
		if b.legacy != nil {
			b.legacyRefs++
			return b.legacy, nil
		}
	default:
		return nil, fmt.Errorf("sim: stream kind %q, want one of %v", kind, plan.StreamKinds)
	}
	h, err := b.NewStream()
	if err != nil {
		return nil, err
	}
	s := h.(*stream)
	s.kind = kind
	if kind == plan.StreamLegacy {
		b.legacy, b.legacyRefs = s, 1
	}
	b.kinded = true
	return s, nil
}

// implicitBefore issues the legacy rule's implicit waits before an op on s.
func (b *Backend) implicitBefore(s *stream) {
	if !b.kinded {
		return
	}
	L := b.legacy
	switch {
	case s == L:
		b.mu.Lock()
		var blocking []*stream
		for x := range b.streams {
			if x != L && x.dirty && blockingStream(x.kind) {
				blocking = append(blocking, x)
			}
		}
		b.mu.Unlock()
		slices.SortFunc(blocking, func(x, y *stream) int { return x.vc - y.vc })
		for _, x := range blocking {
			sl := &slot{done: make(chan struct{}), stream: x.num}
			x.pushRaw(op{kind: opRecord, slot: sl})
			L.pushRaw(op{kind: opWait, slot: sl})
			x.dirty = false
		}
	case L != nil && blockingStream(s.kind) && s.seenLegacy != L.issued:
		sl := &slot{done: make(chan struct{}), stream: L.num}
		L.pushRaw(op{kind: opRecord, slot: sl})
		s.pushRaw(op{kind: opWait, slot: sl})
		s.seenLegacy = L.issued
	}
}

// implicitAfter notes an op issued on s for the legacy rule.
func (b *Backend) implicitAfter(s *stream) {
	if !b.kinded {
		return
	}
	if s == b.legacy {
		s.issued++
	} else if blockingStream(s.kind) {
		s.dirty = true
	}
}

func blockingStream(kind string) bool {
	return kind == plan.StreamBlocking || kind == plan.StreamPerThread
}

// syncCopy issues l, a synchronous copy on s, and returns as the table says.
func (b *Backend) syncCopy(s *stream, l *executor.LaunchDesc) error {
	src, dst := l.Reads[0].Buffer.(*buffer), l.Writes[0].Buffer.(*buffer)
	switch {
	case dst.where.Host() || src.where == contract.WhereHostPinned:
		s.push(op{kind: opLaunch, desc: l})
		b.hostWaitFor(s) // returns once the copy is done
	case src.where == contract.WhereHostPageable:
		// A stream sync, then the source staged at the call: the host reads
		// it now (checked as a host access), the device write comes later.
		b.hostWaitFor(s)
		d, err := b.stageSource(l)
		if err != nil {
			return err
		}
		s.push(op{kind: opLaunch, desc: d})
	default:
		s.push(op{kind: opLaunch, desc: l}) // device to device: no host synchronization
	}
	return nil
}

// pageableAsync reports whether l is an asynchronous copy from pageable
// memory to the device (verify.RulePageableSource).
func pageableAsync(l *executor.LaunchDesc) bool {
	if l.Copy != plan.CopyAsync || l.Kernel != contract.BuiltinCopy || len(l.Reads) != 1 || len(l.Writes) != 1 {
		return false
	}
	src, ok1 := l.Reads[0].Buffer.(*buffer)
	dst, ok2 := l.Writes[0].Buffer.(*buffer)
	return ok1 && ok2 && src.where == contract.WhereHostPageable && !dst.where.Host()
}

// stageSource reads the source of l, a copy from pageable memory, now, as
// l's host access, and returns l reading the staged bytes instead.
func (b *Backend) stageSource(l *executor.LaunchDesc) (*executor.LaunchDesc, error) {
	a := l.Reads[0]
	src := a.Buffer.(*buffer)
	if _, err := b.hostAccessBy(src, a.Offset, a.Bytes, false, l.Stage, l.Name); err != nil {
		return nil, err
	}
	staged := make([]byte, a.Bytes)
	src.mu.RLock()
	copy(staged, src.data[a.Offset:])
	src.mu.RUnlock()
	sb := &buffer{id: -1, name: src.name + " (staged)", where: contract.WhereHostPinned, data: staged}
	d := *l
	d.Reads = []executor.Arg{{Buffer: sb, Name: sb.name, Offset: 0, Bytes: a.Bytes}}
	return &d, nil
}

// hostWaitFor blocks until everything issued on s so far is done and
// orders the host after it (an implicit record and cuEventSynchronize).
func (b *Backend) hostWaitFor(s *stream) {
	sl := &slot{done: make(chan struct{}), stream: s.num}
	s.push(op{kind: opRecord, slot: sl})
	<-sl.done
	b.hostJoin(sl.clock)
}
