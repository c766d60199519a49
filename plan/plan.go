package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/dagrun/dagrun/contract"
)

// PlanVersion is the version of the plan file format written by this package.
const PlanVersion = 1

// Plan is a stream schedule: the contract between the planner, the verifier,
// the executor and tools. It is serialised as JSON (`dagrun plan --json`) and
// can be run without the spec (`dagrun run --plan FILE`).
type Plan struct {
	Version  int    `json:"version"`
	Spec     string `json:"spec,omitempty"`     // spec name
	Dir      string `json:"dir,omitempty"`      // directory that relative paths (PTX, init files) resolve against
	Strategy string `json:"strategy,omitempty"` // stream assignment strategy that made it
	// Devices is the number of GPUs the plan runs on; 0 and 1 both mean
	// one (plan files of one device omit it). Device indices of streams
	// and buffers are 0..Devices-1 (docs/spec.md, "Several devices").
	Devices int `json:"devices,omitempty"`
	// Stages in declaration order; Stage index i is the stage's id everywhere.
	Stages []Stage `json:"stages"`
	// Streams, indexed by ID (Streams[i].ID == i).
	Streams []Stream `json:"streams"`
	// IssueOrder is the global host issue order: each op of every stream
	// exactly once, as [stream id, op index]. Ops of one stream appear in
	// their stream order; every record comes before each wait on its event.
	IssueOrder [][2]int `json:"issue_order"`
	// Events is the number of events; event ids are 0..Events-1.
	Events    int        `json:"events"`
	Buffers   []Buffer   `json:"buffers"`
	Kernels   []Kernel   `json:"kernels,omitempty"`
	Lifetimes []Lifetime `json:"lifetimes"`
	Stats     Stats      `json:"stats"`
	// Budget lists the steps Build's budget loop took to meet memory_budget
	// (ordering edges and their makespan cost); empty without a budget.
	Budget []BudgetStep `json:"budget,omitempty"`
	// BudgetStart is Stats of the plan before Budget's first step: the
	// spec's own critical path and reduced graph, without the orders the
	// steps added (nil when no step was taken; not written to plan files).
	BudgetStart *Stats `json:"-"`
	// Iteration is how the plan is issued once per input (Iteration; the planner's iterate pass): the
	// iterate pass's cross-iteration waits, or the barrier form
	// (Iteration.Barrier, WithIteration). Build always sets it; plan files
	// written without it are issued through WithIteration.
	Iteration *Iteration `json:"iteration,omitempty"`
	// Notes states each quality limit the plan met and its cost, one
	// sentence each (a pass bounded for cost, a form that does not apply);
	// `dagrun plan` prints each as "note: …". Empty when none was met.
	Notes []string `json:"notes,omitempty"`
	// Timings is where Build's time went, phase by phase in pipeline
	// order, then "verify" when dagrun.Plan verified it (not written to
	// plan files; nil for plans read from one).
	Timings []PassTime `json:"-"`
	// Captures are the stream-capture regions of the plan (Capture):
	// CheckCaptures holds them to CUDA's capture rules.
	Captures []Capture `json:"captures,omitempty"`

	// Memo is what the code that made the plan knows of it beyond its
	// fields, for the verifier; it is not written to plan files.
	Memo `json:"-"`
}

// Memo is what UnmarshalJSON, Unroll and Build know of a plan beyond its
// fields. The verifier reads it; every other reader can ignore it.
type Memo struct {
	// FromFile: decoded from a plan file (UnmarshalJSON): a fix is an edit
	// of its streams' ops, not of a spec's waits.
	FromFile bool
	// Unrolled: made by Unroll: its stages are iterations of another plan's.
	Unrolled bool
	// Derived: made by UnrollDerived without names from a plan whose shape
	// the verifier checked: its shape is not checked again.
	Derived bool
	// Base, BaseStages and BufOrig, for a derived plan without Stages and
	// Buffers: it has BaseStages stages, stage i doing what Base's stage i
	// mod len(Base.Stages) does, and len(BufOrig) buffers, buffer i a copy
	// of Base's buffer BufOrig[i].
	Base       *Plan
	BaseStages int
	BufOrig    []int32
	// AccBuf: per access (stage by stage, reads then writes), its buffer's
	// index in Buffers, or -1: the verifier's (UnrollDerived's, or its
	// own AccessBuffers), read as it is when AccOwn is set; otherwise a
	// hint that AccessBuffers checks by name before it uses an entry.
	AccBuf []int32
	// AccOwn: AccBuf is the verifier's own (made or checked by
	// AccessBuffers, or made by UnrollDerived), which its checks read as
	// it is.
	AccOwn bool
	// Ops, for a derived plan without ops (Streams' Ops and IssueOrder
	// empty): its ops (UnrollDerived; the verifier's clocks read them).
	Ops *Ops
}

// Stage is one launch in the plan.
type Stage struct {
	Name       string  `json:"name"`
	Stream     int     `json:"stream"`
	DurationUS float64 `json:"duration_us"`
	Kernel     string  `json:"kernel"`
	// Go marks Kernel as a Go function's name, bound when the plan runs
	// (executor.Options.Funcs).
	Go bool `json:"go,omitempty"`
	// Args is the stage's StageSpec.Args, the same map: several stages
	// may share one, so it is read-only.
	Args   map[string]any `json:"args,omitempty"`
	Grid   [3]int         `json:"grid,omitempty"`
	Block  [3]int         `json:"block,omitempty"`
	Reads  []Access       `json:"reads"`
	Writes []Access       `json:"writes"`
	// Pinned is the stream name the spec pinned this stage to ("" if free).
	Pinned string `json:"pinned,omitempty"`
	// Source is the stage's position in its spec (file:line:col), for
	// reports; "" when the plan was not built from a spec file.
	Source string `json:"source,omitempty"`
	// Copy is the copy mode of a copy stage: CopyAsync (cuMemcpyAsync on
	// the stage's stream) or CopySync (cuMemcpy, on a default stream, with
	// the host ordering of CUDA's "API synchronization behavior" table:
	// the verifier orders the copy by it).
	Copy string `json:"copy,omitempty"`
	// HostFunc marks a host stage enqueued on a device stream
	// (cuLaunchHostFunc): it runs on a driver thread in the stream's order,
	// not when the host issues it.
	HostFunc bool `json:"host_func,omitempty"`
	// Collective marks a rank of a collective (Kernel is the collective's
	// built-in, contract.BuiltinAllReduce): Reads[0] is the rank's send
	// range, Writes[0] its receive range, both on its stream's device.
	Collective *Collective `json:"collective,omitempty"`
	// Seed, when set, is the index the mix built-in (and a user kernel on
	// the simulator) seeds its output by: the stage's index in the spec
	// the user wrote, which placement's peer copies and a collective's
	// ranks shift in Stages, so that outputs do not depend on placement
	// (SeedIndex). Nil: the stage's index in Stages, which is the spec's
	// when the planner added no stages.
	Seed *int `json:"seed,omitempty"`
}

// SeedIndex is the index stage i of p seeds the mix built-in by: its
// Seed, else i (contract.MixSeed).
func (p *Plan) SeedIndex(i int) int {
	if s := p.Stages[i].Seed; s != nil {
		return *s
	}
	return i
}

// Collective is one rank of a collective: the spec's collective stage
// lowered to Ranks stages, one per device, issued consecutively (rank 0
// first) in Plan.IssueOrder as one group (ncclGroupStart, one call per
// rank, ncclGroupEnd). A collective is a rendezvous: no rank completes
// before every rank has started, so whatever happens-before any rank's
// launch happens-before whatever follows every rank (the verifier's
// happens-before, verify.Verify).
type Collective struct {
	Group  int    `json:"group"`  // which collective: 0, 1, … in issue order of their first ranks
	Op     string `json:"op"`     // contract.BuiltinAllReduce
	Reduce string `json:"reduce"` // contract.ReduceSum
	Rank   int    `json:"rank"`   // 0..Ranks-1; the planner numbers ranks in device order, and the all-reduce adds them in rank order
	Ranks  int    `json:"ranks"`  // ranks of the group, ≥ 2
}

// Access is a byte range [Offset, Offset+Bytes) of a buffer:
// contract.Range, the one byte-range type, with its JSON (without
// contract.Range's String, so that %v prints the fields).
type Access contract.Range

// Range is a as a contract.Range.
func (a Access) Range() contract.Range { return contract.Range(a) }

// Overlaps reports whether a and b share at least one byte of the same
// buffer (contract.Range.Overlaps).
func (a Access) Overlaps(b Access) bool { return a.Range().Overlaps(b.Range()) }

// OpKind is the kind of a stream op.
type OpKind uint8

const (
	OpLaunch OpKind = iota // launch Stage on the stream
	OpRecord               // record Event on the stream
	OpWait                 // make the stream wait for the latest record of Event issued before this op (Lag iterations back: Iteration)
)

func (k OpKind) String() string {
	switch k {
	case OpLaunch:
		return "launch"
	case OpRecord:
		return "record"
	case OpWait:
		return "wait"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Op is one operation in a stream's order. JSON: {"op":"launch","stage":"name"},
// {"op":"record","event":3}, {"op":"wait","event":3} or, for a cross-iteration
// wait, {"op":"wait","event":3,"lag":2}. In memory, Stage is the
// stage index; the JSON form names the stage, resolved on load by Plan.UnmarshalJSON.
type Op struct {
	Kind  OpKind
	Stage int // OpLaunch: index into Plan.Stages
	Event int // OpRecord, OpWait: event id
	// Lag, on a wait, is how many iterations back the record it waits for
	// was issued (Iteration); 0 means this iteration's.
	Lag int
}

func (o Op) String() string {
	if o.Kind == OpLaunch {
		return fmt.Sprintf("launch #%d", o.Stage)
	}
	if o.Lag != 0 {
		return fmt.Sprintf("%s e%d lag %d", o.Kind, o.Event, o.Lag)
	}
	return fmt.Sprintf("%s e%d", o.Kind, o.Event)
}

// Stream is one stream and its ops in stream order.
//
// A Host stream (the spec's `stream: host`) is the host thread: its
// launches run on the CPU when they are issued, so each happens-before
// every op issued after it on any stream; a wait on it blocks the host
// until the event's record has completed (cuEventSynchronize); a record on
// it completes at once.
//
// Kind is how a device stream orders itself with the legacy default
// stream (StreamNonBlocking, the default, StreamBlocking, StreamLegacy,
// StreamPerThread; kinds.go). Thread names the host thread that issues
// the stream's ops ("" is the main thread): host stages and host waits
// order only their own thread's later issues.
type Stream struct {
	ID     int    `json:"id"`
	Name   string `json:"name"`
	Host   bool   `json:"host,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Thread string `json:"thread,omitempty"`
	// Device is the GPU whose context creates the stream (0-based, <
	// Plan.Devices); its stages run there. 0 for host streams.
	Device int  `json:"device,omitempty"`
	Ops    []Op `json:"-"`
}

// Buffer is a buffer the plan uses.
type Buffer struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	Where string `json:"where"`
	Role  string `json:"role"`
	// Init: "zeros", "fill", "file", "random"; InitValue, InitPath, InitSeed as in dag.Init.
	Init      string  `json:"init,omitempty"`
	InitValue float64 `json:"init_value,omitempty"`
	InitPath  string  `json:"init_path,omitempty"`
	InitSeed  int64   `json:"init_seed,omitempty"`
	Copies    int     `json:"copies,omitempty"`
	// ArenaOffset, when set, places the buffer in the plan's device arena
	// at this byte offset (a multiple of ArenaAlign): the arena pass shares
	// bytes only between buffers whose lifetimes the plan orders. Buffers
	// without it have their own allocation.
	ArenaOffset *int64 `json:"arena_offset,omitempty"`
	// Alloc is AllocLazy for a buffer each stream allocates at its first
	// use, AllocProducer for a temp its first writer allocates for itself
	// (never in the arena), "" otherwise.
	Alloc string `json:"alloc,omitempty"`
	// Device is the GPU a device buffer lives on (0-based, <
	// Plan.Devices); with ArenaOffset, the offset is within that device's
	// arena. 0 for host memory.
	Device int `json:"device,omitempty"`
}

// Kernel is a user PTX kernel used by the plan.
type Kernel struct {
	Name   string   `json:"name"`
	PTX    string   `json:"ptx"` // path, relative to Plan.Dir
	Entry  string   `json:"entry"`
	Params []string `json:"params"` // "name:type"
}

// Lifetime says, for one buffer, which streams touch it and the event after
// whose record each stream is done with it: bytes may be reused or freed once
// every listed event has completed (the planned form of record_stream).
type Lifetime struct {
	Buffer string     `json:"buffer"`
	Done   []StreamAt `json:"done"`
	// First, set by the arena pass on temps whose initial contents are never
	// read, names the stage whose launch is the buffer's first use and
	// happens-before every other access of it: where `--alloc dynamic`
	// allocates the buffer, on that stage's stream.
	First string `json:"first,omitempty"`
}

// StreamAt names an event recorded on a stream.
type StreamAt struct {
	Stream int `json:"stream"`
	Event  int `json:"event"`
}

// Stats summarises a plan.
//
// Waits counts the waits of one iteration (lag 0), the barrier form's fork
// waits included (Iteration.Barrier: S−1 for S streams); the waits with a
// lag are Iteration.CrossWaits, so Waits + Iteration.CrossWaits is every
// wait op of the plan. Events is Plan.Events: every event, those of the
// iterate pass and of the barrier included.
type Stats struct {
	Stages           int     `json:"stages"`
	Streams          int     `json:"streams"`
	Waits            int     `json:"waits"`
	Events           int     `json:"events"`
	CrossStreamEdges int     `json:"cross_stream_edges"` // edges of the reduced graph whose ends are on different streams
	ReducedEdges     int     `json:"reduced_edges"`      // edges after transitive reduction
	LowerBoundWaits  int     `json:"lower_bound_waits"`  // reduced edges − maximum matching (Nimble)
	CriticalPathUS   float64 `json:"critical_path_us"`   // longest path by duration_us, µs
	IdealMakespanUS  float64 `json:"ideal_makespan_us"`  // latest end of IdealSchedule, µs
	SumUS            float64 `json:"sum_us"`             // one-stream time: sum of durations, µs
	PlanningMS       float64 `json:"planning_ms"`        // Build's time, every pass and budget step, ms
	// ArenaBytes is the size of the device arena (0: none), bytes; with
	// several devices, the sum of ArenaBytesPerDevice.
	ArenaBytes int64 `json:"arena_bytes,omitempty"`
	// ArenaBytesPerDevice is each device's arena size, bytes (only in
	// plans of several devices).
	ArenaBytesPerDevice []int64 `json:"arena_bytes_per_device,omitempty"`
}

type opJSON struct {
	Op    string `json:"op"`
	Stage string `json:"stage,omitempty"`
	Event *int   `json:"event,omitempty"`
	Lag   int    `json:"lag,omitempty"`
	// Why, on a wait, is its reason (WaitReasons), for readers: derived
	// from the plan, so reading a plan ignores it.
	Why *WaitReason `json:"why,omitempty"`
}

type streamJSON struct {
	ID     int      `json:"id"`
	Name   string   `json:"name"`
	Host   bool     `json:"host,omitempty"`
	Kind   string   `json:"kind,omitempty"`
	Thread string   `json:"thread,omitempty"`
	Device int      `json:"device,omitempty"`
	Ops    []opJSON `json:"ops"`
}

type planAlias Plan

type planJSON struct {
	*planAlias
	Streams []streamJSON `json:"streams"`
}

// MarshalJSON writes launches by stage name and each wait with its reason
// ("why": WaitReasons): EncodeJSON's compact form.
func (p *Plan) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := p.EncodeJSON(&b, false); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// UnmarshalJSON reads a plan and resolves launch ops to stage indices.
// It is strict: a field no plan has and data after the plan's object are
// errors, and numbers in kernel arguments decode as json.Number, so that
// 64-bit integer arguments keep every digit. Errors: encoding/json's
// (*json.SyntaxError and *json.UnmarshalTypeError carry the byte offset in
// b; an unknown field is named but not placed), or a *PlanError for data
// after the plan (with its Offset), a stage name given twice, an unknown
// op, an unknown stage or a record or wait without an event. Call
// Validate for the structural checks.
func (p *Plan) UnmarshalJSON(b []byte) error {
	var in planJSON
	in.planAlias = (*planAlias)(p)
	p.FromFile = true
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		return err
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		return &PlanError{Msg: "data after the plan's JSON object", Offset: end}
	}
	idx := make(map[string]int, len(p.Stages))
	for i, s := range p.Stages {
		if _, dup := idx[s.Name]; dup {
			return ErrorAt(fmt.Sprintf("stages[%d].name", i), "stage %s is declared twice", s.Name)
		}
		idx[s.Name] = i
	}
	p.Streams = make([]Stream, len(in.Streams))
	for i, sj := range in.Streams {
		s := Stream{ID: sj.ID, Name: sj.Name, Host: sj.Host, Kind: sj.Kind, Thread: sj.Thread, Device: sj.Device, Ops: make([]Op, len(sj.Ops))}
		for j, oj := range sj.Ops {
			at := func(field string) string { return fmt.Sprintf("streams[%d].ops[%d].%s", i, j, field) }
			switch oj.Op {
			case "launch":
				k, ok := idx[oj.Stage]
				if !ok {
					return ErrorAt(at("stage"), "stream %d op %d launches unknown stage %q", i, j, oj.Stage)
				}
				if oj.Event != nil || oj.Lag != 0 {
					return ErrorAt(at("op"), "a launch has no event or lag")
				}
				s.Ops[j] = Op{Kind: OpLaunch, Stage: k}
			case "record", "wait":
				if oj.Event == nil {
					return ErrorAt(at("event"), "stream %d op %d (%s) has no event", i, j, oj.Op)
				}
				if oj.Stage != "" {
					return ErrorAt(at("stage"), "a %s names no stage", oj.Op)
				}
				kind := OpRecord
				if oj.Op == "wait" {
					kind = OpWait
				}
				s.Ops[j] = Op{Kind: kind, Event: *oj.Event, Lag: oj.Lag}
			default:
				return ErrorAt(at("op"), "stream %d op %d: unknown op %q (want launch, record or wait)", i, j, oj.Op)
			}
		}
		p.Streams[i] = s
	}
	return nil
}

// WithoutOps returns a copy of p without the ops for which drop(stream, index,
// op) is true, with IssueOrder renumbered to match; p is not changed. Tools
// and tests use it to take a wait out of a plan by hand (to reproduce a
// missing-wait bug) and check that the verifier and the detector see it.
func (p *Plan) WithoutOps(drop func(stream, index int, o Op) bool) *Plan {
	q := *p
	q.Streams = make([]Stream, len(p.Streams))
	newIdx := make([][]int, len(p.Streams))
	for s, str := range p.Streams {
		q.Streams[s] = str
		q.Streams[s].Ops = nil
		newIdx[s] = make([]int, len(str.Ops))
		for j, o := range str.Ops {
			newIdx[s][j] = -1
			if drop(s, j, o) {
				continue
			}
			newIdx[s][j] = len(q.Streams[s].Ops)
			q.Streams[s].Ops = append(q.Streams[s].Ops, o)
		}
	}
	q.IssueOrder = make([][2]int, 0, len(p.IssueOrder))
	for _, so := range p.IssueOrder {
		if k := newIdx[so[0]][so[1]]; k >= 0 {
			q.IssueOrder = append(q.IssueOrder, [2]int{so[0], k})
		}
	}
	return &q
}

// PassTime is the time Build spent in one phase: hazard analysis
// ("hazards"), a pass (by its name in Passes), or the budget loop's choice
// of orders ("budget"), summed over the budget loop's pipeline runs
// (Runs of them).
type PassTime struct {
	Pass string
	MS   float64 // wall time, ms
	Runs int
}
