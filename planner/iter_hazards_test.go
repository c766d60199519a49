package planner

import (
	"slices"
	"testing"

	"github.com/dagrun/dagrun/plan"
)

// The cross-iteration orders do not depend on how large the address space
// is: with every bound of a buffer scaled past what packs into a 64-bit
// sort key with its index (packShift), iterHazards sorts the bounds as
// wide keys and finds the same orders.
func TestIterHazardsWideBounds(t *testing.T) {
	s := loadSpec(t, `version: 1
buffers:
  - {name: x, bytes: 4096, copies: 2}
  - {name: y, bytes: 4096}
  - {name: z, bytes: 4096}
stages:
  - {name: a, kernel: mix, writes: [{buffer: x, offset: 0, bytes: 2048}]}
  - {name: b, kernel: mix, reads: [{buffer: x, offset: 1024, bytes: 2048}], writes: [y]}
  - {name: c, kernel: mix, reads: [y], writes: [{buffer: x, offset: 2048, bytes: 2048}]}
  - {name: d, kernel: mix, reads: [{buffer: x, offset: 0, bytes: 4096}], writes: [z]}
`)
	p := build(t, s, Options{})
	copies := make([]int, len(p.Buffers))
	for i, b := range p.Buffers {
		copies[i] = max(b.Copies, 1)
	}
	narrow, k := iterHazards(p, copies, newPlanAccesses(p))
	if len(narrow.r) == 0 {
		t.Fatal("no cross-iteration orders: the test would not compare anything")
	}
	const scale = 1 << 50
	for v := range p.Stages {
		for _, list := range [][]plan.Access{p.Stages[v].Reads, p.Stages[v].Writes} {
			for j := range list {
				if list[j].Buffer == "x" {
					list[j].Offset *= scale
					list[j].Bytes *= scale
				}
			}
		}
	}
	if _, ok := packShift(4, 0, 4096*scale); ok {
		t.Fatal("the scaled bounds pack: the test would not reach the wide keys")
	}
	wide, k2 := iterHazards(p, copies, newPlanAccesses(p))
	if !slices.Equal(narrow.off, wide.off) || !slices.Equal(narrow.r, wide.r) || k != k2 {
		t.Errorf("orders with wide bounds %v %v (in flight %d), want %v %v (%d)", wide.off, wide.r, k2, narrow.off, narrow.r, k)
	}
}
