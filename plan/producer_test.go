package plan_test

import (
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
)

// Validate takes alloc producer on a temp without an arena offset, and
// refuses it with an offset, on a buffer other than a device temp, with initial
// contents other than zeros, and an alloc mode it does not know.
func TestValidateAllocProducer(t *testing.T) {
	base := func() *plan.Plan {
		p := build(t, spec(stage("a", writes("x")), stage("b", reads("x"), writes("y"))), planner.Options{})
		if p.Buffers[0].Name != "x" || p.Buffers[0].ArenaOffset == nil {
			t.Fatalf("buffer 0 is %s, arena offset %v: want x in the arena", p.Buffers[0].Name, p.Buffers[0].ArenaOffset)
		}
		return p
	}
	for _, init := range []string{"", "zeros"} {
		p := base()
		p.Buffers[0].Alloc, p.Buffers[0].ArenaOffset, p.Buffers[0].Init = plan.AllocProducer, nil, init
		if err := p.Validate(); err != nil {
			t.Errorf("a producer temp without an arena offset, init %q: %v", init, err)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(b *plan.Buffer)
		want string
	}{
		{"in the arena", func(b *plan.Buffer) { b.Alloc = plan.AllocProducer }, "buffers[0].arena_offset: buffer x has alloc producer and an arena offset"},
		{"an input", func(b *plan.Buffer) { b.Alloc, b.Role, b.ArenaOffset = plan.AllocProducer, "input", nil }, "buffers[0].alloc: buffer x (input) has alloc producer; only temps"},
		{"on the host", func(b *plan.Buffer) { b.Alloc, b.Where, b.ArenaOffset = plan.AllocProducer, "host_pinned", nil }, "buffers[0].alloc: buffer x (host_pinned) has alloc producer; only device temps"},
		{"unknown", func(b *plan.Buffer) { b.Alloc = "eager" }, `buffers[0].alloc: buffer x: alloc "eager", want lazy, producer or none`},
		{"with contents", func(b *plan.Buffer) { b.Alloc, b.ArenaOffset, b.Init, b.InitValue = plan.AllocProducer, nil, "fill", 1 }, "buffers[0].init: buffer x has init fill and alloc producer; its first writer allocates it"},
	} {
		p := base()
		tc.edit(&p.Buffers[0])
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// An alloc: lazy buffer is a workspace each stream allocates at its first
// use: the planner never places it in the arena, and Validate refuses a
// plan file that gives it an arena offset.
func TestAllocLazyOutsideArena(t *testing.T) {
	s := spec(stage("a", writes("x")), stage("b", reads("x"), writes("y")))
	s.Buffers[0].Alloc = dag.AllocLazy
	p := build(t, s, planner.Options{})
	if b := p.Buffers[0]; b.Name != "x" || b.Alloc != plan.AllocLazy || b.ArenaOffset != nil {
		t.Fatalf("buffer 0: %+v, want x, alloc lazy, no arena offset", b)
	}
	q := build(t, spec(stage("a", writes("x")), stage("b", reads("x"), writes("y"))), planner.Options{})
	q.Buffers[0].Alloc = plan.AllocLazy
	if err := q.Validate(); err == nil || !strings.Contains(err.Error(), "buffers[0].arena_offset: buffer x has alloc lazy and an arena offset") {
		t.Errorf("lazy in the arena: %v", err)
	}
}
