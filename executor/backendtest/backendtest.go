// Package backendtest is the conformance suite of executor.Backend: every
// backend (the simulator now, the CUDA backend with the cuda tag) runs Run.
// It checks values only, never timing, so it holds on any device: each
// built-in against a Go reference written here, cross-stream ordering by
// record/wait, the wait-before-record rule, host↔device copies, iterations,
// record/wait and peer copies across devices and collectives (for a
// backend of several devices), and that a run leaks no stream, event or
// buffer.
package backendtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/plan"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
)

// Run runs the conformance suite. newBackend returns a fresh backend for each
// subtest; the suite closes it and fails the subtest if Close reports leaks.
func Run(t *testing.T, newBackend func(t *testing.T) executor.Backend) {
	s := suite{newBackend}
	t.Run("ReadWrite", s.readWrite)
	t.Run("Fill", s.fill)
	t.Run("Copy", s.copy)
	t.Run("CopyHostDevice", s.copyHostDevice)
	t.Run("LaunchBounds", s.launchBounds)
	t.Run("Scale", s.scale)
	t.Run("Axpy", s.axpy)
	t.Run("Mix", s.mix)
	t.Run("Checksum", s.checksum)
	t.Run("Spin", s.spin)
	t.Run("InitKinds", s.initKinds)
	t.Run("CrossStreamOrder", s.crossStreamOrder)
	t.Run("Chain", s.chain)
	t.Run("WaitBeforeRecord", s.waitBeforeRecord)
	t.Run("Iterations", s.iterations)
	t.Run("CloseReportsLeaks", s.closeReportsLeaks)
	t.Run("Arena", s.arena)             // alloc.go
	t.Run("StreamAlloc", s.streamAlloc) // alloc.go
	t.Run("HostStages", s.hostStages)   // alloc.go
	t.Run("HostThreads", s.hostThreads) // threads.go
	t.Run("Devices", s.devices)         // devices.go
}

type suite struct {
	newBackend func(t *testing.T) executor.Backend
}

// run runs p on a fresh backend, closes it, and returns the outputs by name.
func (s suite) run(t *testing.T, p *plan.Plan, iters int) map[string][]byte {
	t.Helper()
	b := s.newBackend(t)
	res, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: iters})
	if cerr := b.Close(); cerr != nil {
		t.Errorf("%s: Close after Run: %v", b.Name(), cerr)
	}
	if err != nil {
		t.Fatalf("%s: Run: %v", b.Name(), err)
	}
	out := map[string][]byte{}
	for _, o := range res.Outputs {
		if o.Checksum != executor.Checksum(o.Data) || int64(len(o.Data)) != o.Bytes {
			t.Errorf("output %s: checksum %s, %d bytes, does not match its %d bytes of data", o.Name, o.Checksum, o.Bytes, len(o.Data))
		}
		out[o.Name] = o.Data
	}
	return out
}

func expect(t *testing.T, name string, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", name, len(got), len(want))
	}
	for i := 0; i < len(got); i += 4 {
		j := min(i+4, len(got))
		if !bytes.Equal(got[i:j], want[i:j]) {
			t.Fatalf("%s: first difference in word %d (byte %d): got % x, want % x", name, i/4, i, got[i:j], want[i:j])
		}
	}
}

var le = binary.LittleEndian

func f32s(v ...float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		le.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

func words(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = le.Uint32(b[4*i:])
	}
	return out
}

func fromWords(w []uint32) []byte {
	out := make([]byte, 4*len(w))
	for i, x := range w {
		le.PutUint32(out[4*i:], x)
	}
	return out
}

func fillBytes(n int64, v float32) []byte {
	out := make([]byte, n)
	for i := int64(0); i < n; i += 4 {
		le.PutUint32(out[i:], math.Float32bits(v))
	}
	return out
}

// floats returns n finite float32 values of mixed sign and magnitude (no
// NaNs: NaN payloads are not part of the contract).
func floats(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(i%17-8)*0.37 + float32(i)*1e-3
		if i%5 == 0 {
			out[i] *= 1e5
		}
	}
	return out
}

// writeFile writes data under dir and returns its base name.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func (s suite) readWrite(t *testing.T) {
	b := s.newBackend(t)
	for _, where := range contract.Wheres {
		h, err := b.Alloc(executor.BufferDesc{Name: "x", Bytes: 1000, Where: where})
		if err != nil {
			t.Fatalf("Alloc %s: %v", where, err)
		}
		want := executor.RandomBytes(7, 1000)
		if err := b.Write(h, want); err != nil {
			t.Fatalf("Write %s: %v", where, err)
		}
		if err := b.Synchronize(); err != nil {
			t.Fatalf("Synchronize: %v", err)
		}
		got, err := b.Read(h)
		if err != nil {
			t.Fatalf("Read %s: %v", where, err)
		}
		expect(t, string(where), got, want)
		if err := b.Free(h); err != nil {
			t.Fatalf("Free %s: %v", where, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func (s suite) fill(t *testing.T) {
	p := NewBuilder(1)
	p.Buffer(plan.Buffer{Name: "x", Bytes: 64, Role: dag.RoleOutput})
	p.Buffer(plan.Buffer{Name: "y", Bytes: 64, Role: dag.RoleOutput, Where: dag.WhereHostPinned})
	p.Launch(0, plan.Stage{Name: "value", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 1.1}, Writes: Range("x", 16, 32)})
	p.Launch(0, plan.Stage{Name: "bits", Kernel: dag.BuiltinFill, Args: map[string]any{"bits": float64(0xdeadbeef)}, Writes: p.All("y")})
	out := s.run(t, p.Plan(), 1)
	want := make([]byte, 64)
	copy(want[16:48], fillBytes(32, float32(1.1)))
	expect(t, "x", out["x"], want)
	w := make([]uint32, 16)
	for i := range w {
		w[i] = 0xdeadbeef
	}
	expect(t, "y", out["y"], fromWords(w))
}

func (s suite) copy(t *testing.T) {
	p := NewBuilder(1)
	p.Buffer(plan.Buffer{Name: "src", Bytes: 256, Role: dag.RoleInput, Init: dag.InitRandom, InitSeed: 3})
	p.Buffer(plan.Buffer{Name: "dst", Bytes: 256, Role: dag.RoleOutput})
	p.Launch(0, plan.Stage{Name: "cp", Kernel: dag.BuiltinCopy, Reads: Range("src", 0, 128), Writes: Range("dst", 64, 128)})
	out := s.run(t, p.Plan(), 1)
	want := make([]byte, 256)
	copy(want[64:192], executor.RandomBytes(3, 256)[:128])
	expect(t, "dst", out["dst"], want)
}

// launchBounds: a launch whose access ends exactly at its buffer's end
// is issued and copies those bytes; one ending a byte past (the same
// aligned range of a buffer one byte shorter) is refused at Launch.
func (s suite) launchBounds(t *testing.T) {
	b := s.newBackend(t)
	st, err := b.NewStream()
	must(t, err)
	alloc := func(name string, n int64) executor.Buffer {
		h, err := b.Alloc(executor.BufferDesc{Name: name, Bytes: n, Where: contract.WhereDevice})
		must(t, err)
		return h
	}
	src, short, dst := alloc("src", 64), alloc("short", 63), alloc("dst", 64)
	data := executor.RandomBytes(5, 64)
	must(t, b.Write(src, data))
	must(t, b.Write(dst, make([]byte, 64)))
	arg := func(name string, h executor.Buffer, off, n int64) []executor.Arg {
		return []executor.Arg{{Name: name, Buffer: h, Offset: off, Bytes: n}}
	}
	for _, c := range []struct {
		name        string
		read, write []executor.Arg
		ok          bool
	}{
		{"read and write end at the end", arg("src", src, 16, 48), arg("dst", dst, 16, 48), true},
		{"read ends a byte past", arg("short", short, 16, 48), arg("dst", dst, 16, 48), false},
		{"write ends a byte past", arg("src", src, 16, 48), arg("short", short, 16, 48), false},
		{"read starts at the end", arg("short", short, 64, 4), arg("dst", dst, 0, 4), false},
	} {
		l := &executor.LaunchDesc{Name: c.name, Kernel: contract.BuiltinCopy, Reads: c.read, Writes: c.write}
		err := b.Launch(st, l)
		if c.ok && err != nil {
			t.Errorf("%s: Launch: %v", c.name, err)
		}
		if !c.ok && err == nil {
			t.Errorf("%s: Launch issued an access outside its buffer", c.name)
		}
	}
	must(t, b.Synchronize())
	got, err := b.Read(dst)
	must(t, err)
	want := make([]byte, 64)
	copy(want[16:], data[16:])
	expect(t, "dst", got, want)
	must(t, b.DestroyStream(st))
	for _, h := range []executor.Buffer{src, short, dst} {
		must(t, b.Free(h))
	}
	must(t, b.Close())
}

func (s suite) copyHostDevice(t *testing.T) {
	p := NewBuilder(1)
	p.Buffer(plan.Buffer{Name: "in", Bytes: 4096, Where: dag.WhereHostPinned, Role: dag.RoleInput, Init: dag.InitRandom, InitSeed: 11})
	p.Buffer(plan.Buffer{Name: "d", Bytes: 4096})
	p.Buffer(plan.Buffer{Name: "d2", Bytes: 4096})
	p.Buffer(plan.Buffer{Name: "out", Bytes: 4096, Where: dag.WhereHostPinned, Role: dag.RoleOutput})
	p.Launch(0, plan.Stage{Name: "h2d", Kernel: dag.BuiltinCopy, Reads: p.All("in"), Writes: p.All("d")})
	p.Launch(0, plan.Stage{Name: "d2d", Kernel: dag.BuiltinCopy, Reads: p.All("d"), Writes: p.All("d2")})
	p.Launch(0, plan.Stage{Name: "d2h", Kernel: dag.BuiltinCopy, Reads: p.All("d2"), Writes: p.All("out")})
	out := s.run(t, p.Plan(), 1)
	expect(t, "out", out["out"], executor.RandomBytes(11, 4096))
}

func (s suite) scale(t *testing.T) {
	dir := t.TempDir()
	x := floats(300)
	p := NewBuilder(1).Dir(dir)
	p.Buffer(plan.Buffer{Name: "x", Bytes: 1200, Role: dag.RoleInput, Init: dag.InitFile, InitPath: writeFile(t, dir, "x.f32", f32s(x...))})
	p.Buffer(plan.Buffer{Name: "y", Bytes: 1200, Role: dag.RoleOutput})
	p.Buffer(plan.Buffer{Name: "z", Bytes: 1200, Role: dag.RoleOutput, Init: dag.InitFile, InitPath: "x.f32"})
	p.Launch(0, plan.Stage{Name: "scale", Kernel: dag.BuiltinScale, Args: map[string]any{"a": 1.7}, Reads: p.All("x"), Writes: p.All("y")})
	p.Launch(0, plan.Stage{Name: "inplace", Kernel: dag.BuiltinScale, Args: map[string]any{"a": -0.3}, Reads: Range("z", 400, 400), Writes: Range("z", 400, 400)})
	out := s.run(t, p.Plan(), 1)
	y := make([]float32, len(x))
	z := append([]float32(nil), x...)
	for i := range x {
		y[i] = float32(float32(1.7) * x[i])
		if i >= 100 && i < 200 {
			z[i] = float32(float32(-0.3) * x[i])
		}
	}
	expect(t, "y", out["y"], f32s(y...))
	expect(t, "z", out["z"], f32s(z...))
}

func (s suite) axpy(t *testing.T) {
	dir := t.TempDir()
	x := floats(256)
	p := NewBuilder(1).Dir(dir)
	p.Buffer(plan.Buffer{Name: "x", Bytes: 1024, Role: dag.RoleInput, Init: dag.InitFile, InitPath: writeFile(t, dir, "x.f32", f32s(x...))})
	p.Buffer(plan.Buffer{Name: "y", Bytes: 1024, Role: dag.RoleOutput, Init: dag.InitFill, InitValue: 0.1})
	p.Launch(0, plan.Stage{Name: "axpy", Kernel: dag.BuiltinAxpy, Args: map[string]any{"a": -2.3},
		Reads: append(Range("x", 0, 1024), Range("y", 0, 1024)...), Writes: Range("y", 0, 1024)})
	out := s.run(t, p.Plan(), 1)
	y := make([]float32, len(x))
	a := float32(-2.3)
	for i := range x {
		ax := float32(a * x[i])
		y[i] = float32(ax + float32(0.1))
	}
	expect(t, "y", out["y"], f32s(y...))
}

// refMix is the mix built-in per its contract (contract.BuiltinMix).
func refMix(stage int, in [][]uint32, nOut []int) [][]uint32 {
	out := make([][]uint32, len(nOut))
	for w, n := range nOut {
		out[w] = make([]uint32, n)
		for i := range n {
			h := dag.Mix32(dag.MixSeed(stage, w) ^ uint32(i))
			for _, r := range in {
				h = dag.Mix32(h ^ r[i%len(r)])
			}
			out[w][i] = h
		}
	}
	return out
}

func (s suite) mix(t *testing.T) {
	p := NewBuilder(1)
	p.Buffer(plan.Buffer{Name: "a", Bytes: 40, Role: dag.RoleInput, Init: dag.InitRandom, InitSeed: 1})
	p.Buffer(plan.Buffer{Name: "b", Bytes: 256, Role: dag.RoleInput, Init: dag.InitRandom, InitSeed: 2})
	p.Buffer(plan.Buffer{Name: "o", Bytes: 512, Role: dag.RoleOutput})
	p.Buffer(plan.Buffer{Name: "q", Bytes: 64, Role: dag.RoleOutput, Init: dag.InitRandom, InitSeed: 4})
	p.Buffer(plan.Buffer{Name: "z", Bytes: 32, Role: dag.RoleOutput})
	// Stage 0: two reads of different sizes, two writes.
	p.Launch(0, plan.Stage{Name: "two", Kernel: dag.BuiltinMix, Reads: append(p.All("a"), p.All("b")...),
		Writes: append(Range("o", 0, 128), Range("o", 256, 256)...)})
	// Stage 1: in place.
	p.Launch(0, plan.Stage{Name: "inplace", Kernel: dag.BuiltinMix, Reads: append(p.All("q"), Range("a", 4, 8)...), Writes: p.All("q")})
	// Stage 2: no reads, with spin_us.
	p.Launch(0, plan.Stage{Name: "none", Kernel: dag.BuiltinMix, Args: map[string]any{"spin_us": 3.0}, Writes: p.All("z")})
	// Stage 3: max_words: only the first 5 words of each write change.
	p.Buffer(plan.Buffer{Name: "m", Bytes: 64, Role: dag.RoleOutput, Init: dag.InitRandom, InitSeed: 6})
	p.Launch(0, plan.Stage{Name: "few", Kernel: dag.BuiltinMix, Args: map[string]any{"max_words": 5}, Reads: p.All("b"),
		Writes: append(Range("m", 0, 32), Range("m", 32, 32)...)})
	out := s.run(t, p.Plan(), 1)

	a, b := words(executor.RandomBytes(1, 40)), words(executor.RandomBytes(2, 256))
	r0 := refMix(0, [][]uint32{a, b}, []int{32, 64})
	o := make([]uint32, 128)
	copy(o[0:32], r0[0])
	copy(o[64:128], r0[1])
	expect(t, "o", out["o"], fromWords(o))
	r1 := refMix(1, [][]uint32{words(executor.RandomBytes(4, 64)), a[1:3]}, []int{16})
	expect(t, "q", out["q"], fromWords(r1[0]))
	expect(t, "z", out["z"], fromWords(refMix(2, nil, []int{8})[0]))
	m := words(executor.RandomBytes(6, 64))
	r3 := refMix(3, [][]uint32{b}, []int{5, 5})
	copy(m[0:5], r3[0])
	copy(m[8:13], r3[1])
	expect(t, "m", out["m"], fromWords(m))
}

func (s suite) checksum(t *testing.T) {
	p := NewBuilder(1)
	p.Buffer(plan.Buffer{Name: "x", Bytes: 4000, Role: dag.RoleInput, Init: dag.InitRandom, InitSeed: 5})
	p.Buffer(plan.Buffer{Name: "c", Bytes: 16, Role: dag.RoleOutput, Init: dag.InitFill, InitValue: 3})
	p.Launch(0, plan.Stage{Name: "sum", Kernel: dag.BuiltinChecksum, Reads: p.All("x"), Writes: p.All("c")})
	out := s.run(t, p.Plan(), 1)
	var sum, x uint32
	for i, w := range words(executor.RandomBytes(5, 4000)) {
		sum += w
		x ^= dag.Mix32(w ^ uint32(i)*0x9E3779B9)
	}
	want := append(fromWords([]uint32{sum, x}), fillBytes(8, 3)...)
	expect(t, "c", out["c"], want)
}

func (s suite) spin(t *testing.T) {
	p := NewBuilder(1)
	p.Buffer(plan.Buffer{Name: "x", Bytes: 64, Role: dag.RoleOutput, Init: dag.InitRandom, InitSeed: 9})
	p.Launch(0, plan.Stage{Name: "spin", Kernel: dag.BuiltinSpin, DurationUS: 20, Reads: p.All("x"), Writes: p.All("x")})
	p.Launch(0, plan.Stage{Name: "spin-us", Kernel: dag.BuiltinSpin, Args: map[string]any{"us": 5}})
	out := s.run(t, p.Plan(), 1)
	expect(t, "x", out["x"], executor.RandomBytes(9, 64))
}

func (s suite) initKinds(t *testing.T) {
	dir := t.TempDir()
	raw := []byte("0123456789abcdef")
	p := NewBuilder(1).Dir(dir)
	p.Buffer(plan.Buffer{Name: "zeros", Bytes: 16, Role: dag.RoleOutput, Init: dag.InitZeros})
	p.Buffer(plan.Buffer{Name: "fill", Bytes: 16, Role: dag.RoleOutput, Init: dag.InitFill, InitValue: -2.5})
	p.Buffer(plan.Buffer{Name: "file", Bytes: 16, Role: dag.RoleOutput, Init: dag.InitFile, InitPath: writeFile(t, dir, "raw", raw), Where: dag.WhereHostPinned})
	p.Buffer(plan.Buffer{Name: "random", Bytes: 13, Role: dag.RoleOutput, Init: dag.InitRandom, InitSeed: -4})
	out := s.run(t, p.Plan(), 1)
	expect(t, "zeros", out["zeros"], make([]byte, 16))
	expect(t, "fill", out["fill"], fillBytes(16, -2.5))
	expect(t, "file", out["file"], raw)
	expect(t, "random", out["random"], executor.RandomBytes(-4, 13))
}

// crossStreamOrder: a slow writer on stream 0, then a writer on stream 1
// ordered after it by an event: the second value wins.
func (s suite) crossStreamOrder(t *testing.T) {
	p := NewBuilder(2)
	p.Buffer(plan.Buffer{Name: "x", Bytes: 1 << 16, Role: dag.RoleOutput})
	p.Launch(0, plan.Stage{Name: "slow", Kernel: dag.BuiltinSpin, Args: map[string]any{"us": 2000}, Writes: p.All("x")})
	p.Launch(0, plan.Stage{Name: "one", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 1.0}, Writes: p.All("x")})
	p.Record(0, 0)
	p.Wait(1, 0)
	p.Launch(1, plan.Stage{Name: "two", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 2.0}, Writes: p.All("x")})
	for range 3 {
		out := s.run(t, p.Plan(), 2)
		expect(t, "x", out["x"], fillBytes(1<<16, 2))
	}
}

// chain: 30 in-place mix stages on one buffer, round-robin over three
// streams, each hop ordered by its own event; the result equals one stream's.
func (s suite) chain(t *testing.T) {
	const n, streams, iters = 30, 3, 2
	p := NewBuilder(streams)
	p.Buffer(plan.Buffer{Name: "x", Bytes: 4096, Role: dag.RoleOutput, Init: dag.InitRandom, InitSeed: 21})
	p.Buffer(plan.Buffer{Name: "k", Bytes: 64, Role: dag.RoleInput, Init: dag.InitRandom, InitSeed: 22})
	for i := range n {
		st := i % streams
		if i > 0 {
			p.Wait(st, i-1)
		}
		p.Launch(st, plan.Stage{Name: "m" + string(rune('a'+i)), Kernel: dag.BuiltinMix, Reads: append(p.All("x"), p.All("k")...), Writes: p.All("x")})
		p.Record(st, i)
	}
	out := s.run(t, p.Plan(), iters)
	x, k := words(executor.RandomBytes(21, 4096)), words(executor.RandomBytes(22, 64))
	for range iters {
		for i := range n {
			x = refMix(i, [][]uint32{x, k}, []int{len(x)})[0]
		}
	}
	expect(t, "x", out["x"], fromWords(x))
}

// waitBeforeRecord: a wait issued before its event's record waits for
// nothing. A backend with a race detector reports the race; every backend
// finishes without deadlock. Then the same plan, correctly ordered, gives
// the second writer's value.
func (s suite) waitBeforeRecord(t *testing.T) {
	build := func(trap bool) *plan.Plan {
		p := NewBuilder(2)
		p.Buffer(plan.Buffer{Name: "x", Bytes: 4096, Role: dag.RoleOutput})
		if trap {
			p.Wait(1, 0)
		}
		p.Launch(0, plan.Stage{Name: "slow", Kernel: dag.BuiltinSpin, Args: map[string]any{"us": 1000}, Writes: p.All("x")})
		p.Launch(0, plan.Stage{Name: "one", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 1.0}, Writes: p.All("x")})
		p.Record(0, 0)
		if !trap {
			p.Wait(1, 0)
		}
		p.Launch(1, plan.Stage{Name: "two", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 2.0}, Writes: p.All("x")})
		return p.Plan()
	}
	b := s.newBackend(t)
	_, err := executor.Run(context.Background(), build(true), b, executor.Options{})
	var race *executor.RaceError
	if err != nil && !errors.As(err, &race) {
		t.Errorf("wait before record: Run: %v (want nil or a *executor.RaceError)", err)
	}
	if race != nil {
		// Stage two races with slow and one; which pair a detector that
		// keeps the last write only sees first depends on timing.
		found := false
		for _, r := range race.Races {
			if r.Buffer == "x" && (r.First.Stage == "two" || r.Second.Stage == "two") {
				found = true
			}
		}
		if !found {
			t.Errorf("race report does not name stage two on x: %v", race)
		}
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	out := s.run(t, build(false), 1)
	expect(t, "x", out["x"], fillBytes(4096, 2))
}

// iterations: y += a·x on stream 0, then z = copy(y) on stream 1, for 4
// iterations. The next iteration's axpy must wait for the copy (write after
// read across iterations).
func (s suite) iterations(t *testing.T) {
	const iters = 4
	dir := t.TempDir()
	x := floats(512)
	p := NewBuilder(2).Dir(dir)
	p.Buffer(plan.Buffer{Name: "x", Bytes: 2048, Role: dag.RoleInput, Init: dag.InitFile, InitPath: writeFile(t, dir, "x", f32s(x...))})
	p.Buffer(plan.Buffer{Name: "y", Bytes: 2048, Role: dag.RoleOutput, Init: dag.InitFill, InitValue: 1})
	p.Buffer(plan.Buffer{Name: "z", Bytes: 2048, Role: dag.RoleOutput, Where: dag.WhereHostPinned})
	p.Launch(0, plan.Stage{Name: "axpy", Kernel: dag.BuiltinAxpy, Args: map[string]any{"a": 0.75}, Reads: append(p.All("x"), p.All("y")...), Writes: p.All("y")})
	p.Record(0, 0)
	p.Wait(1, 0)
	p.Launch(1, plan.Stage{Name: "copy", Kernel: dag.BuiltinCopy, Reads: p.All("y"), Writes: p.All("z")})
	out := s.run(t, p.Plan(), iters)
	y := make([]float32, len(x))
	for i := range y {
		y[i] = 1
	}
	for range iters {
		for i := range y {
			ax := float32(float32(0.75) * x[i])
			y[i] = float32(ax + y[i])
		}
	}
	expect(t, "y", out["y"], f32s(y...))
	expect(t, "z", out["z"], f32s(y...))
}

// closeReportsLeaks: Close fails while a stream, an event or a buffer is alive.
func (s suite) closeReportsLeaks(t *testing.T) {
	for _, leak := range []string{"stream", "event", "buffer"} {
		b := s.newBackend(t)
		var err error
		switch leak {
		case "stream":
			_, err = b.NewStream()
		case "event":
			_, err = b.NewEvent()
		case "buffer":
			_, err = b.Alloc(executor.BufferDesc{Name: "leaked", Bytes: 64, Where: contract.WhereDevice})
		}
		if err != nil {
			t.Fatalf("create %s: %v", leak, err)
		}
		if err := b.Close(); err == nil {
			t.Errorf("Close with a live %s: no error, want one listing the leak", leak)
		}
	}
}
