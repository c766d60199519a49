package plan

import "fmt"

// IterationMap resolves the plan-level names of iteration i (plan streams,
// events, buffers) to the physical ones the executor creates: stream set
// i mod StreamSets, event slot i mod Slots[e] (a lagged wait: the slot of its
// record's iteration), ring copy i mod Copies[b]. It is the one definition
// of that substitution: Unroll builds its plan through it and the executor
// lowers plans through it.
type IterationMap struct {
	// Sets[r][s] is the physical stream of plan stream s in stream set r
	// (PhysicalStreams).
	Sets [][]int
	// Streams is the number of physical streams.
	Streams int
	// Slots has, per plan event, the physical events it rotates through (≥ 1).
	Slots []int
	// Copies has, per plan buffer, its ring size (≥ 1).
	Copies []int

	base []int // per plan event: its first physical event; base[len(Slots)] = physical events
}

// NewIterationMap returns p's iteration map. minSlots, when not nil, has a
// lower bound per event on its slot count (the executor raises the slots of
// events the host waits on across a ring of K copies to K); entries below
// the plan's slots change nothing. Without iteration info the map has one
// stream set, one slot per event and p's ring sizes.
func NewIterationMap(p *Plan, minSlots []int) (*IterationMap, error) {
	if minSlots != nil && len(minSlots) != p.Events {
		return nil, fmt.Errorf("plan: iteration map: %d slot bounds for %d events", len(minSlots), p.Events)
	}
	m := &IterationMap{Slots: make([]int, p.Events), Copies: make([]int, len(p.Buffers)), base: make([]int, p.Events+1)}
	m.Sets, m.Streams = p.PhysicalStreams()
	for e := range m.Slots {
		m.Slots[e] = 1
		if p.Iteration != nil && e < len(p.Iteration.Slots) {
			m.Slots[e] = max(p.Iteration.Slots[e], 1)
		}
		if minSlots != nil {
			m.Slots[e] = max(m.Slots[e], minSlots[e])
		}
		m.base[e+1] = m.base[e] + m.Slots[e]
	}
	for b, pb := range p.Buffers {
		m.Copies[b] = max(pb.Copies, 1)
	}
	return m, nil
}

// Events is the number of physical events.
func (m *IterationMap) Events() int { return m.base[len(m.Slots)] }

// Stream is the physical stream that runs plan stream s in iteration it.
func (m *IterationMap) Stream(it, s int) int { return m.Sets[it%len(m.Sets)][s] }

// Set is the stream set of iteration it.
func (m *IterationMap) Set(it int) int { return it % len(m.Sets) }

// Record is the physical event a record of plan event e in iteration it
// records.
func (m *IterationMap) Record(it, e int) int { return m.base[e] + it%m.Slots[e] }

// Wait is the physical event a wait on plan event e with lag lag waits on in
// iteration it; ok is false in the first lag iterations, where the record it
// waits for was never issued (the wait is left out).
func (m *IterationMap) Wait(it, e, lag int) (phys int, ok bool) {
	if it < lag {
		return 0, false
	}
	return m.base[e] + (it-lag)%m.Slots[e], true
}

// Copy is the ring copy of plan buffer b that iteration it uses.
func (m *IterationMap) Copy(it, b int) int { return it % m.Copies[b] }

// Period is the least common multiple of the stream sets, the slot counts
// and the ring sizes: iterations it and it+Period resolve every name alike.
// It saturates at limit+1 once it exceeds limit (limit > 0).
func (m *IterationMap) Period(limit int) int { return LCM(limit, len(m.Sets), m.Slots, m.Copies) }

// RingPeriod is the least common multiple of the ring sizes alone (the
// period of iterations that never overlap, as graph replays), saturating
// like Period.
func (m *IterationMap) RingPeriod(limit int) int { return LCM(limit, 1, m.Copies) }

// LCM is the least common multiple of p and every number in lists, or
// limit+1 once it passes limit.
func LCM(limit, p int, lists ...[]int) int {
	for _, xs := range lists {
		for _, k := range xs {
			if p = lcm(p, k); p > limit {
				return limit + 1
			}
		}
	}
	return p
}
