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
