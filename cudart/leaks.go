//go:build cuda

// Live objects: what the backend tracks so that a test can name the
// streams, events and buffers a run leaked, with where each was made.

package cudart

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
)

// liveHandle is a tracked stream, event or buffer.
type liveHandle struct {
	what string // e.g. "buffer x (64 bytes) allocated at run.go:88"
	obj  any    // *stream, *event or *buffer
}

// track records a new handle with its creator's call site (the caller of
// NewStream, NewEvent or Alloc).
func (b *backend) track(what string, obj any) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	if _, file, line, ok := runtime.Caller(2); ok {
		what += fmt.Sprintf(" created at %s:%d", filepath.Base(file), line)
	}
	b.live[b.nextID] = liveHandle{what, obj}
	return b.nextID
}

func (b *backend) untrack(id int) {
	b.mu.Lock()
	delete(b.live, id)
	b.mu.Unlock()
}

// Live counts the streams, events and buffers not yet destroyed or freed.
func (b *backend) Live() (streams, events, buffers int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range b.live {
		switch h.obj.(type) {
		case *stream:
			streams++
		case *event:
			events++
		case *buffer:
			buffers++
		}
	}
	return
}

// Leaks lists the live handles, each with where it was created, sorted.
func (b *backend) Leaks() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, h := range b.live {
		out = append(out, h.what)
	}
	sort.Strings(out)
	return out
}
