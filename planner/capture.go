package planner

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/dag"
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
	return replayOrder(p) // capture_replay.go
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

func (v *verifier) checkCapture(ck int) []CaptureViolation {
	p := v.p
	c := p.Captures[ck]
	begin, end := v.captureRegion(c)
	var out []CaptureViolation
	stageOf := func(g int32) (string, string, string) {
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
	bad := func(g int32, rule, drv, fix string) {
		st, str, src := stageOf(g)
		out = append(out, CaptureViolation{Rule: rule, Stage: st, Stream: str, Error: drv, Fix: fix, Source: src})
	}
	origin := int32(c.Stream)
	if p.Streams[origin].Kind == plan.StreamLegacy {
		bad(v.launchOp[p.StageIndex(c.First)], CaptureLegacyBegin, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
			"capture on a stream you created (the legacy default stream cannot be captured)")
	}
	captured := map[int32]bool{origin: true}
	lastIn := map[int32]int32{} // per captured stream: its last op in the region
	blocking := plan.BlockingKind(p.Streams[origin].Kind)
	thread := p.Streams[origin].Thread
	usedBefore := map[[2]string]bool{} // (stream, lazy buffer) used before the capture
	lazy := map[string]bool{}
	for _, b := range p.Buffers {
		if b.Alloc == plan.AllocLazy {
			lazy[b.Name] = true
		}
	}
	var capturedAcc []plan.Access // accesses of captured stages so far
	joins := p.CaptureJoins(c)
	firstAt := int(v.opIssue[v.launchOp[p.StageIndex(c.First)]])
	for k, so := range p.IssueOrder {
		s := int32(so[0])
		g := v.opBase[s] + int32(so[1])
		o := p.Streams[s].Ops[so[1]]
		str := &p.Streams[s]
		if k < begin {
			if o.Kind == plan.OpLaunch && len(lazy) > 0 {
				for _, a := range stageAccesses(&p.Stages[o.Stage]) {
					if lazy[a.Buffer] {
						usedBefore[[2]string{str.Name, a.Buffer}] = true
					}
				}
			}
			continue
		}
		if k >= end {
			break
		}
		// Joining the capture: a wait on an event recorded in it. A
		// stream that another capture takes cannot join: the dependency
		// would cross from one capture sequence into another.
		if o.Kind == plan.OpWait && !captured[s] {
			if r := v.opCaptured[g]; r >= 0 && captured[v.opStream[r]] && int(v.opIssue[r]) >= begin && !str.Host {
				if q := v.capturedElsewhere(ck, int(s), k); q >= 0 {
					bad(g, CaptureMerge, "CUDA_ERROR_STREAM_CAPTURE_MERGE", v.mergeFix(ck, q, int(s), k, end))
					continue
				}
				captured[s] = true
				blocking = blocking || plan.BlockingKind(str.Kind)
			}
		}
		// Isolation: a captured wait takes only a record made in the
		// capture. First's waits are issued before cuStreamBeginCapture
		// (CaptureRegion); a record by a host stage orders by issue order
		// (no cuStreamWaitEvent is made for it).
		if o.Kind == plan.OpWait && captured[s] && !str.Host && (s != origin || k >= firstAt) {
			if why := v.isolated(ck, o, g, begin, joins); why != "" {
				st, _, _ := stageOf(g)
				fix := isolationFix(p, c, -1)
				if r := v.opCaptured[g]; o.Lag == 0 && r >= 0 && int(v.opIssue[r]) >= begin {
					fix = isolationFix(p, c, p.OpStage(int(v.opStream[r]), int(v.opIndex(r))))
				}
				bad(g, CaptureIsolation, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
					fmt.Sprintf("the wait before %s is for %s, not a record made in the capture: %s", st, why, fix))
			}
		}
		affected := c.Mode != plan.CaptureRelaxed && (c.Mode == plan.CaptureGlobal || str.Thread == thread)
		switch {
		case str.Host && o.Kind == plan.OpWait:
			r := v.opCaptured[g]
			switch {
			case r >= 0 && captured[v.opStream[r]] && int(v.opIssue[r]) >= begin:
				bad(g, CaptureSync, "CUDA_ERROR_CAPTURED_EVENT",
					"move the host wait after the capture ends (captured work runs only when the graph is launched)")
			case r >= 0 && !p.Streams[v.opStream[r]].Host && affected:
				// cuEventSynchronize on work outside the capture: a
				// potentially unsafe call, refused as cuMemAlloc is.
				bad(g, CaptureSync, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
					fmt.Sprintf("capture in relaxed mode (mode: relaxed), which allows cuEventSynchronize during the capture (%s mode refuses it from %s), or wait before the capture begins", captureModeName(c.Mode), map[bool]string{true: "every thread", false: "the capturing thread"}[c.Mode == plan.CaptureGlobal]))
			}
		case str.Host && o.Kind == plan.OpLaunch:
			st := &p.Stages[o.Stage]
			for _, a := range stageAccesses(st) {
				if conflictsAny(a, capturedAcc) {
					bad(g, CaptureHostAccess, "",
						fmt.Sprintf("move %s after the capture and after a wait for the graph's launch: the captured work on %s has not run", st.Name, a.Buffer))
					break
				}
			}
		case captured[s]:
			if o.Kind == plan.OpLaunch {
				st := &p.Stages[o.Stage]
				if st.Copy == plan.CopySync {
					bad(g, CaptureSyncCopy, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "make "+st.Name+" an asynchronous copy (copy: async) on a captured stream")
				}
				capturedAcc = append(capturedAcc, stageAccesses(st)...)
			}
			lastIn[s] = g
		}
		// A lazy buffer's first use on a stream is a cuMemAlloc, an
		// unsafe call whether or not the stream is captured: it fails
		// from any thread in global mode, from the capturing thread in
		// thread-local mode (cuThreadExchangeStreamCaptureMode).
		if !str.Host && o.Kind == plan.OpLaunch && len(lazy) > 0 {
			for _, a := range stageAccesses(&p.Stages[o.Stage]) {
				if key := [2]string{str.Name, a.Buffer}; lazy[a.Buffer] && !usedBefore[key] {
					usedBefore[key] = true
					if affected {
						bad(g, CaptureAlloc, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
							fmt.Sprintf("warm up on stream %s: run a stage that uses %s on %s before the capture begins, so its cuMemAlloc happens outside the capture", str.Name, a.Buffer, str.Name))
					}
				}
			}
		}
		if !captured[s] && !str.Host && o.Kind == plan.OpLaunch {
			st := &p.Stages[o.Stage]
			switch {
			case str.Kind == plan.StreamLegacy && blocking:
				// In every mode and from every thread: the legacy
				// stream's implicit synchronization would depend on the
				// capture; the mode governs unsafe calls only
				// (cuStreamIsCapturing's reference).
				bad(g, CaptureLegacy, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
					fmt.Sprintf("issue %s after the capture ends, or make the captured streams non_blocking", st.Name))
			case st.Copy == plan.CopySync && affected:
				bad(g, CaptureSyncCopy, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "issue "+st.Name+" after the capture ends")
			}
		}
	}
	// Every forked stream joined back into the origin before the end.
	end0, ok := lastIn[origin]
	if !ok {
		return out
	}
	for _, s := range slices.Sorted(maps.Keys(lastIn)) { // in stream order: the same report every time
		l := lastIn[s]
		if s == origin || v.opHB(l, end0) {
			continue
		}
		st, _, _ := stageOf(l)
		bad(l, CaptureUnjoined, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
			fmt.Sprintf("join stream %s back before the capture ends: add %s to the waits of %s (stream %s waits for stream %s)", p.Streams[s].Name, st, c.Last, p.Streams[origin].Name, p.Streams[s].Name))
	}
	return out
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

// joinCaptures makes an automatically synchronized plan keep the join
// rule by construction: for each capture, every device stream forked into
// it (CaptureJoins) whose last op in the region does not happen before
// the launch of the capture's last stage gets a record after that op
// (reusing one that is there) and the capture's stream a wait on it right
// before that launch. Other waits are untouched, so the fewest waits of the
// sync pass are kept elsewhere. It returns the waits added. Cost:
// O(captures × (joins + 1) × ops) for the happens-before it recomputes.
func joinCaptures(p *plan.Plan) int {
	added := 0
	for _, c := range p.Captures {
		for {
			s, at := unjoinedStream(p, c)
			if s < 0 {
				break
			}
			so := p.IssueOrder[at]
			ev := -1
			if o := p.Streams[s].Ops[so[1]]; o.Kind == plan.OpRecord {
				ev = o.Event
			} else {
				ev = p.Events
				p.Events++
				insertOp(p, s, so[1]+1, at+1, plan.Op{Kind: plan.OpRecord, Event: ev})
			}
			last := p.StageIndex(c.Last)
			for k, so := range p.IssueOrder {
				if o := p.Streams[so[0]].Ops[so[1]]; so[0] == c.Stream && o.Kind == plan.OpLaunch && o.Stage == last {
					insertOp(p, c.Stream, so[1], k, plan.Op{Kind: plan.OpWait, Event: ev})
					break
				}
			}
			added++
		}
	}
	return added
}

// unjoinedStream returns a device stream forked into capture c whose last
// op in the region does not happen before the launch of c's last stage,
// and the issue position of that op; −1 when every forked stream joins.
func unjoinedStream(p *plan.Plan, c plan.Capture) (stream, at int) {
	begin, end := p.CaptureRegion(c)
	joined := p.CaptureJoins(c)
	lastAt := make([]int, len(p.Streams))
	for s := range lastAt {
		lastAt[s] = -1
	}
	for k := begin; k < end; k++ {
		if s := p.IssueOrder[k][0]; joined[s] >= 0 && joined[s] <= k && !p.Streams[s].Host {
			lastAt[s] = k
		}
	}
	v := NewOrder(p)
	lastLaunch := v.LaunchOp[p.StageIndex(c.Last)]
	for s, k := range lastAt {
		if s == c.Stream || k < 0 {
			continue
		}
		so := p.IssueOrder[k]
		if !v.Before(v.OpBase[s]+int32(so[1]), lastLaunch) {
			return s, k
		}
	}
	return -1, -1
}

// insertOp inserts op at index j of stream s's ops and at position k of
// the issue order.
func insertOp(p *plan.Plan, s, j, k int, op plan.Op) {
	for i, so := range p.IssueOrder {
		if so[0] == s && so[1] >= j {
			p.IssueOrder[i][1]++
		}
	}
	p.Streams[s].Ops = slices.Insert(p.Streams[s].Ops, j, op)
	p.IssueOrder = slices.Insert(p.IssueOrder, k, [2]int{s, j})
}

// captureOrder makes the order the passes share keep each capture region
// free of the work its captured stages wait for. Of the stages the order
// puts between a capture's first and last stage, those that do not follow
// the first (in the reduced hazard graph and stream order) but precede a
// stage that does are moved, in their order, to just before the first:
// otherwise the stream order of their records would put them inside the
// region, on streams the capture does not take, where a captured wait for
// them breaks the isolation rule (CaptureIsolation) and a wait before the
// capture begins would come before their records. Moving them is a
// topological order still (their predecessors in the region are moved
// too), and each stream keeps its order (a stage after one that follows
// the first follows it too). Stages that follow the first stay, and so do
// the others (work that runs eagerly while the capture is under way).
// Cost: O(stages + reduced edges) per capture, and when a stage moved, a
// sort of the reduced rows by the new positions.
func (st *state) captureOrder() {
	if len(st.spec.Captures) == 0 {
		return
	}
	index := make(map[string]int32, len(st.spec.Stages))
	for i := range st.spec.Stages {
		index[st.spec.Stages[i].Name] = int32(i)
	}
	const follows, precedes = 1, 2
	moved := false
	on := make([]int8, len(st.names)) // per stream: the mark of its latest stage walked
	for _, c := range st.spec.Captures {
		f, okf := index[c.First]
		l, okl := index[c.Last]
		if !okf || !okl || st.pos[f] >= st.pos[l] {
			continue
		}
		a := int(st.pos[f])
		w := st.topo[a : st.pos[l]+1]
		mark := make([]int8, len(w))
		at := func(u int32) int { return int(st.pos[u]) - a } // u's index in w, if 0 ≤ it < len(w)
		// Forward: the stages that follow the first. A stream's stages
		// after one that does follow it too.
		clear(on)
		for i, v := range w {
			s := st.stream[v]
			if i == 0 || on[s] == follows {
				mark[i] = follows
			} else {
				for _, u := range st.redPred.row(int(v)) {
					if j := at(u); j >= 0 && mark[j] == follows {
						mark[i] = follows
						break
					}
				}
			}
			if mark[i] == follows {
				on[s] = follows
			}
		}
		// Backward: the others that precede a marked stage. A stream's
		// stages before a marked one precede it.
		clear(on)
		n := 0
		for i := len(w) - 1; i > 0; i-- {
			v := w[i]
			s := st.stream[v]
			if mark[i] == 0 {
				if on[s] != 0 {
					mark[i] = precedes
				} else {
					for _, x := range st.red.row(int(v)) {
						if j := at(x); j < len(w) && mark[j] != 0 {
							mark[i] = precedes
							break
						}
					}
				}
			}
			if mark[i] == precedes {
				n++
			}
			if mark[i] != 0 {
				on[s] = mark[i]
			}
		}
		if n == 0 {
			continue
		}
		moved = true
		order := make([]int32, 0, len(w))
		for i, v := range w {
			if mark[i] == precedes {
				order = append(order, v)
			}
		}
		for i, v := range w {
			if mark[i] != precedes {
				order = append(order, v)
			}
		}
		copy(w, order)
		for i, v := range w {
			st.pos[v] = int32(a + i)
		}
	}
	if !moved {
		return
	}
	for u := range st.n {
		slices.SortFunc(st.red.row(u), func(x, y int32) int { return int(st.pos[x]) - int(st.pos[y]) })
	}
	st.redPred = transpose(st.red, st.topo)
}

// isolateCaptures makes an automatically synchronized plan keep the
// isolation rule (CaptureIsolation) by construction: every wait the
// capture takes on an event it does not record (an earlier iteration's
// record, or one issued before the region), after the waits of its first
// stage, is moved to the first stage's waits, which are issued before
// cuStreamBeginCapture (CaptureRegion); so is such a wait of a stream
// right before the wait by which it joins the capture, which the capture
// would not take (the stream's work before it joins runs eagerly, and the
// captured work after it does not wait for it). A moved wait orders the
// work after it as before: the capture's work follows its first stage
// through the waits by which streams join it. A lag-0 wait whose record
// happens before the first stage's launch, or before the record of
// another moved wait, is dropped rather than moved. Waits outside the
// regions are untouched, so the fewest waits of the sync and iterate
// passes are kept elsewhere.
//
// It returns the waits removed and added (lag 0 and lagged together), and
// the captured waits that cannot move: a lag-0 wait for a record issued
// in the region by work the capture does not take, which a wait before
// the capture would precede (captureOrder leaves such a record only
// where the recording work follows the capture's first stage through work
// no capture can take, such as a host stage). Cost: per capture,
// O(ops × streams) for the happens-before it recomputes plus O(moved²).
func isolateCaptures(p *plan.Plan) (removed, added int, stuck []stuckWait) {
	for ck := range p.Captures {
		r, a, s := isolateCapture(p, ck)
		removed, added, stuck = removed+r, added+a, append(stuck, s...)
	}
	return removed, added, stuck
}

// stuckWait is a captured wait isolateCaptures cannot move: stage Waiter
// (a stage index) of capture Capture waits for the record after stage
// Producer on stream Stream, issued in the region; Via is a host stage
// that follows the capture's first stage and precedes Producer (−1: none
// found).
type stuckWait struct {
	Capture, Waiter, Producer, Stream, Via int
}

func isolateCapture(p *plan.Plan, ck int) (removed, added int, stuck []stuckWait) {
	c := p.Captures[ck]
	first := p.StageIndex(c.First)
	if first < 0 || len(p.IssueOrder) == 0 {
		return 0, 0, nil
	}
	v := NewOrder(p)
	if v.Over {
		return 0, 0, nil
	}
	begin, end := p.CaptureRegion(c)
	joins := p.CaptureJoins(c)
	fl := v.LaunchOp[first]
	firstAt := int(v.OpIssue[fl])
	// The first stage's waits: a lagged wait there already is not added.
	has := map[plan.Op]bool{}
	for k := begin; k < firstAt; k++ {
		if so := p.IssueOrder[k]; so[0] == c.Stream {
			has[p.Streams[so[0]].Ops[so[1]]] = true
		}
	}
	drop := map[[2]int]bool{}
	var lagged []plan.Op
	var recs []int32 // records of lag-0 waits moved, latest first below
	for k := begin; k < end; k++ {
		so := p.IssueOrder[k]
		s, j := so[0], so[1]
		str := &p.Streams[s]
		o := str.Ops[j]
		if o.Kind != plan.OpWait || str.Host {
			continue
		}
		switch J := joins[s]; {
		case s == c.Stream:
			if k < firstAt {
				continue
			}
		case J < 0:
			continue
		case k < J:
			// Only the waits right before the join, of the stage it
			// joins for.
			jj := p.IssueOrder[J][1]
			if slices.ContainsFunc(str.Ops[j:jj], func(o plan.Op) bool { return o.Kind != plan.OpWait }) {
				continue
			}
		}
		g := v.OpBase[s] + int32(j)
		if v.Isolated(ck, o, g, begin, joins) == "" {
			continue
		}
		if o.Lag > 0 {
			drop[so] = true
			if !has[o] {
				has[o] = true
				lagged = append(lagged, o)
			}
			continue
		}
		r := v.OpCaptured[g]
		if int(v.OpIssue[r]) >= begin {
			w, pr := p.OpStage(s, j), p.OpStage(int(v.OpStream[r]), int(v.OpIndex(r)))
			via := -1 // a host stage between the first stage and the record
			for q := begin; q < int(v.OpIssue[r]) && via < 0; q++ {
				if h := p.IssueOrder[q]; p.Streams[h[0]].Host && p.Streams[h[0]].Ops[h[1]].Kind == plan.OpLaunch {
					if hg := v.OpBase[h[0]] + int32(h[1]); v.Before(fl, hg) && v.Before(hg, r) {
						via = p.Streams[h[0]].Ops[h[1]].Stage
					}
				}
			}
			stuck = append(stuck, stuckWait{Capture: ck, Waiter: w, Producer: pr, Stream: int(v.OpStream[r]), Via: via})
			continue
		}
		drop[so] = true
		recs = append(recs, r)
	}
	if len(drop) == 0 {
		return 0, 0, stuck
	}
	// The latest records first: an earlier one that happens before a
	// chosen one (or before the first stage) needs no wait of its own.
	slices.SortFunc(recs, func(x, y int32) int { return int(v.OpIssue[y]) - int(v.OpIssue[x]) })
	var adds []plan.Op
	var chosen []int32
	for _, r := range recs {
		if v.Before(r, fl) || slices.ContainsFunc(chosen, func(c int32) bool { return v.Before(r, c) }) {
			continue
		}
		chosen = append(chosen, r)
		adds = append(adds, plan.Op{Kind: plan.OpWait, Event: p.Streams[v.OpStream[r]].Ops[v.OpIndex(r)].Event})
	}
	adds = append(adds, lagged...)
	slices.SortFunc(adds, func(x, y plan.Op) int { return cmp.Or(x.Event-y.Event, x.Lag-y.Lag) })
	moveWaits(p, drop, c.Stream, int(v.OpIndex(fl)), adds)
	return len(drop), len(adds), stuck
}

// moveWaits removes the ops drop names ((stream, op index) pairs) and
// inserts adds right before op j of stream s, in stream order and in issue
// order, in one pass over the issue order.
func moveWaits(p *plan.Plan, drop map[[2]int]bool, s, j int, adds []plan.Op) {
	ops := make([][]plan.Op, len(p.Streams))
	for t := range p.Streams {
		ops[t] = make([]plan.Op, 0, len(p.Streams[t].Ops)+len(adds))
	}
	order := make([][2]int, 0, len(p.IssueOrder)+len(adds))
	emit := func(t int, o plan.Op) {
		order = append(order, [2]int{t, len(ops[t])})
		ops[t] = append(ops[t], o)
	}
	for _, so := range p.IssueOrder {
		if drop[so] {
			continue
		}
		if so == [2]int{s, j} {
			for _, o := range adds {
				emit(s, o)
			}
		}
		emit(so[0], p.Streams[so[0]].Ops[so[1]])
	}
	for t := range p.Streams {
		p.Streams[t].Ops = ops[t]
	}
	p.IssueOrder = order
}

// isolationError is the spec error for captured waits that no placement
// keeps isolated (isolateCaptures' stuck waits), at the waiting stage: it
// names the capture, both stages and their streams, the host stage between
// them where there is one, and what to change.
func (st *state) isolationError(p *plan.Plan, stuck []stuckWait) error {
	var l dag.ErrorList
	for _, w := range stuck {
		c := p.Captures[w.Capture]
		at := ""
		if c.Source != "" {
			at = " (" + c.Source + ")"
		}
		x, y := p.Stages[w.Waiter].Name, p.Stages[w.Producer].Name
		why := "work the capture cannot take"
		hint := fmt.Sprintf("end the capture before %s, or let %s follow the captured work through device stages only, so that its stream joins the capture", x, y)
		if w.Via >= 0 {
			h := p.Stages[w.Via].Name
			why = fmt.Sprintf("host stage %s, which no capture takes (the host cannot wait for captured work, which has not run)", h)
			hint = fmt.Sprintf("end the capture before %s, or order %s after the capture ends, or let %s not follow %s", x, h, y, h)
		}
		l = append(l, &dag.Error{Pos: st.spec.Stages[w.Waiter].Pos,
			Msg: fmt.Sprintf("stage %s, which the capture of %s…%s on stream %s%s takes, must wait for stage %s on stream %s, issued while the capture is under way but not taken by it: %s follows the captured work through %s. A captured wait for %s fails with CUDA_ERROR_STREAM_CAPTURE_ISOLATION, and a wait before the capture begins would come before %s is issued",
				x, c.First, c.Last, p.Streams[c.Stream].Name, at, y, p.Streams[w.Stream].Name, y, why, y, y),
			Hint: hint})
	}
	return l.Err()
}
