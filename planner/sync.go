package planner

import (
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// syncStreams builds the plan's streams, events and waits. Each stream runs
// its stages in the shared topological order. Walking stages in that order
// with a vector clock per stream (Lamport 1978; Fidge/Mattern 1988), a
// reduced edge u → v across streams gets a wait before v only when v's
// stream's clock does not already cover u (by stream order plus earlier
// waits); predecessors are tried latest first, so one wait can cover the
// others. Each producer that some wait needs records one event right after
// its launch. The issue order is the same walk (each stage's waits, launch,
// record), so every record is issued before each wait on it.
//
// With capture regions the order first issues the work captured stages
// need before their capture (captureOrder), and the waits a capture would
// take on events it does not record move to its first stage
// (isolateCaptures); a spec where no such placement exists is a
// dag.ErrorList at the waiting stage.
//
// The naive strategy skips the clock test: a wait for every cross-stream
// reduced edge. The hazard-dag strategy waits on hazard edges instead of
// reduced ones (hazardWaits).
//
// Clocks are sparse (clock.go), and a stream's entry is dropped once the
// stream is dead (all its stages launched and all their cross-stream
// consumers walked), so sync is O(V + E + W·L) for W waits and L streams
// live at once. docs/design/sync.md has the design.
func syncStreams(st *state) error {
	st.captureOrder() // capture.go: the work captured stages wait for, issued before their capture
	n, k := st.n, len(st.names)
	stream := st.stream
	var waitOff, waitOn []int32
	var needed []bool
	if st.strategy == StrategyHazardDAG {
		waitOff, waitOn, needed = st.hazardWaits()
	} else {
		waitOff, waitOn, needed = st.clockWaits()
	}
	// Events in topological order of their producers.
	event := make([]int32, n)
	events := 0
	for _, v := range st.topo {
		event[v] = -1
		if needed[v] {
			event[v] = int32(events)
			events++
		}
	}
	p := st.newPlan()
	p.Events = events
	p.Streams = make([]plan.Stream, k)
	nops := make([]int32, k) // launches, waits and records per stream
	for i, v := range st.topo {
		nops[stream[v]]++
		nops[stream[v]] += waitOff[i+1] - waitOff[i]
		if event[v] >= 0 {
			nops[stream[v]]++
		}
	}
	// Each stream's ops and the issue order have room for the record that
	// lifetimes may append at the end of each stream, so that it appends
	// without copying them.
	for s := range p.Streams {
		p.Streams[s] = plan.Stream{ID: s, Name: st.names[s], Host: st.names[s] == dag.HostStream, Device: st.streamDevice(s), Ops: make([]plan.Op, 0, nops[s]+1)}
	}
	for v := range p.Stages {
		p.Stages[v].Stream = int(stream[v])
	}
	p.IssueOrder = make([][2]int, 0, n+2*len(waitOn)+k)
	emit := func(s int32, op plan.Op) {
		ops := &p.Streams[s].Ops
		p.IssueOrder = append(p.IssueOrder, [2]int{int(s), len(*ops)})
		*ops = append(*ops, op)
	}
	var evs []int
	waits := func(i int) {
		v := st.topo[i]
		evs = evs[:0]
		for _, u := range waitOn[waitOff[i]:waitOff[i+1]] {
			evs = append(evs, int(event[u]))
		}
		slices.Sort(evs)
		for _, e := range evs {
			emit(stream[v], plan.Op{Kind: plan.OpWait, Event: e})
		}
	}
	for i := 0; i < len(st.topo); i++ {
		// A collective's ranks are consecutive in topological order
		// (lowerDevices); they are issued as one group: every rank's
		// waits, the launches, then the records.
		group := 1
		if v := st.topo[i]; st.coll != nil && st.coll[v] != nil {
			group = st.coll[v].Ranks
			if i+group > len(st.topo) || !st.consecutiveRanks(i) {
				return fmt.Errorf("the ranks of collective %s are not consecutive in the planner's order", st.spec.Stages[v].Name)
			}
		}
		for k := i; k < i+group; k++ {
			waits(k)
		}
		for k := i; k < i+group; k++ {
			emit(stream[st.topo[k]], plan.Op{Kind: plan.OpLaunch, Stage: int(st.topo[k])})
		}
		for k := i; k < i+group; k++ {
			if v := st.topo[k]; event[v] >= 0 {
				emit(stream[v], plan.Op{Kind: plan.OpRecord, Event: int(event[v])})
			}
		}
		i += group - 1
	}
	applySpecRules(st.spec, p) // spec_rules.go
	// capture.go: captured waits on work outside the capture moved before
	// it, forked streams joined back into each capture.
	removed, added, stuck := isolateCaptures(p)
	if len(stuck) > 0 {
		return st.isolationError(p, stuck)
	}
	p.Stats.Waits = len(waitOn) - removed + added + joinCaptures(p)
	// capture_replay.go: a joined stream's work outside the capture
	// ordered against its captured work through the capture's stream.
	n, left := orderReplays(p)
	if len(left) > 0 {
		return st.replayOrderError(p, left)
	}
	p.Stats.Waits += n
	st.plan = p
	return nil
}

// clockWaits returns, per stage in topological order, the producers it
// waits for (waitOn[waitOff[i]:waitOff[i+1]] for the stage at position i),
// and which stages some wait needs: the vector-clock walk of syncStreams,
// or every cross-stream reduced edge for the naive strategy.
func (st *state) clockWaits() (waitOff, waitOn []int32, needed []bool) {
	n, k := st.n, len(st.names)
	stream := st.stream
	naive := st.strategy == StrategyNaive
	idx := make([]int32, n) // index of each stage among its stream's launches
	cnt := make([]int32, k)
	for _, v := range st.topo {
		s := stream[v]
		idx[v] = cnt[s]
		cnt[s]++
	}
	// Outstanding cross-stream consumers per producer, and per stream the
	// unlaunched stages plus its stages' outstanding consumers.
	refs := make([]int32, n)
	pending := slices.Clone(cnt)
	for u := 0; u < n; u++ {
		for _, v := range st.red.row(u) {
			if stream[v] != stream[u] {
				refs[u]++
				pending[stream[u]]++
			}
		}
	}
	dead := make([]bool, k)
	var ar clockArena
	cur := make([]clock, k) // each stream's clock, without its own entry
	snap := make([]clock, n)
	waitOff = make([]int32, n+1)
	waitOn = make([]int32, 0, n)
	needed = make([]bool, n)
	release := func(t int32) {
		if pending[t]--; pending[t] == 0 {
			dead[t] = true
		}
	}
	for i, v := range st.topo {
		s := stream[v]
		preds := st.redPred.row(int(v))
		for j := len(preds) - 1; j >= 0; j-- { // latest first
			u := preds[j]
			t := stream[u]
			if t == s {
				continue
			}
			if naive || cur[s].get(t) <= idx[u] {
				waitOn = append(waitOn, u)
				needed[u] = true
				if !naive {
					cur[s] = ar.join(cur[s], snap[u], t, idx[u]+1, s, dead)
				}
			}
			if refs[u]--; refs[u] == 0 {
				snap[u] = nil
			}
			release(t)
		}
		waitOff[i+1] = int32(len(waitOn))
		if refs[v] > 0 && !naive {
			snap[v] = cur[s]
		}
		release(s)
	}
	return waitOff, waitOn, needed
}

// hazardWaits is the hazard-dag strategy's waits: before each stage, one on
// every hazard predecessor on another stream (the full hazard DAG, no
// transitive reduction), so that stream order and waits give the hazard
// edges, redundant ones included, as a CUDA graph of the DAG has them. A
// predecessor on the stage's own stream gets no wait: stream order runs it
// first already, and a wait on a record of the waiting stream orders
// nothing (Warnings flags one in a plan). Results as for clockWaits.
func (st *state) hazardWaits() (waitOff, waitOn []int32, needed []bool) {
	n := st.n
	waitOff = make([]int32, n+1)
	waitOn = make([]int32, 0, st.g.NumEdges())
	needed = make([]bool, n)
	for i, v := range st.topo {
		s := st.stream[v]
		for _, u := range st.g.Pred(int(v)) {
			if st.stream[u] != s {
				waitOn = append(waitOn, u)
				needed[u] = true
			}
		}
		waitOff[i+1] = int32(len(waitOn))
	}
	return waitOff, waitOn, needed
}
