package planner

import "slices"

// reduce computes the transitive reduction of the hazard DAG (for a DAG it
// is unique and is the minimum equivalent graph, Aho, Garey & Ullman 1972),
// so that assignment and sync see only edges no other path implies.
//
// Algorithm: nodes u in reverse topological order; u's successors sorted by
// topological position; each successor is dropped if an earlier-kept
// successor reaches it, found by a depth-first search over the already
// reduced rows of later nodes. Two prunings keep it near-linear on real and
// synthetic graphs: with level(x) the longest-path depth from a source, an
// edge u → v with level(v) = level(u)+1 can never be implied (any other path
// is longer), so only successors with a level gap ≥ 2 are candidates, and the
// search only enters nodes whose position and level do not exceed the
// largest candidate's. Graphs whose edges join consecutive levels
// (layered, wavefront) cost O(E); the worst case is O(V·E).
// docs/design/reduce.md has the design.
func reduce(st *state) error {
	n := st.n
	g := st.g
	// Levels, in topological order.
	st.level = make([]int32, n)
	for _, v := range st.topo {
		var l int32
		for _, u := range g.Pred(int(v)) {
			l = max(l, st.level[u]+1)
		}
		st.level[v] = l
	}
	// Kept successors per node, built in reverse topological order into one
	// flat array (rows are located by start/len, then compacted).
	start := make([]int32, n)
	length := make([]int32, n)
	flat := make([]int32, 0, g.NumEdges())
	mark := make([]int32, n) // stamp of the last search that reached the node
	var stamp int32
	var succ, stack []int32
	pos, level := st.pos, st.level
	for i := n - 1; i >= 0; i-- {
		u := st.topo[i]
		succ = append(succ[:0], g.Succ(int(u))...)
		slices.SortFunc(succ, func(a, b int32) int { return int(pos[a]) - int(pos[b]) })
		var maxPos, maxLevel int32 = -1, -1
		for _, v := range succ {
			if level[v] >= level[u]+2 {
				maxPos = max(maxPos, pos[v])
				maxLevel = max(maxLevel, level[v])
			}
		}
		start[u] = int32(len(flat))
		if maxPos < 0 { // no candidate: every edge is needed
			flat = append(flat, succ...)
			length[u] = int32(len(succ))
			continue
		}
		stamp++
		for _, w := range succ {
			if mark[w] == stamp {
				continue // implied by an earlier-kept successor
			}
			flat = append(flat, w)
			mark[w] = stamp
			if pos[w] >= maxPos || level[w] >= maxLevel {
				continue
			}
			stack = append(stack[:0], w)
			for len(stack) > 0 {
				x := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				for _, y := range flat[start[x] : start[x]+length[x]] {
					if mark[y] == stamp || pos[y] > maxPos || level[y] > maxLevel {
						continue
					}
					mark[y] = stamp
					if pos[y] < maxPos && level[y] < maxLevel {
						stack = append(stack, y)
					}
				}
			}
		}
		length[u] = int32(len(flat)) - start[u]
	}
	// Compact into rows by stage index; rows stay sorted by position.
	red := &adjacency{off: make([]int32, n+1), adj: make([]int32, 0, len(flat))}
	for v := 0; v < n; v++ {
		red.adj = append(red.adj, flat[start[v]:start[v]+length[v]]...)
		red.off[v+1] = int32(len(red.adj))
	}
	st.red = red
	st.redPred = transpose(red, st.topo)
	return nil
}

// transpose returns the reverse graph of a; visiting sources in order makes
// each row come out sorted by position in order.
func transpose(a *adjacency, order []int32) *adjacency {
	n := len(a.off) - 1
	t := &adjacency{off: make([]int32, n+1), adj: make([]int32, len(a.adj))}
	for _, v := range a.adj {
		t.off[v+1]++
	}
	for i := 0; i < n; i++ {
		t.off[i+1] += t.off[i]
	}
	fill := slices.Clone(t.off[:n])
	for _, u := range order {
		for _, v := range a.row(int(u)) {
			t.adj[fill[v]] = u
			fill[v]++
		}
	}
	return t
}
