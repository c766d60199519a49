//go:build cuda

package cudart

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/executor"
)

func preparedCount(b *backend) int {
	b.prepMu.Lock()
	defer b.prepMu.Unlock()
	return len(b.preps)
}

// TestPreparedLaunchReuse launches one descriptor again and again, changing
// it in between: every launch computes what the descriptor holds at that
// launch, and an unchanged descriptor is prepared once.
func TestPreparedLaunchReuse(t *testing.T) {
	b := newTB(t, testOptions(t))
	defer func() { must(t, b.Close()) }()
	sh, err := b.NewStream()
	must(t, err)
	defer b.DestroyStream(sh)
	const n = 1000
	x0 := randWords(rand.New(rand.NewPCG(3, 4)), n)
	x := alloc(t, b, "x", 4*n, string(contract.WhereDevice), x0)
	y := alloc(t, b, "y", 4*n, string(contract.WhereDevice), nil)
	z := alloc(t, b, "z", 4*n, string(contract.WhereHostPinned), nil)
	l := &executor.LaunchDesc{Name: "scale", Kernel: contract.BuiltinScale, Args: map[string]any{"a": 2.0},
		Reads: []executor.Arg{arg(x, 0, 4*n)}, Writes: []executor.Arg{arg(y, 0, 4*n)}}
	for range 3 {
		must(t, b.Launch(sh, l))
	}
	sameWords(t, "a=2", read(t, b, y), refScale(2, x0))
	p := b.preps[l]
	if p == nil || preparedCount(b) != 1 {
		t.Fatalf("%d prepared launches after three of one descriptor, want it once", preparedCount(b))
	}
	must(t, b.Launch(sh, l))
	if b.preps[l] != p {
		t.Errorf("an unchanged descriptor was prepared again")
	}

	l.Args = map[string]any{"a": 3.0}
	l.Writes = []executor.Arg{arg(z, 0, 4*n)}
	must(t, b.Launch(sh, l))
	sameWords(t, "a=3 into z", read(t, b, z), refScale(3, x0))
	l.Args["a"] = -0.5 // the same map, changed in place
	must(t, b.Launch(sh, l))
	sameWords(t, "a=-0.5 into z", read(t, b, z), refScale(-0.5, x0))
	l.Writes[0].Offset, l.Writes[0].Bytes = 8, 4*n-8 // the same slice, changed in place
	l.Reads[0].Bytes = 4*n - 8
	must(t, b.Launch(sh, l))
	want := append(refScale(-0.5, x0)[:8], refScale(-0.5, x0[:4*n-8])...)
	sameWords(t, "a=-0.5 into z[8:]", read(t, b, z), want)
	if preparedCount(b) != 1 {
		t.Errorf("%d prepared launches for one descriptor", preparedCount(b))
	}

	// A descriptor that breaks the contract fails at once, every time.
	bad := &executor.LaunchDesc{Name: "sum", Kernel: contract.BuiltinChecksum,
		Reads: []executor.Arg{arg(x, 0, 4*n)}, Writes: []executor.Arg{arg(x, 0, 8)}}
	for range 2 {
		if err := b.Launch(sh, bad); err == nil || !strings.Contains(err.Error(), "overlaps its read") {
			t.Errorf("checksum over its own read: %v, want the contract's disjoint rule", err)
		}
	}
	if b.preps[bad] != nil {
		t.Errorf("a rejected launch was cached")
	}

	must(t, b.Free(z))
	if preparedCount(b) != 0 {
		t.Errorf("%d prepared launches after a Free, want none", preparedCount(b))
	}
	must(t, b.Free(x))
	must(t, b.Free(y))
}

// TestPreparedLaunchBound launches fresh copies of one descriptor, as the
// executor does with dynamic allocation: each is prepared on its own, and
// the cache stays within maxPrepared.
func TestPreparedLaunchBound(t *testing.T) {
	b := newTB(t, testOptions(t))
	defer func() { must(t, b.Close()) }()
	sh, err := b.NewStream()
	must(t, err)
	defer b.DestroyStream(sh)
	y := alloc(t, b, "y", 4096, string(contract.WhereDevice), nil)
	tmpl := executor.LaunchDesc{Name: "fill", Kernel: contract.BuiltinFill, Args: map[string]any{"bits": 0},
		Writes: []executor.Arg{arg(y, 0, 4096)}}
	most := 0
	for i := range maxPrepared + 100 {
		l := tmpl
		l.Args = map[string]any{"bits": i}
		must(t, b.Launch(sh, &l))
		most = max(most, preparedCount(b))
	}
	if most > maxPrepared {
		t.Errorf("%d prepared launches, more than maxPrepared %d", most, maxPrepared)
	}
	got := read(t, b, y)
	for i := 0; i < len(got); i += 4 {
		if w := le.Uint32(got[i:]); w != maxPrepared+99 {
			t.Fatalf("word %d = %d, want the last launch's %d", i/4, w, maxPrepared+99)
		}
	}
	must(t, b.Free(y))

	// A launch whose handles the cache cannot compare (spin only orders
	// its accesses, so it never resolves them) is prepared each time.
	l := &executor.LaunchDesc{Name: "spin", Kernel: contract.BuiltinSpin, Args: map[string]any{"us": math.SmallestNonzeroFloat64},
		Reads: []executor.Arg{{Buffer: []byte{1}, Name: "f", Bytes: 4}}}
	for range 2 {
		must(t, b.Launch(sh, l))
	}
	if preparedCount(b) != 0 {
		t.Errorf("a launch with an uncomparable handle was cached")
	}
	l.Args = map[string]any{"us": []float64{1}}
	if err := b.Launch(sh, l); err == nil || !strings.Contains(err.Error(), "argument us must be a number") {
		t.Errorf("spin with a slice argument: %v", err)
	}
	must(t, b.Synchronize())
}

// TestLaunchRefusesWrappingAccess hands the backend accesses whose end
// wraps int64 (offset near the buffer's end, bytes near 2^63), as a hostile
// plan file would: each launch is refused before it reaches the device, and
// the neighbouring buffer keeps its contents.
func TestLaunchRefusesWrappingAccess(t *testing.T) {
	b := newTB(t, testOptions(t))
	defer func() { must(t, b.Close()) }()
	sh, err := b.NewStream()
	must(t, err)
	defer b.DestroyStream(sh)
	const n = 1024 // words: 4 KiB buffers
	x0 := randWords(rand.New(rand.NewPCG(5, 6)), n)
	x := alloc(t, b, "x", 4*n, string(contract.WhereDevice), x0)
	y := alloc(t, b, "y", 4*n, string(contract.WhereDevice), nil)
	z0 := randWords(rand.New(rand.NewPCG(7, 8)), n)
	z := alloc(t, b, "z", 4*n, string(contract.WhereDevice), z0)
	wrap := arg(y, 4*n-4, math.MaxInt64-(4*n-4)+1) // offset+bytes = 2^63: the end wraps to a negative int64
	for _, l := range []*executor.LaunchDesc{
		{Name: "mix-wrap", Kernel: contract.BuiltinMix, Reads: []executor.Arg{arg(x, 0, 4*n)}, Writes: []executor.Arg{wrap}},
		{Name: "copy-wrap", Kernel: contract.BuiltinCopy, Reads: []executor.Arg{arg(x, 4092, (math.MaxInt64-4092)&^3)}, Writes: []executor.Arg{arg(y, 4092, (math.MaxInt64-4092)&^3)}}, // no wrap, far past the end
		{Name: "fill-negative", Kernel: contract.BuiltinFill, Args: map[string]any{"value": 1.0}, Writes: []executor.Arg{{Name: "y", Buffer: y, Offset: -4, Bytes: 8}}},
		{Name: "scale-past-end", Kernel: contract.BuiltinScale, Args: map[string]any{"a": 2.0}, Reads: []executor.Arg{arg(x, 0, 4*n)}, Writes: []executor.Arg{arg(y, 4, 4*n)}},
	} {
		err := b.Launch(sh, l)
		if err == nil {
			t.Errorf("launch %s: no error, want an access outside the buffer refused", l.Name)
			continue
		}
		t.Logf("launch %s refused: %v", l.Name, err)
	}
	must(t, b.Synchronize())
	sameWords(t, "neighbour z after refused launches", read(t, b, z), z0)
	for _, buf := range []*buffer{x, y, z} {
		must(t, b.Free(buf))
	}
}
