package executor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/backendtest"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
)

func TestRandomBytesContract(t *testing.T) {
	// Pinned: other backends and tools must produce the same bytes.
	if got := fmt.Sprintf("%x", executor.RandomBytes(1, 20)); got != "6304e117ca175df29554f0825fbee55f6d62b624" {
		t.Errorf("RandomBytes(1, 20) = %s", got)
	}
	long := executor.RandomBytes(42, 1000)
	for _, n := range []int64{0, 1, 7, 8, 9, 999} {
		if got := executor.RandomBytes(42, n); !bytes.Equal(got, long[:n]) {
			t.Errorf("RandomBytes(42, %d) is not a prefix of RandomBytes(42, 1000)", n)
		}
	}
	if bytes.Equal(executor.RandomBytes(1, 64), executor.RandomBytes(2, 64)) {
		t.Error("seeds 1 and 2 give the same bytes")
	}
}

func TestChecksumContract(t *testing.T) {
	// FNV-1a 64: the offset basis for no data, and the published value for "a".
	for in, want := range map[string]string{"": "cbf29ce484222325", "a": "af63dc4c8601ec8c"} {
		if got := executor.Checksum([]byte(in)); got != want {
			t.Errorf("Checksum(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestInitialContentsErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "short"), []byte("abc"), 0o644)
	for _, c := range []struct {
		b    plan.Buffer
		want string
	}{
		{plan.Buffer{Name: "f", Bytes: 8, Init: dag.InitFile, InitPath: "short"}, "has 3 bytes, the buffer has 8"},
		{plan.Buffer{Name: "f", Bytes: 8, Init: dag.InitFile, InitPath: "missing"}, "buffer f: init file"},
		{plan.Buffer{Name: "k", Bytes: 8, Init: "ones"}, `unknown init kind "ones"`},
	} {
		_, err := executor.InitialContents(dir, c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.b, err, c.want)
		}
	}
}

// plan2 is a synchronized two-stream plan: fill x, then scale x into y.
func plan2() *backendtest.Builder {
	p := backendtest.NewBuilder(2)
	p.Buffer(plan.Buffer{Name: "x", Bytes: 64})
	p.Buffer(plan.Buffer{Name: "y", Bytes: 64, Role: dag.RoleOutput})
	p.Launch(0, plan.Stage{Name: "fill", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 1.0}, Writes: p.All("x")})
	p.Record(0, 0)
	p.Wait(1, 0)
	p.Launch(1, plan.Stage{Name: "bad", Kernel: dag.BuiltinScale, Args: map[string]any{"a": 2.0}, Reads: p.All("x"), Writes: p.All("y")})
	return p
}

func TestRunRejectsBadPlans(t *testing.T) {
	cases := map[string]struct {
		edit func(p *plan.Plan)
		want string
	}{
		"invalid":        {func(p *plan.Plan) { p.IssueOrder = p.IssueOrder[1:] }, "issue_order: 3 ops, streams have 4"},
		"unknown buffer": {func(p *plan.Plan) { p.Stages[1].Reads[0].Buffer = "nope" }, `stage bad reads unknown buffer "nope"`},
		"out of range":   {func(p *plan.Plan) { p.Stages[1].Writes[0].Offset = 8 }, "stage bad writes y at offset 8, 64 bytes: outside the buffer's 64 bytes"},
		"unknown kernel": {func(p *plan.Plan) { p.Stages[1].Kernel = "gemm" }, `kernel "gemm" is neither a built-in nor one of the plan's kernels`},
		"builtin shape":  {func(p *plan.Plan) { p.Stages[1].Reads = nil }, "stage bad: built-in scale takes exactly 1 read, got 0"},
		"unaligned":      {func(p *plan.Plan) { p.Stages[0].Writes[0].Bytes = 6 }, "needs 4-byte aligned accesses"},
		"missing arg":    {func(p *plan.Plan) { p.Stages[1].Args = nil }, "stage bad: built-in scale needs the argument a"},
		"huge access":    {func(p *plan.Plan) { p.Stages[0].Writes[0].Offset, p.Stages[0].Writes[0].Bytes = 4092, 1<<63-4092 }, "stages[0].writes[0].offset"},
		"wrapping end":   {func(p *plan.Plan) { p.Stages[0].Writes[0].Offset, p.Stages[0].Writes[0].Bytes = 60, 1<<63-60 }, "stages[0].writes[0].bytes: stage fill writes x at offset 60, 9223372036854775748 bytes: outside the buffer's 64 bytes"},
		"arena offset":   {func(p *plan.Plan) { off := int64(1 << 62); p.Buffers[0].ArenaOffset = &off }, "arena offset"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := plan2().Plan()
			c.edit(p)
			b := sim.New(sim.Options{})
			_, err := executor.Run(context.Background(), p, b, executor.Options{Iterations: 2})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
			if s, e, bufs := b.Live(); s+e+bufs != 0 {
				t.Errorf("a rejected plan left %d streams, %d events, %d buffers", s, e, bufs)
			}
			if err := b.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// failing fails the launch of one stage.
type failing struct {
	executor.Backend
	stage string
}

func (f failing) Launch(s executor.Stream, l *executor.LaunchDesc) error {
	if l.Name == f.stage {
		return errors.New("out of resources")
	}
	return f.Backend.Launch(s, l)
}

func TestLaunchErrorNamesStageAndStream(t *testing.T) {
	b := sim.New(sim.Options{})
	_, err := executor.Run(context.Background(), plan2().Plan(), failing{b, "bad"}, executor.Options{Iterations: 3})
	want := "executor: sim: iteration 1: launch stage bad (kernel scale) on stream 1 (s1): out of resources"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if err := b.Close(); err != nil {
		t.Errorf("Run did not release after a failed launch: %v", err)
	}
}

func TestContextCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := sim.New(sim.Options{})
	_, err := executor.Run(ctx, plan2().Plan(), b, executor.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
}

func TestCountsAndSyncEach(t *testing.T) {
	for _, syncEach := range []bool{false, true} {
		b := sim.New(sim.Options{})
		res, err := executor.Run(context.Background(), plan2().Plan(), b, executor.Options{Iterations: 3, SyncEach: syncEach})
		if err != nil {
			t.Fatal(err)
		}
		// Per iteration 2 launches, 1 record, 1 wait, and the barrier form of
		// a plan without iteration info: a fork record and wait, an end
		// record, and from the second iteration on a wait on that end.
		if res.Launches != 6 || res.Records != 3+6 || res.Waits != 3+3+2 {
			t.Errorf("sync each %v: %d launches, %d records, %d waits; want 6, 9, 8", syncEach, res.Launches, res.Records, res.Waits)
		}
		if len(res.Outputs) != 1 || res.Outputs[0].Name != "y" || res.Wall <= 0 {
			t.Errorf("outputs %+v, wall %v", res.Outputs, res.Wall)
		}
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestBarrierOrdersIterations: without the barrier, iteration 2's fill on
// stream 0 would race iteration 1's scale on stream 1 (write after read).
func TestBarrierOrdersIterations(t *testing.T) {
	for seed := range int64(10) {
		b := sim.New(sim.Options{Seed: seed})
		if _, err := executor.Run(context.Background(), plan2().Plan(), b, executor.Options{Iterations: 5}); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		b.Close()
	}
}

// nop is a Backend that does nothing: it measures the executor alone.
type nop struct{ sizes map[int]int64 }

type nopHandle int

func (n *nop) Name() string                                 { return "nop" }
func (n *nop) NewStream() (executor.Stream, error)          { return nopHandle(0), nil }
func (n *nop) NewEvent() (executor.Event, error)            { return nopHandle(0), nil }
func (n *nop) Write(executor.Buffer, []byte) error          { return nil }
func (n *nop) Record(executor.Event, executor.Stream) error { return nil }
func (n *nop) Wait(executor.Stream, executor.Event) error   { return nil }
func (n *nop) Launch(executor.Stream, *executor.LaunchDesc) error {
	return nil
}
func (n *nop) Synchronize() error                  { return nil }
func (n *nop) DestroyStream(executor.Stream) error { return nil }
func (n *nop) DestroyEvent(executor.Event) error   { return nil }
func (n *nop) Free(executor.Buffer) error          { return nil }
func (n *nop) Close() error                        { return nil }
func (n *nop) Read(b executor.Buffer) ([]byte, error) {
	return make([]byte, n.sizes[int(b.(nopHandle))]), nil
}
func (n *nop) Alloc(d executor.BufferDesc) (executor.Buffer, error) {
	if n.sizes == nil {
		n.sizes = map[int]int64{}
	}
	h := len(n.sizes)
	n.sizes[h] = d.Bytes
	return nopHandle(h), nil
}

// wide is a plan of n mix stages over k streams, each waiting on the
// previous stage's stream.
func wide(n, k int) *plan.Plan {
	p := backendtest.NewBuilder(k)
	p.Buffer(plan.Buffer{Name: "x", Bytes: 4 * int64(n), Role: dag.RoleOutput})
	for i := range n {
		if i > 0 {
			p.Wait(i%k, i-1)
		}
		p.Launch(i%k, plan.Stage{Name: fmt.Sprint("m", i), Kernel: dag.BuiltinMix, Writes: backendtest.Range("x", 4*int64(i), 4)})
		p.Record(i%k, i)
	}
	return p.Plan()
}

// TestIssueLoopAllocatesNothing: the issue loop's cost per iteration is the
// backend calls only; everything is precomputed once per Run.
func TestIssueLoopAllocatesNothing(t *testing.T) {
	p := wide(100, 4)
	allocs := func(iters int) float64 {
		return testing.AllocsPerRun(5, func() {
			if _, err := executor.Run(context.Background(), p, &nop{}, executor.Options{Iterations: iters}); err != nil {
				t.Fatal(err)
			}
		})
	}
	// From 2 iterations on, the barrier exists; more iterations cost nothing.
	// (The race detector's instrumentation, and the runtime's own work on a
	// busy machine, add the odd allocation: allow 5 in 100 iterations, where
	// an issue loop that allocates once per iteration adds 100.)
	if two, many := allocs(2), allocs(102); many > two+5 {
		t.Errorf("2 iterations: %v allocs, 102 iterations: %v: the issue loop allocates", two, many)
	}
}

// TestLongRunNotSizedUpFront: a run of two billion iterations with host
// progress sizes nothing by its iterations (it once allocated per-iteration
// arrays up front): set up and cancelled at once, it returns the context's
// error, well within the test's memory.
func TestLongRunNotSizedUpFront(t *testing.T) {
	p := plan2().Plan()
	p.Stages[1].Name = "scale"
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := sim.New(sim.Options{})
	_, err := executor.Run(ctx, p, b, executor.Options{Iterations: 2_000_000_000, Progress: func(int, time.Duration) {}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want the context's cancellation", err)
	}
}

// TestInitFileNotRegular: an init file that is a fifo or a link to a
// device is refused at once (it once hung, or read /dev/zero for ever).
func TestInitFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Skip(err)
	}
	os.Symlink("/dev/zero", filepath.Join(dir, "zero"))
	for _, name := range []string{"fifo", "zero"} {
		_, err := executor.InitialContents(dir, plan.Buffer{Name: "f", Bytes: 8, Init: dag.InitFile, InitPath: name})
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: %v, want it refused as not a regular file", name, err)
		}
	}
}
