package planner

import (
	"math/rand/v2"
	"testing"
)

// randomOpsPlan returns a plan of S streams (the last a host stream when
// host is set) with random launches, records and waits, issued in a random
// interleaving of the streams.
func randomOpsPlan(rng *rand.Rand, S, n int, host bool) *Plan {
	p := &Plan{Events: 1 + rng.IntN(6)}
	for s := range S {
		p.Streams = append(p.Streams, Stream{ID: s, Host: host && s == S-1})
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
		var o Op
		switch rng.IntN(3) {
		case 0:
			o = Op{Kind: OpLaunch, Stage: len(p.Stages)}
			p.Stages = append(p.Stages, Stage{Stream: s})
		case 1:
			o = Op{Kind: OpRecord, Event: rng.IntN(p.Events)}
		default:
			o = Op{Kind: OpWait, Event: rng.IntN(p.Events)}
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
func closure(p *Plan) (before [][]bool, id func(s, j int) int) {
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
		if r, ok := last[o.Event]; ok && o.Kind == OpWait {
			join(g, r)
		}
		if o.Kind == OpRecord {
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

// TestReachMatchesClosure: the backward search answers every pair of ops of
// random plans as the brute-force closure does, asked in random order (so
// that searches are resumed with lower windows and targets change).
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
