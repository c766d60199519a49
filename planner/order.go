package planner

import (
	"container/heap"
	"fmt"
	"math/rand/v2"

	"github.com/dagrun/dagrun/plan"
)

// order computes the topological order the passes share: the hazard graph's
// stable order, or in check mode with a shuffle seed, Kahn's algorithm with
// a seeded random priority among ready stages, or with a kept plan
// (st.keep), Kahn's algorithm with the kept plan's order as the priority
// (keptStreams: its stages by start in its ideal schedule, a topological
// order of this graph too, which Kahn's algorithm then returns as it is,
// so that each stream keeps its order). A collective's ranks are one
// rendezvous, issued as one group, so they are consecutive in the order
// (rank 0 first): with collectives the order is Kahn's algorithm on the
// graph with each collective's ranks taken as one node, the smallest
// declaration index (or the seeded priority) first among ready nodes.
//
// Errors: a collective whose ranks cannot be consecutive (a stage must run
// after one rank and before another: the collective would deadlock).
func (st *state) order() error {
	n := st.n
	shuffle := st.opts.Check && st.opts.ShuffleSeed != 0
	if !shuffle && st.coll == nil && st.keep == nil {
		st.topo = st.g.Order()
	} else {
		prio := make([]uint64, n)
		if st.keep != nil {
			prio = st.keep.prio
		} else if shuffle {
			rng := rand.New(rand.NewPCG(uint64(st.opts.ShuffleSeed), 0x9E3779B97F4A7C15))
			for i := range prio {
				prio[i] = rng.Uint64()
			}
		} else {
			for i := range prio {
				prio[i] = uint64(i)
			}
		}
		unit := st.units()
		size := make([]int32, n)
		for v := 0; v < n; v++ {
			size[unit[v]]++
		}
		indeg := make([]int32, n)
		for v := 0; v < n; v++ {
			for _, u := range st.g.Pred(v) {
				if unit[u] != unit[v] {
					indeg[unit[v]]++
				}
			}
		}
		h := &prioHeap{prio: prio}
		for v := 0; v < n; v++ {
			if unit[v] == int32(v) && indeg[v] == 0 {
				heap.Push(h, int32(v))
			}
		}
		st.topo = make([]int32, 0, n)
		for h.Len() > 0 {
			u := heap.Pop(h).(int32)
			for m := u; m < u+size[u]; m++ {
				st.topo = append(st.topo, m)
			}
			for m := u; m < u+size[u]; m++ {
				for _, v := range st.g.Succ(int(m)) {
					if w := unit[v]; w != u {
						if indeg[w]--; indeg[w] == 0 {
							heap.Push(h, w)
						}
					}
				}
			}
		}
		if len(st.topo) < n {
			for v := 0; v < n; v++ {
				if unit[v] == int32(v) && size[v] > 1 && indeg[v] > 0 {
					return fmt.Errorf("planner: the ranks of collective %s cannot be issued as one group: a stage is ordered after one of its ranks and before another, and no rank completes before every rank has started (a deadlock); order that stage before every rank or after every rank",
						plan.RankGroupName([]string{st.spec.Stages[v].Name}))
				}
			}
			return fmt.Errorf("planner: the order has a cycle")
		}
	}
	st.pos = make([]int32, n)
	for i, v := range st.topo {
		st.pos[v] = int32(i)
	}
	return nil
}

// units returns, per stage, the node it is in the graph the order and the
// budget loop work on: a collective's ranks are one node, numbered by its
// rank 0 (lowerDevices puts the ranks consecutively, rank 0 first); every
// other stage is its own.
func (st *state) units() []int32 {
	unit := make([]int32, st.n)
	for v := range unit {
		unit[v] = int32(v)
		if st.coll != nil && v > 0 && v < len(st.coll) && st.coll[v] != nil && st.coll[v].Rank > 0 {
			unit[v] = unit[v-1]
		}
	}
	return unit
}

type prioHeap struct {
	prio []uint64
	a    []int32
}

func (h *prioHeap) Len() int { return len(h.a) }

func (h *prioHeap) Less(i, j int) bool { return h.prio[h.a[i]] < h.prio[h.a[j]] }

func (h *prioHeap) Swap(i, j int) { h.a[i], h.a[j] = h.a[j], h.a[i] }

func (h *prioHeap) Push(x any) { h.a = append(h.a, x.(int32)) }

func (h *prioHeap) Pop() any {
	x := h.a[len(h.a)-1]
	h.a = h.a[:len(h.a)-1]
	return x
}
