package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/internal/num"
)

// assign maps stages to streams by the strategy: default and naive take a
// minimum path cover of the reduced graph (each chain a stream), single one
// stream, round-robin deals each level over streams, hazard-dag chains the
// hazard DAG greedily. Pins (`stream:`) win under every strategy: all
// stages pinned to one name share a stream. With a kept plan (st.keep, a
// budget re-plan) every stage keeps its stream there, with that plan's
// assign notes. docs/design/assign.md has the design.
func assign(st *state) error {
	before := len(st.notes)
	defer func() { st.assignNotes = slices.Clone(st.notes[before:]) }()
	pin, pinNames := st.pins()
	grp := make([]int32, st.n) // group per stage; pinned groups are 0..len(pinNames)-1
	P := int32(len(pinNames))
	for v := range grp {
		grp[v] = pin[v]
	}
	if st.keep != nil {
		st.keep.groups(grp, pinNames)
		st.notes = append(st.notes, st.keep.notes...)
	} else {
		st.chooseGroups(pin, grp, P)
	}
	st.setStreams(grp, pinNames, P)
	return st.checkHost()
}

// chooseGroups sets grp, each stage's group (a stream), by the strategy.
func (st *state) chooseGroups(pin, grp []int32, P int32) {
	switch st.strategy {
	case StrategySingle:
		for v := range grp {
			if pin[v] < 0 {
				grp[v] = P
			}
		}
	case StrategyRoundRobin:
		st.roundRobin(pin, grp, P)
	case StrategyHazardDAG:
		st.hazardChains(pin, grp, P)
		if n := countGroups(grp); st.maxStr > 0 && n > st.maxStr {
			st.note("a stream cap of %d (--max-streams, or the spec's max_streams) is not applied: the hazard-dag strategy's streams are the greedy chains of the hazard DAG (%d streams here); use the default strategy for a cap", st.maxStr, n)
		}
	default:
		st.pathCover(pin, grp, P)
	}
}

// pins returns each stage's pin index (-1 if free) and the pin names in
// order of first use in declaration order.
func (st *state) pins() ([]int32, []string) {
	pin := make([]int32, st.n)
	idx := map[string]int32{}
	var names []string
	for v, sg := range st.spec.Stages {
		pin[v] = -1
		if sg.Stream == "" {
			continue
		}
		k, ok := idx[sg.Stream]
		if !ok {
			k = int32(len(names))
			idx[sg.Stream] = k
			names = append(names, sg.Stream)
		}
		pin[v] = k
	}
	return pin, names
}

// pathCover groups stages into chains of a minimum path cover: a maximum
// matching on the reduced graph, each matched edge u → v putting v right
// after u on one stream (Nimble, Kwon et al., NeurIPS 2020, §4.2).
//
// Pins: a matching edge between stages pinned to different names is
// forbidden; consecutive stages of one pin joined by a reduced edge start
// matched; a chain that still meets two pins (through free stages) is cut
// before the first stage of the second pin, and chains of one pin share
// that pin's stream. Free stages of a pin with several chains get chains of
// their own, so that merging the pin's chains serializes only pinned stages.
//
// With MaxStreams = N below the number of chains, the critical path (by
// duration_us, 0 counted as 1 µs) is forced into one chain before matching;
// then chains are folded onto N streams by greedy list scheduling: the
// critical chain keeps a stream of its own (it is busy from time 0 to the
// critical path's end in the ideal schedule, so any other chain on it would
// delay it), pinned streams stay as they are, and each other chain, in order
// of earliest start (ASAP), goes to the remaining stream that is free
// earliest. If pins leave no stream free, the other chains join the
// critical chain's stream. One sweep of local search then moves each free
// chain to the stream (the critical chain's included) that most shortens
// the simulated makespan (improveFold; bounded by foldBudget, beyond which
// the plan gets a note).
func (st *state) pathCover(pin, grp []int32, P int32) {
	m := st.pinMatcher(pin, P)
	size := m.match(st.topo)
	if P == 0 {
		st.matching = size
	}
	st.chains(m, pin, grp, P)
	if st.maxStr <= 0 || countGroups(grp) <= st.maxStr {
		return
	}
	// Over the cap: force the critical path into one chain, then fold.
	m = st.pinMatcher(pin, P)
	m.fixed = make([]bool, st.n)
	cp := st.criticalPath()
	for i := 0; i+1 < len(cp); i++ {
		u, v := cp[i], cp[i+1]
		if !m.allowed(u, v) || !slices.Contains(st.red.row(int(u)), v) {
			continue
		}
		if w := m.matchL[u]; w >= 0 { // undo a pin pre-match
			m.matchR[w] = -1
		}
		if w := m.matchR[v]; w >= 0 {
			m.matchL[w] = -1
		}
		m.matchL[u], m.matchR[v] = v, u
		m.fixed[u] = true
	}
	m.match(st.topo)
	st.chains(m, pin, grp, P)
	st.fold(grp, P)
}

func countGroups(grp []int32) int {
	seen := map[int32]bool{}
	for _, g := range grp {
		seen[g] = true
	}
	return len(seen)
}

// pinMatcher returns a matcher on the reduced graph that forbids edges
// between different pins and starts with consecutive stages of each pin
// matched where a reduced edge joins them.
func (st *state) pinMatcher(pin []int32, P int32) *matcher {
	m := newMatcher(st.n, st.red)
	if P == 0 {
		if st.dev != nil {
			m.ok = st.sameDevice
		}
		return m
	}
	host := st.hostPin(pin) // the host thread's stages chain only with each other
	m.ok = func(u, v int32) bool {
		return (pin[u] < 0 || pin[v] < 0 || pin[u] == pin[v]) && (host < 0 || (pin[u] == host) == (pin[v] == host)) && st.sameDevice(u, v)
	}
	last := make([]int32, P)
	for i := range last {
		last[i] = -1
	}
	for _, v := range st.topo {
		p := pin[v]
		if p < 0 {
			continue
		}
		if u := last[p]; u >= 0 && m.matchL[u] < 0 && m.matchR[v] < 0 && slices.Contains(st.red.row(int(u)), v) {
			m.matchL[u], m.matchR[v] = v, u
		}
		last[p] = v
	}
	return m
}

// chains sets grp from the matching's chains: a chain meeting two pins is
// cut before the first stage of the second; pinned chains take their pin's
// group (0..P-1), free chains a group of their own.
func (st *state) chains(m *matcher, pin, grp []int32, P int32) {
	n := st.n
	hasPins := P > 0
	// Walk chains from their heads in topological order, cutting at pin changes.
	chain := make([]int32, n)
	chainPin := []int32{}
	for _, h := range st.topo {
		if m.matchR[h] >= 0 {
			continue
		}
		c := int32(len(chainPin))
		chainPin = append(chainPin, -1)
		for v := h; v >= 0; v = m.matchL[v] {
			if p := pin[v]; p >= 0 {
				if chainPin[c] >= 0 && chainPin[c] != p {
					c = int32(len(chainPin))
					chainPin = append(chainPin, -1)
				}
				chainPin[c] = p
			}
			chain[v] = c
		}
	}
	// A pin with several chains puts them all on one stream, which would
	// serialize the free stages of those chains with each other: give each
	// maximal run of free stages in them a chain of its own instead.
	if hasPins {
		chainsOfPin := make([]int32, P)
		for _, p := range chainPin {
			if p >= 0 {
				chainsOfPin[p]++
			}
		}
		for _, h := range st.topo {
			if m.matchR[h] >= 0 {
				continue
			}
			run := int32(-1)
			for v := h; v >= 0; v = m.matchL[v] {
				p := chainPin[chain[v]]
				if p < 0 || chainsOfPin[p] < 2 || pin[v] >= 0 {
					run = -1
					continue
				}
				if run < 0 {
					run = int32(len(chainPin))
					chainPin = append(chainPin, -1)
				}
				chain[v] = run
			}
		}
	}
	// Groups: pinned chains join their pin's group, free chains are their own.
	for v := 0; v < n; v++ {
		if p := chainPin[chain[v]]; p >= 0 {
			grp[v] = p
		} else {
			grp[v] = P + chain[v]
		}
	}
}

// chainInfo is a free chain being folded.
type chainInfo struct {
	g     int32
	start float64 // earliest start (ASAP) of its first stage, µs
	head  int32   // position of the first stage
	work  float64 // sum of its durations, µs
}

// fold merges free groups onto at most st.maxStr streams (see pathCover).
func (st *state) fold(grp []int32, P int32) {
	if st.dev != nil {
		st.foldDevices(grp, P)
		return
	}
	cp := st.criticalPath()
	cpGrp := grp[cp[0]]
	if host := st.hostPin(nil); host >= 0 { // free chains never fold onto the host thread
		for _, v := range cp {
			if grp[v] != host {
				cpGrp = grp[v]
				break
			}
		}
	}
	st.foldOn(grp, P, cpGrp, int(P), func(int32) bool { return true })
}

// foldOn folds the free chains whose first stage on(v) accepts onto the
// streams max_streams leaves beside pins pinned streams and the critical
// chain's group cpGrp (see pathCover).
func (st *state) foldOn(grp []int32, P, cpGrp int32, pins int, on func(v int32) bool) {
	est, _ := st.asap()
	info := map[int32]*chainInfo{}
	var chains []*chainInfo
	for _, v := range st.topo {
		g := grp[v]
		if g < P || g == cpGrp || !on(v) {
			continue
		}
		c := info[g]
		if c == nil {
			c = &chainInfo{g: g, start: est[v], head: st.pos[v]}
			info[g] = c
			chains = append(chains, c)
		}
		c.work += st.dur[v]
	}
	slots := st.maxStr - pins
	if cpGrp >= P {
		slots--
	}
	remap := map[int32]int32{}
	if slots <= 0 && cpGrp < 0 && len(chains) > 0 {
		cpGrp, chains = chains[0].g, chains[1:] // no critical chain here: the first chain takes the rest
	}
	if slots <= 0 {
		for _, c := range chains {
			remap[c.g] = cpGrp
		}
	} else {
		slices.SortStableFunc(chains, func(a, b *chainInfo) int {
			return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.head, b.head))
		})
		busy := make([]float64, slots)
		target := make([]int32, slots)
		for i := range target {
			target[i] = -1
		}
		for _, c := range chains {
			best := 0
			for i := 1; i < slots; i++ {
				if busy[i] < busy[best] {
					best = i
				}
			}
			busy[best] = max(busy[best], c.start) + c.work
			if target[best] < 0 {
				target[best] = c.g
			}
			remap[c.g] = target[best]
		}
	}
	orig := slices.Clone(grp)
	for v := range grp {
		if t, ok := remap[grp[v]]; ok {
			grp[v] = t
		}
	}
	if cpGrp < 0 {
		if len(chains) == 0 {
			return
		}
		cpGrp = remap[chains[0].g]
	}
	st.improveFold(grp, orig, chains, remap, cpGrp, on)
}

// foldDevices is fold on a plan of several devices: max_streams caps the
// streams of each device, and each device's chains fold onto its own
// streams (a stream never mixes devices), beside the part of the critical
// path on that device.
func (st *state) foldDevices(grp []int32, P int32) {
	cp := st.criticalPath()
	host := st.hostPin(nil)
	n := st.spec.Devices
	for d := int32(0); d < int32(n); d++ {
		cpGrp := int32(-1)
		for _, v := range cp {
			if st.dev[v] == d && grp[v] != host {
				cpGrp = grp[v]
				break
			}
		}
		pinned := map[int32]bool{}
		for v, g := range grp {
			if g < P && g != host && st.dev[v] == d {
				pinned[g] = true
			}
		}
		st.foldOn(grp, P, cpGrp, len(pinned), func(v int32) bool { return st.dev[v] == d })
	}
}

// foldFloor returns the least ideal makespan (µs) of any plan that puts
// the stages on(v) selects on as many streams as grp does (streams): one
// stream runs its stages one after another, so some stream has at least
// work/streams of them, work being their durations' sum (µs).
func (st *state) foldFloor(grp []int32, on func(v int32) bool) (floor, work float64, streams int) {
	seen := map[int32]bool{}
	for v, g := range grp {
		if on(int32(v)) {
			work += st.dur[v]
			seen[g] = true
		}
	}
	if len(seen) == 0 {
		return 0, 0, 0
	}
	return work / float64(len(seen)), work, len(seen)
}

// foldBudget bounds improveFold's work (chain moves tried × graph size).
// A variable for tests.
var foldBudget = 50_000_000

// improveFold is one sweep of local search after the greedy fold: each
// free chain in turn moves to the stream (any free target, or the critical
// chain's) that gives the smallest simulated makespan, if smaller. It is
// skipped when the sweep would cost more than foldBudget steps, with a
// note of what that may cost (foldFloor). on selects the stages the fold
// placed (those of one device).
func (st *state) improveFold(grp, orig []int32, chains []*chainInfo, remap map[int32]int32, cpGrp int32, on func(v int32) bool) {
	targets := []int32{cpGrp}
	seen := map[int32]bool{cpGrp: true}
	for _, c := range chains {
		if t := remap[c.g]; !seen[t] {
			seen[t] = true
			targets = append(targets, t)
		}
	}
	cost := len(chains) * len(targets) * (st.n + st.redPred.edges())
	if len(targets) < 2 {
		return
	}
	if cost > foldBudget {
		// What it may cost: the greedy fold's ideal makespan against the
		// most that no fold goes below.
		got := st.makespan(grp, make([]float64, st.n), make([]float64, slices.Max(grp)+1))
		_, eft := st.asap()
		cp := slices.Max(eft)
		of := ""
		if st.ordered {
			of = " of the spec with memory_budget's orders (what they cost is in the plan's budget steps)"
		}
		bound := fmt.Sprintf("the critical path of %.1f µs%s", cp, of)
		floor, work, streams := st.foldFloor(grp, on)
		if floor > cp {
			bound = fmt.Sprintf("the %.1f µs that no plan on these %d streams goes below (their stages' %.1f µs of work over %d streams; the critical path%s is %.1f µs)", floor, streams, work, streams, of, cp)
			cp = floor
		}
		st.note("max_streams %d: the local search after the greedy fold is bounded at %s steps (this plan needs %s: %d chains × %d streams × %s stages and edges), so the chains stay where the greedy fold put them: its ideal makespan is %.1f µs, %.1f µs (%.1f%%) over %s, the most the search could have saved",
			st.maxStr, num.Thousands(foldBudget), num.Thousands(cost), len(chains), len(targets), num.Thousands(st.n+st.redPred.edges()), got, got-cp, 100*(got-cp)/cp, bound)
		return
	}
	members := map[int32][]int32{} // free chain → its stages
	for _, c := range chains {
		members[c.g] = nil
	}
	for v, g := range orig {
		if ms, ok := members[g]; ok {
			members[g] = append(ms, int32(v))
		}
	}
	eft := make([]float64, st.n)
	free := make([]float64, slices.Max(grp)+1) // per group: when its last stage ends
	best := st.makespan(grp, eft, free)
	for _, c := range chains {
		ms := members[c.g]
		if len(ms) == 0 {
			continue
		}
		from := grp[ms[0]]
		bestT := from
		for _, t := range targets {
			if t == from {
				continue
			}
			for _, v := range ms {
				grp[v] = t
			}
			if m := st.makespan(grp, eft, free); m < best-1e-9 {
				best, bestT = m, t
			}
		}
		for _, v := range ms {
			grp[v] = bestT
		}
	}
}

// makespan is the ideal makespan of a grouping with every dependency
// waited for: each group runs its stages in topological order. It reads
// the reduced graph's edges: an edge that a path implies cannot delay a
// stage, since every stage ends no earlier than its predecessors, so the
// makespan is that of the whole hazard graph, in fewer steps.
func (st *state) makespan(grp []int32, eft, free []float64) float64 {
	clear(free)
	var m float64
	for _, v := range st.topo {
		s := free[grp[v]]
		for _, u := range st.redPred.row(int(v)) {
			s = max(s, eft[u])
		}
		eft[v] = s + st.dur[v]
		free[grp[v]] = eft[v]
		m = max(m, eft[v])
	}
	return m
}

// hazardChains is the hazard-dag strategy's streams: chains built greedily
// in the shared topological order, each free stage going on the free chain
// whose last stage is one of its hazard predecessors (the earliest made
// of those), else on a new chain. Stream order then joins only stages that
// a hazard edge joins, and every other hazard edge becomes a wait
// (hazardWaits): the plan is the whole hazard DAG, one edge per hazard, for
// a CUDA graph's driver to schedule. Pinned stages keep their pin's stream.
func (st *state) hazardChains(pin, grp []int32, P int32) {
	var tail []int32 // per free chain (group P+i): its last stage
	for _, v := range st.topo {
		if pin[v] >= 0 {
			continue
		}
		best := int32(-1)
		for _, u := range st.g.Pred(int(v)) {
			if g := grp[u]; g >= P && tail[g-P] == u && (best < 0 || g < best) {
				best = g
			}
		}
		if best < 0 {
			best = P + int32(len(tail))
			tail = append(tail, -1)
		}
		grp[v], tail[best-P] = best, v
	}
}

// roundRobin is Taskflow's capturer: level = longest-path depth; the free
// stages of each level, in topological order, are dealt round-robin over S
// streams, S = the widest level, capped by MaxStreams (16 when uncapped).
func (st *state) roundRobin(pin, grp []int32, P int32) {
	width := map[int32]int32{}
	var maxW int32
	for _, v := range st.topo {
		if pin[v] < 0 {
			width[st.level[v]]++
			maxW = max(maxW, width[st.level[v]])
		}
	}
	S := int32(16)
	if st.maxStr > 0 {
		S = max(int32(st.maxStr)-P, 1)
	}
	S = max(min(S, maxW), 1)
	dealt := map[int32]int32{}
	for _, v := range st.topo {
		if pin[v] >= 0 {
			continue
		}
		l := st.level[v]
		grp[v] = P + dealt[l]%S
		dealt[l]++
	}
}

// setStreams numbers the groups as streams in order of their first stage
// and names them: a pinned stream by its pin, the others "s<id>". A group
// whose stages are on several devices (the single and round-robin
// strategies group by level, not by device) becomes one stream per
// device, so that a stream never mixes devices.
func (st *state) setStreams(grp []int32, pinNames []string, P int32) {
	type key struct{ g, d int32 }
	id := map[key]int32{}
	var groups []int32
	st.streamDev = st.streamDev[:0]
	for _, v := range st.topo {
		k := key{grp[v], st.device(v)}
		if _, ok := id[k]; !ok {
			id[k] = int32(len(groups))
			groups = append(groups, k.g)
			st.streamDev = append(st.streamDev, k.d)
		}
	}
	taken := map[string]bool{}
	for _, p := range pinNames {
		taken[p] = true
	}
	st.names = make([]string, len(groups))
	for i, g := range groups {
		if g < P {
			st.names[i] = strings.Clone(pinNames[g]) // the plan's own copy, none of the spec's memory
			continue
		}
		name := fmt.Sprintf("s%d", i)
		for k := 1; taken[name]; k++ {
			name = fmt.Sprintf("s%d_%d", i, k)
		}
		taken[name] = true
		st.names[i] = name
	}
	st.stream = make([]int32, st.n)
	for v := range st.stream {
		st.stream[v] = id[key{grp[v], st.device(int32(v))}]
	}
}

// asap returns the earliest start and finish of every stage (µs) with
// unlimited streams: the longest path to it by effective duration, over
// the reduced graph (the same longest paths: an edge it drops is implied
// by a path, which is no shorter).
func (st *state) asap() (est, eft []float64) {
	est = make([]float64, st.n)
	eft = make([]float64, st.n)
	for _, v := range st.topo {
		var s float64
		for _, u := range st.redPred.row(int(v)) {
			s = max(s, eft[u])
		}
		est[v], eft[v] = s, s+st.dur[v]
	}
	return est, eft
}

// criticalPath returns a longest path by effective duration, in order; ties
// go to the earlier position, so the result is stable. It follows the
// transitive reduction's edges, as asap does, so the path does not depend
// on which implied edges the hazard graph has.
func (st *state) criticalPath() []int32 {
	if st.n == 0 {
		return nil
	}
	_, eft := st.asap()
	end := st.topo[0]
	for _, v := range st.topo {
		if eft[v] > eft[end] {
			end = v
		}
	}
	path := []int32{end}
	for v := end; ; {
		best := int32(-1)
		for _, u := range st.redPred.row(int(v)) {
			if eft[u]+st.dur[v] == eft[v] && (best < 0 || st.pos[u] < st.pos[best]) {
				best = u
			}
		}
		if best < 0 {
			break
		}
		path = append(path, best)
		v = best
	}
	slices.Reverse(path)
	return path
}
