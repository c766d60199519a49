package executor

// Capture regions (planner.Plan.Captures) in graph mode: the plan is
// lowered as in stream mode, and each region's ops on the streams the
// capture takes (planner.Plan.CapturedStreams) become a graph. The first
// iteration of each phase captures it: BeginCapture on the region's stream
// (in the capture's mode), the region's ops as they come, EndCapture, then
// a replay of the graph; later iterations replay it where the region
// begins. Ops outside the regions, and the region's ops on streams the
// capture does not take, are issued eagerly. A captured wait on an event
// recorded outside the region becomes a wait of the capture stream before
// the capture (and before each replay), and every event recorded in the
// region is recorded again on the capture stream after each replay (the
// graph's work is done there), so the plan's waits outside the region see
// it. A region that breaks a capture rule (planner.CheckCaptures) fails:
// with the backend's error where the backend (the CUDA driver, or the
// emulation's join rule) refuses it, else with the checker's verdict;
// either names the capture and the stage.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/planner"
)

// CaptureModer is an optional GraphBackend interface: a capture begun in
// one of cuStreamBeginCapture's modes (planner.CaptureGlobal "",
// CaptureThreadLocal, CaptureRelaxed). Graph mode uses it for the plan's
// capture regions, in their mode; without it they begin with BeginCapture.
type CaptureModer interface {
	BeginCaptureMode(s Stream, mode string) error
}

// region is a capture region as the executor lowers it.
type region struct {
	c             planner.Capture
	begin, end    int    // IssueOrder positions (planner.Plan.CaptureRegion)
	captured      []bool // per plan stream: the capture takes its ops in the region
	external      map[int]bool
	what, verdict string
}

// captureAt names capture c in messages: its stages, stream and position
// in the spec (file:line:col) where the plan has it.
func captureAt(p *planner.Plan, c planner.Capture) string {
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
		return fmt.Errorf("executor: the plan's stream sets, event slots and ring sizes repeat only after more than %d iterations: use fewer distinct ring sizes", maxPhases)
	}
	x.phaseDescs(n)
	x.streams, x.events = m.Streams, m.Events()
	rs := make([]region, len(p.Captures))
	for r, c := range p.Captures {
		rg := &rs[r]
		rg.c = c
		rg.begin, rg.end = p.CaptureRegion(c)
		if r > 0 && rg.begin < rs[r-1].end {
			return fmt.Errorf("executor: graph mode: capture %d (%s) begins in issue order before capture %d (%s) ends, but graph mode captures one region at a time (each region is captured into one graph, which later iterations launch where the region begins), so captures under way at once cannot run as graphs: make the regions follow one another, or capture their work in one region",
				r+1, captureAt(p, c), r, captureAt(p, rs[r-1].c))
		}
		rg.captured = p.CapturedStreams(c)
		rg.what = fmt.Sprintf("capture of stages %s…%s on stream %s", c.First, c.Last, p.Streams[c.Stream].Name)
		if c.Source != "" {
			rg.what += " (" + c.Source + ")"
		}
		one := *p
		one.Captures = []planner.Capture{c}
		var vs []string
		for _, v := range planner.CheckCaptures(&one) {
			vs = append(vs, v.String())
		}
		rg.verdict = strings.Join(vs, "; ")
		// Waits the capture takes on events recorded outside the region.
		rg.external = map[int]bool{}
		inside := map[int]bool{}
		for k, so := range p.IssueOrder[:rg.end] {
			o := p.Streams[so[0]].Ops[so[1]]
			switch o.Kind {
			case planner.OpRecord:
				inside[o.Event] = k >= rg.begin && rg.captured[so[0]]
			case planner.OpWait:
				if k >= rg.begin && rg.captured[so[0]] && (o.Lag > 0 || !inside[o.Event]) {
					rg.external[k] = true
				}
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
			taken := rg.captured[s] && !x.p.Streams[s].Host && in.op != opLazy
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
		later = append(later, replay)
		later = append(later, rerec...)
		later = append(later, eager...)
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
// at its first use there (planner.AllocLazy: a library's per-stream
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
