package planner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/num"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

const peerSpec = `version: 1
devices: 2
buffers:
  - {name: a, bytes: 4096, device: 0}
  - {name: b, bytes: 4096, device: 1}
  - {name: t, bytes: 4096, device: 1}
  - {name: out, bytes: 8, role: output, device: 1}
stages:
  - {name: produce, kernel: fill, args: {value: 1.0}, writes: [a]}
  - {name: other, kernel: fill, args: {value: 2.0}, writes: [t]}
  - {name: send, kernel: copy, reads: [a], writes: [b]}
  - {name: use, kernel: mix, reads: [b, t], writes: [t]}
  - {name: sum, kernel: checksum, reads: [t], writes: [out]}
`

const reduceSpec = `version: 1
devices: 2
buffers:
  - {name: x0, dtype: f32, shape: [1024], device: 0, init: {fill: 1.0}}
  - {name: x1, dtype: f32, shape: [1024], device: 1, init: {fill: 2.0}}
  - {name: g0, dtype: f32, shape: [1024], device: 0}
  - {name: g1, dtype: f32, shape: [1024], device: 1}
  - {name: note, bytes: 64, where: host_pinned}
  - {name: sum0, bytes: 8, role: output, device: 0}
  - {name: sum1, bytes: 8, role: output, device: 1}
stages:
  - {name: bwd0, kernel: scale, args: {a: 2}, reads: [x0], writes: [g0], duration_us: 50}
  - {name: mark, kernel: fill, args: {value: 7}, writes: [note], device: 0}
  - {name: bwd1, kernel: scale, args: {a: 3}, reads: [x1], writes: [g1], duration_us: 50}
  - {name: reduce, kernel: all_reduce, args: {op: sum}, reads: [g0, g1], writes: [g0, g1]}
  - {name: step0, kernel: axpy, args: {a: -0.5}, reads: [g0, x0], writes: [x0]}
  - {name: step1, kernel: axpy, args: {a: -0.5}, reads: [g1, x1], writes: [x1]}
  - {name: seen, kernel: checksum, reads: [note], writes: [sum1], after: [reduce], device: 1}
  - {name: check0, kernel: checksum, reads: [x0], writes: [sum0]}
`

// planOf plans src, verifies it, and returns one iteration of it: without
// the iteration info and the waits across iterations.
func planOf(t *testing.T, src string) *plan.Plan {
	t.Helper()
	p, err := Build(loadSpec(t, src), Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatalf("planned: %v", err)
	}
	q := p.WithoutOps(func(s, j int, o plan.Op) bool { return o.Kind == plan.OpWait && o.Lag > 0 })
	q.Iteration = nil
	if err := verify.Verify(q); err != nil {
		t.Fatalf("one iteration: %v", err)
	}
	return q
}

// TestDevicesStreams: streams never mix devices, each stream has its
// stages' device, buffers keep theirs, and each device has its own arena.
func TestDevicesStreams(t *testing.T) {
	s := loadSpec(t, peerSpec)
	p := planOf(t, peerSpec)
	if p.Devices != 2 {
		t.Fatalf("Devices = %d", p.Devices)
	}
	for i, st := range s.Stages {
		if got := p.StageDevice(i); got != st.Device {
			t.Errorf("stage %s on device %d, want %d", st.Name, got, st.Device)
		}
	}
	for _, b := range p.Buffers {
		if want := s.Buffer(b.Name).Device; b.Device != want {
			t.Errorf("buffer %s on device %d, want %d", b.Name, b.Device, want)
		}
	}
	var sum int64
	for d, n := range p.Stats.ArenaBytesPerDevice {
		sum += n
		for _, b := range p.Buffers {
			if b.ArenaOffset != nil && b.Device == d && *b.ArenaOffset+plan.AlignUp(b.Bytes) > n {
				t.Errorf("buffer %s ends past device %d's arena (%d bytes)", b.Name, d, n)
			}
		}
	}
	if len(p.Stats.ArenaBytesPerDevice) != 2 || sum != p.Stats.ArenaBytes || p.Stats.ArenaBytesPerDevice[0] == 0 {
		t.Errorf("arena per device %v, total %d", p.Stats.ArenaBytesPerDevice, p.Stats.ArenaBytes)
	}
	// The copy's source is written on device 0: taking out the wait of
	// device 1's stream for it is a race across devices.
	send := p.Stages[2].Stream
	q := p.WithoutOps(func(s, j int, o plan.Op) bool { return o.Kind == plan.OpWait && s == send })
	var re *verify.RaceError
	if err := verify.Verify(q); !errors.As(err, &re) || re.Races[0].FirstName != "produce" || re.Races[0].SecondName != "send" {
		t.Errorf("without the wait: %v, want the race produce → send", err)
	}
}

// TestDeviceAccesses: the verifier refuses a stage that touches another
// device's memory, and a peer copy on a third device's stream.
func TestDeviceAccesses(t *testing.T) {
	p := planOf(t, peerSpec)
	q := *p
	q.Stages = append([]plan.Stage(nil), p.Stages...)
	use := &q.Stages[3]
	use.Reads = append([]plan.Access(nil), use.Reads...)
	use.Reads[0].Buffer = "a" // device 0's, from device 1
	var pe *plan.PlanError
	if err := verify.Verify(&q); !errors.As(err, &pe) || !strings.Contains(err.Error(), "buffer a of device 0") {
		t.Errorf("cross-device read: %v", err)
	}
	q = *p
	q.Devices = 3
	q.Streams = append([]plan.Stream(nil), p.Streams...)
	send := p.Stages[2].Stream
	q.Streams[send].Device = 2
	if err := verify.Verify(&q); !errors.As(err, &pe) || !strings.Contains(err.Error(), "peer copy runs on a stream of its source or destination") {
		t.Errorf("peer copy on device 2: %v", err)
	}
}

// TestCollectiveLowering: a collective becomes one rank per device,
// consecutive in the issue order, on its device's stream; after: names its
// ranks.
func TestCollectiveLowering(t *testing.T) {
	p := planOf(t, reduceSpec)
	var ranks []int
	for k, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		if o.Kind == plan.OpLaunch && p.Stages[o.Stage].Collective != nil {
			ranks = append(ranks, k)
			c := p.Stages[o.Stage].Collective
			if want := contract.RankName("reduce", c.Rank); p.Stages[o.Stage].Name != want || c.Ranks != 2 || c.Op != "all_reduce" || c.Reduce != "sum" {
				t.Errorf("rank %+v named %s", c, p.Stages[o.Stage].Name)
			}
			if d := p.StageDevice(o.Stage); d != c.Rank {
				t.Errorf("rank %d on device %d", c.Rank, d)
			}
		}
	}
	if len(ranks) != 2 || ranks[1] != ranks[0]+1 {
		t.Fatalf("ranks at issue positions %v, want two consecutive", ranks)
	}
}

// rendezvousPlan is, by hand: mark (stream s0, device 0) writes host
// memory before rank 0; rank 1 (stream s1, device 1), then seen, which
// reads it. No event orders them.
func rendezvousPlan() *plan.Plan {
	rank := func(r int) *plan.Collective {
		return &plan.Collective{Group: 0, Op: "all_reduce", Reduce: "sum", Rank: r, Ranks: 2}
	}
	return &plan.Plan{Version: 1, Devices: 2,
		Buffers: []plan.Buffer{{Name: "note", Bytes: 64, Where: dag.WhereHostPinned, Role: dag.RoleTemp},
			{Name: "g0", Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleTemp},
			{Name: "g1", Bytes: 64, Where: dag.WhereDevice, Role: dag.RoleTemp, Device: 1}},
		Stages: []plan.Stage{
			{Name: "mark", Stream: 0, Kernel: "fill", Args: map[string]any{"value": 1.0}, Writes: []plan.Access{{Buffer: "note", Bytes: 64}}},
			{Name: "r/0", Stream: 0, Kernel: "all_reduce", Args: map[string]any{"op": "sum"}, Reads: []plan.Access{{Buffer: "g0", Bytes: 64}}, Writes: []plan.Access{{Buffer: "g0", Bytes: 64}}, Collective: rank(0)},
			{Name: "r/1", Stream: 1, Kernel: "all_reduce", Args: map[string]any{"op": "sum"}, Reads: []plan.Access{{Buffer: "g1", Bytes: 64}}, Writes: []plan.Access{{Buffer: "g1", Bytes: 64}}, Collective: rank(1)},
			{Name: "seen", Stream: 1, Kernel: "checksum", Reads: []plan.Access{{Buffer: "note", Bytes: 64}}, Writes: []plan.Access{{Buffer: "g1", Bytes: 8}}},
		},
		Streams: []plan.Stream{
			{ID: 0, Name: "s0", Ops: []plan.Op{{Kind: plan.OpLaunch, Stage: 0}, {Kind: plan.OpLaunch, Stage: 1}}},
			{ID: 1, Name: "s1", Device: 1, Ops: []plan.Op{{Kind: plan.OpLaunch, Stage: 2}, {Kind: plan.OpLaunch, Stage: 3}}},
		},
		IssueOrder: [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}},
	}
}

// TestRendezvous: a collective orders what precedes any rank on its
// stream before what follows every rank on its own (mark → seen), but
// not a rank itself before what follows another rank.
func TestRendezvous(t *testing.T) {
	p := rendezvousPlan()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(p); err != nil {
		t.Errorf("mark → seen across the rendezvous: %v", err)
	}
	// Seen before rank 1 on its stream: nothing orders mark before it.
	q := rendezvousPlan()
	q.Streams[1].Ops[0].Stage, q.Streams[1].Ops[1].Stage = 3, 2
	q.IssueOrder = [][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}}
	var re *verify.RaceError
	if err := verify.Verify(q); !errors.As(err, &re) || re.Races[0].FirstName != "mark" || re.Races[0].SecondName != "seen" {
		t.Errorf("seen before rank 1: %v, want the race mark → seen", err)
	}
	// A peer copy after rank 1 that reads device 0's reduced gradient is
	// not ordered after rank 0's write: rank 1's completion says nothing of
	// rank 0's.
	src := strings.Replace(reduceSpec, "  - {name: check0,", "  - {name: peek, kernel: copy, reads: [g0], writes: [g1], after: [reduce], device: 1}\n  - {name: check0,", 1)
	p = planOf(t, src)
	peek := -1
	for i, st := range p.Stages {
		if st.Name == "peek" {
			peek = i
		}
	}
	q = p.WithoutOps(func(s, j int, o plan.Op) bool {
		return o.Kind == plan.OpWait && p.Streams[s].Ops[j+1].Kind == plan.OpLaunch && p.Streams[s].Ops[j+1].Stage == peek
	})
	re = nil
	if err := verify.Verify(q); !errors.As(err, &re) {
		t.Fatalf("peek without its waits: %v, want a race with rank 0", err)
	}
	found := false
	for _, r := range re.Races {
		found = found || r.FirstName == "reduce/0" && r.SecondName == "peek"
	}
	if !found {
		t.Errorf("races %v: want reduce/0 → peek", re.Races)
	}
}

// TestDeadlock: ranks not issued consecutively are reported: as a deadlock
// when a rank's stream waits for another rank's completion, else as not
// one group.
func TestDeadlock(t *testing.T) {
	p := planOf(t, reduceSpec)
	r0, r1 := -1, -1
	for k, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		if o.Kind == plan.OpLaunch && p.Stages[o.Stage].Collective != nil {
			if p.Stages[o.Stage].Collective.Rank == 0 {
				r0 = k
			} else {
				r1 = k
			}
		}
	}
	s0, s1 := p.IssueOrder[r0][0], p.IssueOrder[r1][0]
	// Rank 1's stream waits for an event recorded after rank 0.
	q := *p
	q.Streams = append([]plan.Stream(nil), p.Streams...)
	e := q.Events
	q.Events++
	insert := func(s, at int, o plan.Op) {
		ops := append([]plan.Op(nil), q.Streams[s].Ops[:at]...)
		q.Streams[s].Ops = append(append(ops, o), q.Streams[s].Ops[at:]...)
		for k := range q.IssueOrder {
			if q.IssueOrder[k][0] == s && q.IssueOrder[k][1] >= at {
				q.IssueOrder[k][1]++
			}
		}
	}
	q.IssueOrder = append([][2]int(nil), p.IssueOrder[:r0+1]...)
	j0 := p.IssueOrder[r0][1]
	j1 := p.IssueOrder[r1][1]
	q.IssueOrder = append(q.IssueOrder, p.IssueOrder[r0+1:]...)
	insert(s0, j0+1, plan.Op{Kind: plan.OpRecord, Event: e})
	insert(s1, j1, plan.Op{Kind: plan.OpWait, Event: e})
	// Issue: …, rank 0, the record, the wait, rank 1, …
	rest := [][2]int{{s0, j0 + 1}, {s1, j1}}
	var order [][2]int
	for k, so := range q.IssueOrder {
		order = append(order, so)
		if k == r0 {
			order = append(order, rest...)
		}
	}
	q.IssueOrder = order
	var re *verify.RaceError
	if err := verify.Verify(&q); !errors.As(err, &re) || len(re.Deadlocks) != 1 || re.Deadlocks[0].Waits != "reduce/1" || re.Deadlocks[0].For != "reduce/0" {
		t.Fatalf("Verify = %v, want a deadlock of reduce/1 waiting for reduce/0", err)
	}
	// The collective's spec position names it (reduceSpec's line 15).
	if !strings.Contains(re.Error(), "deadlock: collective reduce (test.yaml:15:5): rank reduce/1 waits") || re.Deadlocks[0].Source != "test.yaml:15:5" {
		t.Errorf("report: %s", re.Error())
	}
	// The record alone between the ranks: not one group, no deadlock.
	q2 := q.WithoutOps(func(s, j int, o plan.Op) bool { return o.Kind == plan.OpWait && o.Event == e })
	re = nil
	if err := verify.Verify(q2); !errors.As(err, &re) || len(re.Deadlocks) != 1 || re.Deadlocks[0].Waits != "" || !strings.Contains(re.Deadlocks[0].Between, "record") {
		t.Fatalf("Verify = %v, want ranks not issued as one group", err)
	}
	if !strings.Contains(re.Error(), "collective reduce (test.yaml:15:5): its ranks") {
		t.Errorf("report: %s", re.Error())
	}
}

// TestPlacementBalance: placement puts the two independent branches on
// two devices and copies the input across; the plan verifies, and each
// stage reads only its device's memory.
func TestPlacementBalance(t *testing.T) {
	src := `version: 1
devices: 2
options: {placement: balance}
buffers:
  - {name: x, bytes: 65536, role: input, init: {random: 3}}
  - {name: left, bytes: 65536}
  - {name: right, bytes: 65536}
  - {name: out, bytes: 65536, role: output}
stages:
  - {name: l, kernel: mix, reads: [x], writes: [left], duration_us: 400}
  - {name: r, kernel: mix, reads: [x], writes: [right], duration_us: 400}
  - {name: join, kernel: mix, reads: [left, right], writes: [out], duration_us: 10}
`
	p := planOf(t, src)
	dev := map[string]int{}
	for i, st := range p.Stages {
		dev[st.Name] = p.StageDevice(i)
	}
	if dev["l"] == dev["r"] {
		t.Errorf("l and r both on device %d", dev["l"])
	}
	copies := 0
	for _, st := range p.Stages {
		if strings.Contains(st.Name, "/to") {
			copies++
			if st.Kernel != "copy" {
				t.Errorf("%s runs %s", st.Name, st.Kernel)
			}
		}
	}
	if copies != 2 { // x to r's device, and left or right to join's
		t.Errorf("%d peer copies, want 2", copies)
	}
	if len(p.Notes) == 0 || !strings.Contains(strings.Join(p.Notes, "\n"), "placement balance") {
		t.Errorf("notes %q: want the placement's summary", p.Notes)
	}
}

// TestDevicesStreamCap: max_streams caps each device's streams: eight
// independent chains per device fold onto two streams of each device, no
// stream mixing devices, and the plan verifies.
func TestDevicesStreamCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\ndevices: 2\noptions: {max_streams: 2}\nbuffers:\n")
	for d := 0; d < 2; d++ {
		for c := 0; c < 8; c++ {
			fmt.Fprintf(&b, "  - {name: x%d_%d, bytes: 64, device: %d}\n", d, c, d)
		}
	}
	b.WriteString("stages:\n")
	for d := 0; d < 2; d++ {
		for c := 0; c < 8; c++ {
			fmt.Fprintf(&b, "  - {name: a%d_%d, kernel: fill, args: {value: 1}, writes: [x%d_%d], duration_us: %d}\n", d, c, d, c, 10+c)
			fmt.Fprintf(&b, "  - {name: b%d_%d, kernel: scale, args: {a: 2}, reads: [x%d_%d], writes: [x%d_%d], duration_us: 5}\n", d, c, d, c, d, c)
		}
	}
	p := planOf(t, b.String())
	per := map[int]int{}
	for _, s := range p.Streams {
		per[s.Device]++
	}
	if per[0] != 2 || per[1] != 2 {
		t.Errorf("streams per device %v, want 2 each", per)
	}
}

// TestDevicesPlanFile: plans of one device carry no device field; a plan
// of two reads back as written, and Validate refuses device fields out of
// range and an arena buffer past its device's arena.
func TestDevicesPlanFile(t *testing.T) {
	one, err := Build(loadSpec(t, "version: 1\nbuffers:\n  - {name: x, bytes: 64}\nstages:\n  - {name: a, kernel: fill, args: {value: 1}, writes: [x]}\n  - {name: b, kernel: scale, args: {a: 2}, reads: [x], writes: [x]}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := one.EncodeJSON(&b, true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `"device":`) || strings.Contains(b.String(), `"devices":`) || strings.Contains(b.String(), "per_device") {
		t.Errorf("a plan of one device names devices:\n%s", b.String())
	}
	p := planOf(t, peerSpec)
	b.Reset()
	if err := p.EncodeJSON(&b, false); err != nil {
		t.Fatal(err)
	}
	var q plan.Plan
	if err := q.UnmarshalJSON([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	if err := q.Validate(); err != nil || q.Devices != 2 || q.Streams[p.Stages[2].Stream].Device != 1 || q.Buffers[1].Device != 1 {
		t.Fatalf("read back: %v, %+v", err, q.Streams)
	}
	for name, bad := range map[string]func(*plan.Plan){
		"stream device":    func(x *plan.Plan) { x.Streams[0].Device = 2 },
		"buffer device":    func(x *plan.Plan) { x.Buffers[0].Device = -1 },
		"arena per device": func(x *plan.Plan) { x.Stats.ArenaBytesPerDevice = []int64{x.Stats.ArenaBytesPerDevice[0]} },
		"past its arena":   func(x *plan.Plan) { x.Stats.ArenaBytesPerDevice = []int64{0, 0} },
		"devices":          func(x *plan.Plan) { x.Devices = 65 },
	} {
		x := q
		x.Streams = append([]plan.Stream(nil), q.Streams...)
		x.Buffers = append([]plan.Buffer(nil), q.Buffers...)
		bad(&x)
		var pe *plan.PlanError
		if err := x.Validate(); !errors.As(err, &pe) {
			t.Errorf("%s: Validate = %v, want a *PlanError", name, err)
		}
	}
}

// TestPlacementFixedReads: with placement balance, a stage given a device
// that reads a buffer given another gets a peer copy; the plan verifies.
func TestPlacementFixedReads(t *testing.T) {
	p := planOf(t, `version: 1
devices: 2
options: {placement: balance}
buffers:
  - {name: a, bytes: 4096, device: 0}
  - {name: b, bytes: 4096, device: 1, role: output}
stages:
  - {name: w, kernel: fill, args: {value: 1}, writes: [a]}
  - {name: r, kernel: copy, reads: [a], writes: [b]}
  - {name: r2, kernel: scale, args: {a: 2}, reads: [a], writes: [b], device: 1}
`)
	names := []string{}
	for _, st := range p.Stages {
		names = append(names, st.Name)
	}
	if got := strings.Join(names, " "); got != "w r a/to1 r2" {
		t.Errorf("stages %s, want w r a/to1 r2 (r copies across itself, r2 reads a replica)", got)
	}
}

// TestBudgetPerDevice: memory_budget caps each device's arena, not their
// sum: a budget of the largest device's arena is met as planned, with no
// step, and a lower one is met by every device or refused.
func TestBudgetPerDevice(t *testing.T) {
	s, err := dag.LoadFile("../specs/multigpu/data-parallel-4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(s, Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	per := p.Stats.ArenaBytesPerDevice
	if len(per) != 4 || slices.Max(per) >= p.Stats.ArenaBytes {
		t.Fatalf("arenas %v (sum %d): want 4 devices with arenas", per, p.Stats.ArenaBytes)
	}
	q, err := Build(s, Options{Check: true, MemoryBudget: slices.Max(per)})
	if err != nil {
		t.Fatalf("budget %d bytes, each device's arena at most that: %v", slices.Max(per), err)
	}
	if len(q.Budget) != 0 || !slices.Equal(q.Stats.ArenaBytesPerDevice, per) {
		t.Errorf("budget met as planned: %d steps, arenas %v, want none and %v", len(q.Budget), q.Stats.ArenaBytesPerDevice, per)
	}
	limit := slices.Max(per) * 3 / 4
	q, err = Build(s, Options{Check: true, MemoryBudget: limit})
	var be *BudgetError
	switch {
	case errors.As(err, &be):
		if be.Arena <= limit {
			t.Errorf("refused with a smallest arena of %d bytes, within the budget %d", be.Arena, limit)
		}
	case err != nil:
		t.Fatal(err)
	default:
		for d, a := range q.Stats.ArenaBytesPerDevice {
			if a > limit {
				t.Errorf("device %d's arena %d bytes, over the budget %d", d, a, limit)
			}
		}
	}
}

// TestLowerBoundWaitsDevices: Nimble's lower bound on waits keeps its
// matching within one device whatever pins or strategy the plan has (no
// stream chains two devices), so it never claims fewer waits than a
// crossing between devices needs: here a (device 0) → b → c (device 1),
// c pinned, takes one wait, and the bound is 1 (an unconstrained matching
// of both edges said 0).
func TestLowerBoundWaitsDevices(t *testing.T) {
	src := `version: 1
devices: 2
buffers:
  - {name: x, bytes: 4096, device: 0}
  - {name: y, bytes: 4096, device: 1}
  - {name: z, bytes: 4096, device: 1, role: output}
stages:
  - {name: a, kernel: fill, args: {value: 1.0}, writes: [x]}
  - {name: b, kernel: copy, reads: [x], writes: [y]}
  - {name: c, kernel: copy, reads: [y], writes: [z]%s}
`
	for _, c := range []struct {
		what, pin string
		o         Options
	}{{"unpinned", "", Options{}}, {"c pinned", ", stream: s", Options{}}, {"naive", "", Options{Strategy: StrategyNaive}}} {
		p := build(t, loadSpec(t, fmt.Sprintf(src, c.pin)), c.o)
		if p.Stats.LowerBoundWaits != 1 || p.Stats.Waits < p.Stats.LowerBoundWaits {
			t.Errorf("%s: lower bound %d, waits %d; want a bound of 1", c.what, p.Stats.LowerBoundWaits, p.Stats.Waits)
		}
	}
}

// TestIdleDevicesNote: a spec of devices: N whose plan runs nothing on
// some of them has a note naming those devices and the ways out; a plan
// that runs something on every device has none.
func TestIdleDevicesNote(t *testing.T) {
	const idle = "the spec has devices: "
	for _, c := range []struct {
		what, src, want string
	}{
		{"no device named", "version: 1\ndevices: 2\nstages:\n  - {name: a, kernel: spin, duration_us: 5}\n",
			"the spec has devices: 2, but device 1 runs nothing, and a CUDA run still opens a context for each plan device (plan device d on GPU d unless --devices maps it): name it on stages"},
		{"one of four", "version: 1\ndevices: 4\nstages:\n  - {name: a, kernel: spin, duration_us: 5, device: 1}\n",
			"but devices 0, 2, 3 run nothing"},
		{"placed", "version: 1\ndevices: 2\noptions: {placement: balance}\nstages:\n  - {name: a, kernel: spin, duration_us: 5}\n",
			"placement put nothing there"},
		{"every device", reduceSpec, ""},
		{"one device", "version: 1\nstages:\n  - {name: a, kernel: spin, duration_us: 5}\n", ""},
	} {
		p := build(t, loadSpec(t, c.src), Options{})
		var got string
		for _, n := range p.Notes {
			if strings.HasPrefix(n, idle) {
				got = n
			}
		}
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s: note %q, want %q", c.what, got, c.want)
		}
	}
}

// TestBudgetAutoNoteDevices: memory_budget auto's note on a plan of
// several devices names the device whose arena it speaks of (the aim
// caps each device's arena; the plan's arena is their sum).
func TestBudgetAutoNoteDevices(t *testing.T) {
	s, err := dag.LoadFile("../specs/multigpu/nasnet-split.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := build(t, s, Options{MemoryBudget: BudgetAuto, MaxStreams: 8})
	per := p.Stats.ArenaBytesPerDevice
	want := fmt.Sprintf("memory_budget auto: the arena of device %d (the largest; the aim caps each device's) is %s bytes", slices.Index(per, slices.Max(per)), num.Thousands(int(slices.Max(per))))
	var got string
	for _, n := range p.Notes {
		if strings.HasPrefix(n, "memory_budget auto") {
			got = n
		}
	}
	if !strings.HasPrefix(got, want) || !strings.Contains(got, "1.1× the largest device's live bound") {
		t.Errorf("note %q, want it to start %q", got, want)
	}
}
