package executor

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
)

// The executor lowers a plan once, for the options of a run, into a
// program: per ring phase a flat list of instructions with physical
// streams, events and ring copies resolved through plan.IterationMap.
// One issue loop (exec.issue) runs every program: the iterations of stream
// mode, the capture and the replays of graph mode.

// opcode is what one instruction does.
type opcode uint8

const (
	opLaunch       opcode = iota // Backend.Launch(desc) on stream
	opLaunchBind                 // opLaunch of a launch that touches dynamic buffers, bound to their current allocations first
	opFunc                       // a Go-function stage (FuncLauncher) on stream
	opHost                       // a host stage, computed on the issuing goroutine now
	opRecord                     // Backend.Record(event, stream)
	opHostRecord                 // a record on the host stream: nothing is issued, the event's latest record is the host's
	opWait                       // Backend.Wait(stream, event)
	opRecordTrack                // opRecord in a program with host stages: also notes that the latest record is a device stream's
	opWaitTrack                  // opWait with a lag (left out before iteration lag) or in a program with host stages (left out when the event's latest record is the host's)
	opHostWait                   // HostSyncer.SyncEvent(event), the host stream's wait; left out likewise
	opAlloc                      // StreamAllocator.AllocAsync of dynamic buffer buf on stream
	opFree                       // the free stream waits on the events lists[event], then FreeAsync of buf
	opHostIO                     // the host side of an iteration: completions, the in-flight bound, host outputs and inputs
	opEnd                        // Backend.Record of the iteration's end event (ends[it mod in-flight]) on stream
	opGraph                      // GraphBackend.LaunchGraph of the graph of phase buf on stream
	opSignal                     // opHostRecord of a host event handed to another thread: also signals handoff buf (threads.go)
	opAwait                      // a host wait on another thread's host event: blocks until handoff buf of iteration it−lag was signalled (threads.go)
	opCaptureBegin               // GraphBackend.BeginCapture on stream of the region of graph buf (capture_regions.go)
	opCaptureEnd                 // GraphBackend.EndCapture on stream: graph buf
	opLazy                       // the workspace of lazy buffer buf on stream, at its first use there (capture_regions.go)
)

// instr is one instruction of a lowered program.
type instr struct {
	op     opcode
	dyn    bool  // a launch that touches dynamic buffers: bound to their current allocations first
	lag    int32 // a wait: left out in the first lag iterations (its record never ran)
	stream int32 // physical stream: index into exec.streams
	event  int32 // physical event: index into exec.events (opFree: into program.lists)
	buf    int32 // plan buffer (opAlloc, opFree); phase (opGraph); handoff (opSignal, opAwait)
	src    int32 // the plan op it comes from (index into IssueOrder); −1: the executor's own
	desc   *LaunchDesc
	fn     StageFunc
}

// program is a plan lowered for one run's options. Nothing in it refers to
// a backend: exec.setup creates the streams, events and buffers it names.
type program struct {
	p              *plan.Plan
	m              *plan.IterationMap
	graph          bool // graph shape: capture programs and replays
	graphsOptional bool // graph shape set up without graphs (Prepared.Issue)
	iters          int

	// phases[it mod len(phases)] is what iteration it issues: the plan's ops
	// (stream mode), or the replay of the captured graph (graph mode).
	phases [][]instr
	// capture[ph], in graph shape: what the graph of phase ph records
	// (fork, the plan's ops without cross-iteration waits, join).
	capture [][]instr
	lists   [][]int32 // event lists of opFree

	descs [][]LaunchDesc // per stage: one per phase if it touches a ring buffer, else one
	kinds []string       // per physical stream: its planner kind; nil when every stream is non-blocking (kinds.go)
	// Several devices (devices.go): per physical stream its device, nil
	// with one device; whether the plan has collective stages.
	streamDev   []int
	collectives bool
	funcs       []StageFunc // per stage: its Go function, or nil

	streams  int   // physical streams, then the executor's (join, free)
	events   int   // physical events, then the executor's (fork, joins, tails, ends)
	origin   int32 // stream of graph capture and replay
	free     int32 // free stream, −1 without dynamic buffers
	ends     int32 // first of the in-flight end events, −1 without
	inflight int   // in-flight bound L (0: untracked)

	// Host threads (threads.go), nil with one: per thread its instructions
	// (threads[0].phases is phases), per plan stream its thread, and the
	// host events handed across threads: by issue position, the records
	// that signal and the waits that await each handoff, and per handoff
	// its awaits in one iteration.
	threads   []threadProg
	thread    []int
	signals   map[int]int32
	awaits    map[int]int32
	awaitsPer []int

	// Capture regions in graph mode (capture_regions.go): the regions, per
	// phase the program of its first iteration (which captures), and per
	// graph (phase × region) its captured ops.
	regionMode  bool
	regions     []region
	first       [][]instr
	graphCounts []counts
	lazy        []bool // per plan buffer: plan.AllocLazy

	host       bool    // host stages: needs a HostSyncer
	dynamic    []bool  // per plan buffer: allocated at first use, freed after its lifetime
	arenaOff   []int64 // per plan buffer: its arena offset (in its device's arena), or −1
	arenaBytes []int64 // per device: its arena's bytes (0: none)
	inputs     []hostBuf
	outputs    []hostBuf
}

// hostBuf is a host_pinned buffer the host fills or reads every iteration.
type hostBuf struct {
	buf  int   // plan buffer index
	k    int   // copies
	done []int // plan events after its last use on each stream (its lifetime)
	in   InputFunc
	out  OutputFunc
}

// MaxIterations bounds Options.Iterations: 2^40 iterations, beyond any
// run's patience at a microsecond each (12 days), so a count that is a
// mistake (a float's bits, a negative number cast) is refused up front.
const MaxIterations = 1 << 40

// MaxPeriod is the most iterations after which a run of several
// iterations may repeat: the least common multiple of the plan's stream
// sets, event slots and ring sizes (ring sizes alone in graph mode). A
// plan past it is refused with a PeriodError.
const MaxPeriod = maxPhases

// Bounds of a lowered program.
const (
	// maxPhases bounds the phases of a program: the least common multiple
	// of the plan's stream sets, event slots and ring sizes.
	maxPhases = 1024
	// maxInstrs bounds the instructions of all phases together.
	maxInstrs = 1 << 23
)

// lower checks p and o and lowers p for them. It touches no backend; the
// backend's abilities are checked by program.requires.
func lower(p *plan.Plan, o *Options) (*program, error) {
	iters := cmp.Or(o.Iterations, 1)
	if iters < 0 || iters > MaxIterations {
		return nil, fmt.Errorf("executor: iterations = %d, want 1 to %d (executor.MaxIterations)", iters, MaxIterations)
	}
	graph := false
	switch o.Mode {
	case "", ModeStreams:
	case ModeGraph:
		graph = true
	default:
		return nil, fmt.Errorf("executor: mode %q, want streams or graph", o.Mode)
	}
	dynamic := false
	switch o.Alloc {
	case "", AllocStatic:
	case AllocDynamic:
		dynamic = true
	default:
		return nil, fmt.Errorf("executor: alloc mode %q, want static or dynamic", o.Alloc)
	}
	if o.InFlight < 0 {
		return nil, fmt.Errorf("executor: in-flight bound %d, want ≥ 0", o.InFlight)
	}
	if graph {
		switch {
		case o.SyncEach:
			return nil, errors.New("executor: graph mode cannot synchronize after each op (sync-each): use stream mode to find a faulting stage")
		case dynamic:
			return nil, errors.New("executor: graph mode allocates every buffer before the capture: --alloc dynamic needs stream mode")
		case len(o.Inputs) > 0 || len(o.Outputs) > 0:
			return nil, errors.New("executor: graph mode cannot stream host inputs or outputs (the host cannot wait on events inside a replay): use stream mode")
		}
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	if err := checkDevices(p, graph, dynamic); err != nil { // devices.go
		return nil, err
	}
	hostIO := o.hostIO()
	if p.Iteration == nil && (iters > 1 || hostIO || o.InFlight > 0) {
		p = planner.WithIteration(p)
	}
	x := &program{p: p, graph: graph, iters: iters, free: -1, ends: -1, regionMode: graph && len(p.Captures) > 0}
	if err := x.resolveStages(o.Funcs); err != nil {
		return nil, err
	}
	if err := x.layout(dynamic); err != nil {
		return nil, err
	}
	minSlots, err := x.hostIO(o)
	if err != nil {
		return nil, err
	}
	if x.m, err = plan.NewIterationMap(p, minSlots); err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	if err := x.streamKinds(); err != nil { // kinds.go
		return nil, err
	}
	x.streamDevices()                                 // devices.go
	if err := x.hostThreads(o, dynamic); err != nil { // threads.go
		return nil, err
	}
	x.inflight = o.InFlight
	if x.inflight == 0 && hostIO {
		x.inflight = max(p.Iteration.InFlight, p.Iteration.StreamSets) + 1
	}
	x.inflight = min(x.inflight, iters) // a bound beyond the run bounds nothing
	switch {
	case x.regionMode:
		err = x.lowerRegions() // capture_regions.go
	case graph:
		err = x.lowerGraph()
	default:
		err = x.lowerStreams()
	}
	if err != nil {
		return nil, err
	}
	x.specialize()
	x.splitThreads() // threads.go
	return x, nil
}

// specialize leaves plain launches, records and waits (the issue loop's
// fast path) only where no check is needed: a launch that touches dynamic
// buffers is bound to their allocations, with host stages every record and
// wait tracks which records are the host's, and a wait with a lag is left
// out in the first iterations.
func (x *program) specialize() {
	for _, progs := range [3][][]instr{x.phases, x.capture, x.first} {
		for _, prog := range progs {
			for i := range prog {
				in := &prog[i]
				switch {
				case in.op == opLaunch && in.dyn:
					in.op = opLaunchBind
				case in.op == opRecord && x.host:
					in.op = opRecordTrack
				case in.op == opWait && (x.host || in.lag > 0):
					in.op = opWaitTrack
				}
			}
		}
	}
}

// resolveStages checks every stage's kernel and builds its launch
// description for phase 0 (buffer handles are filled in by setup). Its
// accesses name buffers and lie inside them: Plan.Validate checked that.
func (x *program) resolveStages(funcs map[string]StageFunc) error {
	p := x.p
	bufIdx := bufferIndex(p) // names, sizes and ranges: checked by Plan.Validate
	kernels := make(map[string]*plan.Kernel, len(p.Kernels))
	for i := range p.Kernels {
		kernels[p.Kernels[i].Name] = &p.Kernels[i]
	}
	n := 0
	for i := range p.Stages {
		n += len(p.Stages[i].Reads) + len(p.Stages[i].Writes)
	}
	flat := make([]Arg, n) // every stage's accesses, one allocation
	resolve := func(st *plan.Stage, acc []plan.Access, what string) ([]Arg, error) {
		args := flat[:len(acc):len(acc)]
		flat = flat[len(acc):]
		for k, a := range acc {
			i := bufIdx[a.Buffer]
			args[k] = Arg{Name: a.Buffer, Offset: a.Offset, Bytes: a.Bytes, buf: i}
		}
		return args, nil
	}
	x.descs = make([][]LaunchDesc, len(p.Stages))
	x.funcs = make([]StageFunc, len(p.Stages))
	all := make([]LaunchDesc, len(p.Stages)) // phase 0's, one allocation
	for i := range p.Stages {
		st := &p.Stages[i]
		d := LaunchDesc{Stage: i, Seed: p.SeedIndex(i), Name: st.Name, Kernel: st.Kernel, Args: st.Args, Grid: st.Grid, Block: st.Block, DurationUS: st.DurationUS, Copy: st.Copy, HostFunc: st.HostFunc, Collective: st.Collective}
		x.collectives = x.collectives || st.Collective != nil
		var err error
		if d.Reads, err = resolve(st, st.Reads, "reads"); err != nil {
			return err
		}
		if d.Writes, err = resolve(st, st.Writes, "writes"); err != nil {
			return err
		}
		all[i] = d
		x.descs[i] = all[i : i+1 : i+1] // later phases append their own
		if f := funcs[st.Kernel]; f != nil {
			x.funcs[i] = f
			continue
		}
		if st.Go {
			return fmt.Errorf("executor: stage %s runs the Go function %q, which Options.Funcs does not bind: pass Funcs[%q] (RunOptions.Funcs): %w", st.Name, st.Kernel, st.Kernel, ErrUnboundFunc)
		}
		if !contract.IsBuiltin(st.Kernel) {
			k, ok := kernels[st.Kernel]
			if !ok {
				return fmt.Errorf("executor: stage %s: kernel %q is neither a built-in nor one of the plan's kernels", st.Name, st.Kernel)
			}
			x.descs[i][0].UserKernel = k
		}
		if err := CheckLaunch(&x.descs[i][0]); err != nil {
			return fmt.Errorf("executor: stage %s: %w", st.Name, err)
		}
	}
	return nil
}

// layout places arena buffers (static allocation) or marks dynamic ones,
// and checks host stages.
func (x *program) layout(dynamic bool) error {
	p := x.p
	x.arenaOff = make([]int64, len(p.Buffers))
	x.dynamic = make([]bool, len(p.Buffers))
	x.arenaBytes = make([]int64, p.DeviceCount())
	for i, b := range p.Buffers {
		if b.Alloc == plan.AllocLazy {
			if x.lazy == nil {
				x.lazy = make([]bool, len(p.Buffers))
			}
			x.lazy[i] = true
		}
		x.arenaOff[i] = -1
		if b.ArenaOffset == nil || dynamic {
			continue
		}
		off := *b.ArenaOffset // aligned, ≤ MaxBufferBytes − bytes, one copy: Plan.Validate
		x.arenaOff[i] = off
		d := b.Device // < DeviceCount: Plan.Validate
		x.arenaBytes[d] = max(x.arenaBytes[d], off+b.Bytes, arenaFigure(p, d))
	}
	var total int64
	for _, n := range x.arenaBytes {
		total += n
	}
	if total > MaxBufferBytes {
		return fmt.Errorf("executor: the arena needs %d bytes, more than %d (1 TiB)", total, int64(MaxBufferBytes))
	}
	for i := range x.descs {
		for _, set := range [2][]Arg{x.descs[i][0].Reads, x.descs[i][0].Writes} {
			for k := range set {
				if off := x.arenaOff[set[k].buf]; off >= 0 {
					set[k].Offset += off
				}
			}
		}
	}
	if dynamic {
		stage := make(map[string]bool, len(p.Stages))
		for _, s := range p.Stages {
			stage[s.Name] = true
		}
		idx := bufferIndex(p)
		for _, l := range p.Lifetimes {
			i, ok := idx[l.Buffer]
			if !ok || l.First == "" || len(l.Done) == 0 {
				continue
			}
			b := p.Buffers[i]
			if b.Role != string(contract.RoleTemp) || cmp.Or(b.Where, string(contract.WhereDevice)) != string(contract.WhereDevice) || b.Copies > 1 {
				continue
			}
			if !stage[l.First] {
				return fmt.Errorf("executor: lifetime of %s: first stage %q is not a stage of the plan", l.Buffer, l.First)
			}
			x.dynamic[i] = true
		}
	}
	for i, st := range p.Stages {
		if !p.Streams[st.Stream].Host {
			continue
		}
		x.host = true
		d := &x.descs[i][0]
		if !slices.Contains(contract.HostKernels(), d.Kernel) || d.UserKernel != nil || x.funcs[i] != nil {
			return fmt.Errorf("executor: stage %s runs on the host stream with kernel %s; the host runs only %v", d.Name, d.Kernel, contract.HostKernels())
		}
		for _, set := range [2][]Arg{d.Reads, d.Writes} {
			for _, a := range set {
				if w := p.Buffers[a.buf].Where; !contract.Where(w).Host() {
					return fmt.Errorf("executor: stage %s runs on the host stream but touches %s buffer %s; the host reaches only host_pinned and host_pageable buffers", d.Name, cmp.Or(w, string(contract.WhereDevice)), a.Name)
				}
			}
		}
	}
	for _, s := range p.Streams {
		x.host = x.host || s.Host && len(s.Ops) > 0 // host waits and records need the host's tracking too
	}
	if x.graph && x.host && !x.regionMode {
		return errors.New("executor: graph mode: the plan has host stages (they run on the CPU at issue time, not in a graph replay): use stream mode")
	}
	return nil
}

// hostIO resolves the host inputs and outputs of o and returns the slot
// counts their lifetime events need (nil: the plan's).
func (x *program) hostIO(o *Options) ([]int, error) {
	p := x.p
	if len(o.Inputs) == 0 && len(o.Outputs) == 0 {
		return nil, nil
	}
	idx := bufferIndex(p)
	life := make(map[string][]int, len(p.Lifetimes))
	for _, l := range p.Lifetimes {
		for _, d := range l.Done {
			life[l.Buffer] = append(life[l.Buffer], d.Event)
		}
	}
	minSlots := make([]int, p.Events)
	host := func(name, what string) (hostBuf, error) {
		i, ok := idx[name]
		if !ok {
			return hostBuf{}, fmt.Errorf("executor: %s for buffer %q: the plan has no such buffer", what, name)
		}
		pb := p.Buffers[i]
		if pb.Where != string(contract.WhereHostPinned) {
			return hostBuf{}, fmt.Errorf("executor: %s for buffer %s: it is %s; the host streams only host_pinned buffers (copy it with a stage)", what, name, cmp.Or(pb.Where, string(contract.WhereDevice)))
		}
		h := hostBuf{buf: i, k: max(pb.Copies, 1), done: life[name]}
		if len(h.done) == 0 {
			return hostBuf{}, fmt.Errorf("executor: %s for buffer %s: no stage uses it", what, name)
		}
		for _, e := range h.done {
			if e < 0 || e >= p.Events {
				return hostBuf{}, fmt.Errorf("executor: lifetime of %s: event %d, plan has %d events", name, e, p.Events)
			}
			minSlots[e] = max(minSlots[e], h.k)
		}
		return h, nil
	}
	for _, name := range slices.Sorted(maps.Keys(o.Inputs)) {
		h, err := host(name, "input")
		if err != nil {
			return nil, err
		}
		h.in = o.Inputs[name]
		x.inputs = append(x.inputs, h)
	}
	for _, name := range slices.Sorted(maps.Keys(o.Outputs)) {
		h, err := host(name, "output")
		if err != nil {
			return nil, err
		}
		h.out = o.Outputs[name]
		x.outputs = append(x.outputs, h)
	}
	return minSlots, nil
}

// phaseCount is the number of phases: the period of the iteration map in
// stream mode; in graph mode (replays never overlap, so one stream set and
// one slot serve every iteration) the least common multiple of ring sizes.
func (x *program) phaseCount() (int, error) {
	n := 1
	if x.iters > 1 {
		if x.graph {
			n = x.m.RingPeriod(maxPhases)
		} else {
			n = x.m.Period(maxPhases)
		}
	}
	if n > maxPhases {
		return 0, periodTooLong(x.p, x.m, x.graph)
	}
	if n*(len(x.p.IssueOrder)+2*len(x.p.Streams)+4) > maxInstrs {
		return 0, &PeriodError{msg: fmt.Sprintf("executor: %d phases of %d ops exceed the executor's %d instructions: %s", n, len(x.p.IssueOrder), maxInstrs, periodHint)}
	}
	return n, nil
}

// phaseDescs gives every stage that touches a ring buffer one launch
// description per phase (the others share phase 0's).
func (x *program) phaseDescs(n int) {
	for i := range x.descs {
		d0 := x.descs[i][0]
		ring := false
		for _, set := range [2][]Arg{d0.Reads, d0.Writes} {
			for _, a := range set {
				ring = ring || x.m.Copies[a.buf] > 1
			}
		}
		if !ring || n == 1 {
			continue
		}
		for ph := 1; ph < n; ph++ {
			d := d0
			d.Reads, d.Writes = slices.Clone(d0.Reads), slices.Clone(d0.Writes)
			for _, set := range [2][]Arg{d.Reads, d.Writes} {
				for k := range set {
					set[k].copy = x.m.Copy(ph, set[k].buf)
				}
			}
			x.descs[i] = append(x.descs[i], d)
		}
	}
}

func (x *program) desc(stage, ph int) *LaunchDesc {
	ds := x.descs[stage]
	return &ds[ph%len(ds)]
}

// newEvents and newStream reserve the executor's own events and streams.
func (x *program) newEvents(n int) int32 {
	e := x.events
	x.events += n
	return int32(e)
}

func (x *program) newStream() int32 {
	s := x.streams
	x.streams++
	return int32(s)
}

// lowerStreams lowers stream mode: per phase, the iteration's host side
// (with host I/O or an in-flight bound), the plan's ops through the
// iteration map with dynamic allocation around them, and the tails the host
// watches for completion.
func (x *program) lowerStreams() error {
	n, err := x.phaseCount()
	if err != nil {
		return err
	}
	x.phaseDescs(n)
	p, m := x.p, x.m
	x.streams, x.events = m.Streams, m.Events()
	allocs, frees, err := x.dynamicOps()
	if err != nil {
		return err
	}
	if frees != nil {
		x.free = x.newStream()
	}
	var join, tails int32 = -1, -1
	if x.inflight > 0 {
		join = x.newStream()
		tails = x.newEvents(len(p.Streams))
		x.ends = x.newEvents(x.inflight)
	}
	x.phases = make([][]instr, n)
	for ph := range n {
		ops := make([]instr, 0, len(p.IssueOrder)+2*len(p.Streams)+2)
		if x.inflight > 0 {
			ops = append(ops, instr{op: opHostIO, src: -1})
		}
		ops = x.appendIteration(ops, ph, n, allocs, frees, false)
		if x.inflight > 0 {
			ops = x.appendJoin(ops, ph, join, tails)
			ops = append(ops, instr{op: opEnd, stream: join, src: -1})
		}
		x.phases[ph] = ops
	}
	return nil
}

// lowerGraph lowers graph mode: per phase, a capture on the origin stream
// (fork, the plan's ops on stream set 0 with slot 0 of every event and no
// cross-iteration waits, join), and a replay of it per iteration, with the
// host side when the host tracks completions.
func (x *program) lowerGraph() error {
	n, err := x.phaseCount()
	if err != nil {
		return err
	}
	x.phaseDescs(n)
	p := x.p
	x.streams, x.events = x.m.Streams, x.m.Events()
	x.origin = 0
	fork := x.newEvents(1)
	joins := x.newEvents(len(p.Streams))
	if x.inflight > 0 {
		x.ends = x.newEvents(x.inflight)
	}
	x.capture = make([][]instr, n)
	x.phases = make([][]instr, n)
	for ph := range n {
		ops := []instr{{op: opRecord, stream: x.origin, event: fork, src: -1}}
		for s := range p.Streams {
			if ps := int32(x.m.Stream(0, s)); ps != x.origin {
				ops = append(ops, instr{op: opWait, stream: ps, event: fork, src: -1})
			}
		}
		ops = x.appendIteration(ops, ph, n, nil, nil, true)
		x.capture[ph] = x.appendJoin(ops, 0, x.origin, joins)
		var replay []instr
		if x.inflight > 0 {
			replay = append(replay, instr{op: opHostIO, src: -1})
		}
		replay = append(replay, instr{op: opGraph, stream: x.origin, buf: int32(ph), src: -1})
		if x.inflight > 0 {
			replay = append(replay, instr{op: opEnd, stream: x.origin, src: -1})
		}
		x.phases[ph] = replay
	}
	return nil
}

// appendIteration appends the plan's ops of phase ph of period phases. In a capture (one
// stream set, slot 0, replays serialized by the origin stream) waits with a
// lag are left out.
func (x *program) appendIteration(ops []instr, ph, period int, allocs map[int][]int, frees map[int][]int, capture bool) []instr {
	p, m := x.p, x.m
	it := ph // iteration whose names phase ph resolves (the map is periodic)
	if capture {
		it = 0
	}
	for k, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		s := int32(m.Stream(it, so[0]))
		host := p.Streams[so[0]].Host
		in := instr{stream: s, src: int32(k)}
		switch o.Kind {
		case plan.OpLaunch:
			for _, b := range allocs[o.Stage] {
				ops = append(ops, instr{op: opAlloc, stream: s, buf: int32(b), src: int32(k)})
			}
			if x.lazy != nil && !host {
				for _, set := range [2][]Arg{x.descs[o.Stage][0].Reads, x.descs[o.Stage][0].Writes} {
					for _, a := range set {
						if x.lazy[a.buf] {
							ops = append(ops, instr{op: opLazy, stream: s, buf: int32(a.buf), src: int32(k)})
						}
					}
				}
			}
			in.desc, in.fn = x.desc(o.Stage, ph), x.funcs[o.Stage]
			switch {
			case host:
				in.op = opHost
			case in.fn != nil:
				in.op = opFunc
			default:
				in.op = opLaunch
			}
			in.dyn = x.touchesDynamic(in.desc)
		case plan.OpRecord:
			in.op, in.event = opRecord, int32(m.Record(it, o.Event))
			if host {
				in.op = opHostRecord
				if h, ok := x.signals[k]; ok {
					in.op, in.buf = opSignal, h
				}
			}
		case plan.OpWait:
			if capture && o.Lag > 0 {
				continue
			}
			// Resolve for an iteration ≡ it (mod period) at or past the lag;
			// the loop leaves the wait out before iteration lag.
			at := it + period*((o.Lag+period-1)/period)
			e, _ := m.Wait(at, o.Event, o.Lag)
			in.op, in.event, in.lag = opWait, int32(e), int32(o.Lag)
			if host {
				in.op = opHostWait
				if h, ok := x.awaits[k]; ok {
					in.op, in.buf = opAwait, h
				}
			}
		}
		ops = append(ops, in)
		for _, b := range frees[k] {
			ops = append(ops, instr{op: opFree, stream: x.free, buf: int32(b), event: x.freeList(it, b), src: int32(k)})
		}
	}
	return ops
}

// appendJoin appends the join of every plan stream (of phase ph's stream
// set) onto stream target: each records its event tails+s, target waits on
// it. A host stream's record is the host's (target's wait is left out).
func (x *program) appendJoin(ops []instr, ph int, target, tails int32) []instr {
	for s, str := range x.p.Streams {
		ps := int32(x.m.Stream(ph, s))
		if ps == target {
			continue
		}
		rec := instr{op: opRecord, stream: ps, event: tails + int32(s), src: -1}
		if str.Host {
			rec.op = opHostRecord
		}
		ops = append(ops, rec, instr{op: opWait, stream: target, event: tails + int32(s), src: -1})
	}
	return ops
}

// dynamicOps returns, for dynamic allocation, the buffers to allocate before
// each stage's launch (its lifetime's first stage) and to free after each
// plan op (the last record of its lifetime's events), by issue position.
func (x *program) dynamicOps() (allocs, frees map[int][]int, err error) {
	if !slices.Contains(x.dynamic, true) {
		return nil, nil, nil
	}
	p := x.p
	stage := make(map[string]int, len(p.Stages))
	for i, s := range p.Stages {
		stage[s.Name] = i
	}
	recPos := make(map[int]int) // event → position of its last record
	for k, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpRecord {
			recPos[o.Event] = k
		}
	}
	idx := bufferIndex(p)
	allocs, frees = map[int][]int{}, map[int][]int{}
	for _, l := range p.Lifetimes {
		i, ok := idx[l.Buffer]
		if !ok || !x.dynamic[i] {
			continue
		}
		last := -1
		for _, at := range l.Done {
			pos, ok := recPos[at.Event]
			if !ok {
				return nil, nil, fmt.Errorf("executor: lifetime of %s: event %d is never recorded", l.Buffer, at.Event)
			}
			last = max(last, pos)
		}
		allocs[stage[l.First]] = append(allocs[stage[l.First]], i)
		frees[last] = append(frees[last], i)
	}
	return allocs, frees, nil
}

// freeList returns the index in lists of buffer b's lifetime events of
// iteration it, physical.
func (x *program) freeList(it, b int) int32 {
	name := x.p.Buffers[b].Name
	var evs []int32
	for _, l := range x.p.Lifetimes {
		if l.Buffer == name {
			for _, at := range l.Done {
				evs = append(evs, int32(x.m.Record(it, at.Event)))
			}
		}
	}
	x.lists = append(x.lists, evs)
	return int32(len(x.lists) - 1)
}

func (x *program) touchesDynamic(d *LaunchDesc) bool {
	for _, set := range [2][]Arg{d.Reads, d.Writes} {
		for _, a := range set {
			if x.dynamic[a.buf] {
				return true
			}
		}
	}
	return false
}

// requires checks that b can run the program: graphs, host waits,
// stream-ordered allocation, Go-function stages.
func (x *program) requires(b Backend) error {
	if x.threads != nil {
		if _, ok := b.(Threader); !ok {
			return fmt.Errorf("executor: %s: %w (the plan's streams name %d host threads)", b.Name(), ErrNoThreads, len(x.threads))
		}
	}
	if x.graph && !x.graphsOptional {
		if _, ok := b.(GraphBackend); !ok {
			return fmt.Errorf("executor: %s: %w", b.Name(), ErrNoGraphs)
		}
	}
	if x.host || x.inflight > 0 {
		if _, ok := b.(HostSyncer); !ok {
			what := "host stages"
			if !x.host {
				what = "host I/O and the in-flight bound"
			}
			return fmt.Errorf("executor: %s: %w (needed for %s)", b.Name(), ErrNoHostSync, what)
		}
	}
	if err := x.requiresDevices(b); err != nil { // devices.go
		return err
	}
	if x.kinds != nil {
		if _, ok := b.(StreamKinder); !ok {
			return fmt.Errorf("executor: %s: %w (the plan has stream kinds or synchronous copies)", b.Name(), ErrNoStreamKinds)
		}
	}
	if x.free >= 0 {
		if _, ok := b.(StreamAllocator); !ok {
			return fmt.Errorf("executor: %s: --alloc dynamic: %w", b.Name(), ErrNoStreamAlloc)
		}
	}
	if slices.ContainsFunc(x.funcs, func(f StageFunc) bool { return f != nil }) {
		if _, ok := b.(FuncLauncher); !ok {
			return fmt.Errorf("executor: %s: %w", b.Name(), ErrNoFuncs)
		}
	}
	return nil
}

func bufferIndex(p *plan.Plan) map[string]int {
	idx := make(map[string]int, len(p.Buffers))
	for i, b := range p.Buffers {
		idx[b.Name] = i
	}
	return idx
}
