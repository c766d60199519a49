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
	"github.com/dagrun/dagrun/verify"
)

// chainSpec: two branches on two streams, a temp per step; the arena shares
// bytes along each chain, and the branches' temps are apart. mix with
// max_words keeps the work small while the buffers stay large.
const chainSpec = `version: 1
name: chains
buffers:
  - {name: in,  bytes: 65536, role: input, init: {random: 7}}
  - {name: a1,  bytes: 65536}
  - {name: a2,  bytes: 65536}
  - {name: a3,  bytes: 65536}
  - {name: b1,  bytes: 32768}
  - {name: b2,  bytes: 32768}
  - {name: out, bytes: 65536, role: output}
stages:
  - {name: sa1, kernel: mix, args: {max_words: 64}, reads: [in], writes: [a1], stream: A}
  - {name: sa2, kernel: mix, args: {max_words: 64}, reads: [a1], writes: [a2], stream: A}
  - {name: sb1, kernel: mix, args: {max_words: 64}, reads: [in], writes: [b1], stream: B}
  - {name: sb2, kernel: mix, args: {max_words: 64}, reads: [b1], writes: [b2], stream: B}
  - {name: sa3, kernel: mix, args: {max_words: 64}, reads: [a2], writes: [a3], stream: A}
  - {name: join, kernel: mix, args: {max_words: 64}, reads: [a3, b2], writes: [out], stream: A}
`

func planYAML(t *testing.T, text string, o planner.Options) *plan.Plan {
	t.Helper()
	s, err := dag.Load([]byte(text), "test.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Build(s, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// counting wraps the simulator and counts its allocations.
type counting struct {
	*sim.Backend
	mu                          sync.Mutex
	allocs, asyncAllocs, asyncs int
	arena                       int64
}

func (c *counting) Alloc(d executor.BufferDesc) (executor.Buffer, error) {
	c.mu.Lock()
	c.allocs++
	if d.Name == "arena" {
		c.arena = d.Bytes
	}
	c.mu.Unlock()
	return c.Backend.Alloc(d)
}

func (c *counting) AllocAsync(d executor.BufferDesc, s executor.Stream) (executor.Buffer, error) {
	c.mu.Lock()
	c.asyncAllocs++
	c.mu.Unlock()
	return c.Backend.AllocAsync(d, s)
}

func (c *counting) FreeAsync(b executor.Buffer, s executor.Stream) error {
	c.mu.Lock()
	c.asyncs++
	c.mu.Unlock()
	return c.Backend.FreeAsync(b, s)
}

func runOn(t *testing.T, b executor.Backend, p *plan.Plan, o executor.Options) map[string]string {
	t.Helper()
	res, err := executor.Run(context.Background(), p, b, o)
	if cerr := b.Close(); cerr != nil {
		t.Errorf("Close: %v", cerr)
	}
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	out := map[string]string{}
	for _, x := range res.Outputs {
		out[x.Name] = x.Checksum
	}
	return out
}

// TestArenaAndDynamicMatch: the static arena, dynamic allocation and
// separate buffers give the same outputs, with no race and no leak, for
// one and several iterations.
func TestArenaAndDynamicMatch(t *testing.T) {
	arena := planYAML(t, chainSpec, planner.Options{})
	off := planYAML(t, chainSpec, planner.Options{Arena: dag.ArenaOff})
	if arena.Stats.ArenaBytes == 0 || arena.Stats.ArenaBytes >= plan.NoReuseBytes(arena) {
		t.Fatalf("arena %d bytes, no reuse %d: the spec should share bytes", arena.Stats.ArenaBytes, plan.NoReuseBytes(arena))
	}
	for _, iters := range []int{1, 3} {
		want := runOn(t, sim.New(sim.Options{Seed: 1}), off, executor.Options{Iterations: iters})
		c := &counting{Backend: sim.New(sim.Options{Seed: 2})}
		if got := runOn(t, c, arena, executor.Options{Iterations: iters}); got["out"] != want["out"] {
			t.Errorf("%d iterations: arena out %s, separate buffers %s", iters, got["out"], want["out"])
		}
		// in, out and the arena: three allocations.
		if c.allocs != 3 || c.arena != arena.Stats.ArenaBytes {
			t.Errorf("arena run: %d allocations, arena %d bytes", c.allocs, c.arena)
		}
		for _, p := range []*plan.Plan{arena, off} {
			c := &counting{Backend: sim.New(sim.Options{Seed: 3})}
			if got := runOn(t, c, p, executor.Options{Iterations: iters, Alloc: executor.AllocDynamic}); got["out"] != want["out"] {
				t.Errorf("%d iterations: dynamic out %s, want %s", iters, got["out"], want["out"])
			}
			if c.asyncAllocs != 5*iters || c.asyncs != 5*iters || c.allocs != 2 {
				t.Errorf("dynamic: %d stream-ordered allocations, %d frees, %d others; want %d, %d, 2", c.asyncAllocs, c.asyncs, c.allocs, 5*iters, 5*iters)
			}
		}
	}
}

// TestDynamicLifetimeCutShort: a lifetime that lists only the allocating
// stream (the caching allocator's rule) frees a buffer that another stream
// still reads; the simulator's detector reports the free racing the read.
func TestDynamicLifetimeCutShort(t *testing.T) {
	const text = `version: 1
name: cut
buffers:
  - {name: x,   bytes: 4096}
  - {name: y,   bytes: 4096, role: output}
  - {name: z,   bytes: 4096, role: output}
stages:
  - {name: make, kernel: fill, args: {value: 1.0}, writes: [x], stream: A}
  - {name: busy, kernel: spin, args: {us: 200}, after: [make], stream: B}
  - {name: use,  kernel: copy, reads: [x], writes: [y], stream: B}
  - {name: more, kernel: fill, args: {value: 2.0}, writes: [z], stream: A}
`
	p := planYAML(t, text, planner.Options{Arena: dag.ArenaOff})
	if got := runOn(t, sim.New(sim.Options{Seed: 1}), p, executor.Options{Alloc: executor.AllocDynamic}); got["y"] == "" {
		t.Fatalf("planned lifetimes: outputs %v", got)
	}
	for i := range p.Lifetimes {
		if l := &p.Lifetimes[i]; l.Buffer == "x" {
			if len(l.Done) != 2 {
				t.Fatalf("x's lifetime lists %v, want streams A and B", l.Done)
			}
			l.Done = l.Done[:1] // stream A only: "the allocating stream is done"
		}
	}
	b := sim.New(sim.Options{Seed: 1})
	_, err := executor.Run(context.Background(), p, b, executor.Options{Alloc: executor.AllocDynamic})
	b.Close()
	// The report names the free or the lifetime record that ends too early,
	// depending on which of the two conflicting points the detector meets
	// second (the streams' goroutines' timing); both name the bug.
	var re *executor.RaceError
	if !errors.As(err, &re) || !(strings.Contains(re.Error(), "free(x)") || strings.Contains(re.Error(), "lifetime of x: stream B uses it")) {
		t.Fatalf("Run: %v, want a race with free(x) or x's lifetime on stream B", err)
	}
}

// TestDynamicNeedsStreamAllocator: a backend without stream-ordered
// allocation refuses --alloc dynamic; an unknown mode is refused too.
func TestDynamicNeedsStreamAllocator(t *testing.T) {
	p := planYAML(t, chainSpec, planner.Options{})
	_, err := executor.Run(context.Background(), p, plainBackend{sim.New(sim.Options{})}, executor.Options{Alloc: executor.AllocDynamic})
	if !errors.Is(err, executor.ErrNoStreamAlloc) {
		t.Errorf("Run: %v, want ErrNoStreamAlloc", err)
	}
	if _, err := executor.Run(context.Background(), p, sim.New(sim.Options{}), executor.Options{Alloc: "lazy"}); err == nil || !strings.Contains(err.Error(), "alloc mode") {
		t.Errorf("Run with alloc lazy: %v", err)
	}
}

// TestArenaGraphMode: graph mode (emulated) runs the arena like stream mode.
func TestArenaGraphMode(t *testing.T) {
	p := planYAML(t, chainSpec, planner.Options{})
	want := runOn(t, sim.New(sim.Options{Seed: 1}), p, executor.Options{})
	got := runOn(t, executor.EmulateGraphs(sim.New(sim.Options{Seed: 1})), p, executor.Options{Mode: executor.ModeGraph, Iterations: 2})
	if got["out"] != want["out"] {
		t.Errorf("graph mode out %s, stream mode %s", got["out"], want["out"])
	}
}

const hostSpec = `version: 1
name: host
buffers:
  - {name: staging, bytes: 65536, where: host_pinned}
  - {name: d0,  bytes: 65536, role: output}
  - {name: d1,  bytes: 65536, role: output}
  - {name: back, bytes: 65536, where: host_pinned}
  - {name: sum, bytes: 8, where: host_pinned, role: output}
stages:
  - {name: fill0, kernel: fill, args: {value: 1.0}, writes: [staging], stream: host}
  - {name: busy,  kernel: spin, args: {us: 300}, stream: h2d}
  - {name: up0,   kernel: copy, reads: [staging], writes: [d0], stream: h2d}
  - {name: fill1, kernel: fill, args: {value: 2.0}, writes: [staging], stream: host}
  - {name: up1,   kernel: copy, reads: [staging], writes: [d1], stream: h2d}
  - {name: twice, kernel: scale, args: {a: 2.0}, reads: [d1], writes: [d0], stream: h2d}
  - {name: down,  kernel: copy, reads: [d0], writes: [back], stream: h2d}
  - {name: check, kernel: checksum, reads: [back], writes: [sum], stream: host}
`

// TestHostStages: host stages run on the host thread in issue order, after
// the host waits the plan places; the outputs are the one-stream ones.
func TestHostStages(t *testing.T) {
	p := planYAML(t, hostSpec, planner.Options{})
	for seed := int64(1); seed <= 5; seed++ {
		got := runOn(t, sim.New(sim.Options{Seed: seed, MaxDelay: 50e3}), p, executor.Options{})
		ones := executor.Checksum(fillBytes(65536, 0x40800000)) // d0 = 2·2.0 = 4.0
		twos := executor.Checksum(fillBytes(65536, 0x40000000))
		if got["d0"] != ones || got["d1"] != twos {
			t.Fatalf("seed %d: d0 %s d1 %s, want %s %s", seed, got["d0"], got["d1"], ones, twos)
		}
		// 16384 words of 4.0: wrapping sum 16384·0x40800000.
		if got["sum"] == "" {
			t.Fatalf("no sum")
		}
	}
	// Host stages need a HostSyncer.
	_, err := executor.Run(context.Background(), p, plainBackend{sim.New(sim.Options{})}, executor.Options{})
	if !errors.Is(err, executor.ErrNoHostSync) {
		t.Errorf("plain backend: %v", err)
	}
	// Several iterations take the barrier path, host included.
	if got := runOn(t, sim.New(sim.Options{Seed: 9}), p, executor.Options{Iterations: 3}); got["d1"] != executor.Checksum(fillBytes(65536, 0x40000000)) {
		t.Errorf("3 iterations: %v", got)
	}
}

func fillBytes(n int, word uint32) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = byte(word), byte(word>>8), byte(word>>16), byte(word>>24)
	}
	return b
}

// TestHostStageMissingWait: without the host's waits (device → host),
// fill1 overwrites staging while up0 may still read it and check reads back
// before the copy: Verify and the simulator's detector both report it.
func TestHostStageMissingWait(t *testing.T) {
	p := stripHostWaits(planYAML(t, hostSpec, planner.Options{}))
	if err := verify.Verify(p); err == nil {
		t.Fatal("Verify accepts the plan without host waits")
	}
	b := sim.New(sim.Options{Seed: 1})
	_, err := executor.Run(context.Background(), p, b, executor.Options{})
	b.Close()
	var re *executor.RaceError
	if !errors.As(err, &re) || !strings.Contains(re.Error(), "host") {
		t.Fatalf("Run: %v, want a race with the host", err)
	}
}

// stripHostWaits removes the host stream's waits, renumbering the issue
// order, and drops the iteration info.
func stripHostWaits(p *plan.Plan) *plan.Plan {
	remap := make([][]int, len(p.Streams))
	for s := range p.Streams {
		var keep []plan.Op
		for _, o := range p.Streams[s].Ops {
			if p.Streams[s].Host && o.Kind == plan.OpWait {
				remap[s] = append(remap[s], -1)
				continue
			}
			remap[s] = append(remap[s], len(keep))
			keep = append(keep, o)
		}
		p.Streams[s].Ops = keep
	}
	var order [][2]int
	for _, so := range p.IssueOrder {
		if j := remap[so[0]][so[1]]; j >= 0 {
			order = append(order, [2]int{so[0], j})
		}
	}
	p.IssueOrder, p.Iteration = order, nil
	return p
}
