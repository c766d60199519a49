//go:build cuda

package cudart

// Kernel timestamps (Options.KernelTimestamps): mix launches carry the
// address of a 16-byte slot where the kernel stores its block 0's start and
// end %globaltimer; Synchronize reads the slots back into stage spans.

import (
	"encoding/binary"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/executor"
)

// stampSlots is the capacity of one stamp buffer, in slots of 16 bytes.
const stampSlots = 1 << 16

// stampBuf is a device buffer of stamp slots and the stage each used slot
// belongs to. Slots are handed out at Launch (the executor's goroutine) and
// read at Synchronize (the worker, while that goroutine waits for it).
type stampBuf struct {
	base  cu.DevicePtr
	cap   int
	owner []stampOwner // one per used slot
}

type stampOwner struct {
	idx  int // stage index
	name string
}

func newStampBuf(w *worker) (*stampBuf, error) {
	n := int64(stampSlots) * 16
	p, err := cu.MemAlloc(n)
	if err != nil {
		return nil, wrap(err, "cuMemAlloc %d bytes for kernel timestamps", n)
	}
	if err := cu.MemsetD8(p, 0, n); err != nil {
		cu.MemFree(p)
		return nil, wrap(err, "cuMemsetD8 kernel timestamps")
	}
	return &stampBuf{base: p, cap: stampSlots}, nil
}

func (s *stampBuf) free() {
	if s != nil && s.base != 0 {
		cu.MemFree(s.base)
		s.base = 0
	}
}

// stampSlot returns the device address of a fresh slot for stage l, or 0
// when timestamps are off or the current buffer is full.
func (b *backend) stampSlot(l *executor.LaunchDesc) uint64 {
	if !b.opts.KernelTimestamps {
		return 0
	}
	sb := b.stamps
	if b.capStamps != nil {
		sb = b.capStamps
	}
	if sb == nil || len(sb.owner) >= sb.cap {
		return 0
	}
	sb.owner = append(sb.owner, stampOwner{idx: l.Stage, name: l.Name})
	return uint64(sb.base) + uint64(16*(len(sb.owner)-1))
}

// readStamps copies sb's used slots to the host and appends a span for each
// slot the kernel wrote, in µs from the earliest start among them. With
// reset, the slots are zeroed and freed for reuse (stream mode); a graph's
// slots stay (its replays rewrite them).
func (w *worker) readStamps(sb *stampBuf, reset bool) error {
	n := len(sb.owner)
	if n == 0 {
		return nil
	}
	raw := make([]byte, 16*n)
	if err := cu.MemcpyDtoH(unsafe.Pointer(&raw[0]), sb.base, int64(len(raw))); err != nil {
		return wrap(err, "cuMemcpyDtoH kernel timestamps")
	}
	le := binary.LittleEndian
	origin := uint64(0)
	for i := range n {
		if s := le.Uint64(raw[16*i:]); s != 0 && (origin == 0 || s < origin) {
			origin = s
		}
	}
	for i, o := range sb.owner {
		s, e := le.Uint64(raw[16*i:]), le.Uint64(raw[16*i+8:])
		if s == 0 || e < s {
			continue
		}
		w.spans = append(w.spans, executor.StageSpan{Stage: o.idx, Name: o.name, StartUS: float64(s-origin) / 1000, EndUS: float64(e-origin) / 1000})
	}
	if reset {
		sb.owner = sb.owner[:0]
		if err := cu.MemsetD8(sb.base, 0, int64(len(raw))); err != nil {
			return wrap(err, "cuMemsetD8 kernel timestamps")
		}
	}
	return nil
}
