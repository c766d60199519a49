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

// hostClock is Verify's view of host streams (Stream.Host): the host thread
// runs a host stream's launches when it issues them and blocks in its
// waits, so every op issued after a host op is ordered after it and after
// everything the host had waited for.
type hostClock struct {
	hosts []int   // host stream ids
	done  []int32 // per host stream: ops issued so far
	tmp   []int32
}

func newHostClock(p *Plan) *hostClock {
	var h *hostClock
	for s := range p.Streams {
		if p.Streams[s].Host {
			if h == nil {
				h = &hostClock{done: make([]int32, len(p.Streams)), tmp: make([]int32, len(p.Streams))}
			}
			h.hosts = append(h.hosts, s)
		}
	}
	return h
}

// join is called for each op, in issue order, before the op's clock row is
// taken: op j of stream s. It joins the host streams' rows into s's row
// (copying the row only if it changes) and, for an op of a host stream,
// counts it.
func (h *hostClock) join(v *verifier, cur []int32, s int, j int32) {
	S := v.S
	for _, hs := range h.hosts {
		if hs == s || h.done[hs] == 0 {
			continue
		}
		row := v.vecs[int(cur[s])*S : int(cur[s]+1)*S]
		hrow := v.vecs[int(cur[hs])*S : int(cur[hs]+1)*S]
		changed := false
		for a := range S {
			x := max(row[a], hrow[a])
			if a == hs {
				x = max(row[a], h.done[hs])
			}
			h.tmp[a] = x
			changed = changed || (x != row[a] && a != s)
		}
		if changed {
			cur[s] = int32(len(v.vecs) / S)
			v.vecs = append(v.vecs, h.tmp...)
		}
	}
	if v.p.Streams[s].Host {
		h.done[s] = j + 1
	}
}
