package dag

import (
	"cmp"
	"slices"
	"strings"
)

// checkHostStage checks a stage pinned to the host stream (HostStream): it
// runs a built-in of HostKernels on the CPU, so every buffer it touches must
// be host_pinned (device memory is not addressable from the host thread).
func (c *checker) checkHostStage(st *StageSpec, src *stageSrc, what string, resolved bool) {
	if st.Kernel != "" && !slices.Contains(HostKernels, st.Kernel) {
		c.errorAt(src.fieldPos("kernel"), "host stages run "+strings.Join(HostKernels, ", ")+" on the CPU; move the stage to a device stream (drop stream: host)",
			"%s: kernel %s cannot run on the host stream", what, st.Kernel)
	}
	if !resolved {
		return
	}
	for _, list := range [2][]Access{st.Reads, st.Writes} {
		for _, a := range list {
			if b := c.buffer(a.Buffer); b != nil && b.Where != WhereHostPinned && b.Where != WhereHostPageable {
				c.errAt(a.Pos, "the host thread reaches only host memory: make "+a.Buffer+" where: host_pinned (or host_pageable), or copy it with a device stage first",
					"%s runs on the host but touches %s buffer %s", what, cmp.Or(b.Where, WhereDevice), a.Buffer)
			}
		}
	}
}
