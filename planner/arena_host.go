package planner

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
)

// hostPin returns the pin index of the host stream (dag.HostStream) in
// pins' numbering (names in order of first use), or -1 when no stage runs
// on the host. pin may be nil.
func (st *state) hostPin(pin []int32) int32 {
	seen := map[string]int32{}
	for _, sg := range st.spec.Stages {
		if sg.Stream == "" {
			continue
		}
		if _, ok := seen[sg.Stream]; !ok {
			seen[sg.Stream] = int32(len(seen))
		}
		if sg.Stream == dag.HostStream {
			return seen[sg.Stream]
		}
	}
	return -1
}

// checkHost reports a stage that assign put on the host stream without
// being pinned there (only host stages may run on the host thread).
func (st *state) checkHost() error {
	for v, sg := range st.spec.Stages {
		if st.names[st.stream[v]] == dag.HostStream && sg.Stream != dag.HostStream {
			return fmt.Errorf("stage %s was assigned to the host stream; raise max_streams so that device stages keep a device stream", sg.Name)
		}
	}
	return nil
}

// hostClock is Verify's view of CUDA's implicit order (implicit.go): at
// each op, in issue order, it joins the clock rows of the ops that
// implicitOrder orders before it, as a record→wait edge would.
type hostClock struct {
	im  *implicitOrder
	tmp []int32
}

// newHostClock returns nil when p has no implicit order.
func newHostClock(p *Plan) *hostClock {
	im := deriveImplicit(p)
	if im == nil {
		return nil
	}
	return &hostClock{im: im, tmp: make([]int32, len(p.Streams))}
}

// join is called for each op, in issue order, before the op's clock row is
// taken: op j of stream s. It joins the rows of the op's implicit
// predecessors into s's row (copying the row only if it changes).
func (h *hostClock) join(v *verifier, cur []int32, s int, j int32) {
	S := v.S
	g := v.opBase[s] + j
	for _, f := range h.im.from[h.im.start[g]:h.im.start[g+1]] {
		row := v.vecs[int(cur[s])*S : int(cur[s]+1)*S]
		frow := v.vecs[int(v.opRow[f])*S : int(v.opRow[f]+1)*S]
		fs := v.opStream[f]
		changed := false
		for a := range S {
			x := max(row[a], frow[a])
			if a == int(fs) {
				x = max(x, v.opIndex[f]+1) // f and every op before it
			}
			h.tmp[a] = x
			changed = changed || (x != row[a] && a != s)
		}
		if changed {
			cur[s] = int32(len(v.vecs) / S)
			v.vecs = append(v.vecs, h.tmp...)
		}
	}
}

// captures reports whether wait g captures record r: false for a wait on
// another thread's record that no host handoff orders (implicit.go).
func (h *hostClock) captures(r, g int32) bool {
	return h == nil || h.im.unordered == nil || !h.im.unordered[g]
}

// readsDone reports whether read access a is done before access d's launch
// is issued: a synchronous copy from pageable memory has staged its source
// when it returns.
func (h *hostClock) readsDone(v *verifier, a, d int32) bool {
	if h == nil {
		return false
	}
	sa := int(v.acc[a].stage)
	return h.im.readsDoneBefore(v.p, sa, v.launchOp[sa], v.launchOp[v.acc[d].stage], v.opStream, v.opIssue)
}
