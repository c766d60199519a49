package verify

import (
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/plan"
)

// oracleFeatures are the kinds of plan genIterPlan makes besides device
// streams, ring copies, arena temps, event slots, lags and stream sets.
type oracleFeatures struct {
	threads bool // two host threads, a host stream each
	kinds   bool // blocking, legacy and per-thread streams, synchronous copies
	coll    bool // two devices and a collective
	ring    bool // a hand-synchronized ring (genRingPlan)
}

// genIterPlan returns a small random iterating plan: stages reading and
// writing whole buffers or halves of them (ring copies, arena temps sharing
// bytes in part, host memory), a host stream at times, host functions,
// records and waits with lags, event slots and stream sets, and what f
// adds.
func genIterPlan(rng *rand.Rand, f oracleFeatures) *plan.Plan {
	if f.ring {
		return genRingPlan(rng)
	}
	threads, kinds, coll := f.threads, f.kinds, f.coll
	p := &plan.Plan{Version: plan.PlanVersion}
	nb := 1 + rng.IntN(3)
	for b := range nb {
		buf := plan.Buffer{Name: "b" + strconv.Itoa(b), Bytes: int64(256 * (1 + rng.IntN(2))), Where: "device", Role: "temp"}
		switch rng.IntN(6) {
		case 0, 1:
			buf.Copies = 2 + rng.IntN(2)
		case 2, 3:
			off := int64(256 * rng.IntN(2))
			buf.ArenaOffset = &off
		case 4:
			if !coll {
				buf.Where = []string{"host_pinned", "host_pageable"}[rng.IntN(2)]
			}
		}
		p.Buffers = append(p.Buffers, buf)
	}
	ns := 2 + rng.IntN(3)
	if threads {
		// Two threads, a host stream each, one or two device streams each.
		ns = 0
		for _, th := range []string{"", "t1"} {
			p.Streams = append(p.Streams, plan.Stream{ID: ns, Name: "h" + th, Host: true, Thread: th})
			ns++
			for range 1 + rng.IntN(2) {
				p.Streams = append(p.Streams, plan.Stream{ID: ns, Name: "s" + strconv.Itoa(ns), Thread: th})
				ns++
			}
		}
	} else {
		hostOf, legacy, perThread := false, false, false
		for s := range ns {
			str := plan.Stream{ID: s, Name: "s" + strconv.Itoa(s)}
			switch k := rng.IntN(8); {
			case k == 0 && !hostOf:
				str.Host, hostOf = true, true
			case k == 1 && kinds && !legacy:
				str.Kind, legacy = plan.StreamLegacy, true
			case k == 2 && kinds:
				str.Kind = plan.StreamBlocking
			case k == 3 && kinds && !perThread:
				str.Kind, perThread = plan.StreamPerThread, true
			}
			p.Streams = append(p.Streams, str)
		}
	}
	if coll {
		// Two devices: streams and buffers on either, and a collective
		// of two ranks on streams of different devices.
		p.Devices = 2
		kinds = false
		for s := range p.Streams {
			p.Streams[s].Kind = ""
			if !p.Streams[s].Host {
				p.Streams[s].Device = rng.IntN(2)
			}
		}
		for b := range p.Buffers {
			p.Buffers[b].Device = rng.IntN(2)
		}
	}
	p.Events = 1 + rng.IntN(3)
	if threads {
		p.Events = 2 + rng.IntN(4)
	}
	nst := 2 + rng.IntN(4)
	for i := range nst {
		s := rng.IntN(ns)
		st := plan.Stage{Name: "v" + strconv.Itoa(i), Stream: s, Kernel: "spin"}
		for b := range nb {
			if coll && !p.Streams[s].Host && p.Buffers[b].Device != p.Streams[s].Device {
				continue
			}
			n := p.Buffers[b].Bytes
			a := plan.Access{Buffer: p.Buffers[b].Name, Bytes: n}
			if n > 256 && rng.IntN(2) == 0 {
				a.Offset, a.Bytes = 256*int64(rng.IntN(2)), 256
			}
			switch rng.IntN(4) {
			case 0:
				st.Reads = append(st.Reads, a)
			case 1:
				st.Writes = append(st.Writes, a)
			}
		}
		if str := p.Streams[s]; !str.Host && rng.IntN(8) == 0 {
			st.HostFunc = true
		}
		if str := p.Streams[s]; (str.Kind == plan.StreamLegacy || str.Kind == plan.StreamPerThread) && nb > 1 && rng.IntN(2) == 0 {
			// A synchronous copy between two buffers.
			x := rng.Perm(nb)
			n := min(p.Buffers[x[0]].Bytes, p.Buffers[x[1]].Bytes)
			st.Kernel, st.Copy, st.HostFunc = "copy", plan.CopySync, false
			st.Reads = []plan.Access{{Buffer: p.Buffers[x[0]].Name, Bytes: n}}
			st.Writes = []plan.Access{{Buffer: p.Buffers[x[1]].Name, Bytes: n}}
		}
		if st.Reads == nil {
			st.Reads = []plan.Access{}
		}
		if st.Writes == nil {
			st.Writes = []plan.Access{}
		}
		p.Stages = append(p.Stages, st)
	}
	ranks := [2]int{-1, -1}
	if coll {
		var on [2][]int
		for s, str := range p.Streams {
			if !str.Host {
				on[str.Device] = append(on[str.Device], s)
			}
		}
		if len(on[0]) > 0 && len(on[1]) > 0 {
			for d := range 2 {
				bufs := []int{}
				for b := range p.Buffers {
					if p.Buffers[b].Device == d {
						bufs = append(bufs, b)
					}
				}
				if len(bufs) == 0 {
					p.Buffers = append(p.Buffers, plan.Buffer{Name: "g" + strconv.Itoa(d), Bytes: 256, Where: "device", Role: "temp", Device: d})
					bufs = append(bufs, len(p.Buffers)-1)
				}
				a := plan.Access{Buffer: p.Buffers[bufs[rng.IntN(len(bufs))]].Name, Bytes: 256}
				ranks[d] = len(p.Stages)
				p.Stages = append(p.Stages, plan.Stage{Name: "ar/" + strconv.Itoa(d), Stream: on[d][rng.IntN(len(on[d]))], Kernel: "all_reduce",
					Reads: []plan.Access{a}, Writes: []plan.Access{a}, Collective: &plan.Collective{Group: 0, Op: "all_reduce", Reduce: "sum", Rank: d, Ranks: 2}})
			}
			// The ranks sit among the other stages in declaration order.
			at := rng.IntN(len(p.Stages) - 1)
			r := p.Stages[len(p.Stages)-2:]
			rest := slices.Clone(p.Stages[:len(p.Stages)-2])
			p.Stages = slices.Concat(rest[:at], r, rest[at:])
			ranks = [2]int{at, at + 1}
		}
	}
	// Ops: each stream's launches in stage order, records and waits
	// between them.
	per := make([][]plan.Op, ns)
	for i, st := range p.Stages {
		per[st.Stream] = append(per[st.Stream], plan.Op{Kind: plan.OpLaunch, Stage: i})
	}
	for s := range per {
		var ops []plan.Op
		for _, o := range per[s] {
			for rng.IntN(3) == 0 {
				ops = append(ops, randSyncOp(rng, p.Events))
			}
			ops = append(ops, o)
		}
		for rng.IntN(3) == 0 {
			ops = append(ops, randSyncOp(rng, p.Events))
		}
		p.Streams[s].Ops = ops
	}
	p.IssueOrder = randIssueOrder(rng, p, ranks)
	p.Iteration = &plan.Iteration{StreamSets: 1 + rng.IntN(3), Slots: make([]int, p.Events)}
	for e := range p.Iteration.Slots {
		p.Iteration.Slots[e] = 1 + rng.IntN(3)
	}
	return p
}

// genRingPlan returns a ring of staging copies synchronized by hand, as
// specs/examples/ring-handsync.yaml: up writes frame (C copies) on stream
// h2d, pre reads it on stream comp after waiting for up, and up waits for
// pre L iterations back, L around C (C itself suffices; less is more
// order; C+1 races C iterations apart), on an event of 1 or C slots, with
// 1 or C stream sets; at times a host stream fills up's source first (a
// ring of its own, with a lagged host wait).
func genRingPlan(rng *rand.Rand) *plan.Plan {
	C := 1 + rng.IntN(3)
	L := max(0, C-1+rng.IntN(4))
	if rng.IntN(2) == 0 {
		L = C + 1 // races only C iterations apart
	}
	one := func() int { return []int{1, C}[rng.IntN(2)] } // so that the period is C at times
	frame := []plan.Access{{Buffer: "frame", Bytes: 256}}
	p := &plan.Plan{
		Version: plan.PlanVersion,
		Buffers: []plan.Buffer{{Name: "frame", Bytes: 256, Where: "device", Role: "temp", Copies: C}, {Name: "res", Bytes: 256, Where: "device", Role: "output", Copies: one()}},
		Stages: []plan.Stage{
			{Name: "up", Stream: 0, Kernel: "spin", Reads: []plan.Access{}, Writes: frame},
			{Name: "pre", Stream: 1, Kernel: "spin", Reads: frame, Writes: []plan.Access{{Buffer: "res", Bytes: 256}}},
		},
		Events: 2, // 0: after up, 1: after pre
		Streams: []plan.Stream{
			{ID: 0, Name: "h2d", Ops: []plan.Op{{Kind: plan.OpWait, Event: 1, Lag: L}, {Kind: plan.OpLaunch, Stage: 0}, {Kind: plan.OpRecord, Event: 0}}},
			{ID: 1, Name: "comp", Ops: []plan.Op{{Kind: plan.OpWait, Event: 0}, {Kind: plan.OpLaunch, Stage: 1}, {Kind: plan.OpRecord, Event: 1}}},
		},
		IssueOrder: [][2]int{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}},
		Iteration:  &plan.Iteration{StreamSets: one(), Slots: []int{one(), one()}},
	}
	if rng.IntN(3) == 0 {
		// A host stream fills a pinned staging buffer (K copies) that up
		// reads, after waiting for up K iterations back.
		K := one()
		p.Buffers = append(p.Buffers, plan.Buffer{Name: "staging", Bytes: 256, Where: "host_pinned", Role: "temp", Copies: K})
		// fill is declared first: stages up, pre become 1, 2.
		p.Stages[0].Reads = []plan.Access{{Buffer: "staging", Bytes: 256}}
		p.Stages = slices.Insert(p.Stages, 0, plan.Stage{Name: "fill", Stream: 2, Kernel: "spin", Reads: []plan.Access{}, Writes: []plan.Access{{Buffer: "staging", Bytes: 256}}})
		p.Streams[0].Ops[1].Stage, p.Streams[1].Ops[1].Stage = 1, 2
		p.Streams = append(p.Streams, plan.Stream{ID: 2, Name: "host", Host: true, Ops: []plan.Op{{Kind: plan.OpWait, Event: 0, Lag: K}, {Kind: plan.OpLaunch, Stage: 0}, {Kind: plan.OpRecord, Event: 2}}})
		p.Streams[0].Ops = slices.Insert(p.Streams[0].Ops, 1, plan.Op{Kind: plan.OpWait, Event: 2})
		p.Events++
		p.Iteration.Slots = append(p.Iteration.Slots, 1)
		p.IssueOrder = [][2]int{{2, 0}, {2, 1}, {2, 2}, {0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}, {1, 2}}
	}
	return p
}

func randSyncOp(rng *rand.Rand, events int) plan.Op {
	if rng.IntN(2) == 0 {
		return plan.Op{Kind: plan.OpRecord, Event: rng.IntN(events)}
	}
	lag := 0
	if rng.IntN(2) == 0 {
		lag = rng.IntN(4)
	}
	return plan.Op{Kind: plan.OpWait, Event: rng.IntN(events), Lag: lag}
}

// randIssueOrder merges the streams' ops at random, each in stream order.
// A collective's two ranks (stages, or -1) are issued one right after the
// other.
func randIssueOrder(rng *rand.Rand, p *plan.Plan, ranks [2]int) [][2]int {
	next := make([]int, len(p.Streams))
	var out [][2]int
	atRank := func(s int) bool {
		o := p.Streams[s].Ops[next[s]]
		return o.Kind == plan.OpLaunch && (o.Stage == ranks[0] || o.Stage == ranks[1])
	}
	for {
		var live, held []int
		for s := range p.Streams {
			if next[s] < len(p.Streams[s].Ops) {
				if ranks[0] >= 0 && atRank(s) {
					held = append(held, s)
					continue
				}
				live = append(live, s)
			}
		}
		if len(held) == 2 || len(held) == 1 && p.Stages[ranks[0]].Stream == p.Stages[ranks[1]].Stream {
			for _, s := range held {
				out = append(out, [2]int{s, next[s]})
				next[s]++
			}
			continue
		}
		if len(live) == 0 {
			return out
		}
		s := live[rng.IntN(len(live))]
		out = append(out, [2]int{s, next[s]})
		next[s]++
	}
}

// mutateIterPlan changes p in one random way: a record after one stage and
// a wait before another added (a lag at times), a record or a wait added
// anywhere (issued anywhere between its stream neighbours), a wait
// dropped, lags, a slot count, stream sets or a ring size changed.
func mutateIterPlan(rng *rand.Rand, p *plan.Plan) *plan.Plan {
	q := clonePlan(p)
	q.Kernels, q.Version, q.Devices = p.Kernels, p.Version, p.Devices
	q.Buffers = slices.Clone(p.Buffers)
	switch rng.IntN(10) {
	case 8, 9:
		// A record or a wait at a random place of a random stream, issued
		// at a random place between its stream neighbours.
		st := rng.IntN(len(q.Streams))
		j := rng.IntN(len(q.Streams[st].Ops) + 1)
		var o plan.Op
		if rng.IntN(2) == 0 && q.Events < 8 {
			e := rng.IntN(q.Events + 1)
			if e == q.Events {
				q.Events++
				q.Iteration.Slots = append(q.Iteration.Slots, 1+rng.IntN(3))
			}
			o = plan.Op{Kind: plan.OpRecord, Event: e}
		} else {
			o = randSyncOp(rng, q.Events)
			if o.Kind == plan.OpRecord {
				o = plan.Op{Kind: plan.OpWait, Event: o.Event}
			}
		}
		insertIssued(rng, q, st, j, o)
	case 0, 1, 2:
		x, y := rng.IntN(len(q.Stages)), rng.IntN(len(q.Stages))
		lag := 0
		if rng.IntN(2) == 0 || x >= y {
			lag = rng.IntN(4)
		}
		addLaggedWait(q, x, y, lag)
		q.Iteration.Slots[len(q.Iteration.Slots)-1] = 1 + rng.IntN(3)
	case 3:
		if waits := waitOps(q); len(waits) > 0 {
			w := waits[rng.IntN(len(waits))]
			r := dropOp(q, w[0], w[1])
			r.Kernels, r.Version, r.Devices = q.Kernels, q.Version, q.Devices
			return r
		}
	case 4:
		for s := range q.Streams {
			for j := range q.Streams[s].Ops {
				if o := &q.Streams[s].Ops[j]; o.Kind == plan.OpWait && rng.IntN(3) == 0 {
					o.Lag = rng.IntN(5)
				}
			}
		}
	case 5:
		e := rng.IntN(q.Events)
		q.Iteration.Slots[e] = 1 + rng.IntN(4)
	case 6:
		q.Iteration.StreamSets = 1 + rng.IntN(3)
	case 7:
		b := rng.IntN(len(q.Buffers))
		if q.Buffers[b].ArenaOffset == nil {
			q.Buffers[b].Copies = 1 + rng.IntN(3)
		}
	}
	return q
}

// insertIssued inserts op o at index j of stream s's ops, issued at a
// random place after its stream predecessor and before its successor.
func insertIssued(rng *rand.Rand, q *plan.Plan, s, j int, o plan.Op) {
	q.Streams[s].Ops = slices.Insert(q.Streams[s].Ops, j, o)
	lo, hi := 0, len(q.IssueOrder) // insert at a position in [lo, hi]
	for k := range q.IssueOrder {
		so := &q.IssueOrder[k]
		if so[0] != s {
			continue
		}
		if so[1] == j-1 {
			lo = k + 1
		}
		if so[1] == j {
			hi = k
		}
		if so[1] >= j {
			so[1]++
		}
	}
	pos := lo + rng.IntN(hi-lo+1)
	q.IssueOrder = slices.Insert(q.IssueOrder, pos, [2]int{s, j})
}

// unrollVerdict verifies p unrolled over n iterations (without names).
func unrollVerdict(t testing.TB, p *plan.Plan, n int) error {
	q, err := plan.UnrollDerived(p, n, false)
	if err != nil {
		t.Fatal(err)
	}
	return verifyWith(q, false, false)
}

// TestUnrollOracle: on random small iterating plans (genIterPlan: host
// streams and host threads, stream kinds and synchronous copies, two
// devices and a collective, hand-synchronized rings, ring copies of
// several sizes, arena temps sharing bytes in part, event slots, lags
// below and past them, stream sets), each walked by 30 random edits
// (mutateIterPlan), the verdict over UnrollIterations(p) iterations is the
// verdict over 3k+8. The walk must meet both verdicts and plans racy only
// with iteration P (so that an unroll of P iterations fails it); it logs,
// per feature, how many plans had it and how many were race-free.
// UNROLL_ORACLE_TRIALS (default 60 plans), UNROLL_ORACLE_SEED and
// UNROLL_ORACLE_MODE (plain, threads, kinds, coll or ring; default each
// at random) run it longer or on one kind of plan.
func TestUnrollOracle(t *testing.T) {
	trials, steps := 60, 30
	if n, err := strconv.Atoi(os.Getenv("UNROLL_ORACLE_TRIALS")); err == nil {
		trials = n
	}
	seed := uint64(1)
	if n, err := strconv.Atoi(os.Getenv("UNROLL_ORACLE_SEED")); err == nil {
		seed = uint64(n)
	}
	mode := os.Getenv("UNROLL_ORACLE_MODE") // plain, threads, kinds, coll, ring; "": each at random
	rng := rand.New(rand.NewPCG(seed, 7))
	// Per feature, the plans checked that have it and the race-free ones.
	type count struct{ checked, clean int }
	counts := map[string]*count{}
	invalid := 0
	for trial := range trials {
		m := mode
		if m == "" {
			m = []string{"plain", "threads", "kinds", "coll", "ring"}[rng.IntN(5)]
		}
		p := genIterPlan(rng, oracleFeatures{threads: m == "threads", kinds: m == "kinds", coll: m == "coll", ring: m == "ring"})
		for step := range steps {
			switch {
			case m == "ring" && step%3 == 0:
				p = genRingPlan(rng) // rings near the boundary, changed a little
			case step > 0:
				p = mutateIterPlan(rng, p)
			}
			if err := p.Validate(); err != nil {
				invalid++
				continue
			}
			k := plan.UnrollIterations(p)
			long := 3*k + 8
			got, want := unrollVerdict(t, p, k), unrollVerdict(t, p, long)
			if (got == nil) != (want == nil) {
				var b strings.Builder
				p.EncodeJSON(&b, false)
				t.Fatalf("trial %d step %d: over %d iterations: %v; over %d: %v\n%s", trial, step, k, got, long, want, b.String())
			}
			// Plans whose races show only with iteration P (the one
			// past the period P, k-1): each is a whole period apart.
			boundary := got != nil && k >= 2 && unrollVerdict(t, p, k-1) == nil
			for _, f := range append(oracleFeaturesOf(p), "racy only with iteration P") {
				if f == "racy only with iteration P" && !boundary {
					continue
				}
				c := counts[f]
				if c == nil {
					c = &count{}
					counts[f] = c
				}
				c.checked++
				if got == nil {
					c.clean++
				}
			}
		}
	}
	for _, f := range slices.Sorted(maps.Keys(counts)) {
		t.Logf("%s: %d plans, %d race-free", f, counts[f].checked, counts[f].clean)
	}
	t.Logf("%d invalid plans skipped", invalid)
	if c := counts["all"]; c == nil || c.clean == 0 || c.clean == c.checked {
		t.Errorf("%v plans race-free of those checked: the walk does not cover both verdicts", c)
	}
	if counts["racy only with iteration P"] == nil {
		t.Errorf("no plan racy only with iteration P: the walk does not test the iteration past the period")
	}
}

// oracleFeaturesOf names what p has of the corners the oracle walks.
func oracleFeaturesOf(p *plan.Plan) []string {
	has := map[string]bool{"all": true}
	add := func(f string, ok bool) { has[f] = has[f] || ok }
	lagged, cross := false, false
	for s, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == plan.OpWait && o.Lag > 0 {
				lagged = true
				if o.Lag >= p.Iteration.Slots[o.Event] {
					add("lag ≥ slots", true)
				}
			}
			if o.Kind == plan.OpWait {
				for s2, str2 := range p.Streams {
					for _, o2 := range str2.Ops {
						if s2 != s && o2.Kind == plan.OpRecord && o2.Event == o.Event && str2.Thread != str.Thread {
							cross = true
						}
					}
				}
			}
		}
		add("host stream", str.Host)
		add("stream kind", str.Kind != "")
	}
	add("lagged wait", lagged)
	add("wait on another thread's record", cross)
	add("stream sets", p.Iteration.StreamSets > 1)
	copies, arena := map[int]bool{}, false
	for _, b := range p.Buffers {
		if b.Copies > 1 {
			copies[b.Copies] = true
		}
		arena = arena || b.ArenaOffset != nil
	}
	add("ring copies", len(copies) > 0)
	add("ring copies of two sizes", len(copies) > 1)
	add("arena", arena)
	for i := range p.Stages {
		add("collective", p.Stages[i].Collective != nil && p.Stages[i].Collective.Rank == 0)
		add("synchronous copy", p.Stages[i].Copy == plan.CopySync)
		add("host function", p.Stages[i].HostFunc)
	}
	var out []string
	for f, ok := range has {
		if ok {
			out = append(out, f)
		}
	}
	return out
}
