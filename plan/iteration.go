package plan

// Iteration is a plan's cross-iteration schedule: how the plan is
// issued once per input of a stream of inputs, with iterations overlapping.
//
// Iteration i (from 0) issues the plan's ops in IssueOrder with three
// substitutions:
//
//   - streams: stream s's ops go to physical stream s + len(Streams)·(i mod
//     StreamSets), so that StreamSets consecutive iterations run on disjoint
//     streams;
//   - buffers: a buffer with copies K > 1 is a ring of K copies, and
//     iteration i uses copy i mod K;
//   - events: event e rotates through Slots[e] physical events; a record of e
//     in iteration i records slot i mod Slots[e], and a wait with Lag d
//     issued in iteration i waits on slot (i−d) mod Slots[e], the record of
//     iteration i−d. A wait with i−d < 0 is skipped (there is nothing to
//     wait for). Slots are enough that no later record of that slot is
//     issued before the wait: every record is issued before each wait that
//     needs it, across iterations too (a wait issued before its record
//     waits for nothing in CUDA: the wait-before-record trap).
//
// The reference semantics is one stream running iteration 0's stages in
// declaration order, then iteration 1's, and so on. The iterate pass adds
// the waits with Lag > 0 (cross waits) that this order needs and stream
// order plus the other waits do not already give; Verify checks the plan
// unrolled over enough iterations to cover every phase of the rings
// (UnrollIterations).
type Iteration struct {
	// StreamSets is R ≥ 1 above: how many copies of the streams iterations
	// rotate through. Physical streams: len(Streams)·StreamSets.
	StreamSets int `json:"stream_sets"`
	// Slots has one entry ≥ 1 per event.
	Slots []int `json:"slots"`
	// CrossWaits counts the waits with Lag > 0 (Stats.Waits counts the others).
	CrossWaits int `json:"cross_waits"`
	// InFlight is how many consecutive iterations the plan lets run at
	// once at most: the smallest ring (copies) among buffers that conflict
	// across iterations, or 1 when a one-copy buffer does.
	InFlight int `json:"in_flight"`
	// Barrier is set when iterations do not overlap: the plan's iteration
	// ops are a barrier between consecutive iterations (WithIteration), the
	// correct but least concurrent form, used where no cross-iteration
	// waits were planned.
	Barrier bool `json:"barrier,omitempty"`
}

// PhysicalStreams returns the streams the executor creates for p, as a
// table: m[r][s] is the stream that runs plan stream s's ops in iterations i
// with i mod StreamSets = r, numbered from 0 to total−1. Set 0 is the plan's
// own streams (m[0][s] = s); each further set adds a copy of every stream
// but host streams (one host thread serves every iteration) and default
// streams (CUDA has one legacy default stream per context and one
// per-thread default stream per host thread, which every iteration
// shares). Without iteration info m has one row.
func (p *Plan) PhysicalStreams() (m [][]int, total int) {
	R := 1
	if p.Iteration != nil {
		R = max(p.Iteration.StreamSets, 1)
	}
	total = len(p.Streams)
	m = make([][]int, R)
	for r := range m {
		m[r] = make([]int, len(p.Streams))
		for s := range m[r] {
			switch {
			case r == 0 || hostStream(p, s) || defaultStream(p, s):
				m[r][s] = s
			default:
				m[r][s] = total
				total++
			}
		}
	}
	return m, total
}

// hostStream reports whether plan stream s is the host thread (the spec's
// host stages), which stream sets do not replicate. The iterate walk treats
// it as a stream like the others: it does not use the host's extra order
// (a host launch happens-before everything issued after it), so it may
// keep a cross wait that order makes redundant, never miss one.
func hostStream(p *Plan, s int) bool { return p.Streams[s].Host }

// defaultStream reports whether plan stream s is a default stream (kind
// legacy or per-thread), which stream sets do not replicate.
func defaultStream(p *Plan, s int) bool {
	k := p.Streams[s].Kind
	return k == StreamLegacy || k == StreamPerThread
}

// maxLag bounds a wait's lag, stream sets and event slots (2^16, as the
// spec loader bounds lags; an event's slots beyond one are MaxExtraSlots
// at most): a plan file beyond it is certainly a mistake.
const maxLag = MaxExtraSlots

// lcm is the least common multiple of a and b (both ≥ 1); callers keep
// a·b within int (LCM saturates at a small limit).
func lcm(a, b int) int {
	g, h := a, b
	for h != 0 {
		g, h = h, g%h
	}
	return a / g * b
}
