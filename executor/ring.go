package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// maxPhases bounds the least common multiple of the plan's ring sizes: Run
// resolves every launch once per phase (iteration mod that multiple).
const maxPhases = 1024

// iterRun is Run's state for a plan with iteration info: the physical
// streams, ring copies and event slots of planner.Iteration, and host I/O.
type iterRun struct {
	*run
	o     Options
	iters int

	phys    [][]int // stream set → plan stream → index into streams
	streams []Stream
	copies  []int      // per plan buffer: ring size K ≥ 1
	bufs    [][]Buffer // per plan buffer: its copies (copy 0 is run.bufs[i])
	period  int        // lcm of copies
	descs   [][]LaunchDesc
	slots   []int     // per plan event: physical events it rotates through
	evs     [][]Event // per plan event: its slots (slot 0 is run.events[e])
	ops     []iterOp

	extraStreams []Stream
	extraEvents  []Event
	extraBufs    []Buffer

	// Host side.
	hs       HostSyncer
	inflight int     // L: 0 = unbounded, untracked
	tails    []Event // per plan stream: recorded after its last op of an iteration
	join     Stream  // waits on every tail, then records the iteration's end
	ends     []Event // L events: ends[i%L] is recorded on join when iteration i is done
	inputs   []hostBuf
	outputs  []hostBuf
	start    []time.Time
	lat      []time.Duration
	done     int // iterations seen complete (a prefix)
	issued   int // iterations issued

	launches, waits, records int
}

// iterOp is one op of an iteration, before the iteration's substitutions.
type iterOp struct {
	kind   planner.OpKind
	stream int // plan stream
	event  int
	lag    int
	stage  int
}

// hostBuf is a host_pinned buffer the host fills or reads every iteration.
type hostBuf struct {
	buf     int   // plan buffer index
	k       int   // copies
	done    []int // events after its last use on each stream (its lifetime)
	in      InputFunc
	out     OutputFunc
	next    int // outputs: next iteration to deliver
	scratch []byte
}

// runIterations is Run for a plan with iteration info (planner.Iteration):
// iteration i issues the plan's ops, cross-iteration waits included, on
// stream set i mod StreamSets, with ring copy i mod K of every buffer and
// slot i mod Slots[e] of every event (a lagged wait: the slot of its
// producer's iteration; skipped in the first iterations, where that
// producer never ran). There is no barrier: iterations overlap as far as
// the planned waits allow.
//
// Host side, before issuing iteration i: it sees which earlier iterations
// have completed (each stream records a tail event after its last op of an
// iteration; a join stream of the executor's own waits on them and records
// the iteration's end event, so one query per iteration suffices); with
// an in-flight bound L it waits for iteration i−L; it delivers each
// streamed output of iteration i−K (K its copies), waiting first for the
// events after the output's last uses in that iteration (the device-to-host
// copy), and it fills each streamed input's copy for iteration i after
// waiting for the events after that copy's last uses in iteration i−K. The
// executor raises those events' slots to K so that the record waited for is
// still the latest one of its slot.
func runIterations(ctx context.Context, p *planner.Plan, b Backend, o Options, iters int) (res *Result, err error) {
	r, err := prepare(p, 1, o.Funcs)
	if err != nil {
		return nil, err
	}
	r.b = b
	x := &iterRun{run: r, o: o, iters: iters}
	defer func() {
		if cerr := x.release(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if err := x.prepare(); err != nil {
		return nil, err
	}
	if err := r.setup(); err != nil {
		return nil, err
	}
	if err := x.setup(); err != nil {
		return nil, err
	}
	start := time.Now()
	r.issued = true
	for it := 0; it < iters; it++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("executor: stopped before iteration %d of %d: %w", it+1, iters, err)
		}
		if err := x.iteration(it); err != nil {
			return nil, err
		}
	}
	syncErr := b.Synchronize()
	r.issued = false
	res = &Result{Wall: time.Since(start)}
	if _, race := syncErr.(*RaceError); syncErr != nil && !race {
		return nil, fmt.Errorf("executor: %s: synchronize: %w", b.Name(), syncErr)
	}
	if err := x.finish(); err != nil {
		return nil, err
	}
	res.Launches, res.Waits, res.Records = x.launches, x.waits, x.records
	res.Latencies = x.lat
	for i, pb := range p.Buffers {
		if pb.Role != dag.RoleOutput {
			continue
		}
		data, err := b.Read(x.bufs[i][(iters-1)%x.copies[i]])
		if err != nil {
			return nil, fmt.Errorf("executor: %s: read output %s: %w", b.Name(), pb.Name, err)
		}
		res.Outputs = append(res.Outputs, Output{Name: pb.Name, Bytes: pb.Bytes, Checksum: Checksum(data), Data: data})
	}
	return res, syncErr
}

// prepare computes the iteration's ops, phases, slots and host buffers;
// nothing touches the backend.
func (x *iterRun) prepare() error {
	p, o := x.p, x.o
	it := p.Iteration
	x.phys, _ = p.PhysicalStreams()
	x.copies = make([]int, len(p.Buffers))
	x.period = 1
	bufIdx := make(map[string]int, len(p.Buffers))
	for i, pb := range p.Buffers {
		x.copies[i] = max(pb.Copies, 1)
		x.period = lcm(x.period, x.copies[i])
		if x.period > maxPhases {
			return fmt.Errorf("executor: the buffers' copies have a least common multiple above %d: use fewer distinct ring sizes", maxPhases)
		}
		bufIdx[pb.Name] = i
	}
	for _, so := range p.IssueOrder {
		op := p.Streams[so[0]].Ops[so[1]]
		x.ops = append(x.ops, iterOp{kind: op.Kind, stream: so[0], event: op.Event, lag: op.Lag, stage: op.Stage})
	}
	x.slots = append([]int(nil), it.Slots...)
	life := make(map[string][]int, len(p.Lifetimes))
	for _, l := range p.Lifetimes {
		for _, d := range l.Done {
			life[l.Buffer] = append(life[l.Buffer], d.Event)
		}
	}
	host := func(name, what string) (hostBuf, error) {
		i, ok := bufIdx[name]
		if !ok {
			return hostBuf{}, fmt.Errorf("executor: %s for buffer %q: the plan has no such buffer", what, name)
		}
		pb := p.Buffers[i]
		if pb.Where != dag.WhereHostPinned {
			return hostBuf{}, fmt.Errorf("executor: %s for buffer %s: it is %s; the host streams only host_pinned buffers (copy it with a stage)", what, name, cmp.Or(pb.Where, dag.WhereDevice))
		}
		h := hostBuf{buf: i, k: x.copies[i], done: life[name], scratch: make([]byte, pb.Bytes)}
		if len(h.done) == 0 {
			return hostBuf{}, fmt.Errorf("executor: %s for buffer %s: no stage uses it", what, name)
		}
		for _, e := range h.done {
			x.slots[e] = max(x.slots[e], h.k)
		}
		return h, nil
	}
	for _, name := range slices.Sorted(maps.Keys(o.Inputs)) {
		h, err := host(name, "input")
		if err != nil {
			return err
		}
		h.in = o.Inputs[name]
		x.inputs = append(x.inputs, h)
	}
	for _, name := range slices.Sorted(maps.Keys(o.Outputs)) {
		h, err := host(name, "output")
		if err != nil {
			return err
		}
		h.out = o.Outputs[name]
		x.outputs = append(x.outputs, h)
	}
	x.inflight = o.InFlight
	if x.inflight < 0 {
		return fmt.Errorf("executor: in-flight bound %d, want ≥ 0", x.inflight)
	}
	if x.inflight == 0 && o.hostIO() {
		x.inflight = max(it.InFlight, it.StreamSets) + 1
	}
	if x.inflight > 0 {
		hs, ok := x.b.(HostSyncer)
		if !ok {
			return fmt.Errorf("executor: %s: %w (needed for host I/O and the in-flight bound)", x.b.Name(), ErrNoHostSync)
		}
		x.hs = hs
		x.start = make([]time.Time, x.iters)
		x.lat = make([]time.Duration, 0, x.iters)
	}
	// Phase 0 is run.descs; later phases get their own argument slices.
	x.descs = make([][]LaunchDesc, x.period)
	x.descs[0] = x.run.descs
	for ph := 1; ph < x.period; ph++ {
		d := make([]LaunchDesc, len(x.run.descs))
		for i, ld := range x.run.descs {
			ld.Reads = append([]Arg(nil), ld.Reads...)
			ld.Writes = append([]Arg(nil), ld.Writes...)
			d[i] = ld
		}
		x.descs[ph] = d
	}
	return nil
}

// setup creates what run.setup did not: the other stream sets, the other
// ring copies (with the buffer's initial contents), the other event slots,
// the tail events; it points every phase's launches at its copies.
func (x *iterRun) setup() error {
	p, b := x.p, x.b
	x.streams = append([]Stream(nil), x.run.streams...)
	_, total := p.PhysicalStreams()
	for len(x.streams) < total {
		s, err := b.NewStream()
		if err != nil {
			return fmt.Errorf("executor: %s: create stream %d of %d: %w", b.Name(), len(x.streams), total, err)
		}
		x.extraStreams = append(x.extraStreams, s)
		x.streams = append(x.streams, s)
	}
	newEvent := func() (Event, error) {
		e, err := b.NewEvent()
		if err != nil {
			return nil, fmt.Errorf("executor: %s: create event: %w", b.Name(), err)
		}
		x.extraEvents = append(x.extraEvents, e)
		return e, nil
	}
	x.evs = make([][]Event, p.Events)
	for e := range x.evs {
		x.evs[e] = []Event{x.run.events[e]}
		for len(x.evs[e]) < x.slots[e] {
			ev, err := newEvent()
			if err != nil {
				return err
			}
			x.evs[e] = append(x.evs[e], ev)
		}
	}
	if x.inflight > 0 {
		for range p.Streams {
			ev, err := newEvent()
			if err != nil {
				return err
			}
			x.tails = append(x.tails, ev)
		}
		for range x.inflight {
			ev, err := newEvent()
			if err != nil {
				return err
			}
			x.ends = append(x.ends, ev)
		}
		s, err := b.NewStream()
		if err != nil {
			return fmt.Errorf("executor: %s: create the join stream: %w", b.Name(), err)
		}
		x.extraStreams = append(x.extraStreams, s)
		x.join = s
	}
	x.bufs = make([][]Buffer, len(p.Buffers))
	var scratch []byte
	for i, pb := range p.Buffers {
		x.bufs[i] = []Buffer{x.run.bufs[i]}
		for c := 1; c < x.copies[i]; c++ {
			h, err := b.Alloc(BufferDesc{Name: fmt.Sprintf("%s#%d", pb.Name, c), Bytes: pb.Bytes, Where: cmp.Or(pb.Where, dag.WhereDevice)})
			if err != nil {
				return fmt.Errorf("executor: %s: alloc copy %d of buffer %s (%d bytes): %w", b.Name(), c, pb.Name, pb.Bytes, err)
			}
			x.extraBufs = append(x.extraBufs, h)
			x.bufs[i] = append(x.bufs[i], h)
			if int64(cap(scratch)) < pb.Bytes {
				scratch = make([]byte, pb.Bytes)
			}
			data := scratch[:pb.Bytes]
			if err := initInto(p.Dir, pb, data); err != nil {
				return fmt.Errorf("executor: %w", err)
			}
			if err := b.Write(h, data); err != nil {
				return fmt.Errorf("executor: %s: write initial contents of copy %d of buffer %s: %w", b.Name(), c, pb.Name, err)
			}
		}
	}
	idx := make(map[string]int, len(p.Buffers))
	for i, pb := range p.Buffers {
		idx[pb.Name] = i
	}
	for ph := 1; ph < x.period; ph++ {
		for i := range x.descs[ph] {
			for _, args := range [2][]Arg{x.descs[ph][i].Reads, x.descs[ph][i].Writes} {
				for k := range args {
					bi := idx[args[k].Name]
					args[k].Buffer = x.bufs[bi][ph%x.copies[bi]]
				}
			}
		}
	}
	return nil
}

// iteration does the host side of iteration it and issues its ops.
func (x *iterRun) iteration(it int) error {
	b := x.b
	if x.inflight > 0 {
		x.start[it] = time.Now()
		if err := x.poll(); err != nil {
			return err
		}
		if it >= x.inflight {
			if err := x.waitDone(it - x.inflight); err != nil {
				return err
			}
		}
		for k := range x.outputs {
			h := &x.outputs[k]
			for ; h.next <= it-h.k; h.next++ {
				if err := x.deliver(h, h.next); err != nil {
					return err
				}
			}
		}
		for k := range x.inputs {
			h := &x.inputs[k]
			if it >= h.k {
				if err := x.syncLifetime(h, it-h.k); err != nil {
					return err
				}
			}
			if err := h.in(it, h.scratch); err != nil {
				return fmt.Errorf("executor: input %s, iteration %d: %w", x.p.Buffers[h.buf].Name, it, err)
			}
			if err := x.hs.HostWrite(x.bufs[h.buf][it%h.k], 0, h.scratch); err != nil {
				return fmt.Errorf("executor: %s: write input %s copy %d for iteration %d: %w", b.Name(), x.p.Buffers[h.buf].Name, it%h.k, it, err)
			}
		}
	}
	set := x.phys[it%len(x.phys)]
	descs := x.descs[it%x.period]
	for i := range x.ops {
		op := &x.ops[i]
		s := x.streams[set[op.stream]]
		var err error
		switch op.kind {
		case planner.OpLaunch:
			d := &descs[op.stage]
			if f := x.run.funcs[op.stage]; f != nil {
				err = launchFunc(b, s, d, f)
			} else {
				err = b.Launch(s, d)
			}
			x.launches++
		case planner.OpRecord:
			err = b.Record(x.evs[op.event][it%x.slots[op.event]], s)
			x.records++
		case planner.OpWait:
			if op.lag > it {
				continue // the producer's iteration never ran
			}
			err = b.Wait(s, x.evs[op.event][(it-op.lag)%x.slots[op.event]])
			x.waits++
		}
		if err == nil && x.o.SyncEach {
			err = b.Synchronize()
		}
		if err != nil {
			return x.iterOpError(op, it, err)
		}
	}
	if x.inflight > 0 {
		// Each stream's end, joined on a stream of its own (so that no
		// stream of the plan waits), which records the iteration's end:
		// one event for the host to ask about.
		for s, tail := range x.tails {
			if err := b.Record(tail, x.streams[set[s]]); err != nil {
				return fmt.Errorf("executor: %s: iteration %d: record the end of stream %d: %w", b.Name(), it+1, s, err)
			}
			if err := b.Wait(x.join, tail); err != nil {
				return fmt.Errorf("executor: %s: iteration %d: join the end of stream %d: %w", b.Name(), it+1, s, err)
			}
			x.records++
			x.waits++
		}
		if err := b.Record(x.ends[it%x.inflight], x.join); err != nil {
			return fmt.Errorf("executor: %s: iteration %d: record its end: %w", b.Name(), it+1, err)
		}
		x.records++
	}
	x.issued = it + 1
	return nil
}

// syncLifetime waits for the events after the last uses of h's copy in
// iteration it; nothing to wait for once the host has seen it complete.
func (x *iterRun) syncLifetime(h *hostBuf, it int) error {
	if it < x.done {
		return nil
	}
	for _, e := range h.done {
		if err := x.hs.SyncEvent(x.evs[e][it%x.slots[e]]); err != nil {
			return fmt.Errorf("executor: %s: wait for the uses of %s in iteration %d: %w", x.b.Name(), x.p.Buffers[h.buf].Name, it, err)
		}
	}
	return nil
}

// deliver hands output h of iteration it to its OutputFunc.
func (x *iterRun) deliver(h *hostBuf, it int) error {
	name := x.p.Buffers[h.buf].Name
	if err := x.syncLifetime(h, it); err != nil {
		return err
	}
	if err := x.hs.HostRead(x.bufs[h.buf][it%h.k], 0, h.scratch); err != nil {
		return fmt.Errorf("executor: %s: read output %s of iteration %d: %w", x.b.Name(), name, it, err)
	}
	if err := h.out(it, h.scratch); err != nil {
		return fmt.Errorf("executor: output %s, iteration %d: %w", name, it, err)
	}
	return nil
}

// poll marks the issued iterations that have completed, oldest first.
func (x *iterRun) poll() error {
	for x.done < x.issued {
		ok, err := x.hs.QueryEvent(x.ends[x.done%x.inflight])
		if err != nil {
			return fmt.Errorf("executor: %s: query the end of iteration %d: %w", x.b.Name(), x.done, err)
		}
		if !ok {
			return nil
		}
		if err := x.complete(x.done); err != nil {
			return err
		}
	}
	return nil
}

// waitDone waits until iterations up to it have completed.
func (x *iterRun) waitDone(it int) error {
	for x.done <= it {
		if err := x.hs.SyncEvent(x.ends[x.done%x.inflight]); err != nil {
			return fmt.Errorf("executor: %s: wait for the end of iteration %d: %w", x.b.Name(), x.done, err)
		}
		if err := x.complete(x.done); err != nil {
			return err
		}
	}
	return nil
}

// complete records iteration it as seen complete now, delivers its outputs
// and reports progress.
func (x *iterRun) complete(it int) error {
	lat := time.Since(x.start[it])
	x.lat = append(x.lat, lat)
	x.done = it + 1
	for k := range x.outputs {
		if h := &x.outputs[k]; h.next == it {
			if err := x.deliver(h, it); err != nil {
				return err
			}
			h.next++
		}
	}
	if x.o.Progress != nil {
		x.o.Progress(it, lat)
	}
	return nil
}

// finish completes the iterations still pending after the final
// Synchronize (everything has run) and delivers their outputs.
func (x *iterRun) finish() error {
	if x.inflight == 0 {
		return nil
	}
	for x.done < x.issued {
		if err := x.complete(x.done); err != nil {
			return err
		}
	}
	for k := range x.outputs {
		h := &x.outputs[k]
		for ; h.next < x.issued; h.next++ {
			if err := x.deliver(h, h.next); err != nil {
				return err
			}
		}
	}
	return nil
}

func (x *iterRun) iterOpError(op *iterOp, it int, err error) error {
	ps := x.phys[it%len(x.phys)][op.stream]
	st := fmt.Sprintf("stream %d", op.stream)
	if name := x.p.Streams[op.stream].Name; name != "" {
		st += " (" + name + ")"
	}
	if ps != op.stream {
		st += fmt.Sprintf(" of stream set %d", it%len(x.phys))
	}
	var what string
	switch op.kind {
	case planner.OpLaunch:
		d := &x.run.descs[op.stage]
		what = fmt.Sprintf("launch stage %s (kernel %s) on %s", d.Name, d.Kernel, st)
	case planner.OpRecord:
		what = fmt.Sprintf("record event %d on %s", op.event, st)
	default:
		what = fmt.Sprintf("wait on event %d (lag %d) on %s", op.event, op.lag, st)
	}
	return fmt.Errorf("executor: %s: iteration %d: %s: %w", x.b.Name(), it+1, what, err)
}

// release destroys what setup made, after run.release (which synchronizes
// issued work and releases copy 0, the first stream set and slot 0).
func (x *iterRun) release() error {
	err := x.run.release()
	var errs []error
	for i, e := range x.extraEvents {
		if cerr := x.b.DestroyEvent(e); cerr != nil {
			errs = append(errs, fmt.Errorf("executor: %s: destroy event slot %d: %w", x.b.Name(), i, cerr))
		}
	}
	for i, s := range x.extraStreams {
		if cerr := x.b.DestroyStream(s); cerr != nil {
			errs = append(errs, fmt.Errorf("executor: %s: destroy stream %d of a stream set: %w", x.b.Name(), i, cerr))
		}
	}
	for i, h := range x.extraBufs {
		if cerr := x.b.Free(h); cerr != nil {
			errs = append(errs, fmt.Errorf("executor: %s: free ring copy %d: %w", x.b.Name(), i, cerr))
		}
	}
	x.extraEvents, x.extraStreams, x.extraBufs = nil, nil, nil
	return errors.Join(append([]error{err}, errs...)...)
}

func lcm(a, b int) int {
	g, h := a, b
	for h != 0 {
		g, h = h, g%h
	}
	return a / g * b
}
