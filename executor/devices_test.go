package executor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
)

// onDevices wraps the simulator as a backend of n devices that records on
// which device each stream and buffer was made.
type onDevices struct {
	*sim.Backend
	n       int
	mu      sync.Mutex
	streams map[int]int    // device → streams made there
	bufs    map[string]int // buffer name → device
	bytes   map[string]int64
}

func newOnDevices(n int) *onDevices {
	return &onDevices{Backend: sim.New(sim.Options{Seed: 5}), n: n, streams: map[int]int{}, bufs: map[string]int{}, bytes: map[string]int64{}}
}

func (d *onDevices) Devices() int { return d.n }

func (d *onDevices) NewStreamOn(dev int, kind string) (executor.Stream, error) {
	if dev < 0 || dev >= d.n || kind != "" {
		return nil, errors.New("bad device or kind")
	}
	d.mu.Lock()
	d.streams[dev]++
	d.mu.Unlock()
	return d.Backend.NewStreamOn(dev, kind)
}

func (d *onDevices) NewStream() (executor.Stream, error) {
	d.mu.Lock()
	d.streams[0]++
	d.mu.Unlock()
	return d.Backend.NewStream()
}

func (d *onDevices) Alloc(b executor.BufferDesc) (executor.Buffer, error) {
	d.mu.Lock()
	d.bufs[b.Name], d.bytes[b.Name] = b.Device, b.Bytes
	d.mu.Unlock()
	return d.Backend.Alloc(b)
}

// plain hides every optional interface of a backend.
type plain struct{ executor.Backend }

// twoDevices returns chainSpec's plan with stream B and its buffer b1
// on device 1 (the arena offsets as planned for one device), and the
// plan for one device. The buffers both devices touch (in, read on both;
// b2, read by join on device 0) are host_pinned in both plans: a kernel
// touches only its own device's memory and host memory.
func twoDevices(t *testing.T, arena bool) (two, one *plan.Plan) {
	o := planner.Options{}
	if !arena {
		o.Arena = dag.ArenaOff
	}
	one = planYAML(t, chainSpec, o)
	one.Buffers = append([]plan.Buffer(nil), one.Buffers...)
	for i := range one.Buffers {
		if n := one.Buffers[i].Name; n == "in" || n == "b2" {
			one.Buffers[i].Where, one.Buffers[i].ArenaOffset = dag.WhereHostPinned, nil
		}
	}
	q := *one
	q.Devices = 2
	q.Streams = append([]plan.Stream(nil), one.Streams...)
	q.Buffers = append([]plan.Buffer(nil), one.Buffers...)
	for i := range q.Streams {
		if q.Streams[i].Name == "B" {
			q.Streams[i].Device = 1
		}
	}
	for i := range q.Buffers {
		if q.Buffers[i].Name == "b1" {
			q.Buffers[i].Device = 1
		}
	}
	if arena {
		var per [2]int64
		for _, b := range q.Buffers {
			if b.ArenaOffset != nil {
				per[b.Device] = max(per[b.Device], *b.ArenaOffset+b.Bytes)
			}
		}
		q.Stats.ArenaBytesPerDevice = per[:]
	}
	return &q, one
}

// TestDevicesStreamsAndMemory: a plan of two devices runs its streams and
// buffers on their devices (stream B and buffers b1, b2 on device 1; one
// arena per device, each as large as its buffers need) and gives the
// checksums of the same plan on one device.
func TestDevicesStreamsAndMemory(t *testing.T) {
	for _, arena := range []bool{false, true} {
		two, one := twoDevices(t, arena)
		want := runOn(t, quickSim(5), one, executor.Options{Iterations: 3})
		b := newOnDevices(2)
		got := runOn(t, b, two, executor.Options{Iterations: 3})
		for k, v := range want {
			if got[k] != v {
				t.Errorf("arena %v: output %s: %s on two devices, %s on one", arena, k, got[k], v)
			}
		}
		if b.streams[1] != 1 {
			t.Errorf("arena %v: %d streams made on device 1, want 1 (stream B)", arena, b.streams[1])
		}
		if b.streams[0] == 0 {
			t.Errorf("arena %v: no stream made on device 0", arena)
		}
		if !arena {
			for name, dev := range b.bufs {
				if want := map[bool]int{true: 1, false: 0}[name == "b1"]; dev != want {
					t.Errorf("buffer %s allocated on device %d, want %d", name, dev, want)
				}
			}
			continue
		}
		if b.bufs["arena@1"] != 1 || b.bytes["arena@1"] != two.Stats.ArenaBytesPerDevice[1] {
			t.Errorf("device 1's arena: device %d, %d bytes (allocs %v); want device 1, %d bytes", b.bufs["arena@1"], b.bytes["arena@1"], b.bufs, two.Stats.ArenaBytesPerDevice[1])
		}
		if _, ok := b.bufs["arena@0"]; !ok || b.bufs["arena@0"] != 0 {
			t.Errorf("no arena on device 0: allocs %v", b.bufs)
		}
	}
}

// TestDevicesRefused: a plan of two devices is refused up front with
// dynamic allocation and on a backend that drives fewer devices (graph
// emulation over one included).
func TestDevicesRefused(t *testing.T) {
	two, _ := twoDevices(t, false)
	for _, c := range []struct {
		name string
		b    executor.Backend
		o    executor.Options
		want string
		is   error
	}{
		{"graph, no Devicer", executor.EmulateGraphs(plain{quickSim(1)}), executor.Options{Mode: executor.ModeGraph}, "the plan runs on 2 devices; this backend drives 1", executor.ErrNoDevices},
		{"dynamic", newOnDevices(2), executor.Options{Alloc: executor.AllocDynamic}, "--alloc dynamic: the plan runs on 2 devices", nil},
		{"no Devicer", plain{quickSim(1)}, executor.Options{}, "the plan runs on 2 devices; this backend drives one", executor.ErrNoDevices},
		{"one device", newOnDevices(1), executor.Options{}, "the plan runs on 2 devices; this backend drives 1", executor.ErrNoDevices},
	} {
		_, err := executor.Run(context.Background(), two, c.b, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// peerSpec is a peer copy: device 0 produces, device 1 copies and reads.
const peerSpec = `version: 1
devices: 2
buffers:
  - {name: a, bytes: 4096, device: 0}
  - {name: b, bytes: 4096, device: 1}
  - {name: out, bytes: 8, role: output, device: 1}
stages:
  - {name: produce, kernel: fill, args: {value: 1.0}, writes: [a]}
  - {name: send, kernel: copy, reads: [a], writes: [b]}
  - {name: use, kernel: checksum, reads: [b], writes: [out]}
`

// TestDevicesPeerCopySpec: the peer copy spec runs with its streams and
// buffers on their devices and gives the checksums of the same stages on
// one device.
func TestDevicesPeerCopySpec(t *testing.T) {
	two := planYAML(t, peerSpec, planner.Options{})
	one := planYAML(t, strings.NewReplacer("devices: 2\n", "", ", device: 1", "", ", device: 0", "").Replace(peerSpec), planner.Options{})
	if two.DeviceCount() != 2 || one.DeviceCount() != 1 {
		t.Fatalf("devices %d and %d, want 2 and 1", two.DeviceCount(), one.DeviceCount())
	}
	want := runOn(t, quickSim(2), one, executor.Options{Iterations: 2})
	b := newOnDevices(2)
	got := runOn(t, b, two, executor.Options{Iterations: 2})
	if got["out"] != want["out"] {
		t.Errorf("out: %s on two devices, %s on one", got["out"], want["out"])
	}
	if b.streams[1] == 0 {
		t.Errorf("no stream made on device 1 (the copy's and the reader's)")
	}
	for name, dev := range b.bufs {
		if name == "b" || name == "out" || name == "arena@1" {
			if dev != 1 {
				t.Errorf("buffer %s on device %d, want 1 (allocs %v)", name, dev, b.bufs)
			}
		} else if dev != 0 {
			t.Errorf("buffer %s on device %d, want 0 (allocs %v)", name, dev, b.bufs)
		}
	}
}

// TestDevicesGraphMode: graph mode captures an iteration of a plan of
// several devices as one graph (a fork from the origin stream into every
// device's streams and a join back) and gives stream mode's outputs: the
// peer copy, the chains on two devices and the data-parallel step with its
// all-reduce, over 1 and 3 iterations.
func TestDevicesGraphMode(t *testing.T) {
	two, _ := twoDevices(t, true)
	dp, err := dag.LoadFile("../specs/multigpu/data-parallel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dpPlan, err := planner.Build(dp, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    *plan.Plan
	}{{"peer copy", planYAML(t, peerSpec, planner.Options{})}, {"chains", two}, {"data-parallel", dpPlan}} {
		for _, iters := range []int{1, 3} {
			want := runOn(t, quickSim(4), c.p, executor.Options{Iterations: iters})
			got := runOn(t, executor.EmulateGraphs(quickSim(4)), c.p, executor.Options{Iterations: iters, Mode: executor.ModeGraph})
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s, %d iterations: output %s: %s in graph mode, %s in stream mode", c.name, iters, k, got[k], v)
				}
			}
		}
	}
}
