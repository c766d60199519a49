package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
)

// devicesOnly is a backend of n devices (Devicer) and no other optional
// interface.
type devicesOnly struct {
	executor.Backend
	d *onDevices
}

func (d devicesOnly) Devices() int { return d.d.Devices() }
func (d devicesOnly) NewStreamOn(dev int, kind string) (executor.Stream, error) {
	return d.d.NewStreamOn(dev, kind)
}

// noLibrary is a Collectiver whose library cannot be loaded.
type noLibrary struct{ devicesOnly }

var errNoLib = errors.New("libnccl.so.2: not found")

func (noLibrary) CollectiveLibrary() (string, error) { return "", errNoLib }

// TestDevicesCollectiveNeedsCollectiver: a plan with a collective is
// refused up front by a backend that is no Collectiver, or whose
// collective library cannot be loaded (the library's error wrapped).
func TestDevicesCollectiveNeedsCollectiver(t *testing.T) {
	p := planYAML(t, `version: 1
devices: 2
buffers:
  - {name: g0, dtype: f32, shape: [1024], device: 0, init: {fill: 1.0}}
  - {name: g1, dtype: f32, shape: [1024], device: 1, init: {fill: 2.0}}
  - {name: sum0, bytes: 8, role: output, device: 0}
stages:
  - {name: reduce, kernel: all_reduce, args: {op: sum}, reads: [g0, g1], writes: [g0, g1]}
  - {name: check0, kernel: checksum, reads: [g0], writes: [sum0]}
`, planner.Options{})
	if err := executor.CheckPlan(p); err != nil {
		t.Fatalf("CheckPlan: %v (the ranks' form: one read, one write)", err)
	}
	d := newOnDevices(2)
	defer d.Close()
	_, err := executor.Run(context.Background(), p, devicesOnly{d.Backend, d}, executor.Options{})
	if !errors.Is(err, executor.ErrNoCollectives) {
		t.Errorf("no Collectiver: error %v, want ErrNoCollectives", err)
	}
	_, err = executor.Run(context.Background(), p, noLibrary{devicesOnly{d.Backend, d}}, executor.Options{})
	if !errors.Is(err, errNoLib) || !strings.Contains(err.Error(), "collective stages need a collective library") {
		t.Errorf("no library: error %v, want the library's error wrapped", err)
	}
}

// TestDevicesSyncEachCollective: with sync-each, a collective's ranks are
// issued together before the executor synchronizes (synchronizing after
// rank 0 would wait for rank 1, not yet issued): the run gives the outputs
// of a run without sync-each.
func TestDevicesSyncEachCollective(t *testing.T) {
	s, err := dag.LoadFile("../specs/multigpu/data-parallel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := runOn(t, quickSim(3), p, executor.Options{Iterations: 2})
	got := runOn(t, quickSim(3), p, executor.Options{Iterations: 2, SyncEach: true})
	for k, v := range want {
		if got[k] != v {
			t.Errorf("output %s: %s with sync-each, %s without", k, got[k], v)
		}
	}
}

// TestAllReduceDeviceOrder: an all-reduce adds its ranks in device order
// whatever the order of its reads, with values whose float32 sum depends on
// the order: (1e8 + 1) − 1e8 is 0 (1e8 + 1 rounds to 1e8), where the
// reads' order, (−1e8 + 1e8) + 1, would give 1.
func TestAllReduceDeviceOrder(t *testing.T) {
	p := planYAML(t, `version: 1
devices: 3
buffers:
  - {name: g0, dtype: f32, shape: [16], device: 0, role: output, init: {fill: 1e8}}
  - {name: g1, dtype: f32, shape: [16], device: 1, role: output, init: {fill: 1.0}}
  - {name: g2, dtype: f32, shape: [16], device: 2, role: output, init: {fill: -1e8}}
stages:
  - {name: reduce, kernel: all_reduce, args: {op: sum}, reads: [g2, g0, g1], writes: [g2, g0, g1]}
`, planner.Options{})
	for i, st := range p.Stages {
		if c := st.Collective; c != nil && p.StageDevice(i) != c.Rank {
			t.Errorf("rank %d (%s) on device %d: ranks are numbered in device order", c.Rank, st.Name, p.StageDevice(i))
		}
	}
	want := executor.Checksum(floats(float32(float32(1e8)+1)-1e8, 16))
	if want == executor.Checksum(floats(1, 16)) {
		t.Fatal("the test's values do not depend on the order")
	}
	for seed := range int64(3) {
		got := runOn(t, quickSim(seed), p, executor.Options{})
		for _, b := range []string{"g0", "g1", "g2"} {
			if got[b] != want {
				t.Errorf("seed %d: %s = %s, want the device-order sum's %s", seed, b, got[b], want)
			}
		}
	}
}

// TestPlacementKeepsOutputs: the same spec placed on 1, 2 and 4 devices
// gives the same outputs on the simulator, though placement inserts peer
// copies before some stages: mix seeds by the stage's index in the spec,
// not in the plan.
func TestPlacementKeepsOutputs(t *testing.T) {
	const spec = `version: 1
devices: %d
options: {placement: balance}
buffers:
  - {name: x, bytes: 4096, role: input, init: {random: 3}}
  - {name: a, bytes: 4096}
  - {name: b, bytes: 4096}
  - {name: c, bytes: 4096}
  - {name: d, bytes: 4096}
  - {name: out, bytes: 4096, role: output}
stages:
  - {name: l, kernel: mix, reads: [x], writes: [a], duration_us: 400}
  - {name: r, kernel: mix, reads: [x], writes: [b], duration_us: 400}
  - {name: m, kernel: mix, reads: [x], writes: [c], duration_us: 400}
  - {name: n, kernel: mix, reads: [x], writes: [d], duration_us: 400}
  - {name: j1, kernel: mix, reads: [a, b], writes: [a], duration_us: 10}
  - {name: j2, kernel: mix, reads: [c, d], writes: [c], duration_us: 10}
  - {name: join, kernel: mix, reads: [a, c], writes: [out], duration_us: 10}
`
	var want map[string]string
	for _, n := range []int{1, 2, 4} {
		p := planYAML(t, fmt.Sprintf(spec, n), planner.Options{})
		if n > 1 && len(p.Stages) == 7 {
			t.Fatalf("%d devices: no peer copy placed, the test tests nothing", n)
		}
		got := runOn(t, quickSim(int64(n)), p, executor.Options{Iterations: 2})
		// The plan file keeps the seeds.
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var q plan.Plan
		if err := json.Unmarshal(b, &q); err != nil {
			t.Fatal(err)
		}
		if again := runOn(t, quickSim(1), &q, executor.Options{Iterations: 2}); again["out"] != got["out"] {
			t.Errorf("%d devices: out = %s from the plan file, %s from the plan", n, again["out"], got["out"])
		}
		if want == nil {
			want = got
			continue
		}
		if got["out"] != want["out"] {
			t.Errorf("%d devices (%d stages): out = %s, one device %s", n, len(p.Stages), got["out"], want["out"])
		}
	}
}
