package sim_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/plan"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/backendtest"
	"github.com/dagrun/dagrun/executor/sim"
)

func userPlan() *plan.Plan {
	p := backendtest.NewBuilder(1)
	p.Kernel(plan.Kernel{Name: "blur", PTX: "blur.ptx", Entry: "blur", Params: []string{"in:ptr", "out:ptr"}})
	p.Buffer(plan.Buffer{Name: "in", Bytes: 10, Role: dag.RoleInput, Init: dag.InitRandom, InitSeed: 3})
	p.Buffer(plan.Buffer{Name: "out", Bytes: 7, Role: dag.RoleOutput})
	p.Launch(0, plan.Stage{Name: "pad", Kernel: dag.BuiltinSpin})
	p.Launch(0, plan.Stage{Name: "blur", Kernel: "blur", Reads: p.All("in"), Writes: p.All("out")})
	return p.Plan()
}

// A user kernel without a CPU body is opaque: its writes are the mix of the
// stage index and the bytes read, over zero-padded words.
func TestUserKernelOpaque(t *testing.T) {
	res, err := run(t, userPlan(), sim.Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	in := append(executor.RandomBytes(3, 10), 0, 0) // 3 words, zero-padded
	var want []byte
	for i := range 2 {
		h := dag.Mix32(dag.MixSeed(1, 0) ^ uint32(i))
		h = dag.Mix32(h ^ binary.LittleEndian.Uint32(in[4*(i%3):]))
		want = binary.LittleEndian.AppendUint32(want, h)
	}
	if got := res.Outputs[0].Data; !bytes.Equal(got, want[:7]) {
		t.Errorf("out = % x, want % x", got, want[:7])
	}
}

func TestUserKernelCPUBody(t *testing.T) {
	body := func(l *executor.LaunchDesc, in, out [][]byte) error {
		for i := range out[0] {
			out[0][i] = in[0][i] + byte(l.Stage)
		}
		return nil
	}
	res, err := run(t, userPlan(), sim.Options{Kernels: map[string]sim.KernelFunc{"blur": body}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := executor.RandomBytes(3, 7)
	for i := range want {
		want[i]++
	}
	if got := res.Outputs[0].Data; !bytes.Equal(got, want) {
		t.Errorf("out = % x, want % x", got, want)
	}
}

func TestLaunchRejectsFreedBuffer(t *testing.T) {
	b := sim.New(sim.Options{})
	s, _ := b.NewStream()
	x, _ := b.Alloc(executor.BufferDesc{Name: "x", Bytes: 8, Where: contract.WhereDevice})
	b.Free(x)
	l := &executor.LaunchDesc{Name: "late", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 1}, Writes: []executor.Arg{{Buffer: x, Name: "x", Bytes: 8}}}
	if err := b.Launch(s, l); err == nil {
		t.Error("launch on a freed buffer: no error")
	}
	b.DestroyStream(s)
	if err := b.Close(); err != nil {
		t.Error(err)
	}
	if _, err := b.NewStream(); err != sim.ErrClosed {
		t.Errorf("NewStream after Close: %v, want ErrClosed", err)
	}
}

func TestLeakNamesCreationSite(t *testing.T) {
	b := sim.New(sim.Options{})
	b.Alloc(executor.BufferDesc{Name: "forgotten", Bytes: 8, Where: contract.WhereDevice})
	b.NewEvent()
	err := b.Close()
	if err == nil {
		t.Fatal("no leak reported")
	}
	msg := err.Error()
	for _, want := range []string{"2 leaked", "buffer forgotten (8 bytes) allocated at", "event created at", "kernels_test.go:"} {
		if !bytes.Contains([]byte(msg), []byte(want)) {
			t.Errorf("leak report %q lacks %q", msg, want)
		}
	}
}

// A CPU body that panics fails the run with the stage's name and leaves no
// buffer locked (the next stages still run).
func TestPanickingBodyIsAFault(t *testing.T) {
	body := func(*executor.LaunchDesc, [][]byte, [][]byte) error { panic("boom") }
	_, err := run(t, userPlan(), sim.Options{Kernels: map[string]sim.KernelFunc{"blur": body}}, 3)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("stage blur (stream 0): panic: boom")) {
		t.Errorf("error %v, want the stage's panic", err)
	}
}

// A body registered for the PTX entry runs when Options.Kernels has none.
func TestUserKernelRegisteredBody(t *testing.T) {
	executor.RegisterCPUKernel("sim_test_entry", func(l *executor.LaunchDesc, in, out [][]byte) error {
		copy(out[0], in[0])
		return nil
	})
	p := userPlan()
	p.Kernels[0].Entry = "sim_test_entry"
	res, err := run(t, p, sim.Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Outputs[0].Data, executor.RandomBytes(3, 7); !bytes.Equal(got, want) {
		t.Errorf("out = % x, want % x", got, want)
	}
}
