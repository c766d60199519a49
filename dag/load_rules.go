package dag

import (
	"cmp"
	"slices"
	"strings"
)

// Checks of CUDA's stream kinds, host threads, copy modes, host functions,
// lazy buffers and capture regions (docs/spec.md, "Streams"). The verifier
// holds plans to the rules these declare (verify/implicit.go,
// planner/capture.go, verify/capture.go); here the loader checks that a spec states them
// consistently.

// checkStreams checks the streams: declarations.
func (c *checker) checkStreams() {
	seen := map[string]StreamSpec{}
	legacy := ""
	perThread := map[string]string{}
	hostOf := map[string]string{MainThread: HostStream}
	used := map[string]bool{}
	for _, st := range c.s.Stages {
		used[st.Stream] = true
	}
	threads := false
	for _, d := range c.s.Streams {
		if d.Name == "" {
			continue
		}
		thread := cmp.Or(d.Thread, MainThread)
		if prev, dup := seen[d.Name]; dup {
			c.errAt(d.Pos, "declare each stream once", "stream %s declared twice (first at %s)", d.Name, prev.Pos)
			continue
		}
		seen[d.Name] = d
		if !used[d.Name] {
			c.errAt(d.Pos, "pin a stage to it (stream: "+d.Name+") or drop the declaration", "stream %s is declared but no stage runs on it", d.Name)
		}
		if thread != MainThread {
			threads = true
		}
		switch d.Kind {
		case KindLegacy:
			if legacy != "" {
				c.errAt(d.Pos, "a context has one legacy default stream: declare it once", "streams %s and %s are both kind: legacy", legacy, d.Name)
			}
			legacy = d.Name
		case KindPerThread:
			if o, ok := perThread[thread]; ok {
				c.errAt(d.Pos, "a thread has one per-thread default stream", "streams %s and %s are both the per-thread default stream of thread %s", o, d.Name, thread)
			}
			perThread[thread] = d.Name
		case KindHost:
			if d.Name == HostStream {
				break
			}
			if thread == MainThread {
				c.errAt(d.Pos, "the main thread's host stream is host: name that one, or give this stream a thread: of its own", "stream %s is kind: host on the main thread, which has host already", d.Name)
			} else if o, ok := hostOf[thread]; ok {
				c.errAt(d.Pos, "a thread runs its host stages in one order: use one host stream per thread", "streams %s and %s are both host streams of thread %s", o, d.Name, thread)
			}
			hostOf[thread] = d.Name
		}
		if d.Name == HostStream && d.Kind != KindHost {
			c.errAt(d.Pos, "host is the main thread's host stream: give it kind: host or leave it undeclared", "stream host declared kind: %s", d.Kind)
		}
	}
	if threads && c.s.Sync != SyncManual {
		c.errAt(c.s.Streams[0].Pos, "set sync: manual: the planner issues every op from one thread, so a spec with several host threads states its own waits and host events", "streams on host threads other than main need sync: manual")
	}
}

// checkStageRules checks a stage's copy mode, host function and the host
// memory it reaches.
func (c *checker) checkStageRules(st *StageSpec, src *stageSrc, what string, resolved bool) {
	host := c.s.IsHostStream(st.Stream)
	if host && st.Stream != HostStream {
		c.checkHostStage(st, src, what, resolved)
	}
	var kind string
	if d := c.s.StreamOf(st.Stream); d != nil {
		kind = d.Kind
	}
	if st.Copy != "" && st.Kernel != "" && st.Kernel != BuiltinCopy {
		c.errorAt(src.fieldPos("copy"), "drop copy: (only copy stages have a copy mode)", "%s: copy: %s on kernel %s", what, st.Copy, st.Kernel)
	}
	if st.Copy == CopySync && st.Kernel == BuiltinCopy {
		switch {
		case host:
			c.errorAt(src.fieldPos("copy"), "put the synchronous copy on a device stream declared kind: legacy or per_thread", "%s: a synchronous copy on host stream %s", what, st.Stream)
		case kind != KindLegacy && kind != KindPerThread:
			c.errorAt(src.fieldPos("copy"), "cuMemcpy runs on a default stream: pin the stage to a stream declared kind: legacy (or per_thread), or make it copy: async",
				"%s: a synchronous copy on stream %s (%s)", what, cmp.Or(st.Stream, "of the planner's choice"), cmp.Or(kind, KindNonBlocking))
		}
	}
	if st.HostFunc {
		switch {
		case host:
			c.errorAt(src.fieldPos("host_func"), "drop host_func: (a host stage runs on the host already), or move the stage to a device stream", "%s: host_func on host stream %s", what, st.Stream)
		case st.Stream == "":
			c.errorAt(src.fieldPos("host_func"), "pin the stage to the device stream it is enqueued on", "%s: a host function needs a stream", what)
		}
		if st.Kernel != "" && !slices.Contains(HostKernels, st.Kernel) {
			c.errorAt(src.fieldPos("kernel"), "a host function runs "+strings.Join(HostKernels, ", ")+" on the CPU", "%s: kernel %s cannot run as a host function", what, st.Kernel)
		}
	}
	if !resolved {
		return
	}
	for k, list := range [2][]Access{st.Reads, st.Writes} {
		srcs := [2][]accessSrc{src.reads, src.writes}[k]
		for j, a := range list {
			b := c.accessBuffer(&srcs[j])
			switch {
			case st.HostFunc && b.Where != WhereHostPinned && b.Where != WhereHostPageable:
				c.errAt(a.Pos, "a host function reaches only host memory: make "+a.Buffer+" host_pinned or host_pageable",
					"%s is a host function but touches %s buffer %s", what, cmp.Or(b.Where, WhereDevice), a.Buffer)
			case b.Where == WhereHostPageable && !host && !st.HostFunc && st.Kernel != BuiltinCopy:
				c.errAt(a.Pos, "device kernels cannot reach pageable memory: copy it with a copy stage, or make "+a.Buffer+" host_pinned",
					"%s runs kernel %s on the device but touches host_pageable buffer %s", what, st.Kernel, a.Buffer)
			}
		}
	}
}

// checkCaptures checks the captures: regions.
func (c *checker) checkCaptures() {
	for _, cp := range c.s.Captures {
		fi, li := c.s.StageIndex(cp.First), c.s.StageIndex(cp.Last)
		for _, n := range []struct {
			name string
			i    int
		}{{cp.First, fi}, {cp.Last, li}} {
			switch {
			case n.name == "":
			case n.i < 0:
				c.errAt(cp.Pos, "name a stage of the capture's stream", "capture on %s names unknown stage %q", cp.Stream, n.name)
			case c.s.Stages[n.i].Stream != cp.Stream:
				c.errAt(cp.Pos, "a capture begins and ends on its own stream: name stages pinned to "+cp.Stream,
					"capture on %s: stage %s runs on stream %s", cp.Stream, n.name, cmp.Or(c.s.Stages[n.i].Stream, "of the planner's choice"))
			}
		}
		if fi >= 0 && li >= 0 && fi > li {
			c.errAt(cp.Pos, "first is declared before last", "capture on %s: first stage %s comes after last stage %s", cp.Stream, cp.First, cp.Last)
		}
		if c.s.IsHostStream(cp.Stream) {
			c.errAt(cp.Pos, "capture a device stream", "capture on host stream %s", cp.Stream)
		}
	}
	// A stream has one capture at a time (cuStreamBeginCapture on a
	// capturing stream fails): the stages of two captures on one stream
	// must not overlap in declaration order, a stream's issue order.
	for k, cp := range c.s.Captures {
		fi, li := c.s.StageIndex(cp.First), c.s.StageIndex(cp.Last)
		for _, q := range c.s.Captures[:k] {
			qf, ql := c.s.StageIndex(q.First), c.s.StageIndex(q.Last)
			if q.Stream == cp.Stream && min(fi, li, qf, ql) >= 0 && fi <= ql && qf <= li {
				c.errAt(cp.Pos, "end one capture before the next begins on the stream: make the regions' stages disjoint, or merge them into one capture",
					"capture of %s…%s on stream %s overlaps the capture of %s…%s (%s): a stream has one capture at a time", cp.First, cp.Last, cp.Stream, q.First, q.Last, q.Pos)
				break
			}
		}
	}
}
