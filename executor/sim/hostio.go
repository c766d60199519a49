package sim

import (
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/executor"
)

// hostState is the host thread as the race detector sees it: one more
// vector-clock component. It is owned by the issuing goroutine; snap, an
// immutable copy of clock, is attached to every op issued after the host
// waited or accessed memory, so the op is ordered after what the host did.
type hostState struct {
	vc    int // vector-clock index; -1 until first used
	used  bool
	clock []uint64
	snap  []uint64
	// Host threads (threads.go): the thread's number, and per thread the
	// records it issued that this thread knows were issued before its
	// next call (its own count included).
	id    int
	known []uint64
}

var _ executor.HostSyncer = (*Backend)(nil)

// hostSnapshot returns the host clock to attach to an op being issued.
func (b *Backend) hostSnapshot() []uint64 { return b.host.snap }

// hostInit gives the host its vector-clock index.
func (b *Backend) hostInit() {
	if b.host.used {
		return
	}
	b.mu.Lock()
	b.host.vc = b.nextVC
	b.nextVC++
	b.mu.Unlock()
	b.host.used = true
}

func (b *Backend) hostJoin(c []uint64) {
	if !b.detect || c == nil {
		return
	}
	b.hostInit()
	if len(c) > len(b.host.clock) {
		b.host.clock = append(b.host.clock, make([]uint64, len(c)-len(b.host.clock))...)
	}
	for i, v := range c {
		b.host.clock[i] = max(b.host.clock[i], v)
	}
	b.host.snap = slices.Clone(b.host.clock)
}

// SyncEvent blocks until the generation of e most recently recorded on the
// host has completed, and orders the host after it.
func (b *Backend) SyncEvent(he executor.Event) error {
	e, err := b.event(he)
	if err != nil {
		return err
	}
	if sl := e.latest; sl != nil {
		<-sl.done
		if !b.unordered(sl) {
			b.hostJoin(sl.clock)
		}
	}
	return nil
}

// QueryEvent reports whether that generation has completed, and if so
// orders the host after it.
func (b *Backend) QueryEvent(he executor.Event) (bool, error) {
	e, err := b.event(he)
	if err != nil {
		return false, err
	}
	sl := e.latest
	if sl == nil {
		return true, nil
	}
	select {
	case <-sl.done:
		if !b.unordered(sl) {
			b.hostJoin(sl.clock)
		}
		return true, nil
	default:
		return false, nil
	}
}

// HostWrite copies data into a host_pinned buffer from the host. The race
// detector checks it as an access by the host: it must be ordered (by
// SyncEvent or QueryEvent) after every earlier device access to the bytes.
func (b *Backend) HostWrite(h executor.Buffer, off int64, data []byte) error {
	buf, err := b.hostAccess(h, off, int64(len(data)), true)
	if err != nil {
		return err
	}
	buf.mu.Lock()
	copy(buf.data[off:], data)
	buf.fresh = false
	buf.mu.Unlock()
	return nil
}

// HostRead copies bytes of a host_pinned buffer to data, checked as
// HostWrite is.
func (b *Backend) HostRead(h executor.Buffer, off int64, data []byte) error {
	buf, err := b.hostAccess(h, off, int64(len(data)), false)
	if err != nil {
		return err
	}
	buf.mu.RLock()
	copy(data, buf.data[off:])
	buf.mu.RUnlock()
	return nil
}

// hostAccess checks a host access of bytes [off, off+n) and runs the race
// detector on it.
func (b *Backend) hostAccess(h executor.Buffer, off, n int64, write bool) (*buffer, error) {
	return b.hostAccessBy(h, off, n, write, -1, "host")
}

// hostAccessBy is hostAccess on behalf of stage (index, name): a copy
// whose source the host reads when it issues it.
func (b *Backend) hostAccessBy(h executor.Buffer, off, n int64, write bool, stage int, name string) (*buffer, error) {
	buf, err := b.buffer(h)
	if err != nil {
		return nil, err
	}
	verb := [2]string{"read", "write"}[btoi(write)]
	if !buf.where.Host() {
		return nil, fmt.Errorf("sim: host %s of %s: a %s buffer is not reachable from the host during a run (use host_pinned or host_pageable)", verb, buf.name, buf.where)
	}
	if off < 0 || n < 0 || off+n > int64(len(buf.data)) {
		return nil, fmt.Errorf("sim: host %s of %s[%d:%d]: outside the buffer's %d bytes", verb, buf.name, off, off+n, len(buf.data))
	}
	if !b.detect || n == 0 {
		return buf, nil
	}
	b.hostInit()
	if b.host.vc >= len(b.host.clock) {
		b.host.clock = append(b.host.clock, make([]uint64, b.host.vc+1-len(b.host.clock))...)
	}
	b.host.clock[b.host.vc]++
	acc := access{stream: -1, vc: b.host.vc, clock: b.host.clock[b.host.vc], stage: stage, name: name, write: write}
	for _, r := range buf.shadow.apply(off, off+n, acc, b.host.clock) {
		b.report(buf.name, r, acc)
	}
	b.host.snap = slices.Clone(b.host.clock)
	return buf, nil
}

func btoi(x bool) int {
	if x {
		return 1
	}
	return 0
}
