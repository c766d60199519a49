package plan

import (
	"fmt"

	"github.com/dagrun/dagrun/contract"
)

// Stream kinds (Stream.Kind): how a device stream orders itself with the
// legacy default stream. CUDA documents the rule in the driver API's
// "Stream synchronization behavior" section: an action on the legacy
// default stream first waits on all blocking streams, and then all blocking
// streams wait on it; non-blocking streams do not synchronize with it.
const (
	StreamNonBlocking = ""           // cuStreamCreate(CU_STREAM_NON_BLOCKING): no implicit order (dagrun's own streams)
	StreamBlocking    = "blocking"   // cuStreamCreate(CU_STREAM_DEFAULT): ordered with the legacy default stream both ways
	StreamLegacy      = "legacy"     // the legacy default stream (CU_STREAM_LEGACY, "stream 0"): one per plan
	StreamPerThread   = "per_thread" // a thread's per-thread default stream (CU_STREAM_PER_THREAD): blocking towards the legacy stream, one per host thread
)

// StreamKinds lists the stream kinds by their spec spelling (StreamNonBlocking
// is "non_blocking" there).
var StreamKinds = []string{"non_blocking", StreamBlocking, StreamLegacy, StreamPerThread}

// Copy modes (Stage.Copy) of a copy stage.
const (
	CopyAsync = ""     // cuMemcpyAsync on the stage's stream: the call returns at once
	CopySync  = "sync" // cuMemcpy on a default stream: returns as the "API synchronization behavior" table says
)

// BlockingKind reports whether kind orders itself with the legacy default
// stream (blocking streams and per-thread default streams).
func BlockingKind(kind string) bool { return kind == StreamBlocking || kind == StreamPerThread }

// HasImplicit reports whether p uses anything implicitOrder derives edges
// or reads for: host streams, stream kinds, synchronous copies,
// asynchronous copies from pageable memory, host threads.
func HasImplicit(p *Plan) bool {
	for _, s := range p.Streams {
		if s.Host || s.Kind != "" || s.Thread != "" {
			return true
		}
	}
	for i := range p.Stages {
		if p.Stages[i].Copy == CopySync || p.Stages[i].Collective != nil || PageableAsync(p, i) {
			return true
		}
	}
	return false
}

// PageableAsync reports whether stage i is an asynchronous copy from
// pageable memory to the device on a device stream: cuMemcpyHtoDAsync,
// which stages its source into pinned memory when the host calls it (the
// "API synchronization behavior" table: "host memory is copied to a
// staging buffer immediately"; seen on the H100: a host function queued
// before the copy on its stream had not run when the source was read).
func PageableAsync(p *Plan, i int) bool {
	st := &p.Stages[i]
	return st.Kernel == contract.BuiltinCopy && st.Copy == CopyAsync && !st.HostFunc && !p.Streams[st.Stream].Host &&
		len(st.Reads) == 1 && len(st.Writes) == 1 &&
		p.Where(st.Reads[0].Buffer) == contract.WhereHostPageable && !p.Where(st.Writes[0].Buffer).Host()
}

// Where returns a buffer's placement (device when unknown or unset).
func (p *Plan) Where(buffer string) contract.Where {
	for k := range p.Buffers {
		if p.Buffers[k].Name == buffer {
			if p.Buffers[k].Where == "" {
				return contract.WhereDevice
			}
			return contract.Where(p.Buffers[k].Where)
		}
	}
	return contract.WhereDevice
}

// ValidateKinds checks stream kinds, threads, copy modes and host
// functions: known kinds, one legacy default stream, one per-thread default
// stream and one host stream per thread, synchronous copies on a default
// stream, host functions on device streams.
func (p *Plan) ValidateKinds() error {
	legacy := ""
	perThread := map[string]string{}
	hostOf := map[string]string{}
	for _, s := range p.Streams {
		switch s.Kind {
		case StreamNonBlocking, StreamBlocking:
		case StreamLegacy:
			if legacy != "" {
				return fmt.Errorf("plan: streams %s and %s are both the legacy default stream; a context has one", legacy, s.Name)
			}
			legacy = s.Name
		case StreamPerThread:
			if o, ok := perThread[s.Thread]; ok {
				return fmt.Errorf("plan: streams %s and %s are both the per-thread default stream of thread %s", o, s.Name, ThreadLabel(s.Thread))
			}
			perThread[s.Thread] = s.Name
		default:
			return fmt.Errorf("plan: stream %s has kind %q, want one of %v", s.Name, s.Kind, StreamKinds)
		}
		if s.Host {
			if s.Kind != "" {
				return fmt.Errorf("plan: host stream %s has kind %q; host streams have none", s.Name, s.Kind)
			}
			if o, ok := hostOf[s.Thread]; ok {
				return fmt.Errorf("plan: streams %s and %s are both host streams of thread %s; a thread runs its host stages in one order", o, s.Name, ThreadLabel(s.Thread))
			}
			hostOf[s.Thread] = s.Name
		}
	}
	for i := range p.Stages {
		st := &p.Stages[i]
		str := &p.Streams[st.Stream]
		switch st.Copy {
		case CopyAsync:
		case CopySync:
			if st.Kernel != contract.BuiltinCopy {
				return fmt.Errorf("plan: stage %s has copy %q but kernel %s; only copy stages have a copy mode", st.Name, st.Copy, st.Kernel)
			}
			if str.Kind != StreamLegacy && str.Kind != StreamPerThread {
				return fmt.Errorf("plan: stage %s is a synchronous copy on stream %s (%s); cuMemcpy runs on a default stream: put it on the legacy or per-thread default stream", st.Name, str.Name, kindLabel(str.Kind))
			}
		default:
			return fmt.Errorf("plan: stage %s has copy %q, want %q or %q", st.Name, st.Copy, CopyAsync, CopySync)
		}
		if st.HostFunc && str.Host {
			return fmt.Errorf("plan: stage %s is a host function on host stream %s; a host function is enqueued on a device stream", st.Name, str.Name)
		}
	}
	return p.validateCaptures() // capture.go
}

// ThreadLabel names host thread t in messages ("main" for the main thread).
func ThreadLabel(t string) string {
	if t == "" {
		return "main"
	}
	return t
}

func kindLabel(k string) string {
	if k == "" {
		return "non_blocking"
	}
	return k
}

// HasDefaultStream reports whether p has a legacy or per-thread default
// stream (one per context or thread: the iterate pass gives such plans one
// stream set).
func HasDefaultStream(p *Plan) bool { return DefaultStreamName(p) != "" }

// DefaultStreamName is the name of p's legacy or per-thread default
// stream, or "" when it has none.
func DefaultStreamName(p *Plan) string {
	for s := range p.Streams {
		if defaultStream(p, s) {
			return p.Streams[s].Name
		}
	}
	return ""
}
