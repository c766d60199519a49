package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/verify"
)

// exec is a program set up on a backend: what it created there, the host
// side's state, and the counts of issued ops.
type exec struct {
	x  *program
	b  Backend
	hs HostSyncer
	sa StreamAllocator
	gb GraphBackend
	fl FuncLauncher
	hh HostHandoff // a host thread's view, for its handoffs (threads.go)

	views    []Backend // per host thread, its view of b (threads.go); nil with one thread
	handoffs *handoffs

	capturing, capStream int32             // the graph being captured (capture_regions.go), −1; its stream
	lazyDone             map[[2]int32]bool // (stream, lazy buffer): workspace allocated

	syncEach bool
	progress func(iteration int, latency time.Duration)

	streams []Stream
	events  []Event
	bufs    [][]Buffer    // per plan buffer, per ring copy; the arena's for arena buffers, nil for dynamic ones
	owned   []Buffer      // allocations of its own (freed by release)
	arena   []Buffer      // per device: its arena, nil if none
	live    []Buffer      // per plan buffer: the current dynamic allocation
	freed   []bool        // per plan buffer: live's free was issued
	hostRec []atomic.Bool // per physical event: its latest record was a host stream's (atomic: host threads share it)
	graphs  []Graph       // per phase, in graph mode

	pending bool // work was issued and not synchronized
	issued  int  // iterations issued
	done    int  // iterations the host saw complete (a prefix)
	next    []int
	start   []time.Time     // per iteration in flight (ring of in-flight + 1): when its host work began
	lat     []time.Duration // Result.Latencies: every iteration's, or a uniform sample of MaxLatencies
	latRng  *rand.Rand      // the sample's choices (Vitter's algorithm R)
	scratch [][]byte        // per host input/output

	launches, waits, records int
	captured                 []counts // per phase: the ops one replay runs
}

type counts struct{ launches, waits, records int }

// setup creates on b everything the program names: buffers (with their
// initial contents), the arena, streams and events; it fills the buffer
// handles into the launch descriptions. Release undoes it, also after an
// error.
func (x *program) setup(b Backend, o *Options) (*exec, error) {
	if err := x.requires(b); err != nil {
		return nil, err
	}
	e := &exec{x: x, b: b, syncEach: o.SyncEach, progress: o.Progress, capturing: -1}
	e.hs, _ = b.(HostSyncer)
	e.sa, _ = b.(StreamAllocator)
	e.gb, _ = b.(GraphBackend)
	e.fl, _ = b.(FuncLauncher)
	if err := e.setup(); err != nil {
		return e, err
	}
	return e, nil
}

func (e *exec) setup() error {
	x, b, p := e.x, e.b, e.x.p
	e.arena = make([]Buffer, len(x.arenaBytes))
	for d, n := range x.arenaBytes {
		if n == 0 {
			continue
		}
		name, what := "arena", "the arena"
		if len(x.arenaBytes) > 1 {
			name, what = fmt.Sprintf("arena@%d", d), fmt.Sprintf("the arena of device %d", d)
		}
		h, err := b.Alloc(BufferDesc{Name: name, Bytes: n, Where: contract.WhereDevice, Device: d})
		if err != nil {
			return fmt.Errorf("executor: %s: alloc %s (%d bytes): %w", b.Name(), what, n, err)
		}
		e.arena[d] = h
	}
	var scratch, zeros []byte
	e.bufs = make([][]Buffer, len(p.Buffers))
	for i, pb := range p.Buffers {
		k := x.m.Copies[i]
		e.bufs[i] = make([]Buffer, k)
		if x.arenaOff[i] >= 0 {
			e.bufs[i][0] = e.arena[pb.Device]
			continue
		}
		if x.dynamic[i] {
			continue
		}
		where := cmp.Or(pb.Where, string(contract.WhereDevice))
		for c := range k {
			name := pb.Name
			if k > 1 {
				name = fmt.Sprintf("%s#%d", pb.Name, c)
			}
			h, err := b.Alloc(BufferDesc{Name: name, Bytes: pb.Bytes, Where: contract.Where(where), Device: pb.Device})
			if err != nil {
				return fmt.Errorf("executor: %s: alloc buffer %s (%d bytes, %s): %w", b.Name(), name, pb.Bytes, where, err)
			}
			e.owned = append(e.owned, h)
			e.bufs[i][c] = h
			var data []byte
			switch pb.Init {
			case "", string(contract.InitZeros):
				// Zeros come from a slice never written: its pages stay the
				// system's zero page, so a large zero buffer costs no host
				// memory here (the simulator does not write zeros at all).
				if int64(len(zeros)) < pb.Bytes {
					zeros = make([]byte, pb.Bytes)
				}
				data = zeros[:pb.Bytes]
			default:
				if int64(cap(scratch)) < pb.Bytes {
					scratch = make([]byte, pb.Bytes)
				}
				data = scratch[:pb.Bytes]
				if err := initInto(p.Dir, pb, data); err != nil {
					return fmt.Errorf("executor: %w", err)
				}
			}
			if err := b.Write(h, data); err != nil {
				return fmt.Errorf("executor: %s: write initial contents of buffer %s: %w", b.Name(), name, err)
			}
		}
	}
	for i := range x.descs {
		for k := range x.descs[i] {
			d := &x.descs[i][k]
			for _, set := range [2][]Arg{d.Reads, d.Writes} {
				for a := range set {
					set[a].Buffer = e.bufs[set[a].buf][set[a].copy]
				}
			}
		}
	}
	for len(e.streams) < x.streams {
		s, err := e.newStream(len(e.streams)) // kinds.go
		if err != nil {
			return fmt.Errorf("executor: %s: create stream %d of %d: %w", b.Name(), len(e.streams)+1, x.streams, err)
		}
		e.streams = append(e.streams, s)
	}
	for len(e.events) < x.events {
		ev, err := b.NewEvent()
		if err != nil {
			return fmt.Errorf("executor: %s: create event %d of %d: %w", b.Name(), len(e.events)+1, x.events, err)
		}
		e.events = append(e.events, ev)
	}
	if x.host {
		e.hostRec = make([]atomic.Bool, x.events)
	}
	if x.free >= 0 {
		e.live = make([]Buffer, len(p.Buffers))
		e.freed = make([]bool, len(p.Buffers))
	}
	if x.inflight > 0 {
		e.start = make([]time.Time, x.inflight+1) // at most in-flight + 1 iterations are outstanding
		e.lat = make([]time.Duration, 0, min(x.iters, MaxLatencies))
	}
	for _, set := range [2][]hostBuf{x.inputs, x.outputs} {
		for _, h := range set {
			e.scratch = append(e.scratch, make([]byte, p.Buffers[h.buf].Bytes))
		}
	}
	e.next = make([]int, len(x.outputs))
	e.graphs = make([]Graph, max(len(x.capture), len(x.graphCounts)))
	e.captured = make([]counts, len(x.capture))
	if x.regionMode {
		e.captured = x.graphCounts
	}
	if x.threads != nil {
		return e.threadViews() // threads.go
	}
	return nil
}

// issue runs the instructions of one program for iteration it: the one
// issue loop of the executor.
func (e *exec) issue(prog []instr, it int) error {
	b, streams, events, syncEach := e.b, e.streams, e.events, e.syncEach
	var launches, waits, records int
	e.pending = true
	for i := range prog {
		in := &prog[i]
		var err error
		// The three ops of every plan first, as plain branches (they
		// alternate, which a jump table predicts badly); the rest in issueOther.
		switch in.op {
		case opLaunch:
			err = b.Launch(streams[in.stream], in.desc)
			launches++
		case opRecord:
			err = b.Record(events[in.event], streams[in.stream])
			records++
		case opWait:
			err = b.Wait(streams[in.stream], events[in.event])
			waits++
		default:
			var c counts
			c, err = e.issueOther(in, it)
			launches, waits, records = launches+c.launches, waits+c.waits, records+c.records
		}
		if err == nil && syncEach && !midGroup(in) {
			err = b.Synchronize()
		}
		if err != nil {
			e.launches, e.waits, e.records = e.launches+launches, e.waits+waits, e.records+records
			return e.captureError(in, e.opError(in, it, err)) // capture_regions.go
		}
	}
	e.launches, e.waits, e.records = e.launches+launches, e.waits+waits, e.records+records
	return nil
}

// issueOther issues an instruction other than a plain launch, record or
// wait, and returns the backend ops it counts.
func (e *exec) issueOther(in *instr, it int) (c counts, err error) {
	switch in.op {
	case opLaunchBind:
		return counts{launches: 1}, e.b.Launch(e.streams[in.stream], e.bind(in.desc))
	case opRecordTrack:
		if e.hostRec != nil {
			e.hostRec[in.event].Store(false)
		}
		return counts{records: 1}, e.b.Record(e.events[in.event], e.streams[in.stream])
	case opWaitTrack:
		if it < int(in.lag) || e.hostRec != nil && e.hostRec[in.event].Load() {
			return c, nil
		}
		return counts{waits: 1}, e.b.Wait(e.streams[in.stream], e.events[in.event])
	case opFunc:
		d := in.desc
		if in.dyn {
			d = e.bind(d)
		}
		return counts{launches: 1}, e.fl.LaunchFunc(e.streams[in.stream], d, in.fn)
	case opHost:
		return counts{launches: 1}, hostLaunch(e.hs, in.desc)
	case opHostRecord:
		e.hostRec[in.event].Store(true)
	case opHostWait:
		if it < int(in.lag) || e.hostRec[in.event].Load() {
			return c, nil
		}
		return c, e.hs.SyncEvent(e.events[in.event])
	case opSignal:
		e.hostRec[in.event].Store(true)
		e.handoffs.signal(in.buf, it, e.hh)
	case opAwait:
		if it < int(in.lag) {
			return c, nil
		}
		if !e.handoffs.await(in.buf, it-int(in.lag), e.hh) {
			return c, errHandoff
		}
	case opAlloc:
		pb := e.x.p.Buffers[in.buf]
		var h Buffer
		h, err = e.sa.AllocAsync(BufferDesc{Name: pb.Name, Bytes: pb.Bytes, Where: contract.WhereDevice}, e.streams[in.stream])
		e.live[in.buf], e.freed[in.buf] = h, false
		return c, err
	case opFree:
		c.waits, err = e.free(in)
		return c, err
	case opHostIO:
		return c, e.hostSide(it)
	case opEnd:
		return counts{records: 1}, e.b.Record(e.endEvent(it), e.streams[in.stream])
	case opGraph:
		return e.captured[in.buf], e.gb.LaunchGraph(e.graphs[in.buf], e.streams[in.stream])
	case opCaptureBegin:
		return c, e.beginCapture(in)
	case opCaptureEnd:
		return e.endCapture(in)
	case opLazy:
		return c, e.lazyAlloc(in)
	}
	return c, nil
}

// free issues a dynamic buffer's free: the free stream waits on the events
// of its lifetime, then frees it there (stream-ordered, never a device-wide
// synchronization).
// It returns the waits issued.
func (e *exec) free(in *instr) (waits int, err error) {
	name := e.x.p.Buffers[in.buf].Name
	for _, ev := range e.x.lists[in.event] {
		if err := e.b.Wait(e.streams[in.stream], e.events[ev]); err != nil {
			return waits, fmt.Errorf("free %s: wait on event %d: %w", name, ev, err)
		}
		waits++
	}
	e.freed[in.buf] = true
	if err := e.sa.FreeAsync(e.live[in.buf], e.streams[in.stream]); err != nil {
		return waits, fmt.Errorf("free %s: %w", name, err)
	}
	return waits, nil
}

// bind returns d, or for a launch that touches dynamic buffers a copy of d
// whose accesses point at their current allocations (a fresh copy per
// launch: the backend may keep it until the launch has run, and the next
// iteration allocates anew).
func (e *exec) bind(d *LaunchDesc) *LaunchDesc {
	if e.live == nil {
		return d
	}
	c := *d
	c.Reads, c.Writes = slices.Clone(d.Reads), slices.Clone(d.Writes)
	for _, set := range [2][]Arg{c.Reads, c.Writes} {
		for k := range set {
			if e.x.dynamic[set[k].buf] {
				set[k].Buffer = e.live[set[k].buf]
			}
		}
	}
	return &c
}

// run issues the program's iterations, then runs the shared tail.
func (e *exec) run(ctx context.Context) (*Result, error) {
	x := e.x
	if x.threads != nil {
		return e.runThreads(ctx) // threads.go
	}
	start := time.Now()
	for it := 0; it < x.iters; it++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("executor: stopped before iteration %d of %d: %w", it+1, x.iters, err)
		}
		prog := x.phases[it%len(x.phases)]
		if it < len(x.first) {
			prog = x.first[it] // capture regions: it captures (capture_regions.go)
		}
		if err := e.issue(prog, it); err != nil {
			return nil, err
		}
		e.issued = it + 1
	}
	return e.tail(start)
}

// tail synchronizes, completes the host side of the iterations still
// pending, reads back the role=output buffers (the last iteration's ring
// copy) and returns the Result. A race report alone (*RaceError) comes with
// the Result, its races in Result.Races; any other error with none.
func (e *exec) tail(start time.Time) (*Result, error) {
	b := e.b
	syncErr := b.Synchronize()
	e.pending = false
	res := &Result{Wall: time.Since(start)}
	race, err := splitRace(syncErr)
	if err != nil {
		return nil, fmt.Errorf("executor: %s: synchronize: %w", b.Name(), err)
	}
	if err := e.finish(); err != nil {
		return nil, err
	}
	res.Launches, res.Waits, res.Records = e.launches, e.waits, e.records
	res.Latencies, res.LatencyIterations = e.lat, e.done
	last := max(e.issued-1, 0)
	for i, pb := range e.x.p.Buffers {
		if pb.Role != string(contract.RoleOutput) {
			continue
		}
		data, err := b.Read(e.bufs[i][e.x.m.Copy(last, i)])
		if err != nil {
			return nil, fmt.Errorf("executor: %s: read output %s: %w", b.Name(), pb.Name, err)
		}
		res.Outputs = append(res.Outputs, Output{Name: pb.Name, Bytes: pb.Bytes, Checksum: Checksum(data), Data: data})
	}
	if race != nil {
		e.nameRaces(race)
		res.Races, res.RaceReport = race.Races, race.Plan
		return res, race
	}
	return res, nil
}

// nameRaces puts the plan's names on the detector's report: stream names
// (with the stream set), byte ranges relative to the buffer rather than to
// the arena, and the plan-level report of verify.Verify.
func (e *exec) nameRaces(re *RaceError) {
	x, p := e.x, e.x.p
	names := make([]string, x.streams)
	for r, set := range x.m.Sets {
		for s, ps := range set {
			if names[ps] == "" {
				names[ps] = p.Streams[s].Name
				if r > 0 && ps != s {
					names[ps] = fmt.Sprintf("%s/%d", p.Streams[s].Name, r)
				}
			}
		}
	}
	for i := range names {
		if names[i] == "" {
			names[i] = "the executor's"
		}
	}
	idx := bufferIndex(p)
	for k := range re.Races {
		r := &re.Races[k]
		for _, a := range []*RaceAccess{&r.First, &r.Second} {
			if a.Stream >= 0 && a.Stream < len(names) {
				a.StreamName = names[a.Stream]
			}
		}
		if b, ok := idx[r.Buffer]; ok && x.arenaOff[b] > 0 && r.Offset >= x.arenaOff[b] {
			r.Offset -= x.arenaOff[b]
		}
	}
	if err := verify.Verify(p); err != nil {
		if pr, ok := err.(*verify.RaceError); ok {
			re.Plan = pr
		}
	}
}

// splitRace separates a race report from other errors: a *RaceError alone
// is returned as race; anything else (a fault, possibly joined with a race
// report) as err.
func splitRace(err error) (race *RaceError, other error) {
	if re, ok := err.(*RaceError); ok {
		return re, nil
	}
	return nil, err
}

// hostSide is the host's part of iteration it, before its ops are issued:
// it notes the iterations that have completed, waits for iteration
// it−InFlight, delivers each host output of iteration it−K (K its copies)
// and fills each host input's copy for iteration it after the uses of that
// copy in iteration it−K.
func (e *exec) hostSide(it int) error {
	x, b := e.x, e.b
	e.start[it%len(e.start)] = time.Now()
	if err := e.poll(); err != nil {
		return err
	}
	if it >= x.inflight {
		if err := e.waitDone(it - x.inflight); err != nil {
			return err
		}
	}
	for k := range x.outputs {
		h := &x.outputs[k]
		for ; e.next[k] <= it-h.k; e.next[k]++ {
			if err := e.deliver(k, e.next[k]); err != nil {
				return err
			}
		}
	}
	for k := range x.inputs {
		h := &x.inputs[k]
		if it >= h.k {
			if err := e.syncLifetime(h, it-h.k); err != nil {
				return err
			}
		}
		buf := e.scratch[k]
		if err := h.in(it, buf); err != nil {
			return fmt.Errorf("executor: input %s, iteration %d: %w", x.p.Buffers[h.buf].Name, it, err)
		}
		c := x.m.Copy(it, h.buf)
		if err := e.hs.HostWrite(e.bufs[h.buf][c], 0, buf); err != nil {
			return fmt.Errorf("executor: %s: write input %s copy %d for iteration %d: %w", b.Name(), x.p.Buffers[h.buf].Name, c, it, err)
		}
	}
	return nil
}

// syncLifetime waits for the events after the last uses of h's copy in
// iteration it; nothing to wait for once the host has seen it complete.
func (e *exec) syncLifetime(h *hostBuf, it int) error {
	if it < e.done {
		return nil
	}
	for _, ev := range h.done {
		if err := e.hs.SyncEvent(e.events[e.x.m.Record(it, ev)]); err != nil {
			return fmt.Errorf("executor: %s: wait for the uses of %s in iteration %d: %w", e.b.Name(), e.x.p.Buffers[h.buf].Name, it, err)
		}
	}
	return nil
}

// deliver hands output k of iteration it to its OutputFunc.
func (e *exec) deliver(k, it int) error {
	h := &e.x.outputs[k]
	name := e.x.p.Buffers[h.buf].Name
	if err := e.syncLifetime(h, it); err != nil {
		return err
	}
	buf := e.scratch[len(e.x.inputs)+k]
	if err := e.hs.HostRead(e.bufs[h.buf][e.x.m.Copy(it, h.buf)], 0, buf); err != nil {
		return fmt.Errorf("executor: %s: read output %s of iteration %d: %w", e.b.Name(), name, it, err)
	}
	if err := h.out(it, buf); err != nil {
		return fmt.Errorf("executor: output %s, iteration %d: %w", name, it, err)
	}
	return nil
}

func (e *exec) endEvent(it int) Event { return e.events[e.x.ends+int32(it%e.x.inflight)] }

// poll marks the issued iterations that have completed, oldest first.
func (e *exec) poll() error {
	for e.done < e.issued {
		ok, err := e.hs.QueryEvent(e.endEvent(e.done))
		if err != nil {
			return fmt.Errorf("executor: %s: query the end of iteration %d: %w", e.b.Name(), e.done, err)
		}
		if !ok {
			return nil
		}
		if err := e.complete(e.done); err != nil {
			return err
		}
	}
	return nil
}

// waitDone waits until iterations up to it have completed.
func (e *exec) waitDone(it int) error {
	for e.done <= it {
		if err := e.hs.SyncEvent(e.endEvent(e.done)); err != nil {
			return fmt.Errorf("executor: %s: wait for the end of iteration %d: %w", e.b.Name(), e.done, err)
		}
		if err := e.complete(e.done); err != nil {
			return err
		}
	}
	return nil
}

// complete records iteration it as seen complete now, delivers its outputs
// and reports progress.
func (e *exec) complete(it int) error {
	lat := time.Since(e.start[it%len(e.start)])
	switch {
	case len(e.lat) < MaxLatencies:
		e.lat = append(e.lat, lat)
	default: // reservoir sampling (Vitter 1985, algorithm R): keep it with probability MaxLatencies/(it+1)
		if e.latRng == nil {
			e.latRng = rand.New(rand.NewPCG(1, 2))
		}
		if j := e.latRng.IntN(it + 1); j < MaxLatencies {
			e.lat[j] = lat
		}
	}
	e.done = it + 1
	for k := range e.x.outputs {
		if e.next[k] == it {
			if err := e.deliver(k, it); err != nil {
				return err
			}
			e.next[k]++
		}
	}
	if e.progress != nil {
		e.progress(it, lat)
	}
	return nil
}

// finish completes the iterations still pending after the final
// Synchronize (everything has run) and delivers their outputs.
func (e *exec) finish() error {
	if e.x.inflight == 0 {
		return nil
	}
	for e.done < e.issued {
		if err := e.complete(e.done); err != nil {
			return err
		}
	}
	for k := range e.x.outputs {
		for ; e.next[k] < e.issued; e.next[k]++ {
			if err := e.deliver(k, e.next[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// opError names the instruction that failed: its plan op (stage, event,
// stream and stream set) or the executor's own op, and the iteration.
func (e *exec) opError(in *instr, it int, err error) error {
	x := e.x
	var what string
	if in.src < 0 {
		what = fmt.Sprintf("the executor's %s on stream %d", in.op, in.stream)
	} else {
		so := x.p.IssueOrder[in.src]
		o := x.p.Streams[so[0]].Ops[so[1]]
		st := fmt.Sprintf("stream %d", so[0])
		if name := x.p.Streams[so[0]].Name; name != "" {
			st += " (" + name + ")"
		}
		if len(x.m.Sets) > 1 && int(in.stream) != so[0] {
			st += fmt.Sprintf(" of stream set %d", x.m.Set(it))
		}
		switch in.op {
		case opLaunch, opLaunchBind, opFunc, opHost:
			what = fmt.Sprintf("launch stage %s (kernel %s) on %s", in.desc.Name, in.desc.Kernel, st)
		case opAlloc, opFree:
			what = fmt.Sprintf("%s buffer %s on %s", in.op, x.p.Buffers[in.buf].Name, st)
		case opLazy:
			what = fmt.Sprintf("allocate the workspace of lazy buffer %s at its first use on %s (stage %s)", x.p.Buffers[in.buf].Name, st, x.p.Stages[o.Stage].Name)
		case opRecord, opRecordTrack, opHostRecord, opSignal:
			what = fmt.Sprintf("record event %d on %s", o.Event, st)
		default:
			what = fmt.Sprintf("wait on event %d (lag %d) on %s", o.Event, o.Lag, st)
		}
	}
	return fmt.Errorf("executor: %s: iteration %d: %s: %w", e.b.Name(), it+1, what, err)
}

func (op opcode) String() string {
	return [...]string{"launch", "launch", "Go-function launch", "host launch", "record", "host record", "wait", "record", "wait", "host wait",
		"alloc", "free", "host side", "end record", "graph launch", "host signal", "host await",
		"begin capture", "end capture", "workspace allocation"}[op]
}

// release waits for issued work, then destroys the graphs, events and
// streams and frees the buffers it created; it returns every error met.
func (e *exec) release() error {
	if e == nil {
		return nil
	}
	b := e.b
	var errs []error
	if e.pending {
		if err := b.Synchronize(); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: synchronize before release: %w", b.Name(), err))
		}
		e.pending = false
	}
	for i, g := range e.graphs {
		if g == nil {
			continue
		}
		if err := e.gb.DestroyGraph(g); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: destroy graph %d: %w", b.Name(), i, err))
		}
	}
	for i, ev := range e.events {
		if err := b.DestroyEvent(ev); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: destroy event %d: %w", b.Name(), i, err))
		}
	}
	for i, s := range e.streams {
		if err := b.DestroyStream(s); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: destroy stream %d: %w", b.Name(), i, err))
		}
	}
	for i, h := range e.live {
		if h != nil && !e.freed[i] {
			if err := b.Free(h); err != nil {
				errs = append(errs, fmt.Errorf("executor: %s: free buffer %s: %w", b.Name(), e.x.p.Buffers[i].Name, err))
			}
		}
	}
	for _, h := range append(e.owned, e.arena...) {
		if h == nil {
			continue
		}
		if err := b.Free(h); err != nil {
			errs = append(errs, fmt.Errorf("executor: %s: free buffer: %w", b.Name(), err))
		}
	}
	e.graphs, e.events, e.streams, e.live, e.owned, e.arena = nil, nil, nil, nil, nil, nil
	return errors.Join(errs...)
}

// midGroup reports whether in launches a rank of a collective other than
// its last: with sync-each the executor synchronizes after the whole group
// (its ranks run together; synchronizing after one rank would wait for
// ranks not yet issued).
func midGroup(in *instr) bool {
	if in.desc == nil || in.desc.Collective == nil {
		return false
	}
	c := in.desc.Collective
	return c.Rank < c.Ranks-1
}
