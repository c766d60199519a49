package executor

import (
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/plan"
)

// StreamKinder is an optional Backend interface: streams of CUDA's other
// kinds (plan.StreamBlocking, StreamLegacy, StreamPerThread), with the
// implicit order CUDA gives them, and synchronous copies
// (LaunchDesc.Copy == plan.CopySync: Launch returns as the "API
// synchronization behavior" table says). Run uses it for plans whose
// streams have a kind or whose stages copy synchronously.
type StreamKinder interface {
	// NewStreamKind creates a stream of kind (StreamNonBlocking is
	// NewStream). The legacy default stream is one per backend: every
	// call returns it, and it lives until each holder destroyed it.
	NewStreamKind(kind string) (Stream, error)
}

// ErrNoStreamKinds is returned (wrapped) by Run when a plan with stream
// kinds or synchronous copies meets a backend that is no StreamKinder.
var ErrNoStreamKinds = errors.New("backend cannot create blocking or default streams")

// streamKinds sets x.kinds, the kind of each physical stream, and rejects
// what graph mode cannot run: the legacy default stream (it cannot be
// captured) and synchronous copies (not allowed in a capture).
func (x *program) streamKinds() error {
	p := x.p
	for _, s := range p.Streams {
		if s.Kind == plan.StreamLegacy && x.graph && !x.regionMode {
			return fmt.Errorf("executor: graph mode: stream %s is the legacy default stream, which cannot be captured: use stream mode", s.Name)
		}
	}
	if x.graph && !x.regionMode {
		for i := range p.Stages {
			if p.Stages[i].Copy == plan.CopySync {
				return fmt.Errorf("executor: graph mode: stage %s is a synchronous copy, which a capture does not allow (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED): make it copy: async, or use stream mode", p.Stages[i].Name)
			}
		}
	}
	kinds := make([]string, x.m.Streams)
	any := false
	for _, set := range x.m.Sets {
		for s, ps := range set {
			kinds[ps] = p.Streams[s].Kind
			any = any || kinds[ps] != ""
		}
	}
	for i := range p.Stages {
		any = any || p.Stages[i].Copy == plan.CopySync
	}
	if any {
		x.kinds = kinds
	}
	return nil
}

// newStream creates physical stream i with its kind, on its device.
func (e *exec) newStream(i int) (Stream, error) {
	kind := ""
	if i < len(e.x.kinds) {
		kind = e.x.kinds[i]
	}
	if i < len(e.x.streamDev) && e.x.streamDev[i] != 0 {
		return e.b.(Devicer).NewStreamOn(e.x.streamDev[i], kind) // devices.go; program.requires checked it
	}
	if kind != "" {
		return e.b.(StreamKinder).NewStreamKind(kind)
	}
	return e.b.NewStream()
}
