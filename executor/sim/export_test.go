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
