package plan

import (
	"cmp"
	"fmt"
	"math"

	"github.com/dagrun/dagrun/contract"
)

// Limits of the plan format. A plan file beyond one is certainly a mistake
// or hostile; Validate rejects it with the limit in the message
// (docs/spec.md, "Limits of plan files").
const (
	// MaxPlanFileBytes bounds the size of a plan file (1 GiB): a plan of a
	// million stages is a few hundred MB of compact JSON.
	MaxPlanFileBytes = 1 << 30
	// MaxBufferBytes bounds one buffer's size, and the sum of every
	// buffer's bytes times its copies, the arena included (1 TiB): an H200
	// has 141 GB, and larger sizes would overflow host-side allocation.
	MaxBufferBytes = 1 << 40
	// MaxLag bounds a wait's lag, a plan's stream sets, a buffer's copies,
	// an event's slots (MaxLag + 1) and the in-flight bound (2^16, as the
	// spec loader bounds lags and copies): one event's slots or one
	// buffer's copies beyond one are within MaxExtraSlots, the bound on all
	// of them.
	MaxLag = maxLag
	// MaxExtraSlots bounds the physical events of a plan beyond one per
	// event: the sum over events of their slots − 1 (2^16), and likewise
	// the ring copies beyond one per buffer: the sum of copies − 1. A
	// small file must not make the executor create millions of events or
	// allocations.
	MaxExtraSlots = 1 << 16
	// MaxStreamSetStreams bounds the physical streams of a plan with more
	// than one stream set: its device streams times its stream sets (2^16;
	// a GPU runs at most a few hundred streams at once).
	MaxStreamSetStreams = 1 << 16
	// MaxGridDim and MaxBlockThreads are CUDA's bounds on a launch's grid
	// (x; y and z: 65535) and block (threads in all, and per dimension).
	MaxGridDim      = math.MaxInt32
	MaxGridDimYZ    = 65535
	MaxBlockThreads = 1024
)

// minEventLimit is the least bound on a plan's events: a plan has at most
// as many events as ops, or this many.
const minEventLimit = 1024

// PlanError is a plan that is not well-formed, found by Validate. Path is
// the JSON path of the value at fault in the plan file (e.g.
// "stages[3].writes[0].bytes", "" for the plan as a whole); Msg says what is
// wrong and what is wanted.
type PlanError struct {
	Path string
	Msg  string
	// Offset, when > 0, is the byte offset of the fault in the JSON that
	// UnmarshalJSON decoded (data after the plan has no path).
	Offset int64
}

func (e *PlanError) Error() string {
	if e.Path == "" {
		return "plan: " + e.Msg
	}
	return "plan: " + e.Path + ": " + e.Msg
}

// ErrorAt is a *PlanError at path (a field path such as "stages[3].reads")
// with the message fmt.Sprintf(format, a...).
func ErrorAt(path, format string, a ...any) error {
	return &PlanError{Path: path, Msg: fmt.Sprintf(format, a...)}
}

// Validate checks that p is a well-formed plan, in the order that keeps
// its own cost linear in the plan's size (counts are checked before
// anything is sized by them), with overflow-safe arithmetic throughout:
//
//   - buffers: names unique and non-empty; 1 to MaxBufferBytes bytes, the
//     sum over buffers of bytes × copies at most MaxBufferBytes; where,
//     role and init kind from the vocabulary (where "" is device); copies 0
//     to MaxLag, at most MaxExtraSlots beyond one each in all; arena offsets only on device temps of one copy, aligned to
//     ArenaAlign, inside Stats.ArenaBytes when it is set (≤ MaxBufferBytes);
//   - stages: names unique and non-empty, a kernel, duration_us finite, 0
//     to contract.MaxSpinUS µs, grid and block within CUDA's bounds, every
//     access naming a buffer, bytes > 0 and offset ≤ size, bytes ≤
//     size−offset (contract.InBounds);
//   - kernels: names unique and non-empty;
//   - streams: ids equal to their index; every stage launched exactly once,
//     on its own stream; events 0 ≤ e < Events, and Events ≥ 0 at most the
//     larger of the plan's ops and 1024 (an event no op can use is a mistake);
//   - issue_order: every op of every stream exactly once, in stream order;
//   - lifetimes: one per buffer at most, naming a buffer; each done entry
//     a stream and an event of the plan; First naming a stage;
//   - iteration: stream sets 1 to MaxLag, at most MaxStreamSetStreams
//     physical streams beyond the first set; one slot count 1 to MaxLag+1
//     per event, at most MaxExtraSlots beyond one each in all; in_flight and cross_waits 0
//     to MaxLag; lags 0 to MaxLag, only on waits of a plan with iteration
//     info.
//
// It does not check the ordering of accesses (that is Verify's job), nor
// a kernel's arguments (executor.CheckPlan does, through the contract).
// Errors are *PlanError, naming the JSON path of the value at fault.
func (p *Plan) Validate() error {
	bufIdx, err := p.validateBuffers()
	if err != nil {
		return err
	}
	kernels := make(map[string]bool, len(p.Kernels))
	for i, k := range p.Kernels {
		if k.Name == "" || kernels[k.Name] {
			return ErrorAt(fmt.Sprintf("kernels[%d].name", i), "kernel name %q is empty or given twice", k.Name)
		}
		kernels[k.Name] = true
	}
	for i := range p.Stages {
		if err := p.validateStageRefs(i, bufIdx); err != nil {
			return err
		}
	}
	for i, l := range p.Lifetimes {
		if _, ok := bufIdx[l.Buffer]; !ok {
			return ErrorAt(fmt.Sprintf("lifetimes[%d].buffer", i), "lifetime of unknown buffer %q", l.Buffer)
		}
	}
	// ValidateShape, but for the accesses' buffers, resolved above
	if err := p.ValidateBounds(); err != nil {
		return err
	}
	if err := p.validateNames(false); err != nil {
		return err
	}
	return p.validateDevices(bufIdx) // devices.go
}

// ValidateShape is the part of Validate that does not resolve names
// against the plan's buffers and kernels, which Verify needs of the plans
// it is given (tests build plans without declarations): stage names,
// durations, launch shapes and access ranges within the format's limits,
// the streams, events and issue order, lifetimes' streams, events and
// first stages, the iteration info, and the arena offsets of declared
// buffers. With it, no sum of an offset and a size in the verifier
// overflows.
func (p *Plan) ValidateShape() error {
	if err := p.ValidateBounds(); err != nil {
		return err
	}
	return p.ValidateNames()
}

// ValidateBounds is the part of ValidateShape that the verifier's checks
// need before they read the plan: every index, count and range within its
// limits. The rest (ValidateNames) they do not read, so Verify runs it
// beside them.
func (p *Plan) ValidateBounds() error {
	for i := range p.Stages {
		if err := p.validateStage(i); err != nil {
			return err
		}
	}
	if err := p.validateStreams(); err != nil {
		return err
	}
	if err := p.validateLifetimes(); err != nil {
		return err
	}
	if err := p.validateArena(); err != nil {
		return err
	}
	if err := p.ValidateKinds(); err != nil { // stream kinds: kinds.go
		return err
	}
	return p.validateIteration()
}

// ValidateNames checks that stages have names of their own, that every
// access names a declared buffer (where the plan declares any), and that
// lifetimes name each buffer once and stages of the plan.
func (p *Plan) ValidateNames() error { return p.validateNames(true) }

// validateNames is ValidateNames; with accesses false it leaves out the
// accesses' buffers (Validate resolves them itself).
func (p *Plan) validateNames(accesses bool) error {
	// Names a terminal shows wrongly or not at all, refused as in a spec.
	for _, c := range []struct {
		what string
		n    int
		name func(i int) string
	}{
		{"stage", len(p.Stages), func(i int) string { return p.Stages[i].Name }},
		{"buffer", len(p.Buffers), func(i int) string { return p.Buffers[i].Name }},
		{"stream", len(p.Streams), func(i int) string { return p.Streams[i].Name }},
		{"kernel", len(p.Kernels), func(i int) string { return p.Kernels[i].Name }},
	} {
		for i := range c.n {
			if msg := contract.NameHidden(c.name(i)); msg != "" {
				return ErrorAt(fmt.Sprintf("%ss[%d].name", c.what, i), "%s %q: its name %s", c.what, c.name(i), msg)
			}
		}
	}
	stageIdx := make(map[string]int, len(p.Stages))
	for i := range p.Stages {
		// One map operation: a name given before leaves the map as large
		// (and the plan is refused).
		n := len(stageIdx)
		if stageIdx[p.Stages[i].Name] = i; len(stageIdx) == n {
			return ErrorAt(fmt.Sprintf("stages[%d].name", i), "stage %s is declared twice", p.Stages[i].Name)
		}
	}
	if accesses && len(p.Buffers) > 0 { // a plan without declarations names its buffers by its accesses
		bufIdx := make(map[string]int, len(p.Buffers))
		for i, b := range p.Buffers {
			bufIdx[b.Name] = i
		}
		for i := range p.Stages {
			for k, list := range [2][]Access{p.Stages[i].Reads, p.Stages[i].Writes} {
				for j, a := range list {
					if _, err := p.accessBuffer(i, k, j, a, bufIdx); err != nil {
						return err
					}
				}
			}
		}
	}
	seen := make(map[string]struct{}, len(p.Lifetimes))
	// A lifetime's first stage is mostly the previous lifetime's or the
	// stage after it (lifetimes are in buffer order, and buffers are
	// mostly declared in the order stages first use them): a stage found
	// there by its name needs no look-up in stageIdx.
	prev := -1
	isStage := func(name string) bool {
		for _, k := range [2]int{prev, prev + 1} {
			if k >= 0 && k < len(p.Stages) && p.Stages[k].Name == name {
				prev = k
				return true
			}
		}
		k, ok := stageIdx[name]
		if ok {
			prev = k
		}
		return ok
	}
	for i, l := range p.Lifetimes {
		n := len(seen)
		if seen[l.Buffer] = struct{}{}; len(seen) == n {
			return ErrorAt(fmt.Sprintf("lifetimes[%d].buffer", i), "a second lifetime of buffer %s", l.Buffer)
		}
		if l.First != "" && !isStage(l.First) {
			return ErrorAt(fmt.Sprintf("lifetimes[%d].first", i), "lifetime of %s: first stage %q is not a stage of the plan", l.Buffer, l.First)
		}
	}
	return nil
}

// validateBuffers checks every buffer on its own and the sum of their
// bytes, and returns the index of each buffer by name.
func (p *Plan) validateBuffers() (map[string]int, error) {
	seen := make(map[string]int, len(p.Buffers))
	var total int64 // Σ bytes × copies, ≤ MaxBufferBytes at every step
	extra := 0      // Σ copies − 1
	for i, b := range p.Buffers {
		at := func(field string) string { return fmt.Sprintf("buffers[%d].%s", i, field) }
		n := len(seen)
		seen[b.Name] = i // one map operation: a name given before leaves the map as large
		switch {
		case b.Name == "":
			return nil, ErrorAt(at("name"), "a buffer has no name")
		case len(seen) == n:
			return nil, ErrorAt(at("name"), "buffer %s is declared twice", b.Name)
		case b.Bytes <= 0 || b.Bytes > MaxBufferBytes:
			return nil, ErrorAt(at("bytes"), "buffer %s has %d bytes, want 1 to %d (1 TiB)", b.Name, b.Bytes, int64(MaxBufferBytes))
		case b.Where != "" && !contract.Where(b.Where).Valid():
			return nil, ErrorAt(at("where"), "buffer %s: where %q, want %s, %s or %s", b.Name, b.Where, contract.WhereDevice, contract.WhereHostPinned, contract.WhereHostPageable)
		case b.Role != "" && !contract.Role(b.Role).Valid():
			return nil, ErrorAt(at("role"), "buffer %s: role %q, want %v", b.Name, b.Role, contract.Roles)
		case b.Init != "" && !contract.InitKind(b.Init).Valid():
			return nil, ErrorAt(at("init"), "buffer %s: init %q, want %v", b.Name, b.Init, contract.InitKinds)
		case b.InitPath != "" && b.Init != string(contract.InitFile):
			return nil, ErrorAt(at("init_path"), "buffer %s: init_path with init %q; only init file reads a file", b.Name, b.Init)
		case b.Init == string(contract.InitFile) && b.InitPath == "":
			return nil, ErrorAt(at("init_path"), "buffer %s: init file needs init_path", b.Name)
		case math.IsNaN(b.InitValue) || math.IsInf(b.InitValue, 0):
			return nil, ErrorAt(at("init_value"), "buffer %s: init_value %v, want a finite number", b.Name, b.InitValue)
		case b.Copies < 0 || b.Copies > maxLag:
			return nil, ErrorAt(at("copies"), "buffer %s has copies %d, want 0 or 1 (one copy) to %d", b.Name, b.Copies, maxLag)
		case b.Alloc != "" && b.Alloc != AllocLazy && b.Alloc != AllocProducer:
			return nil, ErrorAt(at("alloc"), "buffer %s: alloc %q, want %s, %s or none", b.Name, b.Alloc, AllocLazy, AllocProducer)
		case b.Alloc == AllocProducer && cmp.Or(b.Role, string(contract.RoleTemp)) != string(contract.RoleTemp):
			return nil, ErrorAt(at("alloc"), "buffer %s (%s) has alloc %s; only temps are allocated by their producer", b.Name, b.Role, AllocProducer)
		case b.Alloc == AllocProducer && cmp.Or(b.Where, string(contract.WhereDevice)) != string(contract.WhereDevice):
			return nil, ErrorAt(at("alloc"), "buffer %s (%s) has alloc %s; only device temps are allocated by their producer", b.Name, b.Where, AllocProducer)
		case b.Alloc == AllocProducer && b.Init != "" && b.Init != string(contract.InitZeros):
			return nil, ErrorAt(at("init"), "buffer %s has init %s and alloc %s; its first writer allocates it, so nothing is in it before that write", b.Name, b.Init, AllocProducer)
		}
		if extra += max(b.Copies, 1) - 1; extra > MaxExtraSlots {
			return nil, ErrorAt(at("copies"), "buffers 0 to %d have %d ring copies beyond one each, more than %d", i, extra, MaxExtraSlots)
		}
		k := int64(max(b.Copies, 1))
		if b.Bytes > (MaxBufferBytes-total)/k {
			return nil, ErrorAt(at("bytes"), "buffer %s: the plan's buffers need more than %d bytes (1 TiB) in all, copies included", b.Name, int64(MaxBufferBytes))
		}
		total += b.Bytes * k
	}
	return seen, nil
}

// validateArena checks the arena fields of a plan: offsets of device temps
// of one copy only, aligned, within MaxBufferBytes and inside
// Stats.ArenaBytes when it is set (0: unknown, as in plans Unroll makes;
// the executor sizes the arena by its buffers then).
func (p *Plan) validateArena() error {
	if a := p.Stats.ArenaBytes; a < 0 || a > MaxBufferBytes {
		return ErrorAt("stats.arena_bytes", "%d, want 0 (no arena) to %d (1 TiB)", a, int64(MaxBufferBytes))
	}
	for i, b := range p.Buffers {
		if b.ArenaOffset == nil {
			continue
		}
		off := *b.ArenaOffset
		at := func() string { return fmt.Sprintf("buffers[%d].arena_offset", i) }
		switch {
		case b.Role != string(contract.RoleTemp) || cmp.Or(b.Where, string(contract.WhereDevice)) != string(contract.WhereDevice):
			return ErrorAt(at(), "buffer %s (%s, %s) has an arena offset; only device temps live in the arena", b.Name, b.Where, b.Role)
		case b.Copies > 1:
			return ErrorAt(at(), "buffer %s has %d copies and an arena offset; only buffers of one copy live in the arena", b.Name, b.Copies)
		case b.Alloc == AllocProducer:
			return ErrorAt(at(), "buffer %s has alloc %s and an arena offset; its producer allocates its bytes, so it has none in the arena", b.Name, AllocProducer)
		case b.Alloc == AllocLazy:
			return ErrorAt(at(), "buffer %s has alloc %s and an arena offset; each stream allocates its own workspace at its first use, so it has none in the arena", b.Name, AllocLazy)
		case off < 0 || off%ArenaAlign != 0 || off > MaxBufferBytes-b.Bytes:
			return ErrorAt(at(), "buffer %s: arena offset %d, want a multiple of %d from 0 to %d (1 TiB less its %d bytes)", b.Name, off, ArenaAlign, MaxBufferBytes-b.Bytes, b.Bytes)
		case p.Stats.ArenaBytes > 0 && !contract.InBounds(off, b.Bytes, p.Stats.ArenaBytes):
			return ErrorAt(at(), "buffer %s: arena bytes [%d:%d] past the arena's %d bytes (stats.arena_bytes)", b.Name, off, off+b.Bytes, p.Stats.ArenaBytes)
		}
	}
	return nil
}

// validateStage checks stage i's own fields.
func (p *Plan) validateStage(i int) error {
	st := &p.Stages[i]
	at := func(field string) string { return fmt.Sprintf("stages[%d].%s", i, field) }
	if st.Name == "" {
		return ErrorAt(at("name"), "a stage has no name")
	}
	if d := st.DurationUS; math.IsNaN(d) || d < 0 || d > contract.MaxSpinUS {
		return ErrorAt(at("duration_us"), "stage %s: duration_us %v, want 0 to %g µs", st.Name, d, float64(contract.MaxSpinUS))
	}
	threads := int64(1)
	for k := range 3 {
		lim := int64(MaxGridDimYZ)
		if k == 0 {
			lim = MaxGridDim
		}
		if g := st.Grid[k]; g < 0 || int64(g) > lim {
			return ErrorAt(fmt.Sprintf("stages[%d].grid[%d]", i, k), "stage %s: grid %d, want 0 (default) to %d", st.Name, g, lim)
		}
		if b := st.Block[k]; b < 0 || b > MaxBlockThreads {
			return ErrorAt(fmt.Sprintf("stages[%d].block[%d]", i, k), "stage %s: block %d, want 0 (default) to %d", st.Name, b, MaxBlockThreads)
		}
		threads *= int64(max(st.Block[k], 1))
	}
	if threads > MaxBlockThreads {
		return ErrorAt(at("block"), "stage %s: block %v has %d threads, want at most %d", st.Name, st.Block, threads, MaxBlockThreads)
	}
	for k, list := range [2][]Access{st.Reads, st.Writes} {
		verb := [2]string{"reads", "writes"}[k]
		for j, a := range list {
			switch {
			case a.Offset < 0 || a.Offset >= MaxBufferBytes:
				return ErrorAt(fmt.Sprintf("stages[%d].%s[%d].offset", i, verb, j), "stage %s %s %s at offset %d: want 0 to %d", st.Name, verb, a.Buffer, a.Offset, MaxBufferBytes-1)
			case a.Bytes <= 0 || a.Bytes > MaxBufferBytes:
				return ErrorAt(fmt.Sprintf("stages[%d].%s[%d].bytes", i, verb, j), "stage %s %s %s: %d bytes, want 1 to %d", st.Name, verb, a.Buffer, a.Bytes, int64(MaxBufferBytes))
			}
		}
	}
	return nil
}

// validateStageRefs checks that stage i names a kernel and that each of
// its accesses names a buffer and lies inside it.
func (p *Plan) validateStageRefs(i int, bufIdx map[string]int) error {
	st := &p.Stages[i]
	if st.Kernel == "" {
		return ErrorAt(fmt.Sprintf("stages[%d].kernel", i), "stage %s has no kernel", st.Name)
	}
	if st.Seed != nil && (*st.Seed < 0 || *st.Seed > math.MaxInt32) {
		return ErrorAt(fmt.Sprintf("stages[%d].seed", i), "stage %s: seed %d, want 0 to %d (the stage's index in its spec)", st.Name, *st.Seed, math.MaxInt32)
	}
	for k, list := range [2][]Access{st.Reads, st.Writes} {
		verb := [2]string{"reads", "writes"}[k]
		for j, a := range list {
			b, err := p.accessBuffer(i, k, j, a, bufIdx)
			if err != nil {
				return err
			}
			size := p.Buffers[b].Bytes
			switch {
			case a.Offset < 0 || a.Offset >= size:
				return ErrorAt(fmt.Sprintf("stages[%d].%s[%d].offset", i, verb, j), "stage %s %s %s at offset %d: want 0 to %d (the buffer has %d bytes)", st.Name, verb, a.Buffer, a.Offset, size-1, size)
			case a.Bytes <= 0 || !contract.InBounds(a.Offset, a.Bytes, size):
				return ErrorAt(fmt.Sprintf("stages[%d].%s[%d].bytes", i, verb, j), "stage %s %s %s at offset %d, %d bytes: outside the buffer's %d bytes (want 1 to %d)", st.Name, verb, a.Buffer, a.Offset, a.Bytes, size, size-a.Offset)
			}
		}
	}
	return nil
}

// accessBuffer returns the index of the buffer that access j of stage i
// names (k: 0 for its reads, 1 for its writes), or a *PlanError when the
// plan declares no such buffer.
func (p *Plan) accessBuffer(i, k, j int, a Access, bufIdx map[string]int) (int, error) {
	b, ok := bufIdx[a.Buffer]
	if !ok {
		verb := [2]string{"reads", "writes"}[k]
		return 0, ErrorAt(fmt.Sprintf("stages[%d].%s[%d].buffer", i, verb, j), "stage %s %s unknown buffer %q", p.Stages[i].Name, verb, a.Buffer)
	}
	return b, nil
}

// validateStreams checks stream ids, launches, events and the issue order.
func (p *Plan) validateStreams() error {
	ops := 0
	for _, s := range p.Streams {
		ops += len(s.Ops)
	}
	lim := max(ops, minEventLimit)
	if p.Unrolled {
		// Unrolled iterations have an event per slot: one per event of the
		// plan, and up to MaxExtraSlots more for lagged waits (planner/manual.go).
		lim += MaxExtraSlots
	}
	if p.Events < 0 || p.Events > lim {
		return ErrorAt("events", "%d events, want 0 to %d (the larger of the plan's %d ops and %d: an event no op uses is a mistake)", p.Events, lim, ops, minEventLimit)
	}
	launched := make([]int32, len(p.Stages))
	for i, s := range p.Streams {
		if s.ID != i {
			return ErrorAt(fmt.Sprintf("streams[%d].id", i), "stream at index %d has id %d, want %d", i, s.ID, i)
		}
		for j, o := range s.Ops {
			at := func(field string) string { return fmt.Sprintf("streams[%d].ops[%d].%s", i, j, field) }
			switch o.Kind {
			case OpLaunch:
				if o.Stage < 0 || o.Stage >= len(p.Stages) {
					return ErrorAt(at("stage"), "stream %d op %d launches stage %d of %d", i, j, o.Stage, len(p.Stages))
				}
				if st := &p.Stages[o.Stage]; st.Stream != i {
					return ErrorAt(fmt.Sprintf("stages[%d].stream", o.Stage), "stage %s is on stream %d but launched on stream %d", st.Name, st.Stream, i)
				}
				if launched[o.Stage]++; launched[o.Stage] > 1 {
					return ErrorAt(at("stage"), "stage %s launched twice, want once", p.Stages[o.Stage].Name)
				}
			case OpRecord, OpWait:
				if o.Event < 0 || o.Event >= p.Events {
					return ErrorAt(at("event"), "stream %d op %d uses event %d, plan has %d events", i, j, o.Event, p.Events)
				}
			default:
				return ErrorAt(at("op"), "unknown op %v", o.Kind)
			}
		}
	}
	for i, n := range launched {
		if n != 1 {
			return ErrorAt(fmt.Sprintf("stages[%d]", i), "stage %s is never launched, want once", p.Stages[i].Name)
		}
	}
	if len(p.IssueOrder) != ops {
		return ErrorAt("issue_order", "%d ops, streams have %d", len(p.IssueOrder), ops)
	}
	next := make([]int, len(p.Streams))
	for k, so := range p.IssueOrder {
		s, j := so[0], so[1]
		if s < 0 || s >= len(p.Streams) {
			return ErrorAt(fmt.Sprintf("issue_order[%d]", k), "names stream %d of %d", s, len(p.Streams))
		}
		if next[s] >= len(p.Streams[s].Ops) {
			return ErrorAt(fmt.Sprintf("issue_order[%d]", k), "issues stream %d more often than its %d ops", s, len(p.Streams[s].Ops))
		}
		if j != next[s] {
			return ErrorAt(fmt.Sprintf("issue_order[%d]", k), "issues stream %d op %d, want op %d (stream order)", s, j, next[s])
		}
		next[s]++
	}
	return nil
}

// validateLifetimes checks that lifetimes name streams and events of the
// plan (their buffers and first stages: ValidateNames).
func (p *Plan) validateLifetimes() error {
	for i, l := range p.Lifetimes {
		for k, d := range l.Done {
			if d.Stream < 0 || d.Stream >= len(p.Streams) {
				return ErrorAt(fmt.Sprintf("lifetimes[%d].done[%d].stream", i, k), "lifetime of %s: stream %d, plan has %d streams", l.Buffer, d.Stream, len(p.Streams))
			}
			if d.Event < 0 || d.Event >= p.Events {
				return ErrorAt(fmt.Sprintf("lifetimes[%d].done[%d].event", i, k), "lifetime of %s: event %d, plan has %d events", l.Buffer, d.Event, p.Events)
			}
		}
	}
	return nil
}

// validateIteration checks the iteration info's shape: stream sets, slot
// counts, in-flight and cross-wait counts within their limits, and lags
// only on waits of a plan with iteration info.
func (p *Plan) validateIteration() error {
	it := p.Iteration
	for s, str := range p.Streams {
		for j, o := range str.Ops {
			if o.Lag < 0 || o.Lag > maxLag || (o.Lag > 0 && (o.Kind != OpWait || it == nil)) {
				return ErrorAt(fmt.Sprintf("streams[%d].ops[%d].lag", s, j), "%s has lag %d: want lag only on waits of a plan with iteration info, 0 to %d", o.Kind, o.Lag, maxLag)
			}
		}
	}
	if it == nil {
		return nil
	}
	if it.StreamSets < 1 || it.StreamSets > maxLag {
		return ErrorAt("iteration.stream_sets", "%d, want 1 to %d", it.StreamSets, maxLag)
	}
	if it.StreamSets > 1 {
		device := 0
		for _, s := range p.Streams {
			if !s.Host {
				device++
			}
		}
		if device > MaxStreamSetStreams/it.StreamSets {
			return ErrorAt("iteration.stream_sets", "%d stream sets of %d streams: more than %d physical streams", it.StreamSets, device, MaxStreamSetStreams)
		}
	}
	if it.InFlight < 0 || it.InFlight > maxLag {
		return ErrorAt("iteration.in_flight", "%d, want 0 to %d", it.InFlight, maxLag)
	}
	if it.CrossWaits < 0 {
		return ErrorAt("iteration.cross_waits", "%d, want ≥ 0", it.CrossWaits)
	}
	if len(it.Slots) != p.Events {
		return ErrorAt("iteration.slots", "%d entries, plan has %d events", len(it.Slots), p.Events)
	}
	extra := 0
	for e, n := range it.Slots {
		if n < 1 || n > maxLag+1 {
			return ErrorAt(fmt.Sprintf("iteration.slots[%d]", e), "%d, want 1 to %d", n, maxLag+1)
		}
		if extra += n - 1; extra > MaxExtraSlots {
			return ErrorAt(fmt.Sprintf("iteration.slots[%d]", e), "events 0 to %d have %d slots beyond one each, more than %d", e, extra, MaxExtraSlots)
		}
	}
	return nil
}

// Recount sets the figures of p.Stats that follow from the plan itself —
// stages, streams, waits (lag 0), events, the one-stream time (SumUS) and
// the ideal makespan (IdealSchedule) — and Iteration.CrossWaits, so that a
// plan read from a file reports what it holds rather than what the file
// claims; likewise the note that Verify unrolls fewer iterations than the
// plan's period needs (UnrollIterations), in Notes when it applies and only
// then. The figures of the hazard graph the planner built (reduced and
// cross-stream edges, the lower bound on waits, the critical path) and the
// planning time stay as given. p must be valid (Validate).
func Recount(p *Plan) {
	SetUnrollNote(p)
	s := &p.Stats
	s.Stages, s.Streams, s.Events = len(p.Stages), len(p.Streams), p.Events
	s.Waits = 0
	cross := 0
	for _, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == OpWait {
				if o.Lag == 0 {
					s.Waits++
				} else {
					cross++
				}
			}
		}
	}
	if p.Iteration != nil {
		p.Iteration.CrossWaits = cross
	}
	s.SumUS = 0
	for _, st := range p.Stages {
		s.SumUS += CostUS(st.DurationUS)
	}
	s.IdealMakespanUS = IdealMakespan(p)
}
