package sim

import "github.com/dagrun/dagrun/executor"

// ShadowSegments returns the number of shadow segments of a buffer and the
// most reads any one holds.
func ShadowSegments(h executor.Buffer) (segs, maxReads int) {
	sh := &h.(*buffer).shadow
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, s := range sh.segs {
		maxReads = max(maxReads, len(s.reads))
	}
	return len(sh.segs), maxReads
}

// Drain waits for all queued work without clearing the shadow state as
// Synchronize does.
func Drain(b *Backend) { b.pending.Wait() }

// MaxQueued is the most ops a stream queues.
const MaxQueued = maxQueued

// QueueCap returns the capacity of the queue of every stream of b.
func QueueCap(b *Backend) (caps []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.streams {
		s.mu.Lock()
		caps = append(caps, cap(s.q))
		s.mu.Unlock()
	}
	return caps
}
