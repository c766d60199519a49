package verify

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dagrun/dagrun/plan"
)

// randomOpsPlan returns a plan of S streams (the last a host stream when
// host is set) with random launches, records and waits, issued in a random
// interleaving of the streams.
func randomOpsPlan(rng *rand.Rand, S, n int, host bool) *plan.Plan {
	p := &plan.Plan{Events: 1 + rng.IntN(6)}
	for s := range S {
		p.Streams = append(p.Streams, plan.Stream{ID: s, Host: host && s == S-1})
	}
	left := make([]int, S)
	for range n {
		left[rng.IntN(S)]++
	}
	for sum := n; sum > 0; sum-- {
		s := rng.IntN(S)
		for left[s] == 0 {
			s = (s + 1) % S
		}
		left[s]--
		var o plan.Op
		switch rng.IntN(3) {
		case 0:
			o = plan.Op{Kind: plan.OpLaunch, Stage: len(p.Stages)}
			p.Stages = append(p.Stages, plan.Stage{Stream: s})
		case 1:
			o = plan.Op{Kind: plan.OpRecord, Event: rng.IntN(p.Events)}
		default:
			o = plan.Op{Kind: plan.OpWait, Event: rng.IntN(p.Events)}
		}
		p.IssueOrder = append(p.IssueOrder, [2]int{s, len(p.Streams[s].Ops)})
		p.Streams[s].Ops = append(p.Streams[s].Ops, o)
	}
	return p
}

// closure is the happens-before relation of p by brute force: a bit set
// of the ops ordered before each op, built in issue order from its stream
// predecessor, the record its wait captured and the host ops issued before
// it.
func closure(p *plan.Plan) (before [][]bool, id func(s, j int) int) {
	base := make([]int, len(p.Streams)+1)
	for s := range p.Streams {
		base[s+1] = base[s] + len(p.Streams[s].Ops)
	}
	id = func(s, j int) int { return base[s] + j }
	n := base[len(p.Streams)]
	before = make([][]bool, n)
	last := map[int]int{}
	var issued []int // host ops issued so far
	join := func(g, x int) {
		before[g][x] = true
		for k, b := range before[x] {
			before[g][k] = before[g][k] || b
		}
	}
	for _, so := range p.IssueOrder {
		s, j := so[0], so[1]
		g := id(s, j)
		before[g] = make([]bool, n)
		if j > 0 {
			join(g, id(s, j-1))
		}
		o := p.Streams[s].Ops[j]
		if r, ok := last[o.Event]; ok && o.Kind == plan.OpWait {
			join(g, r)
		}
		if o.Kind == plan.OpRecord {
			last[o.Event] = g
		}
		for _, h := range issued {
			join(g, h)
		}
		if p.Streams[s].Host {
			issued = append(issued, g)
		}
	}
	return before, id
}

// TestReachMatchesClosure: the clocks answer every pair of ops of random
// plans as the brute-force closure does, asked in random order.
func TestReachMatchesClosure(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 300 {
		S := 1 + rng.IntN(6)
		p := randomOpsPlan(rng, S, 5+rng.IntN(60), trial%3 == 0)
		before, id := closure(p)
		h := hbEdges(p)
		var ops [][2]int
		for s := range p.Streams {
			for j := range p.Streams[s].Ops {
				ops = append(ops, [2]int{s, j})
			}
		}
		for range 4 * len(ops) * len(ops) / 3 {
			x, y := ops[rng.IntN(len(ops))], ops[rng.IntN(len(ops))]
			a, b := id(x[0], x[1]), id(y[0], y[1])
			want := a == b || before[b][a]
			if got := h.reach(int32(a), int32(b)); got != want {
				t.Fatalf("trial %d: reach(stream %d op %d, stream %d op %d) = %v, want %v", trial, x[0], x[1], y[0], y[1], got, want)
			}
		}
	}
}

// randomImplicitPlan returns a plan of S streams with staggered, short
// lives (so that later streams can continue the chains of finished ones),
// random stream kinds, host threads and host streams, and launches,
// records, waits and synchronous copies from pageable, pinned and device
// memory, issued by start time.
func randomImplicitPlan(rng *rand.Rand, S int) *plan.Plan {
	p := &plan.Plan{Events: 1 + rng.IntN(8)}
	p.Buffers = []plan.Buffer{{Name: "dev", Where: "device"}, {Name: "pageable", Where: "host_pageable"}, {Name: "pinned", Where: "host_pinned"}}
	threads := []string{"", "t1", "t2"}[:1+rng.IntN(3)]
	legacy, perThread, host := false, map[string]bool{}, map[string]bool{}
	type timed struct {
		at    float64
		s, j  int
		order int
	}
	var ops []timed
	for s := range S {
		str := plan.Stream{ID: s, Name: fmt.Sprintf("s%d", s), Thread: threads[rng.IntN(len(threads))]}
		switch k := rng.IntN(6); {
		case k == 0 && !host[str.Thread]:
			str.Host, host[str.Thread] = true, true
		case k == 1 && !legacy:
			str.Kind, legacy = plan.StreamLegacy, true
		case k == 2 && !perThread[str.Thread]:
			str.Kind, perThread[str.Thread] = plan.StreamPerThread, true
		case k == 3:
			str.Kind = plan.StreamBlocking
		}
		at := rng.Float64() * float64(S)
		for j := range 1 + rng.IntN(6) {
			var o plan.Op
			switch rng.IntN(3) {
			case 0:
				o = plan.Op{Kind: plan.OpLaunch, Stage: len(p.Stages)}
				st := plan.Stage{Name: fmt.Sprintf("v%d", len(p.Stages)), Stream: s, Kernel: "spin"}
				if (str.Kind == plan.StreamLegacy || str.Kind == plan.StreamPerThread) && rng.IntN(2) == 0 {
					src, dst := p.Buffers[rng.IntN(3)].Name, p.Buffers[rng.IntN(3)].Name
					st.Kernel, st.Copy = "copy", plan.CopySync
					st.Reads, st.Writes = []plan.Access{{Buffer: src, Bytes: 8}}, []plan.Access{{Buffer: dst, Bytes: 8}}
				}
				p.Stages = append(p.Stages, st)
			case 1:
				o = plan.Op{Kind: plan.OpRecord, Event: rng.IntN(p.Events)}
			default:
				o = plan.Op{Kind: plan.OpWait, Event: rng.IntN(p.Events)}
			}
			str.Ops = append(str.Ops, o)
			ops = append(ops, timed{at: at, s: s, j: j})
			at += rng.Float64() * 3
		}
		p.Streams = append(p.Streams, str)
	}
	slices.SortStableFunc(ops, func(x, y timed) int { return cmp.Compare(x.at, y.at) })
	for _, t := range ops {
		p.IssueOrder = append(p.IssueOrder, [2]int{t.s, t.j})
	}
	return p
}

// TestReachMatchesBFS: the clocks (both layouts) answer every pair of ops
// as a breadth-first search over the plan's edges does: stream order, each
// wait's captured record, and CUDA's implicit order (deriveImplicit), on
// random plans with stream kinds, host threads, synchronous copies and
// many short streams whose chains are continued.
func TestReachMatchesBFS(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	merged := 0
	for trial := range 400 {
		p := randomImplicitPlan(rng, 1+rng.IntN(24))
		if err := p.ValidateKinds(); err != nil {
			t.Fatalf("trial %d: generator: %v", trial, err)
		}
		if m, _ := checkReachBFS(t, fmt.Sprintf("trial %d", trial), p); m {
			merged++
		}
	}
	if merged == 0 {
		t.Errorf("no plan had fewer chains than streams: the chain continuation went untested")
	}
}

// checkReachBFS fails t unless the clocks of p (all layouts, and with one
// adoption per query at most and heads in a map) answer every pair of ops
// as a breadth-first search over the plan's edges does: stream order, each
// wait's captured record, and CUDA's implicit order (deriveImplicit). It
// reports whether some build had fewer chains than p has streams, and
// whether a stream left its chain for another's.
func checkReachBFS(t *testing.T, name string, p *plan.Plan) (merged, handed bool) {
	t.Helper()
	base := make([]int, len(p.Streams)+1)
	for s := range p.Streams {
		base[s+1] = base[s] + len(p.Streams[s].Ops)
	}
	n := base[len(p.Streams)]
	// Edges by target: stream order, the latest record of the wait's
	// event issued before it (unless implicit.go finds it unordered),
	// implicit order.
	im := deriveImplicit(p)
	pred := make([][]int, n)
	last := map[int]int{}
	for _, so := range p.IssueOrder {
		g := base[so[0]] + so[1]
		if so[1] > 0 {
			pred[g] = append(pred[g], g-1)
		}
		o := p.Streams[so[0]].Ops[so[1]]
		if r, ok := last[o.Event]; ok && o.Kind == plan.OpWait && (im == nil || !im.unordered[int32(g)]) {
			pred[g] = append(pred[g], r)
		}
		if o.Kind == plan.OpRecord {
			last[o.Event] = g
		}
		if im != nil {
			for _, f := range im.from[im.start[g]:im.start[g+1]] {
				pred[g] = append(pred[g], int(f))
			}
		}
	}
	before := make([][]bool, n) // before[b][a]: a path a → … → b, or a == b
	for b := range n {
		seen := make([]bool, n)
		seen[b] = true
		queue := []int{b}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			for _, y := range pred[x] {
				if !seen[y] {
					seen[y] = true
					queue = append(queue, y)
				}
			}
		}
		before[b] = seen
	}
	for k, layout := range []hbLayout{hbDense, hbSparse, hbSparse} {
		// The third build follows one adoption at most (so that rows are
		// taken delta by delta past it) and keeps its heads in a map.
		hops, flat := hbMaxHops, hbFlatHeads
		if k == 2 {
			hbMaxHops, hbFlatHeads = 1, 0
		}
		h := buildHB(p, layout, 0)
		hbMaxHops, hbFlatHeads = hops, flat
		if h.chains < len(p.Streams) {
			merged = true
		}
		for g := range n {
			if g > 0 && h.opStream[g] == h.opStream[g-1] && h.opChain[g] != h.opChain[g-1] {
				handed = true // a stream left its chain to another
			}
		}
		for a := range n {
			for b := range n {
				if got, want := h.reach(int32(a), int32(b)), before[b][a]; got != want {
					t.Fatalf("%s, layout %d (%d streams, %d chains): reach(op %d, op %d) = %v, want %v", name, layout, len(p.Streams), h.chains, a, b, got, want)
				}
			}
		}
	}
	return merged, handed
}

// randomLongLivedPlan returns a plan of S streams that all live the whole
// plan and take turns, as uncapped plans do: each stream, woken in a
// random order, waits on the events of one to three streams (the latest
// record of each, or none yet), launches and records its own event; a
// stream wakes rounds times.
func randomLongLivedPlan(rng *rand.Rand, S, rounds int) *plan.Plan {
	p := &plan.Plan{Events: S}
	for s := range S {
		p.Streams = append(p.Streams, plan.Stream{ID: s, Name: fmt.Sprintf("s%d", s)})
	}
	emit := func(s int, o plan.Op) {
		p.IssueOrder = append(p.IssueOrder, [2]int{s, len(p.Streams[s].Ops)})
		p.Streams[s].Ops = append(p.Streams[s].Ops, o)
	}
	for range rounds {
		for _, s := range rng.Perm(S) {
			for range 1 + rng.IntN(3) {
				emit(s, plan.Op{Kind: plan.OpWait, Event: rng.IntN(S)})
			}
			emit(s, plan.Op{Kind: plan.OpLaunch, Stage: len(p.Stages)})
			p.Stages = append(p.Stages, plan.Stage{Stream: s})
			if rng.IntN(4) == 0 { // a second stage before the record
				emit(s, plan.Op{Kind: plan.OpLaunch, Stage: len(p.Stages)})
				p.Stages = append(p.Stages, plan.Stage{Stream: s})
			}
			emit(s, plan.Op{Kind: plan.OpRecord, Event: s})
		}
	}
	return p
}

// TestReachMatchesBFSLongLived: as TestReachMatchesBFS, on plans of many
// streams that live the whole plan and wake repeatedly, whose chains are
// handed on from stream to stream.
func TestReachMatchesBFSLongLived(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 17))
	merged, handed := 0, 0
	for trial := range 120 {
		p := randomLongLivedPlan(rng, 2+rng.IntN(40), 1+rng.IntN(4))
		m, h := checkReachBFS(t, fmt.Sprintf("trial %d", trial), p)
		if m {
			merged++
		}
		if h {
			handed++
		}
	}
	if merged == 0 || handed == 0 {
		t.Errorf("%d plans had fewer chains than streams, %d handed a chain on: the chain cover went untested", merged, handed)
	}
}
