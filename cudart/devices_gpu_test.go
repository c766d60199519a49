//go:build cuda

package cudart

// GPU tests of several devices that one GPU can run: a plan device that the
// driver does not report, two plan devices in two contexts of one GPU
// (separateContexts: events recorded in one context and waited on in the
// other, copies between contexts with cuMemcpyPeerAsync, kernels in the
// second context), two plan devices sharing one primary context, and NCCL
// with one rank. What needs two GPUs (NVLink peer copies, NCCL with two
// ranks, two devices' speed) is listed in docs/devices.md.

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
)

// TestDevicesBeyondCount: a plan device on an ordinal the driver does not
// report fails at New, naming the device count (cuDeviceGetCount).
func TestDevicesBeyondCount(t *testing.T) {
	info, err := ProbeInfo()
	if errors.Is(err, ErrNotSupported) || errors.Is(err, ErrNoDevice) {
		t.Skip(err)
	}
	must(t, err)
	o := testOptions(t)
	o.Devices = []int{0, info.Devices}
	b, err := newBackend(o)
	if err == nil {
		b.Close()
		t.Fatalf("New with Devices %v on a machine of %d devices: no error", o.Devices, info.Devices)
	}
	figure(t, "Devices %v: %v", o.Devices, err)
	want := fmt.Sprintf("device 1 is ordinal %d, but the driver reports %d CUDA device(s) (cuDeviceGetCount", info.Devices, info.Devices)
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), want) {
		t.Errorf("error %q: want one wrapping ErrNoDevice that says %q", err, want)
	}
}

func fillDesc(name string, v float64, a executor.Arg) *executor.LaunchDesc {
	return &executor.LaunchDesc{Name: name, Kernel: "fill", Args: map[string]any{"value": v}, Writes: []executor.Arg{a}}
}

func spinDesc(us float64) *executor.LaunchDesc {
	return &executor.LaunchDesc{Name: "slow", Kernel: "spin", Args: map[string]any{"us": us}}
}

func copyDesc(name string, src, dst executor.Arg) *executor.LaunchDesc {
	return &executor.LaunchDesc{Name: name, Kernel: "copy", Reads: []executor.Arg{src}, Writes: []executor.Arg{dst}}
}

// allWords reports whether every float32 word of data is v, and the first
// word that is not.
func allWords(data []byte, v float32) (bool, float32) {
	for i := 0; i+4 <= len(data); i += 4 {
		if x := math.Float32frombits(le.Uint32(data[i:])); x != v {
			return false, x
		}
	}
	return true, v
}

// crossDevice runs the seed's pattern across two plan devices: a slow
// writer of A on device 0, then a copy of A into B on device 1 (a peer
// copy) and a kernel doubling B there, then device 0 overwrites A. With the two waits (device 1 after the
// writer: RAW; device 0 after the copy: WAR) B holds the writer's value in
// every trial; without them most trials copy too early. It returns the
// wrong trials of 40, for each variant.
func crossDevice(t *testing.T, b *backend) (racy, synced int) {
	const n = 1 << 20 // 4 MiB of float32
	a, err := b.Alloc(executor.BufferDesc{Name: "A", Bytes: 4 * n, Where: contract.WhereDevice, Device: 0})
	must(t, err)
	bb, err := b.Alloc(executor.BufferDesc{Name: "B", Bytes: 4 * n, Where: contract.WhereDevice, Device: 1})
	must(t, err)
	A, B := arg(a.(*buffer), 0, 4*n), arg(bb.(*buffer), 0, 4*n)
	s0, err := b.NewStreamOn(0, "")
	must(t, err)
	s1, err := b.NewStreamOn(1, "")
	must(t, err)
	raw, err := b.NewEvent()
	must(t, err)
	war, err := b.NewEvent()
	must(t, err)
	for _, sync := range []bool{false, true} {
		wrong := 0
		for trial := range 40 {
			v := float32(trial + 1)
			must(t, b.Launch(s1, fillDesc("clear B", 0, B))) // a memset in device 1's context
			must(t, b.Launch(s0, spinDesc(300)))
			must(t, b.Launch(s0, fillDesc("write A", float64(v), A)))
			if sync {
				must(t, b.Record(raw, s0))
				must(t, b.Wait(s1, raw))
			}
			must(t, b.Launch(s1, copyDesc("A to B", A, B)))
			must(t, b.Launch(s1, &executor.LaunchDesc{Name: "double B", Kernel: "scale", Args: map[string]any{"a": 2.0}, Reads: []executor.Arg{B}, Writes: []executor.Arg{B}})) // a kernel in device 1's context
			if sync {
				must(t, b.Record(war, s1))
				must(t, b.Wait(s0, war))
			}
			must(t, b.Launch(s0, fillDesc("overwrite A", -1, A)))
			must(t, b.Synchronize())
			got, err := b.Read(bb)
			must(t, err)
			if ok, _ := allWords(got, 2*v); !ok {
				wrong++
			}
		}
		if sync {
			synced = wrong
		} else {
			racy = wrong
		}
	}
	must(t, b.DestroyEvent(raw))
	must(t, b.DestroyEvent(war))
	must(t, b.DestroyStream(s0))
	must(t, b.DestroyStream(s1))
	must(t, b.Free(a))
	must(t, b.Free(bb))
	return racy, synced
}

// TestDevicesTwoContexts: two plan devices in two contexts of one GPU
// (the second created for the test): a peer copy between them
// (cuMemcpyPeerAsync), record/wait pairs across the contexts in both
// directions, a kernel in the second context, and the cleanup of both.
func TestDevicesTwoContexts(t *testing.T) {
	o := testOptions(t)
	o.Devices, o.separateContexts = []int{0, 0}, true
	b := newTB(t, o)
	if got := b.Devices(); got != 2 {
		t.Fatalf("Devices() = %d, want 2", got)
	}
	if len(b.ctxs) != 2 || b.ctxs[0].ctx == b.ctxs[1].ctx {
		t.Fatalf("want two distinct contexts, got %d", len(b.ctxs))
	}
	racy, synced := crossDevice(t, b)
	figure(t, "two contexts on ordinal 0, peer copy across them: without waits %d of 40 trials wrong, with waits %d of 40", racy, synced)
	if synced != 0 {
		t.Errorf("with the waits: %d of 40 trials wrong, want 0", synced)
	}
	if racy < 20 {
		t.Errorf("without the waits: only %d of 40 trials wrong, want most (the copy runs before the slow writer)", racy)
	}
	if l := b.Leaks(); len(l) > 0 {
		t.Errorf("leaks: %v", l)
	}
	must(t, b.Close())
}

// TestDevicesSharedOrdinal: two plan devices on one ordinal share its
// primary context: the same pattern, with the peer copy issued as
// cuMemcpyPeerAsync within one context.
func TestDevicesSharedOrdinal(t *testing.T) {
	o := testOptions(t)
	o.Devices = []int{0, 0}
	b := newTB(t, o)
	if len(b.ctxs) != 1 || b.Devices() != 2 {
		t.Fatalf("contexts %d, devices %d: want 1 and 2", len(b.ctxs), b.Devices())
	}
	if !b.PeerAccess(0, 1) {
		t.Errorf("PeerAccess(0, 1) = false for two plan devices on one ordinal")
	}
	racy, synced := crossDevice(t, b)
	figure(t, "two plan devices on ordinal 0 (one context): without waits %d of 40 trials wrong, with waits %d of 40", racy, synced)
	if synced != 0 {
		t.Errorf("with the waits: %d of 40 trials wrong, want 0", synced)
	}
	must(t, b.Close())
}

// TestPeerAccessReport prints what cuDeviceCanAccessPeer says for every
// pair of ordinals of the machine (none on one GPU).
func TestPeerAccessReport(t *testing.T) {
	info, err := ProbeInfo()
	if errors.Is(err, ErrNotSupported) || errors.Is(err, ErrNoDevice) {
		t.Skip(err)
	}
	must(t, err)
	o := testOptions(t)
	for i := range info.Devices {
		o.Devices = append(o.Devices, i)
	}
	b := newTB(t, o)
	defer func() { must(t, b.Close()) }()
	var pairs []string
	for i := range info.Devices {
		for j := range info.Devices {
			if i != j {
				pairs = append(pairs, fmt.Sprintf("%d→%d %v", i, j, b.PeerAccess(i, j)))
			}
		}
	}
	figure(t, "%d device(s); peer access enabled: %v", info.Devices, pairs)
}

// ncclOrSkip loads NCCL or skips, printing the paths tried.
func ncclOrSkip(t *testing.T) {
	lib, err := (&backend{}).CollectiveLibrary()
	if errors.Is(err, ErrNoNCCL) {
		t.Skip(err)
	}
	must(t, err)
	figure(t, "loaded %s", lib)
}

// TestNCCLOneRank: an all-reduce over one rank (ncclCommInitAll over
// ordinal 0) is a copy of the send range into the receive range, in the
// stream's order: it runs after a slow writer of the send range that was
// issued before it on the same stream, and a reduction in place leaves
// the range as it was. Two ranks on one ordinal are refused before NCCL.
func TestNCCLOneRank(t *testing.T) {
	b := newTB(t, testOptions(t))
	defer func() { must(t, b.Close()) }()
	ncclOrSkip(t)
	const n = 1 << 18
	send := alloc(t, b, "send", 4*n, dag.WhereDevice, nil)
	recv := alloc(t, b, "recv", 4*n, dag.WhereDevice, nil)
	s, err := b.NewStream()
	must(t, err)
	rank := &executor.LaunchDesc{Name: "grad/0", Reads: []executor.Arg{arg(send, 0, 4*n)}, Writes: []executor.Arg{arg(recv, 0, 4*n)}}
	for trial, red := range []string{"sum", "max", "min", "prod"} {
		v := float32(trial) + 1.5
		must(t, b.Launch(s, fillDesc("recv", -7, arg(recv, 0, 4*n))))
		must(t, b.Launch(s, spinDesc(500)))
		must(t, b.Launch(s, fillDesc("send", float64(v), arg(send, 0, 4*n))))
		must(t, b.allReduce("grad", red, []*executor.LaunchDesc{rank}, []*stream{s.(*stream)}))
		got := read(t, b, recv)
		if ok, x := allWords(got, v); !ok {
			t.Errorf("all_reduce %s over one rank: receive range has %v, want %v (the send range, written before it on the stream)", red, x, v)
		}
	}
	inPlace := &executor.LaunchDesc{Name: "grad/0", Reads: []executor.Arg{arg(send, 0, 4*n)}, Writes: []executor.Arg{arg(send, 0, 4*n)}}
	must(t, b.allReduce("in place", "sum", []*executor.LaunchDesc{inPlace}, []*stream{s.(*stream)}))
	if ok, x := allWords(read(t, b, send), 4.5); !ok {
		t.Errorf("in-place all_reduce over one rank changed the range: %v, want 4.5", x)
	}
	figure(t, "all_reduce over one rank (sum, max, min, prod, in place): receive range = send range, ordered after the stream's earlier writer")
	must(t, b.DestroyStream(s))
	must(t, b.Free(send))
	must(t, b.Free(recv))
}

// TestNCCLTwoRanksOneGPU: a collective of two ranks on plan devices that
// share an ordinal is refused with the reason, before NCCL is called.
func TestNCCLTwoRanksOneGPU(t *testing.T) {
	o := testOptions(t)
	o.Devices = []int{0, 0}
	b := newTB(t, o)
	defer func() { must(t, b.Close()) }()
	var bufs [2]executor.Buffer
	var streams [2]*stream
	var ranks [2]*executor.LaunchDesc
	for r := range 2 {
		h, err := b.Alloc(executor.BufferDesc{Name: fmt.Sprintf("g%d", r), Bytes: 1024, Where: contract.WhereDevice, Device: r})
		must(t, err)
		bufs[r] = h
		hs, err := b.NewStreamOn(r, "")
		must(t, err)
		streams[r] = hs.(*stream)
		a := arg(h.(*buffer), 0, 1024)
		ranks[r] = &executor.LaunchDesc{Name: fmt.Sprintf("grad/%d", r), Reads: []executor.Arg{a}, Writes: []executor.Arg{a}}
	}
	err := b.allReduce("grad", "sum", ranks[:], streams[:])
	figure(t, "two ranks on ordinal 0: %v", err)
	if err == nil || !strings.Contains(err.Error(), "both on ordinal 0") {
		t.Errorf("error %v: want the two ranks on one ordinal named", err)
	}
	for r := range 2 {
		must(t, b.DestroyStream(streams[r]))
		must(t, b.Free(bufs[r]))
	}
}
