package plan

import "fmt"

// Capture modes (Capture.Mode), cuStreamBeginCapture's CUstreamCaptureMode.
const (
	CaptureGlobal      = ""             // CU_STREAM_CAPTURE_MODE_GLOBAL (the default): unsafe calls from any thread fail
	CaptureThreadLocal = "thread_local" // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: unsafe calls from the capturing thread fail
	CaptureRelaxed     = "relaxed"      // CU_STREAM_CAPTURE_MODE_RELAXED: unsafe calls are allowed
)

// AllocLazy (Buffer.Alloc) is a buffer that each stream allocates with
// cuMemAlloc at its first use (a library's per-stream workspace, as cuBLAS
// keeps one per stream): inside a capture that allocation is not allowed,
// so the stream must use it once before the capture (a warm-up).
const AllocLazy = "lazy"

// AllocProducer (Buffer.Alloc) is a temp that its first writer allocates
// for itself (a library call that returns a new tensor, as PyTorch's
// operators do): it is never placed in the arena (no ArenaOffset), and the
// executors give it bytes of its own. Only a temp may have it (Validate).
const AllocProducer = "producer"

// Capture is a stream-capture region (cuStreamBeginCapture on Stream
// before the ops of stage First, cuStreamEndCapture after the ops of stage
// Last; both on Stream). Work issued into a capture is not run: it becomes
// a CUDA graph, replayed later. CUDA's rules for it are in the programming
// guide's "CUDA Graphs" section, "Creating a Graph Using Stream Capture"
// (cross-stream dependencies, prohibited and unhandled operations) and in
// cuThreadExchangeStreamCaptureMode's reference (capture modes).
type Capture struct {
	Stream int    `json:"stream"`
	First  string `json:"first"` // stage name
	Last   string `json:"last"`  // stage name
	Mode   string `json:"mode,omitempty"`
	Source string `json:"source,omitempty"` // the capture's position in its spec, for reports
}

// validateCaptures checks that each capture names stages of its stream,
// First not after Last, a known mode, and that no two captures on one
// stream overlap in issue order.
func (p *Plan) validateCaptures() error {
	for k, c := range p.Captures {
		if c.Stream < 0 || c.Stream >= len(p.Streams) {
			return fmt.Errorf("plan: capture %d on stream %d of %d", k, c.Stream, len(p.Streams))
		}
		switch c.Mode {
		case CaptureGlobal, CaptureThreadLocal, CaptureRelaxed:
		default:
			return fmt.Errorf("plan: capture %d has mode %q, want global, %s or %s", k, c.Mode, CaptureThreadLocal, CaptureRelaxed)
		}
		f, l := p.StageIndex(c.First), p.StageIndex(c.Last)
		if f < 0 || l < 0 {
			return fmt.Errorf("plan: capture %d names unknown stage %q", k, map[bool]string{true: c.First, false: c.Last}[f < 0])
		}
		for _, i := range []int{f, l} {
			if p.Stages[i].Stream != c.Stream {
				return fmt.Errorf("plan: capture %d on stream %s: stage %s is on stream %s; a capture begins and ends on its own stream", k, p.Streams[c.Stream].Name, p.Stages[i].Name, p.Streams[p.Stages[i].Stream].Name)
			}
		}
	}
	// One capture per stream at a time, in issue order (cuStreamBeginCapture
	// on a capturing stream fails).
	for k, c := range p.Captures {
		b, e := p.CaptureRegion(c)
		for j, q := range p.Captures[:k] {
			if qb, qe := p.CaptureRegion(q); q.Stream == c.Stream && b < qe && qb < e {
				at := ""
				if c.Source != "" {
					at = " (" + c.Source + ")"
				}
				return fmt.Errorf("plan: capture %d%s of %s…%s on stream %s overlaps capture %d (%s…%s) in issue order: a stream has one capture at a time; make their stages disjoint", k, at, c.First, c.Last, p.Streams[c.Stream].Name, j, q.First, q.Last)
			}
		}
		for j, q := range p.Captures {
			// A stream that joined another capture is capturing too.
			if qb, qe := p.CaptureRegion(q); j != k && q.Stream != c.Stream && qb < b && b < qe {
				if at := p.CaptureJoins(q)[c.Stream]; at >= 0 && at < b {
					src := ""
					if c.Source != "" {
						src = " (" + c.Source + ")"
					}
					return fmt.Errorf("plan: capture %d%s begins on stream %s, which joined capture %d (%s…%s on stream %s) before: a stream has one capture at a time; begin it after that capture ends, or drop it (its stages are in that capture)", k, src, p.Streams[c.Stream].Name, j, q.First, q.Last, p.Streams[q.Stream].Name)
				}
			}
		}
	}
	return nil
}

// OpStage returns the stage that op j of stream s belongs to: a launch's
// stage, the next launch's on the stream for a wait (the stage it waits
// for), the previous launch's for a record (the stage it signals); −1
// where there is none.
func (p *Plan) OpStage(s, j int) int {
	ops := p.Streams[s].Ops
	step := 1
	if ops[j].Kind == OpRecord {
		step = -1
	}
	for ; j >= 0 && j < len(ops); j += step {
		if ops[j].Kind == OpLaunch {
			return ops[j].Stage
		}
	}
	return -1
}

// StageIndex returns the index of the stage named name, or -1.
func (p *Plan) StageIndex(name string) int {
	for i := range p.Stages {
		if p.Stages[i].Name == name {
			return i
		}
	}
	return -1
}

// CaptureRegion returns the issue-order positions [begin, end) of capture
// c (IssueOrder indices): from the waits issued just before First's launch
// on its stream (right before it in issue order too: a wait issued
// earlier, such as an iteration barrier's, comes before the capture) to
// the records issued just after Last's launch. p must be valid.
func (p *Plan) CaptureRegion(c Capture) (begin, end int) {
	ops := p.Streams[c.Stream].Ops
	pos := make([]int, len(ops)) // issue position of each op of the stream
	for k, so := range p.IssueOrder {
		if so[0] == c.Stream {
			pos[so[1]] = k
		}
	}
	f, l := p.StageIndex(c.First), p.StageIndex(c.Last)
	jf, jl := -1, -1
	for j, o := range ops {
		if o.Kind == OpLaunch && o.Stage == f {
			jf = j
		}
		if o.Kind == OpLaunch && o.Stage == l {
			jl = j
		}
	}
	for jf > 0 && ops[jf-1].Kind == OpWait && pos[jf-1] == pos[jf]-1 {
		jf--
	}
	for jl+1 < len(ops) && ops[jl+1].Kind == OpRecord && pos[jl+1] == pos[jl]+1 {
		jl++
	}
	return pos[jf], pos[jl] + 1
}

// CaptureJoins returns, per stream, the issue position (an IssueOrder
// index) from which capture c takes its ops: the region's begin
// (CaptureRegion) for c's stream, the position of the wait by which a
// device stream joins the capture (a lag-0 wait on an event whose latest
// record before it was issued in the region on a stream the capture had
// taken: CUDA programming guide, "CUDA Graphs", cross-stream
// dependencies), and −1 for a stream that never joins. A stream's ops in
// the region before it joins are not captured: they run. p must be valid.
func (p *Plan) CaptureJoins(c Capture) []int {
	begin, end := p.CaptureRegion(c)
	joined := make([]int, len(p.Streams))
	for s := range joined {
		joined[s] = -1
	}
	joined[c.Stream] = begin
	inside := map[int]bool{} // events whose latest record is a captured one in the region
	for k, so := range p.IssueOrder[:end] {
		str := &p.Streams[so[0]]
		o := str.Ops[so[1]]
		switch o.Kind {
		case OpRecord:
			inside[o.Event] = k >= begin && joined[so[0]] >= 0
		case OpWait:
			if k >= begin && o.Lag == 0 && inside[o.Event] && !str.Host && joined[so[0]] < 0 {
				joined[so[0]] = k
			}
		}
	}
	return joined
}
