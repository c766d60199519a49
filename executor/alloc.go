package executor

// Memory (issue 5): the plan's device arena, stream-ordered dynamic
// allocation (--alloc dynamic), and host stages (the plan's host stream).

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// Allocation modes (Options.Alloc).
const (
	// AllocStatic allocates every buffer before the run; buffers the plan
	// places in its arena (planner.Buffer.ArenaOffset) share one allocation
	// of Stats.ArenaBytes at their offsets. The default.
	AllocStatic = "static"
	// AllocDynamic allocates each temp that has a lifetime first stage
	// (planner.Lifetime.First) on that stage's stream just before it, and
	// frees it after the events of its lifetime on every stream that used
	// it: a dedicated stream waits on those events and frees it there
	// (stream-ordered, like cuMemFreeAsync; never a device-wide
	// synchronization). The backend must be a StreamAllocator. Other
	// buffers are allocated as in AllocStatic, without the arena.
	AllocDynamic = "dynamic"
)

// StreamAllocator is an optional Backend interface: stream-ordered
// allocation (cuMemAllocAsync, cuMemFreeAsync).
type StreamAllocator interface {
	// AllocAsync allocates a device buffer of d.Bytes for use in stream
	// order after this call on s: work issued to s afterwards, and work
	// ordered after it by events, may use it. Its contents are undefined.
	AllocAsync(d BufferDesc, s Stream) (Buffer, error)
	// FreeAsync releases b when s reaches this call. Every use of b must be
	// ordered before that point (waits on s); the handle is invalid after
	// the call. A race detector checks the order.
	FreeAsync(b Buffer, s Stream) error
}

// ErrNoStreamAlloc is returned (wrapped) by Run for AllocDynamic on a
// backend that is no StreamAllocator.
var ErrNoStreamAlloc = errors.New("backend cannot allocate stream-ordered memory")

// Op kinds of the memory-aware issue path, after planner's.
const (
	opAlloc planner.OpKind = 100 + iota // allocate buffer op.event on op.stream
	opFree                              // free buffer op.event after its lifetime's events
)

// memRun is a run's memory and host state.
type memRun struct {
	arenaOff   []int64 // per plan buffer: its arena offset, or -1
	arenaBytes int64
	arena      Buffer // the arena allocation (static), nil if none
	slow       bool   // issue through issueSlow (host stages or dynamic buffers)

	host   []bool // per plan stream: the host thread (planner.Stream.Host)
	hostEv []bool // per event: its latest record was issued on a host stream
	hs     HostSyncer

	dynamic    bool
	dyn        []int    // per plan buffer: index into done, or -1 (static)
	done       [][]int  // per dynamic buffer: the events of its lifetime
	live       []Buffer // per plan buffer: the current dynamic allocation
	freed      []bool   // per plan buffer: live's free was issued (launches issued later still use it: a dangling pointer, as on a GPU)
	sa         StreamAllocator
	freeStream Stream
	bufIdx     map[string]int
}

// prepareMemory, at the end of prepare, places arena buffers' accesses at
// their arena offsets (the static layout, which every mode but dynamic
// uses) and notes host streams.
func (r *run) prepareMemory() error {
	p := r.p
	m := &memRun{arenaOff: make([]int64, len(p.Buffers)), bufIdx: make(map[string]int, len(p.Buffers))}
	r.mem = m
	for i, b := range p.Buffers {
		m.bufIdx[b.Name] = i
		m.arenaOff[i] = -1
		if b.ArenaOffset != nil {
			m.arenaOff[i] = *b.ArenaOffset
			m.arenaBytes = max(m.arenaBytes, *b.ArenaOffset+b.Bytes, p.Stats.ArenaBytes)
		}
	}
	m.shift(r.descs, +1)
	for s, str := range p.Streams {
		if !str.Host {
			continue
		}
		if m.host == nil {
			m.host = make([]bool, len(p.Streams))
			m.hostEv = make([]bool, p.Events+len(p.Streams))
			m.slow = true
		}
		m.host[s] = true
	}
	if m.host == nil {
		return nil
	}
	for i := range r.descs {
		if !m.host[p.Stages[i].Stream] {
			continue
		}
		d := &r.descs[i]
		if !slices.Contains(dag.HostKernels, d.Kernel) || d.UserKernel != nil || r.funcs[i] != nil {
			return fmt.Errorf("executor: stage %s runs on the host stream with kernel %s; the host runs only %v", d.Name, d.Kernel, dag.HostKernels)
		}
		for _, set := range [2][]Arg{d.Reads, d.Writes} {
			for _, a := range set {
				if w := p.Buffers[m.bufIdx[a.Name]].Where; w != dag.WhereHostPinned {
					return fmt.Errorf("executor: stage %s runs on the host stream but touches %s buffer %s; the host reaches only host_pinned buffers", d.Name, cmp.Or(w, dag.WhereDevice), a.Name)
				}
			}
		}
	}
	return nil
}

// shift moves every access of an arena buffer by its arena offset (sign
// +1) or back (−1).
func (m *memRun) shift(descs []LaunchDesc, sign int64) {
	if m.arenaBytes == 0 {
		return
	}
	for i := range descs {
		for _, set := range [2][]Arg{descs[i].Reads, descs[i].Writes} {
			for k := range set {
				if off := m.arenaOff[m.bufIdx[set[k].Name]]; off >= 0 {
					set[k].Offset += sign * off
				}
			}
		}
	}
}

// setAlloc switches the run to mode (AllocStatic or AllocDynamic) before
// setup. Dynamic: the arena is not used; each buffer with a lifetime first
// stage gets an alloc op right before that stage's launch (on its stream)
// and a free op right after the last record of its lifetime's events.
func (r *run) setAlloc(mode string) error {
	m := r.mem
	switch mode {
	case "", AllocStatic:
		return nil
	case AllocDynamic:
	default:
		return fmt.Errorf("executor: alloc mode %q, want static or dynamic", mode)
	}
	p := r.p
	m.shift(r.descs, -1)
	for i := range m.arenaOff {
		m.arenaOff[i] = -1
	}
	m.arenaBytes = 0
	m.dynamic, m.slow = true, true
	m.dyn = make([]int, len(p.Buffers))
	m.live = make([]Buffer, len(p.Buffers))
	m.freed = make([]bool, len(p.Buffers))
	stage := make(map[string]int, len(p.Stages))
	for i, s := range p.Stages {
		stage[s.Name] = i
	}
	first := map[int]int{} // stage → buffers allocated before it, by dyn index
	var allocs [][]int
	lastRec := map[int]int{} // dyn index → position in r.ops of the last record of its lifetime
	recPos := map[int]int{}  // event → position of its (last) record in r.ops
	for k, op := range r.ops {
		if op.kind == planner.OpRecord {
			recPos[op.event] = k
		}
	}
	for i := range m.dyn {
		m.dyn[i] = -1
	}
	for _, l := range p.Lifetimes {
		i, ok := m.bufIdx[l.Buffer]
		if !ok || l.First == "" || len(l.Done) == 0 {
			continue
		}
		b := p.Buffers[i]
		if b.Role != dag.RoleTemp || cmp.Or(b.Where, dag.WhereDevice) != dag.WhereDevice || b.Copies > 1 {
			continue
		}
		v, ok := stage[l.First]
		if !ok {
			return fmt.Errorf("executor: lifetime of %s: first stage %q is not a stage of the plan", l.Buffer, l.First)
		}
		d := len(m.done)
		m.dyn[i] = d
		var evs []int
		last := -1
		for _, at := range l.Done {
			pos, ok := recPos[at.Event]
			if !ok {
				return fmt.Errorf("executor: lifetime of %s: event %d is never recorded", l.Buffer, at.Event)
			}
			evs = append(evs, at.Event)
			last = max(last, pos)
		}
		m.done = append(m.done, evs)
		lastRec[d] = last
		if _, ok := first[v]; !ok {
			first[v] = len(allocs)
			allocs = append(allocs, nil)
		}
		allocs[first[v]] = append(allocs[first[v]], i)
	}
	if len(m.done) == 0 {
		return nil
	}
	sa, ok := r.b.(StreamAllocator)
	if !ok {
		return fmt.Errorf("executor: %s: --alloc dynamic: %w", r.b.Name(), ErrNoStreamAlloc)
	}
	m.sa = sa
	frees := map[int][]int{} // position in r.ops → buffers to free after it
	for i, d := range m.dyn {
		if d >= 0 {
			frees[lastRec[d]] = append(frees[lastRec[d]], i)
		}
	}
	var ops []issueOp
	for k, op := range r.ops {
		if op.kind == planner.OpLaunch {
			if a, ok := first[op.desc.Stage]; ok {
				for _, i := range allocs[a] {
					ops = append(ops, issueOp{kind: opAlloc, stream: op.stream, event: i})
				}
			}
		}
		ops = append(ops, op)
		for _, i := range frees[k] {
			ops = append(ops, issueOp{kind: opFree, stream: op.stream, event: i})
		}
	}
	r.ops = ops
	return nil
}

// allocArena allocates the arena (static mode), at the start of setup.
func (r *run) allocArena() error {
	m := r.mem
	if m.arenaBytes == 0 {
		return nil
	}
	h, err := r.b.Alloc(BufferDesc{Name: "arena", Bytes: m.arenaBytes, Where: dag.WhereDevice})
	if err != nil {
		return fmt.Errorf("executor: %s: alloc the arena (%d bytes): %w", r.b.Name(), m.arenaBytes, err)
	}
	m.arena = h
	return nil
}

// handle returns the handle setup gives buffer i instead of allocating it:
// the arena, or nil for a dynamic buffer; ok is false for other buffers.
func (m *memRun) handle(i int) (h Buffer, ok bool) {
	if m.arenaOff[i] >= 0 {
		return m.arena, true
	}
	if m.dynamic && m.dyn[i] >= 0 {
		return nil, true
	}
	return nil, false
}

// owns reports whether run.bufs[i] is an allocation of its own.
func (m *memRun) owns(i int) bool {
	_, shared := m.handle(i)
	return !shared
}

// setupSlow, at the end of setup, prepares host stages and dynamic
// allocation: the HostSyncer and the free stream.
func (r *run) setupSlow() error {
	m := r.mem
	if m.host != nil {
		hs, ok := r.b.(HostSyncer)
		if !ok {
			return fmt.Errorf("executor: %s: the plan has host stages: %w", r.b.Name(), ErrNoHostSync)
		}
		m.hs = hs
	}
	if m.sa != nil {
		s, err := r.b.NewStream()
		if err != nil {
			return fmt.Errorf("executor: %s: create the free stream: %w", r.b.Name(), err)
		}
		m.freeStream = s
	}
	return nil
}

// releaseMemory frees what the memory state holds, after release has
// synchronized: the arena, dynamic buffers still allocated (a failed run),
// the free stream.
func (r *run) releaseMemory() []error {
	m := r.mem
	if m == nil || r.b == nil {
		return nil
	}
	var errs []error
	if m.arena != nil {
		if err := r.b.Free(m.arena); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: free the arena: %w", r.b.Name(), err))
		}
		m.arena = nil
	}
	for i, h := range m.live {
		if h != nil && !m.freed[i] {
			if err := r.b.Free(h); err != nil {
				errs = append(errs, fmt.Errorf("executor: %s: free buffer %s: %w", r.b.Name(), r.p.Buffers[i].Name, err))
			}
			m.live[i] = nil
		}
	}
	if m.freeStream != nil {
		if err := r.b.DestroyStream(m.freeStream); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: destroy the free stream: %w", r.b.Name(), err))
		}
		m.freeStream = nil
	}
	return errs
}

// issueSlow issues one op when the plan has host stages or dynamic buffers.
// Host stream: a launch runs on the host now (hostLaunch), a record
// completes at once (nothing is issued), a wait blocks the host until the
// event's latest record has completed (HostSyncer.SyncEvent). A device
// stream's wait on an event last recorded on the host is skipped: the host
// issued it after the host work, which is therefore done. opAlloc and
// opFree are --alloc dynamic's.
func (r *run) issueSlow(op *issueOp) error {
	m, b := r.mem, r.b
	host := m.host != nil && m.host[op.stream]
	switch op.kind {
	case opAlloc:
		pb := r.p.Buffers[op.event]
		h, err := m.sa.AllocAsync(BufferDesc{Name: pb.Name, Bytes: pb.Bytes, Where: dag.WhereDevice}, r.streams[op.stream])
		if err != nil {
			return fmt.Errorf("alloc %s (%d bytes): %w", pb.Name, pb.Bytes, err)
		}
		m.live[op.event], m.freed[op.event] = h, false
		return nil
	case opFree:
		i := op.event
		for _, e := range m.done[m.dyn[i]] {
			if err := b.Wait(m.freeStream, r.events[e]); err != nil {
				return fmt.Errorf("free %s: wait on event %d: %w", r.p.Buffers[i].Name, e, err)
			}
		}
		m.freed[i] = true
		if err := m.sa.FreeAsync(m.live[i], m.freeStream); err != nil {
			return fmt.Errorf("free %s: %w", r.p.Buffers[i].Name, err)
		}
		return nil
	case planner.OpLaunch:
		d := op.desc
		if m.dynamic {
			d = m.bind(d)
		}
		if host {
			return r.hostLaunch(d)
		}
		if op.fn != nil {
			return launchFunc(b, r.streams[op.stream], d, op.fn)
		}
		return b.Launch(r.streams[op.stream], d)
	case planner.OpRecord:
		if m.hostEv != nil {
			m.hostEv[op.event] = host
		}
		if host {
			return nil
		}
		return b.Record(r.events[op.event], r.streams[op.stream])
	case planner.OpWait:
		if m.hostEv != nil && m.hostEv[op.event] {
			return nil
		}
		if host {
			return m.hs.SyncEvent(r.events[op.event])
		}
		return b.Wait(r.streams[op.stream], r.events[op.event])
	}
	return fmt.Errorf("unknown op kind %d", op.kind)
}

// bind returns a copy of d whose dynamic buffers' accesses point at their
// current allocations (a fresh copy per launch: the backend may keep it
// until the launch has run, and the next iteration allocates anew).
func (m *memRun) bind(d *LaunchDesc) *LaunchDesc {
	c := *d
	c.Reads, c.Writes = slices.Clone(d.Reads), slices.Clone(d.Writes)
	for _, set := range [2][]Arg{c.Reads, c.Writes} {
		for k := range set {
			if i := m.bufIdx[set[k].Name]; m.dyn[i] >= 0 {
				set[k].Buffer = m.live[i]
			}
		}
	}
	return &c
}

// hasHostStream reports whether p has a host stream.
func hasHostStream(p *planner.Plan) bool {
	return slices.ContainsFunc(p.Streams, func(s planner.Stream) bool { return s.Host })
}

// classicOnly reports whether Run must take its one-iteration-at-a-time
// path (a barrier between iterations) for p and o: dynamic allocation and
// host stages are issued only there.
func classicOnly(p *planner.Plan, o *Options) bool {
	return (o.Alloc == AllocDynamic || hasHostStream(p)) && !o.hostIO()
}

// allocModeOK checks Options.Alloc.
func allocModeOK(mode string) error {
	switch cmp.Or(mode, AllocStatic) {
	case AllocStatic, AllocDynamic:
		return nil
	}
	return fmt.Errorf("executor: alloc mode %q, want static or dynamic", mode)
}
