package planner

// matcher computes a maximum bipartite matching by Hopcroft–Karp (Hopcroft
// & Karp, SIAM J. Comput. 1973): O(E·√V) for V nodes per side and E edges.
// Left and right are both the stages; an edge u → v of adj means "v may run
// right after u on u's stream", so a matching is a path cover (Nimble, Kwon
// et al., NeurIPS 2020, §4.2): chains = V − |matching|.
type matcher struct {
	adj    *adjacency
	ok     func(u, v int32) bool // nil: every edge is allowed
	fixed  []bool                // left nodes whose initial match may not change (nil: none)
	matchL []int32               // left u → right v, or -1
	matchR []int32               // right v → left u, or -1
}

const inf = int32(1<<31 - 1)

func newMatcher(n int, adj *adjacency) *matcher {
	m := &matcher{adj: adj, matchL: make([]int32, n), matchR: make([]int32, n)}
	for i := range m.matchL {
		m.matchL[i], m.matchR[i] = -1, -1
	}
	return m
}

func (m *matcher) allowed(u, v int32) bool { return m.ok == nil || m.ok(u, v) }

// usable reports whether the augmenting search may re-match right node v's
// current partner.
func (m *matcher) usable(v int32) bool {
	w := m.matchR[v]
	return w < 0 || m.fixed == nil || !m.fixed[w]
}

// match completes the matching (from whatever matchL/matchR hold) to a
// maximum one under the constraints, and returns its size. order is the
// order of the greedy start (a topological order gives long chains early).
func (m *matcher) match(order []int32) int {
	n := len(m.matchL)
	// Greedy start.
	for _, u := range order {
		if m.matchL[u] >= 0 {
			continue
		}
		for _, v := range m.adj.row(int(u)) {
			if m.matchR[v] < 0 && m.allowed(u, v) {
				m.matchL[u], m.matchR[v] = v, u
				break
			}
		}
	}
	dist := make([]int32, n)
	it := make([]int32, n)
	queue := make([]int32, 0, n)
	var stack []int32
	for {
		// BFS: layer the free left nodes and the alternating paths from them.
		queue = queue[:0]
		for u := 0; u < n; u++ {
			if m.matchL[u] < 0 {
				dist[u] = 0
				queue = append(queue, int32(u))
			} else {
				dist[u] = inf
			}
		}
		limit := inf // length of the shortest augmenting path, in left layers
		for qi := 0; qi < len(queue); qi++ {
			u := queue[qi]
			if dist[u] >= limit {
				break
			}
			for _, v := range m.adj.row(int(u)) {
				if !m.allowed(u, v) || !m.usable(v) {
					continue
				}
				w := m.matchR[v]
				if w < 0 {
					limit = min(limit, dist[u]+1)
				} else if dist[w] == inf {
					dist[w] = dist[u] + 1
					queue = append(queue, w)
				}
			}
		}
		if limit == inf {
			break
		}
		// DFS along the layers from each free left node; vertex-disjoint
		// shortest augmenting paths.
		for i := range it {
			it[i] = 0
		}
		augmented := false
		for u0 := 0; u0 < n; u0++ {
			if m.matchL[u0] >= 0 || dist[u0] != 0 {
				continue
			}
			stack = append(stack[:0], int32(u0))
			for len(stack) > 0 {
				x := stack[len(stack)-1]
				row := m.adj.row(int(x))
				pushed, done := false, false
				for int(it[x]) < len(row) {
					v := row[it[x]]
					if !m.allowed(x, v) || !m.usable(v) {
						it[x]++
						continue
					}
					w := m.matchR[v]
					if w < 0 {
						if dist[x]+1 == limit { // augment along the stack
							for k := len(stack) - 1; k >= 0; k-- {
								y := stack[k]
								vy := m.adj.row(int(y))[it[y]]
								m.matchL[y], m.matchR[vy] = vy, y
							}
							done = true
							break
						}
						it[x]++
						continue
					}
					if dist[w] == dist[x]+1 && dist[w] < limit {
						stack = append(stack, w)
						pushed = true
						break
					}
					it[x]++
				}
				if done {
					augmented = true
					for _, y := range stack {
						dist[y] = inf // used: keep paths vertex-disjoint
					}
					break
				}
				if !pushed {
					dist[x] = inf // dead end
					stack = stack[:len(stack)-1]
					if len(stack) > 0 {
						it[stack[len(stack)-1]]++
					}
				}
			}
		}
		if !augmented {
			break
		}
	}
	size := 0
	for _, v := range m.matchL {
		if v >= 0 {
			size++
		}
	}
	return size
}
