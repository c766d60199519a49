package verify

import (
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/plan"
)

// Capture rules, as CaptureViolation.Rule names them.
const (
	CaptureUnjoined    = "unjoined"     // a stream forked into the capture is not joined back: CUDA_ERROR_STREAM_CAPTURE_UNJOINED at cuStreamEndCapture
	CaptureSync        = "synchronize"  // the host waits during a capture: for captured work, CUDA_ERROR_CAPTURED_EVENT (cuEventSynchronize on an event recorded in the capture), the capture is invalidated; for other work, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED from any thread in global mode, from the capturing thread in thread-local mode (seen on the H100)
	CaptureHostAccess  = "host access"  // a host stage touches bytes of captured work, which has not run
	CaptureAlloc       = "allocation"   // cuMemAlloc during a capture, on any stream: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED from any thread in global mode, from the capturing thread in thread-local mode
	CaptureLegacy      = "legacy"       // the legacy default stream used during a capture of blocking streams: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
	CaptureSyncCopy    = "sync copy"    // a synchronous copy waits for the device: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
	CaptureLegacyBegin = "legacy begin" // capture begun on the legacy default stream: not allowed (cuStreamBeginCapture)
	CaptureMerge       = "merge"        // a stream that one capture takes waits on an event recorded in another: CUDA_ERROR_STREAM_CAPTURE_MERGE (seen on the H200)
	CaptureIsolation   = "isolation"    // a captured stream waits on an event not recorded in the capture: CUDA_ERROR_STREAM_CAPTURE_ISOLATION, the capture is invalidated (seen on the H100)
)

// CaptureViolation is one broken capture rule.
type CaptureViolation struct {
	Rule   string `json:"rule"`
	Stage  string `json:"stage"`  // the stage that breaks it
	Stream string `json:"stream"` // its stream
	// Error is the driver's error that the rule predicts.
	Error string `json:"error,omitempty"`
	// Fix is the edit that keeps the rule.
	Fix    string `json:"fix"`
	Source string `json:"source,omitempty"` // the stage's file:line:col
}

func (c CaptureViolation) String() string {
	at := ""
	if c.Source != "" {
		at = " (" + c.Source + ")"
	}
	s := fmt.Sprintf("capture rule %q broken by %s%s on stream %s", c.Rule, c.Stage, at, c.Stream)
	if c.Error != "" {
		s += " (the driver: " + c.Error + ")"
	}
	return s + "; fix: " + c.Fix
}

// captureRegion is CaptureRegion for the verifier.
func (v *verifier) captureRegion(c plan.Capture) (begin, end int) { return v.p.CaptureRegion(c) }

// CheckCaptures holds p's capture regions to CUDA's capture rules: every
// stream forked into a capture (by waiting on an event recorded in it) is
// joined back into the origin stream before the capture ends; inside a
// capture no host wait on captured work (nor on other work, except in
// relaxed mode or from another thread in thread-local mode: a potentially
// unsafe call), no wait of a captured stream on an event not recorded in
// the capture (isolation), no host stage on bytes captured
// work touches, no synchronous copy, no use of the legacy default stream
// while a blocking stream is captured, and no cuMemAlloc (a lazy buffer's
// first use on a stream, captured or not: warm up on that stream first)
// from any thread in global mode, from the capturing thread in
// thread-local mode, as cuThreadExchangeStreamCaptureMode's reference
// says of unsafe calls; relaxed mode allows it. Happens-before inside the region is Verify's
// (stream order plus record→wait in issue order); a replay's is Verify's
// of ReplayPlan, whose races that p does not have break the replay-order
// rule (CaptureReplayOrder), checked when every other rule holds (graph
// mode runs no capture that breaks one). p must be valid.
func CheckCaptures(p *plan.Plan) []CaptureViolation {
	if len(p.Captures) == 0 {
		return nil
	}
	v := &verifier{p: p}
	v.clocks()
	var out []CaptureViolation
	for k := range p.Captures {
		out = append(out, v.checkCapture(k)...)
	}
	if len(out) > 0 {
		return out // a capture that breaks a rule is not replayed
	}
	return replayOrder(p) // replay.go
}

// capturedElsewhere returns the capture other than k that takes stream s's
// ops at issue position at (s is its stream, or joined it before), or −1.
func (v *verifier) capturedElsewhere(k, s, at int) int {
	p := v.p
	for q, c := range p.Captures {
		if q == k {
			continue
		}
		if begin, end := p.CaptureRegion(c); at >= begin && at < end {
			if j := p.CaptureJoins(c)[s]; j >= 0 && j <= at {
				return q
			}
		}
	}
	return -1
}

// checkCapture returns the violations of capture ck: each op issued in its
// region is checked against the rules CheckCaptures lists, then every
// stream the capture took must join back into its origin stream.
func (v *verifier) checkCapture(ck int) []CaptureViolation {
	p := v.p
	c := p.Captures[ck]
	cc := &captureCheck{v: v, p: p, ck: ck, c: c, origin: int32(c.Stream)}
	cc.begin, cc.end = v.captureRegion(c)
	if p.Streams[cc.origin].Kind == plan.StreamLegacy {
		cc.bad(v.launchOp[p.StageIndex(c.First)], CaptureLegacyBegin, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
			"capture on a stream you created (the legacy default stream cannot be captured)")
	}
	cc.streams = make([]capturedStream, len(p.Streams))
	for s := range cc.streams {
		cc.streams[s].last = -1
	}
	cc.streams[cc.origin].in = true
	cc.blocking = plan.BlockingKind(p.Streams[cc.origin].Kind)
	cc.thread = p.Streams[cc.origin].Thread
	// The lazy buffers' maps go to op as an argument, not in cc: there
	// they stay on the stack while small (cc's fields do not, as its
	// methods append to cc.out).
	la := lazyAllocs{lazy: map[string]bool{}, usedBefore: map[[2]string]bool{}}
	for _, b := range p.Buffers {
		if b.Alloc == plan.AllocLazy {
			la.lazy[b.Name] = true
		}
	}
	cc.joins = p.CaptureJoins(c)
	cc.firstAt = int(v.opIssue[v.launchOp[p.StageIndex(c.First)]])
	for k, so := range p.IssueOrder {
		if k >= cc.end {
			break
		}
		cc.op(k, so, la)
	}
	cc.unjoined()
	return cc.out
}

// captureCheck is checkCapture's state as it walks the issue order up to
// the end of capture ck's region.
type captureCheck struct {
	v          *verifier
	p          *plan.Plan
	ck         int
	c          plan.Capture
	begin, end int // the region's issue positions [begin, end)
	origin     int32
	out        []CaptureViolation

	streams     []capturedStream // per stream: taken by the capture, its last op there
	blocking    bool             // a captured stream is blocking
	thread      string           // the capturing thread
	capturedAcc []plan.Access    // accesses of captured stages so far
	joins       []int            // per stream: where it joins the capture (CaptureJoins)
	firstAt     int              // the issue position of First's launch
}

// lazyAllocs is what checkCapture knows of the lazy buffers' cuMemAlloc.
type lazyAllocs struct {
	lazy map[string]bool // the lazy buffers
	// usedBefore holds each (stream, lazy buffer) used so far: before the
	// capture, or since (its cuMemAlloc is done).
	usedBefore map[[2]string]bool
}

// capturedStream is a stream as capture ck's walk has seen it so far:
// whether the capture took it (in) and its last op issued in the region
// while taken (last, −1 for none).
type capturedStream struct {
	in   bool
	last int32
}

// stageOf names op g's stage (or the op), its stream and the stage's source.
func (cc *captureCheck) stageOf(g int32) (string, string, string) {
	v, p := cc.v, cc.p
	s := v.opStream[g]
	o := p.Streams[s].Ops[v.opIndex(g)]
	if o.Kind == plan.OpLaunch {
		return p.Stages[o.Stage].Name, p.Streams[s].Name, p.Stages[o.Stage].Source
	}
	if i := p.OpStage(int(s), int(v.opIndex(g))); i >= 0 {
		st := &p.Stages[i]
		return st.Name, p.Streams[s].Name, st.Source
	}
	return o.String(), p.Streams[s].Name, ""
}

// bad reports that op g breaks rule, with the driver's error drv and fix.
func (cc *captureCheck) bad(g int32, rule, drv, fix string) {
	st, str, src := cc.stageOf(g)
	cc.out = append(cc.out, CaptureViolation{Rule: rule, Stage: st, Stream: str, Error: drv, Fix: fix, Source: src})
}

// op checks the op at issue position k (so: stream, index), which is
// before the region's end; la holds the lazy buffers and their uses.
func (cc *captureCheck) op(k int, so [2]int, la lazyAllocs) {
	v, p := cc.v, cc.p
	s := int32(so[0])
	g := v.opBase[s] + int32(so[1])
	o := p.Streams[s].Ops[so[1]]
	str := &p.Streams[s]
	if k < cc.begin {
		if o.Kind == plan.OpLaunch && len(la.lazy) > 0 {
			for _, a := range stageAccesses(&p.Stages[o.Stage]) {
				if la.lazy[a.Buffer] {
					la.usedBefore[[2]string{str.Name, a.Buffer}] = true
				}
			}
		}
		return
	}
	// Joining the capture: a wait on an event recorded in it. A
	// stream that another capture takes cannot join: the dependency
	// would cross from one capture sequence into another.
	if o.Kind == plan.OpWait && !cc.streams[s].in {
		if r := v.opCaptured[g]; r >= 0 && cc.streams[v.opStream[r]].in && int(v.opIssue[r]) >= cc.begin && !str.Host {
			if q := v.capturedElsewhere(cc.ck, int(s), k); q >= 0 {
				cc.bad(g, CaptureMerge, "CUDA_ERROR_STREAM_CAPTURE_MERGE", v.mergeFix(cc.ck, q, int(s), k, cc.end))
				return
			}
			cc.streams[s].in = true
			cc.blocking = cc.blocking || plan.BlockingKind(str.Kind)
		}
	}
	// Isolation: a captured wait takes only a record made in the
	// capture. First's waits are issued before cuStreamBeginCapture
	// (CaptureRegion); a record by a host stage orders by issue order
	// (no cuStreamWaitEvent is made for it).
	if o.Kind == plan.OpWait && cc.streams[s].in && !str.Host && (s != cc.origin || k >= cc.firstAt) {
		cc.isolation(g, o)
	}
	affected := cc.c.Mode != plan.CaptureRelaxed && (cc.c.Mode == plan.CaptureGlobal || str.Thread == cc.thread)
	cc.inRegion(g, s, o, affected)
	// A lazy buffer's first use on a stream is a cuMemAlloc, an
	// unsafe call whether or not the stream is captured: it fails
	// from any thread in global mode, from the capturing thread in
	// thread-local mode (cuThreadExchangeStreamCaptureMode).
	if !str.Host && o.Kind == plan.OpLaunch && len(la.lazy) > 0 {
		for _, a := range stageAccesses(&p.Stages[o.Stage]) {
			if key := [2]string{str.Name, a.Buffer}; la.lazy[a.Buffer] && !la.usedBefore[key] {
				la.usedBefore[key] = true
				if affected {
					cc.bad(g, CaptureAlloc, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
						fmt.Sprintf("warm up on stream %s: run a stage that uses %s on %s before the capture begins, so its cuMemAlloc happens outside the capture", str.Name, a.Buffer, str.Name))
				}
			}
		}
	}
	if !cc.streams[s].in && !str.Host && o.Kind == plan.OpLaunch {
		cc.outside(g, str, &p.Stages[o.Stage], affected)
	}
}

// isolation checks that captured wait g (op o) takes a record made in the
// capture.
func (cc *captureCheck) isolation(g int32, o plan.Op) {
	v, p, c := cc.v, cc.p, cc.c
	why := v.isolated(cc.ck, o, g, cc.begin, cc.joins)
	if why == "" {
		return
	}
	st, _, _ := cc.stageOf(g)
	fix := isolationFix(p, c, -1)
	if r := v.opCaptured[g]; o.Lag == 0 && r >= 0 && int(v.opIssue[r]) >= cc.begin {
		fix = isolationFix(p, c, p.OpStage(int(v.opStream[r]), int(v.opIndex(r))))
	}
	cc.bad(g, CaptureIsolation, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
		fmt.Sprintf("the wait before %s is for %s, not a record made in the capture: %s", st, why, fix))
}

// inRegion checks op g (o, of stream s) in the region: a host stage's
// waits and accesses against the captured work, and a captured stream's
// copies; affected is whether the capture's mode refuses unsafe calls
// from g's thread.
func (cc *captureCheck) inRegion(g, s int32, o plan.Op, affected bool) {
	v, p, c := cc.v, cc.p, cc.c
	str := &p.Streams[s]
	switch {
	case str.Host && o.Kind == plan.OpWait:
		r := v.opCaptured[g]
		switch {
		case r >= 0 && cc.streams[v.opStream[r]].in && int(v.opIssue[r]) >= cc.begin:
			cc.bad(g, CaptureSync, "CUDA_ERROR_CAPTURED_EVENT",
				"move the host wait after the capture ends (captured work runs only when the graph is launched)")
		case r >= 0 && !p.Streams[v.opStream[r]].Host && affected:
			// cuEventSynchronize on work outside the capture: a
			// potentially unsafe call, refused as cuMemAlloc is.
			cc.bad(g, CaptureSync, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
				fmt.Sprintf("capture in relaxed mode (mode: relaxed), which allows cuEventSynchronize during the capture (%s mode refuses it from %s), or wait before the capture begins", captureModeName(c.Mode), map[bool]string{true: "every thread", false: "the capturing thread"}[c.Mode == plan.CaptureGlobal]))
		}
	case str.Host && o.Kind == plan.OpLaunch:
		st := &p.Stages[o.Stage]
		for _, a := range stageAccesses(st) {
			if conflictsAny(a, cc.capturedAcc) {
				cc.bad(g, CaptureHostAccess, "",
					fmt.Sprintf("move %s after the capture and after a wait for the graph's launch: the captured work on %s has not run", st.Name, a.Buffer))
				break
			}
		}
	case cc.streams[s].in:
		if o.Kind == plan.OpLaunch {
			st := &p.Stages[o.Stage]
			if st.Copy == plan.CopySync {
				cc.bad(g, CaptureSyncCopy, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "make "+st.Name+" an asynchronous copy (copy: async) on a captured stream")
			}
			cc.capturedAcc = append(cc.capturedAcc, stageAccesses(st)...)
		}
		cc.streams[s].last = g
	}
}

// outside checks launch g of stage st on device stream str, which the
// capture has not taken, issued in the region.
func (cc *captureCheck) outside(g int32, str *plan.Stream, st *plan.Stage, affected bool) {
	switch {
	case str.Kind == plan.StreamLegacy && cc.blocking:
		// In every mode and from every thread: the legacy
		// stream's implicit synchronization would depend on the
		// capture; the mode governs unsafe calls only
		// (cuStreamIsCapturing's reference).
		cc.bad(g, CaptureLegacy, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
			fmt.Sprintf("issue %s after the capture ends, or make the captured streams non_blocking", st.Name))
	case st.Copy == plan.CopySync && affected:
		cc.bad(g, CaptureSyncCopy, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "issue "+st.Name+" after the capture ends")
	}
}

// unjoined checks that every forked stream joined back into the origin
// before the end.
func (cc *captureCheck) unjoined() {
	v, p := cc.v, cc.p
	end0 := cc.streams[cc.origin].last
	if end0 < 0 {
		return
	}
	for s, cs := range cc.streams { // in stream order: the same report every time
		l := cs.last
		if l < 0 || s == int(cc.origin) || v.opHB(l, end0) {
			continue
		}
		st, _, _ := cc.stageOf(l)
		cc.bad(l, CaptureUnjoined, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
			fmt.Sprintf("join stream %s back before the capture ends: add %s to the waits of %s (stream %s waits for stream %s)", p.Streams[s].Name, st, cc.c.Last, p.Streams[cc.origin].Name, p.Streams[s].Name))
	}
}

// isolationFix is the fix of a captured wait that breaks isolation in
// capture c. For a record that stage x (≥ 0) makes in the region, after
// the capture began, on a stream the capture does not take, the first
// stage cannot wait for it (its waits come before the record): x moves
// before the capture, or x's stream joins the capture so that x is
// captured. For any other record (x < 0: before the capture, or an
// earlier iteration's), the wait moves to the first stage, whose waits
// are issued before cuStreamBeginCapture.
func isolationFix(p *plan.Plan, c plan.Capture, x int) string {
	if x < 0 {
		return fmt.Sprintf("wait before the capture begins instead (a wait of %s, the capture's first stage, whose waits are issued before cuStreamBeginCapture, or of a stage before it), or record the event in the capture", c.First)
	}
	n := p.Stages[x].Name
	return fmt.Sprintf("issue %s before the capture begins (above %s, the capture's first stage) and add %s to the waits of %s, or let stream %s join the capture: add %s to the waits of %s, so that it is captured and its record is made in the capture",
		n, c.First, n, c.First, p.Streams[p.Stages[x].Stream].Name, c.First, n)
}

// isolationNote says, for fix f (a wait of stage Before on a record after
// stage After) of p, that the wait would break capture isolation, with
// the fix that works instead (isolationFix): Before is captured, not as
// its capture's first stage (whose waits come before the capture), and
// the record is not made in that capture (a stream the capture has not
// taken, or an earlier iteration's). "" when it breaks none; a record in
// another capture under way is the merge rule's, not said here. pos is
// plan.LaunchPositions(p).
func isolationNote(p *plan.Plan, f *Fix, pos []int) string {
	x, y := f.After, f.Before
	sx, sy := p.Stages[x].Stream, p.Stages[y].Stream
	if p.Streams[sx].Host || p.Streams[sy].Host {
		return ""
	}
	for ck, c := range p.Captures {
		begin, end := p.CaptureRegion(c)
		if pos[y] < begin || pos[y] >= end || p.Stages[y].Name == c.First {
			continue
		}
		joins := p.CaptureJoins(c)
		if joins[sy] < 0 || joins[sy] > pos[y] {
			continue // Before is not captured: it runs
		}
		inRegion := f.Lag == 0 && pos[x] >= begin && pos[x] < pos[y]
		if inRegion && joins[sx] >= 0 && joins[sx] <= pos[x] {
			continue // recorded in the capture
		}
		if inRegion {
			v := &verifier{p: p}
			if v.capturedElsewhere(ck, sx, pos[x]) >= 0 {
				continue
			}
		}
		fix := isolationFix(p, c, -1)
		if inRegion {
			fix = isolationFix(p, c, x)
		}
		return fmt.Sprintf("but the wait breaks capture isolation (CUDA_ERROR_STREAM_CAPTURE_ISOLATION): %s is captured and the record after %s is not made in the capture: %s", p.Stages[y].Name, p.Stages[x].Name, fix)
	}
	return ""
}

// isolated returns what wait o (op g) inside the region of capture ck,
// which begins at issue position begin, waits for when that is not a
// record made in the capture (joins: CaptureJoins): an earlier
// iteration's record (a lag), or a record issued before the region or by
// a stream the capture had not taken. It returns "" for a record made in
// the capture, by a host stage, or in another capture under way (the
// merge rule's), and for a wait on nothing.
func (v *verifier) isolated(ck int, o plan.Op, g int32, begin int, joins []int) string {
	p := v.p
	if o.Lag > 0 {
		return fmt.Sprintf("event e%d of %d iteration(s) back", o.Event, o.Lag)
	}
	r := v.opCaptured[g]
	if r < 0 {
		return ""
	}
	rs, at := int(v.opStream[r]), int(v.opIssue[r])
	if p.Streams[rs].Host || at >= begin && joins[rs] >= 0 && joins[rs] <= at || v.capturedElsewhere(ck, rs, at) >= 0 {
		return ""
	}
	what := "the record"
	if i := p.OpStage(rs, int(v.opIndex(r))); i >= 0 {
		what = "the record after " + p.Stages[i].Name
	}
	where := "issued before the capture"
	if at >= begin {
		where = "issued in the region, on a stream the capture does not take"
	}
	return fmt.Sprintf("%s on stream %s (%s)", what, p.Streams[rs].Name, where)
}

// mergeFix is the fix for a wait, at issue position at on stream s,
// that capture q takes, on an event recorded in capture ck: capture the
// work of both in one capture (drop q), with s joined back into ck's
// stream after its last stage in ck's region (which ends at end).
func (v *verifier) mergeFix(ck, q, s, at, end int) string {
	p := v.p
	c, cq := p.Captures[ck], p.Captures[q]
	at2 := ""
	if cq.Source != "" {
		at2 = " (" + cq.Source + ")"
	}
	fix := fmt.Sprintf("capture the work of both streams in one capture: remove the capture of %s…%s on stream %s%s", cq.First, cq.Last, p.Streams[cq.Stream].Name, at2)
	last, lastOp := -1, int32(-1) // stream s's last launch in ck's region
	endOp := int32(-1)            // the capture stream's last launch in it
	for _, so := range p.IssueOrder[at:end] {
		o := p.Streams[so[0]].Ops[so[1]]
		if o.Kind != plan.OpLaunch {
			continue
		}
		switch so[0] {
		case s:
			last, lastOp = o.Stage, v.opBase[s]+int32(so[1])
		case c.Stream:
			endOp = v.opBase[c.Stream] + int32(so[1])
		}
	}
	// Stream s needs joining back only if its last stage there does not
	// already happen-before the capture stream's last one.
	if last >= 0 && (endOp < 0 || !v.opHB(lastOp, endOp)) {
		fix += fmt.Sprintf(" and join stream %s back before the capture on %s ends: add %s to the waits of %s", p.Streams[s].Name, p.Streams[c.Stream].Name, p.Stages[last].Name, c.Last)
	}
	return fix
}

// captureModeName is a capture mode's spec spelling.
func captureModeName(m string) string {
	if m == plan.CaptureGlobal {
		return "global"
	}
	return m
}

func stageAccesses(st *plan.Stage) []plan.Access {
	return append(append([]plan.Access(nil), st.Reads...), st.Writes...)
}

func conflictsAny(a plan.Access, list []plan.Access) bool {
	for _, b := range list {
		if a.Overlaps(b) {
			return true
		}
	}
	return false
}

// withCaptures adds p's capture violations to err, Verify's result: into
// its *RaceError, or as a new one.
func withCaptures(p *plan.Plan, err error) error {
	if p == nil || len(p.Captures) == 0 || p.ValidateShape() != nil {
		return err
	}
	cv := CheckCaptures(p)
	if len(cv) == 0 {
		return err
	}
	if re, ok := err.(*RaceError); ok {
		re.Captures = cv
		return re
	}
	if err != nil {
		return err
	}
	return &RaceError{Captures: cv, FixesMinimal: true}
}

// reportCaptures prints the capture violations, one a line.
func (e *RaceError) reportCaptures(b *strings.Builder) {
	for _, c := range e.Captures {
		b.WriteString("\n")
		b.WriteString(c.String())
	}
}
