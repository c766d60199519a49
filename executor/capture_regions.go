package executor

// Capture regions (plan.Plan.Captures) in graph mode: the plan is
// lowered as in stream mode, and each region's ops on the streams the
// capture takes (plan.Plan.CaptureJoins) become a graph. The first
// iteration of each phase captures it: BeginCapture on the region's stream
// (in the capture's mode), the region's ops as they come, EndCapture, then
// a replay of the graph. Later iterations issue the region's eager ops
// (those on streams the capture does not take, host stages included),
// then replay the graph where the capture ended: every op issued before
// the capture's end in the plan's issue order is issued before the
// replay, in every iteration, as in the first. Ops outside the regions
// are issued eagerly. A captured wait on an event recorded before the
// region becomes a wait of the capture stream before the capture (and
// before each replay), and every event recorded in the region is recorded
// again on the capture stream after each replay (the graph's work is done
// there), so the plan's waits outside the region see it. A region whose
// lowering would reorder a wait against its record (a captured wait on an
// event recorded by eager work in the region, which the driver refuses as
// CUDA_ERROR_STREAM_CAPTURE_ISOLATION) or a record against a captured one
// is refused before any work. A region that breaks a capture rule
// (verify.CheckCaptures) fails: with the backend's error where the
// backend (the CUDA driver, or the emulation's join rule) refuses it, else
// with the checker's verdict; either names the capture and the stage.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// CaptureModer is an optional GraphBackend interface: a capture begun in
// one of cuStreamBeginCapture's modes (plan.CaptureGlobal "",
// CaptureThreadLocal, CaptureRelaxed). Graph mode uses it for the plan's
// capture regions, in their mode; without it they begin with BeginCapture.
type CaptureModer interface {
	BeginCaptureMode(s Stream, mode string) error
}

// region is a capture region as the executor lowers it.
type region struct {
	c             plan.Capture
	begin, end    int   // IssueOrder positions (plan.Plan.CaptureRegion)
	joins         []int // per plan stream: the issue position from which the capture takes its ops, or −1 (plan.Plan.CaptureJoins)
	external      map[int]bool
	what, verdict string
}

// taken reports whether the capture takes the op of stream s at issue
// position k of the region: s has joined it by then.
func (rg *region) taken(s, k int) bool { return rg.joins[s] >= 0 && rg.joins[s] <= k }

// captureAt names capture c in messages: its stages, stream and position
// in the spec (file:line:col) where the plan has it.
func captureAt(p *plan.Plan, c plan.Capture) string {
	s := fmt.Sprintf("%s…%s on stream %s", c.First, c.Last, p.Streams[c.Stream].Name)
	if c.Source != "" {
		s += ", " + c.Source
	}
	return s
}

// lowerRegions lowers graph mode for a plan with capture regions.
func (x *program) lowerRegions() error {
	p, m := x.p, x.m
	if x.inflight > 0 {
		return errors.New("executor: graph mode with capture regions tracks no iteration's end: the in-flight bound and progress need stream mode, or a spec without captures (the whole iteration captured)")
	}
	n := 1
	if x.iters > 1 {
		n = m.Period(maxPhases)
	}
	if n > maxPhases {
		return periodTooLong(p, m, false)
	}
	x.phaseDescs(n)
	x.streams, x.events = m.Streams, m.Events()
	hostOnly := map[int]bool{} // events recorded by host stages only
	for _, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpRecord {
			h, seen := hostOnly[o.Event]
			hostOnly[o.Event] = (h || !seen) && p.Streams[so[0]].Host
		}
	}
	rs := make([]region, len(p.Captures))
	for r, c := range p.Captures {
		rg := &rs[r]
		rg.c = c
		rg.begin, rg.end = p.CaptureRegion(c)
		if r > 0 && rg.begin < rs[r-1].end {
			return fmt.Errorf("executor: graph mode: capture %d (%s) begins in issue order before capture %d (%s) ends, but graph mode captures one region at a time (each region is captured into one graph, which later iterations launch where the region ends), so captures under way at once cannot run as graphs: make the regions follow one another, or capture their work in one region",
				r+1, captureAt(p, c), r, captureAt(p, rs[r-1].c))
		}
		rg.joins = p.CaptureJoins(c)
		rg.what = fmt.Sprintf("capture of stages %s…%s on stream %s", c.First, c.Last, p.Streams[c.Stream].Name)
		if c.Source != "" {
			rg.what += " (" + c.Source + ")"
		}
		one := *p
		one.Captures = []plan.Capture{c}
		var vs []string
		for _, v := range verify.CheckCaptures(&one) {
			if v.Rule == verify.CaptureReplayOrder {
				// No backend refuses it: the replay races, and the
				// backend's race detector (the simulator's) says so.
				continue
			}
			vs = append(vs, v.String())
		}
		rg.verdict = strings.Join(vs, "; ")
		// Waits the capture takes on events recorded outside the region:
		// the waits of its first stage, issued before the capture begins
		// (plan.Plan.CaptureRegion), and no others.
		rg.external = map[int]bool{}
		inside := map[int]bool{}
		last := map[int]int{} // per event: the issue position of its latest record
		firstAt := rg.begin
		for firstAt < rg.end && p.Streams[p.IssueOrder[firstAt][0]].Ops[p.IssueOrder[firstAt][1]].Kind == plan.OpWait {
			firstAt++
		}
		for k, so := range p.IssueOrder[:rg.end] {
			o := p.Streams[so[0]].Ops[so[1]]
			switch o.Kind {
			case plan.OpRecord:
				if k >= rg.begin && !rg.taken(so[0], k) && inside[o.Event] {
					return regionOrderError(p, rg, so, p.IssueOrder[last[o.Event]])
				}
				inside[o.Event] = k >= rg.begin && rg.taken(so[0], k)
				last[o.Event] = k
			case plan.OpWait:
				if k < rg.begin || !rg.taken(so[0], k) || o.Lag == 0 && inside[o.Event] || hostOnly[o.Event] {
					// Not captured, a record made in the capture, or a
					// host stage's record (no device wait is issued).
					continue
				}
				if k >= firstAt {
					return isolationError(p, rg, so, o)
				}
				rg.external[k] = true
			}
		}
	}
	x.regions = rs
	R := len(rs)
	x.graphCounts = make([]counts, n*R)
	x.phases = make([][]instr, n)
	x.first = make([][]instr, n)
	for ph := range n {
		ops := x.appendIteration(nil, ph, n, nil, nil, false)
		x.first[ph], x.phases[ph] = x.regionize(ops, ph)
	}
	return nil
}

// opName names the stage of op so (plan.Plan.OpStage) and its stream.
func opName(p *plan.Plan, so [2]int) string {
	s := fmt.Sprintf("stream %s", p.Streams[so[0]].Name)
	if i := p.OpStage(so[0], so[1]); i >= 0 {
		s = fmt.Sprintf("stage %s (%s)", p.Stages[i].Name, s)
	}
	return s
}

// isolationError refuses a captured wait (so, op o) in a region, after
// the waits of its first stage, on an event not recorded in the capture:
// the driver refuses it inside a capture
// (CUDA_ERROR_STREAM_CAPTURE_ISOLATION, verify.CaptureIsolation), and
// graph mode would have to move it in front of the capture (before its
// record, when eager work in the region records it).
func isolationError(p *plan.Plan, rg *region, so [2]int, o plan.Op) error {
	what := fmt.Sprintf("event e%d of %d iteration(s) back", o.Event, o.Lag)
	if o.Lag == 0 {
		what = fmt.Sprintf("event e%d, which the capture does not record", o.Event)
		for k := len(p.IssueOrder) - 1; k >= 0; k-- { // its latest record before the wait
			r := p.IssueOrder[k]
			if r == so {
				for k--; k >= 0; k-- {
					r = p.IssueOrder[k]
					if ro := p.Streams[r[0]].Ops[r[1]]; ro.Kind == plan.OpRecord && ro.Event == o.Event {
						what = "the record of " + opName(p, r) + ", which the capture does not take"
						if k >= rg.begin {
							what += " (issued in the region: moving the wait in front of the capture would put it before its record)"
						}
						break
					}
				}
				break
			}
		}
	}
	return fmt.Errorf("executor: graph mode: in the %s, %s waits for %s: the driver refuses such a wait inside a capture (CUDA_ERROR_STREAM_CAPTURE_ISOLATION), and graph mode does not move a wait in front of its capture: wait before the capture begins (a wait of stage %s, the capture's first stage, or of a stage before it), or capture the work it waits for",
		rg.what, opName(p, so), what, rg.c.First)
}

// regionOrderError refuses a record by work the capture does not take
// (so) of an event that captured work recorded earlier in the region
// (rec): graph mode records the captured events again after each replay,
// which would move the captured record after this one.
func regionOrderError(p *plan.Plan, rg *region, so, rec [2]int) error {
	return fmt.Errorf("executor: graph mode: in the %s, %s records an event that %s recorded earlier in the capture: graph mode records the captured events again after each replay, which would move the captured record after this one: record a separate event for each",
		rg.what, opName(p, so), opName(p, rec))
}

// regionize returns the first and the later iterations' programs of phase
// ph from its stream-mode instructions ops.
func (x *program) regionize(ops []instr, ph int) (first, later []instr) {
	R := len(x.regions)
	i := 0
	for r := range x.regions {
		rg := &x.regions[r]
		g := int32(ph*R + r)
		origin := int32(x.m.Stream(ph, rg.c.Stream))
		for ; i < len(ops) && int(ops[i].src) < rg.begin; i++ {
			first, later = append(first, ops[i]), append(later, ops[i])
		}
		var ext, inner, eager, rerec []instr
		var cnt counts
		for ; i < len(ops) && int(ops[i].src) < rg.end; i++ {
			in := ops[i]
			s := x.p.IssueOrder[in.src][0]
			taken := rg.taken(s, int(in.src)) && !x.p.Streams[s].Host && in.op != opLazy
			switch {
			case !taken:
				inner = append(inner, in)
				eager = append(eager, in)
			case in.op == opWait && rg.external[int(in.src)]:
				in.stream = origin
				ext = append(ext, in)
			default:
				inner = append(inner, in)
				switch in.op {
				case opLaunch, opFunc:
					cnt.launches++
				case opWait:
					cnt.waits++
				case opRecord:
					cnt.records++
					rerec = append(rerec, instr{op: opRecord, stream: origin, event: in.event, src: -1})
				}
			}
		}
		x.graphCounts[g] = cnt
		replay := instr{op: opGraph, stream: origin, buf: g, src: -1}
		first = append(first, ext...)
		first = append(first, instr{op: opCaptureBegin, stream: origin, buf: g, src: -1})
		first = append(first, inner...)
		first = append(first, instr{op: opCaptureEnd, stream: origin, buf: g, src: -1}, replay)
		first = append(first, rerec...)
		later = append(later, ext...)
		later = append(later, eager...)
		later = append(later, replay)
		later = append(later, rerec...)
	}
	first, later = append(first, ops[i:]...), append(later, ops[i:]...)
	return first, later
}

// beginCapture opens the capture of graph g's region on in's stream.
func (e *exec) beginCapture(in *instr) error {
	rg := &e.x.regions[int(in.buf)%len(e.x.regions)]
	s := e.streams[in.stream]
	var err error
	if cm, ok := e.gb.(CaptureModer); ok {
		err = cm.BeginCaptureMode(s, rg.c.Mode)
	} else {
		err = e.gb.BeginCapture(s)
	}
	if err == nil {
		e.capturing, e.capStream = in.buf, in.stream
	}
	return err
}

// endCapture ends it and keeps the graph; a region the capture checker
// refuses fails even where the backend took it. It returns the captured
// ops as negative counts: the replay counts them.
func (e *exec) endCapture(in *instr) (counts, error) {
	e.capturing = -1
	rg := &e.x.regions[int(in.buf)%len(e.x.regions)]
	g, err := e.gb.EndCapture(e.streams[in.stream])
	if err != nil {
		return counts{}, err
	}
	if rg.verdict != "" {
		return counts{}, errors.Join(errors.New("the backend took the capture, but it breaks a capture rule"), e.gb.DestroyGraph(g))
	}
	e.graphs[in.buf] = g
	c := e.x.graphCounts[in.buf]
	return counts{-c.launches, -c.waits, -c.records}, nil
}

// captureError names the capture in progress (or the one op ends) and the
// capture checker's verdict, and ends a capture left open by the error.
func (e *exec) captureError(in *instr, err error) error {
	g := e.capturing
	if in.op == opCaptureBegin || in.op == opCaptureEnd {
		g = in.buf
	}
	if g < 0 || e.x.regions == nil {
		return err
	}
	rg := &e.x.regions[int(g)%len(e.x.regions)]
	if e.capturing >= 0 {
		e.capturing = -1
		if gr, eerr := e.gb.EndCapture(e.streams[e.capStream]); eerr == nil && gr != nil {
			e.gb.DestroyGraph(gr)
		}
	}
	msg := rg.what
	if rg.verdict != "" {
		msg += ": the capture checker: " + rg.verdict
	}
	return fmt.Errorf("%w (%s)", err, msg)
}

// lazyAlloc allocates the workspace of lazy buffer in.buf on in's stream
// at its first use there (plan.AllocLazy: a library's per-stream
// cuMemAlloc), kept until release; later uses allocate nothing.
func (e *exec) lazyAlloc(in *instr) error {
	key := [2]int32{in.stream, in.buf}
	if e.lazyDone[key] {
		return nil
	}
	pb := e.x.p.Buffers[in.buf]
	h, err := e.b.Alloc(BufferDesc{Name: pb.Name + " (workspace)", Bytes: pb.Bytes, Where: "device"})
	if err != nil {
		return err
	}
	if e.lazyDone == nil {
		e.lazyDone = map[[2]int32]bool{}
	}
	e.lazyDone[key] = true
	e.owned = append(e.owned, h)
	return nil
}
