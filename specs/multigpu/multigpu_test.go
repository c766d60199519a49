package multigpu_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/specs/multigpu"
	"github.com/dagrun/dagrun/verify"
)

func planFile(t *testing.T, file string) *plan.Plan {
	t.Helper()
	s, err := dag.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Build(s, planner.Options{Check: s.Sync != dag.SyncManual && s.Options.Arena != dag.ArenaStreamOrder})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, p *plan.Plan, seed int64, iters int) (map[string]string, error) {
	t.Helper()
	b := sim.New(sim.Options{Seed: seed, MaxDelay: 2000})
	res, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: iters})
	if cerr := b.Close(); cerr != nil {
		t.Fatalf("Close: %v", cerr)
	}
	out := map[string]string{}
	if res != nil {
		for _, o := range res.Outputs {
			out[o.Name] = o.Checksum
		}
	}
	return out, err
}

// oneDevice is p with every stream and buffer on device 0 and no arena:
// the same stages and synchronization on one device, the reference of a
// plan of several devices without collectives.
func oneDevice(p *plan.Plan) *plan.Plan {
	q := *p
	q.Devices = 0
	q.Streams = append([]plan.Stream(nil), p.Streams...)
	for i := range q.Streams {
		q.Streams[i].Device = 0
	}
	q.Buffers = append([]plan.Buffer(nil), p.Buffers...)
	for i := range q.Buffers {
		q.Buffers[i].Device, q.Buffers[i].ArenaOffset = 0, nil
	}
	q.Stats.ArenaBytes, q.Stats.ArenaBytesPerDevice = 0, nil
	return &q
}

func devicesUsed(p *plan.Plan) map[int]int {
	m := map[int]int{}
	for i := range p.Stages {
		m[p.StageDevice(i)]++
	}
	return m
}

// TestPatterns: the fixed specs verify and run clean on the simulator
// under every seed with the one-device reference's outputs; the racy ones
// are reported by the verifier and by the detector under every seed.
func TestPatterns(t *testing.T) {
	for _, pair := range multigpu.Patterns {
		t.Run(strings.TrimSuffix(pair[0], ".yaml"), func(t *testing.T) {
			fixed, racy := planFile(t, pair[0]), planFile(t, pair[1])
			if len(devicesUsed(fixed)) < 2 {
				t.Fatalf("fixed plan uses devices %v", devicesUsed(fixed))
			}
			if err := verify.Verify(fixed); err != nil {
				t.Fatalf("verifier on the fixed spec: %v", err)
			}
			var pre *verify.RaceError
			if err := verify.Verify(racy); !errors.As(err, &pre) {
				t.Fatalf("verifier on the racy spec: %v, want a race", err)
			}
			want, err := run(t, oneDevice(fixed), 1, 2)
			if err != nil {
				t.Fatalf("one-device reference: %v", err)
			}
			for seed := range int64(8) {
				got, err := run(t, fixed, seed, 2)
				if err != nil {
					t.Fatalf("seed %d: fixed: %v", seed, err)
				}
				for name, c := range want {
					if got[name] != c {
						t.Errorf("seed %d: %s = %s, one device %s", seed, name, got[name], c)
					}
				}
				_, err = run(t, racy, seed, 2)
				var re *executor.RaceError
				if !errors.As(err, &re) {
					t.Fatalf("seed %d: racy: %v, want the detector's report", seed, err)
				}
			}
		})
	}
}

// stepWeights is every weight after iters steps on n devices, in float32
// as the built-ins compute it: act = w + (d+1), grad = act × 0.25, the
// all-reduce's sum in device order, w = w − 0.1 × sum.
func stepWeights(n, iters int) float32 {
	w := float32(1)
	for range iters {
		var g float32
		for d := 0; d < n; d++ {
			act := float32(w + float32(d+1))
			g += float32(0.25 * act)
		}
		w = float32(float32(-0.1*g) + w)
	}
	return w
}

func filled(v float32, words int) []byte {
	b := make([]byte, 4*words)
	for i := 0; i < len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
	}
	return b
}

// TestDataParallel: on 2 and 4 devices, the step verifies, and after
// three iterations on the simulator every device holds the weights a
// float32 computation of the step gives (the all-reduce sums for real).
func TestDataParallel(t *testing.T) {
	for _, c := range []struct {
		file string
		n    int
	}{{"data-parallel.yaml", 2}, {"data-parallel-4.yaml", 4}} {
		p := planFile(t, c.file)
		if got := len(devicesUsed(p)); got != c.n {
			t.Fatalf("%s: stages on %d devices, want %d", c.file, got, c.n)
		}
		if err := verify.Verify(p); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		want := executor.Checksum(filled(stepWeights(c.n, 3), 65536))
		for seed := range int64(4) {
			out, err := run(t, p, seed, 3)
			if err != nil {
				t.Fatalf("%s seed %d: %v", c.file, seed, err)
			}
			for d := 0; d < c.n; d++ {
				if w := out["w"+string(rune('0'+d))]; w != want {
					t.Errorf("%s seed %d: w%d = %s, want %s (w = %v)", c.file, seed, d, w, want, stepWeights(c.n, 3))
				}
			}
		}
	}
}

// TestDataParallelDeadlock: the step's ranks issued apart, rank 1's stream
// waiting for an event recorded after rank 0: the verifier reports the
// deadlock, and so does the simulator, which would otherwise hang.
func TestDataParallelDeadlock(t *testing.T) {
	p := planFile(t, "data-parallel.yaml")
	p = p.WithoutOps(func(s, j int, o plan.Op) bool { return o.Kind == plan.OpWait && o.Lag > 0 })
	p.Iteration = nil
	q := splitRanks(t, p)
	var re *verify.RaceError
	if err := verify.Verify(q); !errors.As(err, &re) || len(re.Deadlocks) != 1 || re.Deadlocks[0].Waits != "reduce/1" {
		t.Fatalf("verifier: %v, want the deadlock of reduce/1", err)
	}
	_, err := run(t, q, 1, 1)
	if err == nil || !strings.Contains(err.Error(), "deadlock in a collective") || !strings.Contains(err.Error(), "reduce/0") {
		t.Fatalf("simulator: %v, want the deadlock", err)
	}
}

// splitRanks returns p with an event recorded after rank 0 of its
// collective and waited for before rank 1, issued in between.
func splitRanks(t *testing.T, p *plan.Plan) *plan.Plan {
	t.Helper()
	q := *p
	q.Streams = append([]plan.Stream(nil), p.Streams...)
	var at [2][2]int // per rank: stream, op index
	for s, str := range p.Streams {
		for j, o := range str.Ops {
			if o.Kind == plan.OpLaunch && p.Stages[o.Stage].Collective != nil {
				at[p.Stages[o.Stage].Collective.Rank] = [2]int{s, j}
			}
		}
	}
	e := q.Events
	q.Events++
	ins := func(s, j int, o plan.Op) {
		ops := append([]plan.Op(nil), q.Streams[s].Ops[:j]...)
		q.Streams[s].Ops = append(append(ops, o), q.Streams[s].Ops[j:]...)
	}
	ins(at[0][0], at[0][1]+1, plan.Op{Kind: plan.OpRecord, Event: e})
	ins(at[1][0], at[1][1], plan.Op{Kind: plan.OpWait, Event: e})
	q.IssueOrder = nil
	for _, so := range p.IssueOrder {
		s, j := so[0], so[1]
		if (s == at[0][0] && j > at[0][1]) || (s == at[1][0] && j >= at[1][1]) {
			j++
		}
		q.IssueOrder = append(q.IssueOrder, [2]int{s, j})
		if s == at[0][0] && so[1] == at[0][1] {
			q.IssueOrder = append(q.IssueOrder, [2]int{s, at[0][1] + 1}, [2]int{at[1][0], at[1][1]})
		}
	}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	return &q
}

// TestNasnetSplit: the planner places nasnetalarge on both devices with
// peer copies; the plan verifies and runs on the simulator with the
// outputs of the same plan on one device; without one of its waits across
// devices the verifier and the detector report a race.
func TestNasnetSplit(t *testing.T) {
	p := planFile(t, multigpu.NasnetSplitFile)
	used := devicesUsed(p)
	if len(used) != 2 || used[0] < len(p.Stages)/4 || used[1] < len(p.Stages)/4 {
		t.Fatalf("stages per device %v of %d", used, len(p.Stages))
	}
	if err := verify.Verify(p); err != nil {
		t.Fatal(err)
	}
	want, err := run(t, oneDevice(p), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := run(t, p, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("outputs %d, one device %d", len(got), len(want))
	}
	for name, c := range want {
		if got[name] != c {
			t.Errorf("%s = %s, one device %s", name, got[name], c)
		}
	}
	// Take out the first wait of a stream of device 1 for a record on
	// device 0.
	recDev := map[int]int{}
	for _, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == plan.OpRecord {
				recDev[o.Event] = str.Device
			}
		}
	}
	dropped := false
	q := p.WithoutOps(func(s, j int, o plan.Op) bool {
		if !dropped && o.Kind == plan.OpWait && o.Lag == 0 && p.Streams[s].Device == 1 && recDev[o.Event] == 0 {
			dropped = true
			return true
		}
		return false
	})
	if !dropped {
		t.Fatal("no wait across devices")
	}
	var pre *verify.RaceError
	if err := verify.Verify(q); !errors.As(err, &pre) {
		t.Fatalf("verifier without a wait across devices: %v", err)
	}
	_, err = run(t, q, 3, 1)
	var re *executor.RaceError
	if !errors.As(err, &re) {
		t.Fatalf("detector without a wait across devices: %v", err)
	}
}

// TestGenerated: nasnet-split.yaml is NasnetSplit's output.
func TestGenerated(t *testing.T) {
	want, err := multigpu.NasnetSplit("../models/nasnetalarge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(multigpu.NasnetSplitFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not NasnetSplit's output: run go generate in specs/multigpu", multigpu.NasnetSplitFile)
	}
}
