package planner

import (
	"cmp"
	"slices"

	"github.com/dagrun/dagrun/plan"
)

// keptStreams is a plan's streams, which the re-plan after a reuse step
// keeps (state.keep). A reuse step orders only buffers that the plan's
// ideal schedule runs one after the other already (every stage of x ends
// before any stage of y starts), so that schedule meets the new orders as
// it is: with every stage on its stream there, in the same order, the
// re-plan's ideal schedule is the same, stage for stage, and so is its
// ideal makespan, where a re-plan that chose its streams anew (a new path
// cover, under a cap folded anew) could come out longer. The order is the
// plan's stages by start in that schedule (ties in its issue order): a
// topological order of the graph with the new orders, since each of its
// edges runs from a stage's end to a start no earlier (durations are at
// least 1 µs), and on each stream the order of the plan.
type keptStreams struct {
	stream []int32  // per stage: its stream in the kept plan
	names  []string // per stream of the kept plan: its name
	prio   []uint64 // per stage: its rank in the order above
	notes  []string // the kept plan's assign notes
}

// keepStreams returns st's plan's streams for the re-plan to keep.
func (st *state) keepStreams() *keptStreams {
	p := st.plan
	k := &keptStreams{stream: make([]int32, st.n), names: make([]string, len(p.Streams)), prio: make([]uint64, st.n), notes: st.assignNotes}
	for i, s := range p.Streams {
		k.names[i] = s.Name
	}
	for v := range p.Stages {
		k.stream[v] = int32(p.Stages[v].Stream)
	}
	start, _ := plan.IdealSchedule(p)
	order := slices.Clone(st.topo) // the issue order
	slices.SortStableFunc(order, func(u, v int32) int { return cmp.Compare(start[u], start[v]) })
	for i, v := range order {
		k.prio[v] = uint64(i)
	}
	return k
}

// groups sets grp, each stage's group for setStreams, to its kept stream:
// the pin's group (0..len(pinNames)-1) for a stream named by a pin, else
// one group per stream after those.
func (k *keptStreams) groups(grp []int32, pinNames []string) {
	pinned := make(map[string]int32, len(pinNames))
	for i, n := range pinNames {
		pinned[n] = int32(i)
	}
	P := int32(len(pinNames))
	for v, s := range k.stream {
		if g, ok := pinned[k.names[s]]; ok {
			grp[v] = g
		} else {
			grp[v] = P + s
		}
	}
}

// keepRendezvous returns the pairs whose orders, with those of st's graph,
// keep each collective's ranks one node of an acyclic graph (acyclicWith):
// an order from one rank to another through other stages would leave a
// rank waiting for another's completion, a deadlock, and the ranks could
// not be issued as one group. The whole batch is tried first, then, if it
// fails, each pair in turn.
func keepRendezvous(st *state, pairs [][2]int, stages [][]int32) [][2]int {
	var extra [][2]int32 // the orders of earlier steps are in st.g already
	add := func(extra [][2]int32, pr [2]int) [][2]int32 {
		for _, u := range stages[pr[0]] {
			for _, v := range stages[pr[1]] {
				extra = append(extra, [2]int32{u, v})
			}
		}
		return extra
	}
	all := extra
	for _, pr := range pairs {
		all = add(all, pr)
	}
	if st.acyclicWith(all) {
		return pairs
	}
	var kept [][2]int
	for _, pr := range pairs {
		if next := add(extra, pr); st.acyclicWith(next) {
			kept, extra = append(kept, pr), next
		}
	}
	return kept
}
