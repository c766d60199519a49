package sim_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/backendtest"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// randomPlan makes a random plan of mix stages over k streams, synchronized
// with a wait on every cross-stream conflict, and then drops each wait with
// probability drop.
func randomPlan(r *rand.Rand, drop float64) *plan.Plan {
	nb, n, k := 1+r.IntN(4), 2+r.IntN(12), 1+r.IntN(3)
	ranges := [][2]int64{{0, 64}, {0, 32}, {32, 32}, {16, 32}}
	p := backendtest.NewBuilder(k)
	for i := range nb {
		p.Buffer(plan.Buffer{Name: fmt.Sprint("b", i), Bytes: 64, Role: dag.RoleOutput, Init: dag.InitRandom, InitSeed: int64(i)})
	}
	acc := func() plan.Access {
		rg := ranges[r.IntN(len(ranges))]
		return plan.Access{Buffer: fmt.Sprint("b", r.IntN(nb)), Offset: rg[0], Bytes: rg[1]}
	}
	var stages []plan.Stage
	for i := range n {
		st := plan.Stage{Name: fmt.Sprint("s", i), Kernel: dag.BuiltinMix, Stream: r.IntN(k)}
		used := map[string]bool{}
		for range 1 + r.IntN(2) {
			w := acc()
			if !used[w.Buffer] {
				used[w.Buffer] = true
				st.Writes = append(st.Writes, w)
			}
		}
	reads:
		for range r.IntN(3) {
			a := acc()
			for _, w := range st.Writes {
				if a.Overlaps(w) && a != w {
					continue reads
				}
			}
			st.Reads = append(st.Reads, a)
		}
		stages = append(stages, st)
	}
	for i, st := range stages {
		for j := range i {
			if stages[j].Stream != st.Stream && stagesConflict(stages[j], st) && r.Float64() >= drop {
				p.Wait(st.Stream, j)
			}
		}
		p.Launch(st.Stream, st)
		p.Record(st.Stream, i)
	}
	return p.Plan()
}

// racy says whether p has an unordered conflicting pair, from happens-before
// computed offline by vector clocks over the issue order (like the verifier).
func racy(p *plan.Plan) bool {
	k := len(p.Streams)
	clock := make([][]int, k)
	for s := range clock {
		clock[s] = make([]int, k)
	}
	rec := make([][]int, p.Events)
	at := make([][]int, len(p.Stages)) // clock at each launch
	for _, so := range p.IssueOrder {
		s, op := so[0], p.Streams[so[0]].Ops[so[1]]
		switch op.Kind {
		case plan.OpLaunch:
			clock[s][s]++
			at[op.Stage] = append([]int(nil), clock[s]...)
		case plan.OpRecord:
			rec[op.Event] = append([]int(nil), clock[s]...)
		case plan.OpWait:
			for i, v := range rec[op.Event] {
				clock[s][i] = max(clock[s][i], v)
			}
		}
	}
	before := func(a, b int) bool {
		sa := p.Stages[a].Stream
		return at[a][sa] <= at[b][sa]
	}
	for a := range p.Stages {
		for b := a + 1; b < len(p.Stages); b++ {
			if before(a, b) || before(b, a) {
				continue
			}
			A, B := p.Stages[a], p.Stages[b]
			for _, w := range A.Writes {
				for _, x := range append(append([]plan.Access{}, B.Reads...), B.Writes...) {
					if w.Overlaps(x) {
						return true
					}
				}
			}
			for _, w := range B.Writes {
				for _, x := range A.Reads {
					if w.Overlaps(x) {
						return true
					}
				}
			}
		}
	}
	return false
}

// oneStream returns p's stages on one stream in declaration order.
func oneStream(p *plan.Plan) *plan.Plan {
	q := backendtest.NewBuilder(1)
	for _, b := range p.Buffers {
		q.Buffer(b)
	}
	for _, st := range p.Stages {
		q.Launch(0, st)
	}
	return q.Plan()
}

// TestDetectorIsExact: over random plans with random waits dropped, the
// detector flags a run under every seed exactly when the plan has a race by
// offline happens-before; race-free plans give one stream's outputs.
func TestDetectorIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var nracy, nclean int
	for c := range 300 {
		p := randomPlan(r, 0.3)
		want := racy(p)
		ref, err := run(t, oneStream(p), sim.Options{MaxDelay: -1}, 2)
		if err != nil {
			t.Fatal(err)
		}
		for seed := range int64(3) {
			res, err := run(t, p, sim.Options{Seed: seed, MaxDelay: 5000}, 2)
			var re *executor.RaceError
			if err != nil && !errors.As(err, &re) {
				t.Fatalf("case %d seed %d: %v", c, seed, err)
			}
			if got := re != nil; got != want {
				t.Fatalf("case %d seed %d: detector says race=%v, offline happens-before says %v (%v)", c, seed, got, want, err)
			}
			if !want && checksums(res) != checksums(ref) {
				t.Fatalf("case %d seed %d: outputs %s, one stream %s", c, seed, checksums(res), checksums(ref))
			}
		}
		if want {
			nracy++
		} else {
			nclean++
		}
	}
	t.Logf("%d racy plans, %d race-free", nracy, nclean)
}

// randomDevicesPlan makes a random plan over d devices (2 or 3) and k
// streams (stream s on device s % d): mix stages on their device's
// buffers and a host-pinned one, and now and then an all-reduce over every
// device, its ranks issued as one group on a stream of each device. Waits
// order each cross-stream conflict, each dropped with probability drop.
func randomDevicesPlan(r *rand.Rand, drop float64) *plan.Plan {
	d := 2 + r.IntN(2)
	k := d + r.IntN(3)
	p := backendtest.NewBuilder(k)
	for s := range k {
		p.OnDevice(s, s%d)
	}
	bufs := make([][]string, d+1) // per device; [d]: host memory
	for dev := range d {
		for i := range 2 {
			name := fmt.Sprintf("b%d_%d", dev, i)
			p.Buffer(plan.Buffer{Name: name, Bytes: 64, Role: dag.RoleOutput, Init: dag.InitFill, InitValue: float64(dev + i), Device: dev})
			bufs[dev] = append(bufs[dev], name)
		}
	}
	p.Buffer(plan.Buffer{Name: "h", Bytes: 64, Where: dag.WhereHostPinned, Role: dag.RoleOutput})
	bufs[d] = []string{"h"}
	ranges := [][2]int64{{0, 64}, {0, 32}, {32, 32}}
	acc := func(dev int) plan.Access {
		list := bufs[dev]
		if r.IntN(4) == 0 {
			list = bufs[d]
		}
		rg := ranges[r.IntN(len(ranges))]
		return plan.Access{Buffer: list[r.IntN(len(list))], Offset: rg[0], Bytes: rg[1]}
	}
	var stages []plan.Stage
	waits := func(st plan.Stage) {
		for j := range stages {
			if stages[j].Stream != st.Stream && stagesConflict(stages[j], st) && r.Float64() >= drop {
				p.Wait(st.Stream, j)
			}
		}
	}
	group := 0
	for range 3 + r.IntN(10) {
		if r.IntN(4) == 0 { // an all-reduce over every device
			var ranks []plan.Stage
			for dev := range d {
				g := plan.Access{Buffer: bufs[dev][r.IntN(2)], Bytes: 64}
				ranks = append(ranks, plan.Stage{Name: fmt.Sprintf("ar%d/%d", group, dev), Kernel: "all_reduce", Args: map[string]any{"op": "sum"},
					Stream: dev + d*r.IntN((k-dev+d-1)/d), Reads: []plan.Access{g}, Writes: []plan.Access{g},
					Collective: &plan.Collective{Group: group, Op: "all_reduce", Reduce: "sum", Rank: dev, Ranks: d}})
			}
			group++
			for _, st := range ranks {
				waits(st)
			}
			first := len(stages)
			for _, st := range ranks {
				p.Launch(st.Stream, st)
				stages = append(stages, st)
			}
			for i, st := range ranks {
				p.Record(st.Stream, first+i)
			}
			continue
		}
		s := r.IntN(k)
		st := plan.Stage{Name: fmt.Sprint("s", len(stages)), Kernel: dag.BuiltinMix, Stream: s, Writes: []plan.Access{acc(s % d)}}
		if a := acc(s % d); r.IntN(2) == 0 && (!a.Overlaps(st.Writes[0]) || a == st.Writes[0]) {
			st.Reads = append(st.Reads, a)
		}
		waits(st)
		i := p.Launch(s, st)
		stages = append(stages, st)
		p.Record(s, i)
	}
	return p.Plan()
}

// TestDetectorAgreesAcrossDevices: over random plans of several devices
// with collectives and waits dropped, the detector flags a run under every
// seed exactly when the verifier finds a race: the two take a
// collective's rendezvous the same way.
func TestDetectorAgreesAcrossDevices(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var nracy, nclean, ncoll int
	for c := range 200 {
		p := randomDevicesPlan(r, 0.4)
		if err := p.Validate(); err != nil {
			t.Fatalf("case %d: %v", c, err)
		}
		verr := verify.Verify(p)
		var pre *verify.RaceError
		if verr != nil && !errors.As(verr, &pre) {
			t.Fatalf("case %d: verifier: %v", c, verr)
		}
		want := pre != nil
		for seed := range int64(3) {
			_, err := run(t, p, sim.Options{Seed: seed, MaxDelay: 5000}, 1)
			var re *executor.RaceError
			if err != nil && !errors.As(err, &re) {
				t.Fatalf("case %d seed %d: %v", c, seed, err)
			}
			if got := re != nil; got != want {
				t.Fatalf("case %d seed %d: detector says race=%v, the verifier %v (%v; %v)", c, seed, got, want, err, verr)
			}
		}
		for _, st := range p.Stages {
			if st.Collective != nil {
				ncoll++
				break
			}
		}
		if want {
			nracy++
		} else {
			nclean++
		}
	}
	t.Logf("%d racy plans, %d race-free, %d with collectives", nracy, nclean, ncoll)
	if nracy < 20 || nclean < 20 || ncoll < 20 {
		t.Errorf("too few of a kind: %d racy, %d race-free, %d with collectives", nracy, nclean, ncoll)
	}
}

// stagesConflict reports whether a and b touch overlapping bytes with at
// least one write (a RAW, WAR or WAW pair).
func stagesConflict(a, b plan.Stage) bool {
	for _, w := range a.Writes {
		for _, x := range append(append([]plan.Access{}, b.Reads...), b.Writes...) {
			if w.Overlaps(x) {
				return true
			}
		}
	}
	for _, w := range b.Writes {
		for _, x := range a.Reads {
			if w.Overlaps(x) {
				return true
			}
		}
	}
	return false
}
