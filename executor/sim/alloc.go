package sim

import (
	"fmt"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/executor"
)

// Stream-ordered allocation (executor.StreamAllocator): the
// simulator's cuMemAllocAsync and cuMemFreeAsync. The race detector sees an
// allocation and a free as writes of every byte of the buffer by the stream
// at that point, so a use not ordered after the allocation, or not ordered
// before the free (a lifetime that ends too early, e.g. after the
// allocating stream only), is reported as a race with "alloc" or "free".

var _ executor.StreamAllocator = (*Backend)(nil)

// AllocAsync allocates a device buffer now (host memory, zeroed) and marks
// the allocation point on s.
func (b *Backend) AllocAsync(d executor.BufferDesc, hs executor.Stream) (executor.Buffer, error) {
	s, err := b.stream(hs)
	if err != nil {
		return nil, err
	}
	if contract.Where(d.Where) != contract.WhereDevice {
		return nil, fmt.Errorf("sim: alloc %s on a stream: where %q, stream-ordered allocation is for device buffers", d.Name, d.Where)
	}
	h, err := b.Alloc(d)
	if err != nil {
		return nil, err
	}
	buf := h.(*buffer)
	buf.mu.Lock()
	buf.fresh = false
	buf.mu.Unlock()
	s.push(op{kind: opLifetime, buf: buf})
	return h, nil
}

// FreeAsync frees the buffer when s reaches this point: after the detector
// has checked that every use is ordered before it. A launch that reaches
// the buffer afterwards fails.
func (b *Backend) FreeAsync(h executor.Buffer, hs executor.Stream) error {
	buf, err := b.buffer(h)
	if err != nil {
		return err
	}
	s, err := b.stream(hs)
	if err != nil {
		return err
	}
	s.push(op{kind: opLifetime, buf: buf, free: true})
	return nil
}

// lifetime runs an allocation or free point on the stream's goroutine.
func (s *stream) lifetime(buf *buffer, free bool) {
	what := "alloc"
	if free {
		what = "free"
	}
	if s.b.detect {
		now := s.tick()
		acc := access{stream: s.num, vc: s.vc, clock: now, stage: -1, name: what + "(" + buf.name + ")", write: true}
		for _, r := range buf.shadow.apply(0, int64(len(buf.data)), acc, s.clock) {
			s.b.report(buf.name, r, acc)
		}
	}
	if free {
		if err := s.b.Free(buf); err != nil {
			s.b.fault(fmt.Errorf("sim: free of %s on stream %d: %w", buf.name, s.num, err))
		}
	}
}
