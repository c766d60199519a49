//go:build cuda

package cudart

// Plans of several devices through the executor on the GPU: the specs of
// specs/multigpu/ against the simulator. With fewer GPUs than a plan has
// devices, its devices run in contexts of their own on GPU 0
// (separateContexts), which exercises every cross-device path but NCCL;
// collectives then need as many GPUs as ranks and are reported as such.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// devicesBackend returns a backend for plans of n devices: n GPUs when the
// machine has them, else n contexts on GPU 0; real says which.
func devicesBackend(t *testing.T, n int) (b *backend, real bool) {
	info, err := ProbeInfo()
	if errors.Is(err, ErrNotSupported) || errors.Is(err, ErrNoDevice) {
		t.Skip(err)
	}
	must(t, err)
	o := testOptions(t)
	if info.Devices >= n {
		for i := range n {
			o.Devices = append(o.Devices, i)
		}
		return newTB(t, o), true
	}
	o.Devices = make([]int, n)
	o.separateContexts = true
	return newTB(t, o), false
}

func hasCollective(p *plan.Plan) bool {
	for i := range p.Stages {
		if p.Stages[i].Collective != nil {
			return true
		}
	}
	return false
}

// reference returns the race-free counterpart of a racy spec file
// (NAME-racy.yaml: NAME.yaml or NAME-fixed.yaml), "" if none.
func reference(racy string) string {
	base := strings.TrimSuffix(racy, "-racy.yaml")
	for _, f := range []string{base + ".yaml", base + "-fixed.yaml"} {
		if _, err := os.Stat(f); err == nil {
			return f
		}
	}
	return ""
}

// TestDevicesSpecs: every race-free spec of specs/multigpu gives the
// simulator's checksums on the GPU(s), over 1 and 3 iterations; every
// racy one runs 20 times against its fixed counterpart's checksums and
// the wrong runs are counted (a racy variant goes wrong only when the
// timing exposes it: the count is reported, not required).
func TestDevicesSpecs(t *testing.T) {
	dir := filepath.Join(specsDir(t), "multigpu")
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Skip("no specs/multigpu/ here")
	}
	for _, f := range files {
		p := planFile(t, f, planner.Options{})
		n := p.DeviceCount()
		b, real := devicesBackend(t, n)
		where := map[bool]string{true: "GPUs", false: "contexts on GPU 0"}[real]
		racy := verify.Verify(p) != nil
		switch {
		case hasCollective(p) && !real:
			_, err := runSums(p, b, 1)
			figure(t, "%s: %d devices, a collective: needs %d GPUs (on %d %s: %v)", f, n, n, n, where, err)
			if err == nil || !strings.Contains(err.Error(), "both on ordinal") {
				t.Errorf("%s on one GPU: error %v, want the ranks on one ordinal named", f, err)
			}
		case racy:
			ref := reference(f)
			if ref == "" {
				figure(t, "%s: racy, no fixed counterpart: skipped", f)
				break
			}
			want := simSums(t, planFile(t, ref, planner.Options{}), 1)
			wrong := 0
			for range 20 {
				if got, err := runSums(p, b, 1); err != nil || got != want {
					wrong++
				}
			}
			figure(t, "%s: racy, on %d %s: %d of 20 runs differ from %s's checksums", f, n, where, wrong, filepath.Base(ref))
		default:
			for _, iters := range []int{1, 3} {
				want := simItersSums(t, p, iters)
				got, err := runSums(p, b, iters)
				if err != nil {
					t.Errorf("%s, %d iterations on %d %s: %v", f, iters, n, where, err)
					continue
				}
				figure(t, "%s: %d iterations on %d %s: cuda %s sim", f, iters, n, where, map[bool]string{true: "==", false: "!="}[got == want])
				if got != want {
					t.Errorf("%s, %d iterations: cuda %s\n sim %s", f, iters, got, want)
				}
			}
		}
		if l := b.Leaks(); len(l) > 0 {
			t.Errorf("%s: leaks: %v", f, l)
		}
		must(t, b.Close())
	}
}

// runSums runs p on b and returns "name=checksum ..." of its outputs, or
// the run's error.
func runSums(p *plan.Plan, b executor.Backend, iters int) (string, error) {
	res, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: iters})
	if err != nil {
		return "", err
	}
	var s []string
	for _, o := range res.Outputs {
		s = append(s, o.Name+"="+o.Checksum)
	}
	return strings.Join(s, " "), nil
}

// simItersSums is simSums over iters iterations.
func simItersSums(t testing.TB, p *plan.Plan, iters int) string {
	t.Helper()
	b := sim.New(sim.Options{Seed: 3})
	defer func() { must(t, b.Close()) }()
	return checksums(t, p, b, iters)
}

// peerSpecs are a peer copy behind a slow producer (2 ms of spin before
// it on device 0's stream) on two devices: planned (sync: auto),
// hand-synchronized without the wait (racy) and with it. The stages are
// the same, in the same order, in all three (the mix hashes its stage's
// index).
const peerBuffers = `buffers:
  - {name: a, bytes: 4194304, device: 0}
  - {name: b, bytes: 4194304, device: 1}
  - {name: out, bytes: 8, role: output, device: 1}
`

var peerSpecs = []struct{ name, src string }{
	{"planned", "version: 1\ndevices: 2\n" + peerBuffers + `stages:
  - {name: slow, kernel: spin, args: {us: 2000}, writes: [a]}
  - {name: produce, kernel: mix, writes: [a]}
  - {name: send, kernel: copy, reads: [a], writes: [b]}
  - {name: use, kernel: checksum, reads: [b], writes: [out]}
`},
	{"racy", "version: 1\ndevices: 2\nsync: manual\n" + peerBuffers + `stages:
  - {name: slow, kernel: spin, args: {us: 2000}, writes: [a], stream: s0, device: 0}
  - {name: produce, kernel: mix, writes: [a], stream: s0, device: 0}
  - {name: send, kernel: copy, reads: [a], writes: [b], stream: s1, device: 1}
  - {name: use, kernel: checksum, reads: [b], writes: [out], stream: s1, device: 1}
`},
	{"fixed", "version: 1\ndevices: 2\nsync: manual\n" + peerBuffers + `stages:
  - {name: slow, kernel: spin, args: {us: 2000}, writes: [a], stream: s0, device: 0}
  - {name: produce, kernel: mix, writes: [a], stream: s0, device: 0}
  - {name: send, kernel: copy, reads: [a], writes: [b], stream: s1, device: 1, waits: [produce]}
  - {name: use, kernel: checksum, reads: [b], writes: [out], stream: s1, device: 1}
`},
}

// oneDevice strips a spec's devices: the same stages on device 0.
func oneDevice(src string) string {
	return strings.NewReplacer("devices: 2\n", "", ", device: 1", "", ", device: 0", "").Replace(src)
}

// TestDevicesPeerSpecs: the peer copy specs through the executor on two
// devices (two GPUs, or two contexts on GPU 0), 20 runs each, against the
// simulator's checksums of the same stages on one device: the planned and
// the fixed spec never differ, the racy one (the copy issued on device 1
// with no wait for device 0's producer, which runs after 2 ms of spin)
// nearly always does.
func TestDevicesPeerSpecs(t *testing.T) {
	b, real := devicesBackend(t, 2)
	defer func() { must(t, b.Close()) }()
	where := map[bool]string{true: "2 GPUs", false: "2 contexts on GPU 0"}[real]
	want := simSums(t, planYAML(t, oneDevice(peerSpecs[0].src), planner.Options{}), 1)
	for _, c := range peerSpecs {
		p := planYAML(t, c.src, planner.Options{})
		if p.DeviceCount() != 2 {
			t.Fatalf("%s: %d devices, want 2", c.name, p.DeviceCount())
		}
		if racy := verify.Verify(p) != nil; racy != (c.name == "racy") {
			t.Errorf("%s: Verify finds a race: %v", c.name, racy)
		}
		wrong := 0
		var last error
		for range 20 {
			got, err := runSums(p, b, 1)
			if err != nil {
				last = err
			}
			if err != nil || got != want {
				wrong++
			}
		}
		figure(t, "peer copy %s on %d devices (%s): %d of 20 runs differ from the simulator (streams %d, waits %d)", c.name, p.DeviceCount(), where, wrong, len(p.Streams), p.Stats.Waits)
		if last != nil {
			t.Errorf("%s: %v", c.name, last)
		}
		if c.name != "racy" && wrong != 0 {
			t.Errorf("%s: %d of 20 runs wrong, want 0", c.name, wrong)
		}
		if c.name == "racy" && wrong < 15 {
			t.Errorf("racy: only %d of 20 runs wrong, want nearly all (the copy is issued with no wait for a producer 2 ms behind a spin)", wrong)
		}
	}
}

// TestDevicesGraphMode: graph mode over several devices (one graph whose
// nodes lie in every device's context, forked from and joined into the
// origin stream) gives the simulator's checksums for the race-free specs
// of specs/multigpu without collectives, over 1 and 3 iterations.
func TestDevicesGraphMode(t *testing.T) {
	dir := filepath.Join(specsDir(t), "multigpu")
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Skip("no specs/multigpu/ here")
	}
	for _, f := range files {
		p := planFile(t, f, planner.Options{})
		if verify.Verify(p) != nil || hasCollective(p) {
			continue
		}
		n := p.DeviceCount()
		b, real := devicesBackend(t, n)
		where := map[bool]string{true: "GPUs", false: "contexts on GPU 0"}[real]
		for _, iters := range []int{1, 3} {
			want := simItersSums(t, p, iters)
			res, err := executor.RunGraph(context.Background(), p, b, executor.Options{Iterations: iters})
			if err != nil {
				t.Errorf("%s, graph mode, %d iterations on %d %s: %v", f, iters, n, where, err)
				continue
			}
			got := outSums(res.Outputs)
			figure(t, "%s: graph mode, %d iterations on %d %s: cuda %s sim", f, iters, n, where, map[bool]string{true: "==", false: "!="}[got == want])
			if got != want {
				t.Errorf("%s, graph mode, %d iterations: cuda %s\n sim %s", f, iters, got, want)
			}
		}
		must(t, b.Close())
	}
}
