package planner

import "slices"

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
// The naive strategy skips the clock test: a wait for every cross-stream
// reduced edge.
//
// Cost: O(V + E + W·k) time for W waits and k streams; clocks take
// O(k² + F·k) memory, F the producers whose consumers are not all done.
func syncStreams(st *state) error {
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
	// Outstanding cross-stream consumers per producer: its clock snapshot
	// is kept until the last one has been walked.
	refs := make([]int32, n)
	for u := 0; u < n; u++ {
		for _, v := range st.red.row(u) {
			if stream[v] != stream[u] {
				refs[u]++
			}
		}
	}
	var vc []int32
	if !naive {
		vc = make([]int32, k*k)
	}
	snap := make([][]int32, n)
	var pool [][]int32
	waitOff := make([]int32, n+1) // waits of v: waitOn[waitOff[pos]:waitOff[pos+1]], by position
	waitOn := make([]int32, 0)
	needed := make([]bool, n)
	for i, v := range st.topo {
		s := stream[v]
		var row []int32
		if !naive {
			row = vc[int(s)*k : int(s+1)*k]
		}
		preds := st.redPred.row(int(v))
		for j := len(preds) - 1; j >= 0; j-- { // latest first
			u := preds[j]
			t := stream[u]
			if t == s {
				continue
			}
			if naive || row[t] <= idx[u] {
				waitOn = append(waitOn, u)
				needed[u] = true
				if !naive {
					for c, x := range snap[u] {
						row[c] = max(row[c], x)
					}
				}
			}
			if refs[u]--; refs[u] == 0 && snap[u] != nil {
				pool = append(pool, snap[u])
				snap[u] = nil
			}
		}
		waitOff[i+1] = int32(len(waitOn))
		if naive {
			continue
		}
		row[s] = idx[v] + 1
		if refs[v] > 0 {
			var c []int32
			if len(pool) > 0 {
				c, pool = pool[len(pool)-1], pool[:len(pool)-1]
			} else {
				c = make([]int32, k)
			}
			copy(c, row)
			snap[v] = c
		}
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
	p.Streams = make([]Stream, k)
	for s := range p.Streams {
		p.Streams[s] = Stream{ID: s, Name: st.names[s], Ops: make([]Op, 0, cnt[s]+1)}
	}
	for v := range p.Stages {
		p.Stages[v].Stream = int(stream[v])
	}
	p.IssueOrder = make([][2]int, 0, n+2*len(waitOn))
	emit := func(s int32, op Op) {
		ops := &p.Streams[s].Ops
		p.IssueOrder = append(p.IssueOrder, [2]int{int(s), len(*ops)})
		*ops = append(*ops, op)
	}
	var evs []int
	for i, v := range st.topo {
		s := stream[v]
		evs = evs[:0]
		for _, u := range waitOn[waitOff[i]:waitOff[i+1]] {
			evs = append(evs, int(event[u]))
		}
		slices.Sort(evs)
		for _, e := range evs {
			emit(s, Op{Kind: OpWait, Event: e})
		}
		emit(s, Op{Kind: OpLaunch, Stage: int(v)})
		if event[v] >= 0 {
			emit(s, Op{Kind: OpRecord, Event: int(event[v])})
		}
	}
	p.Stats.Waits = len(waitOn)
	st.plan = p
	return nil
}
