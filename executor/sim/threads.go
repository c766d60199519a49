package sim

import (
	"slices"

	"github.com/dagrun/dagrun/executor"
)

// Host threads. Thread(name) is a view of the backend that one host thread
// issues through: the views' calls are serialized (one at a time, as a
// driver lock does), each with its thread's own host clock. The threads'
// interleaving is the Go scheduler's, so which record a wait on another
// thread's event takes varies from run to run; the race detector does not
// depend on it. A thread knows that another thread issued a record only
// through host handoffs (Release and Acquire, called by the executor when
// a host event is handed over): a wait (Wait, SyncEvent, QueryEvent) whose
// record is another thread's and not known that way is blind: it still
// waits for the record it took, but the detector takes it as waiting for
// nothing, as the verifier does (verify/implicit.go). So a plan whose
// threads are not ordered by handoffs is reported under every seed.

var (
	_ executor.Threader    = (*Backend)(nil)
	_ executor.HostHandoff = (*thread)(nil)
)

// Thread returns host thread name's view of the backend ("" is the main
// thread); the same name gives the same view.
func (b *Backend) Thread(name string) (executor.Backend, error) {
	if b.closed {
		return nil, ErrClosed
	}
	b.issueMu.Lock()
	defer b.issueMu.Unlock()
	if t, ok := b.threads[name]; ok {
		return t, nil
	}
	if b.threads == nil {
		b.threads = map[string]*thread{}
	}
	t := &thread{b: b, host: &b.mainHost}
	if name != "" {
		t.host = &hostState{id: len(b.threads) + 1}
	}
	b.threads[name] = t
	b.threaded = true
	return t, nil
}

// stampRecord marks a record issued through a thread's view with the
// thread and its record count.
func (b *Backend) stampRecord(sl *slot) {
	if !b.threaded {
		return
	}
	h := b.host
	h.grow(h.id)
	h.known[h.id]++
	sl.thread, sl.seq = h.id, h.known[h.id]
}

// unordered reports whether a wait by the issuing thread on record sl is
// blind: sl is another thread's record that no handoff made known to it.
func (b *Backend) unordered(sl *slot) bool {
	if !b.threaded || sl == nil || sl.seq == 0 || sl.thread == b.host.id {
		return false
	}
	k := b.host.known
	return sl.thread >= len(k) || k[sl.thread] < sl.seq
}

func (h *hostState) grow(i int) {
	if i >= len(h.known) {
		h.known = append(h.known, make([]uint64, i+1-len(h.known))...)
	}
}

// thread is one host thread's view of a Backend (executor.Threader).
type thread struct {
	b    *Backend
	host *hostState
}

// handoffToken is what a releasing thread hands over: its host clock and
// the records it knows were issued.
type handoffToken struct {
	clock, known []uint64
}

// do runs f as a call of thread t: serialized with the other threads'
// calls, with t's host clock.
func (t *thread) do(f func() error) error {
	b := t.b
	b.issueMu.Lock()
	defer b.issueMu.Unlock()
	b.host = t.host
	defer func() { b.host = &b.mainHost }()
	return f()
}

// Release returns t's host clock and known records (executor.HostHandoff).
func (t *thread) Release() any {
	var tok handoffToken
	t.do(func() error {
		tok = handoffToken{clock: slices.Clone(t.host.clock), known: slices.Clone(t.host.known)}
		return nil
	})
	return tok
}

// Acquire orders t after what the releasing thread had done and issued.
func (t *thread) Acquire(v any) {
	tok, ok := v.(handoffToken)
	if !ok {
		return
	}
	t.do(func() error {
		t.b.hostJoin(tok.clock)
		if len(tok.known) > 0 {
			t.host.grow(len(tok.known) - 1)
		}
		for i, n := range tok.known {
			t.host.known[i] = max(t.host.known[i], n)
		}
		return nil
	})
}

func (t *thread) Name() string { return t.b.Name() }

func (t *thread) NewStream() (s executor.Stream, err error) {
	err = t.do(func() error { s, err = t.b.NewStream(); return err })
	return s, err
}

func (t *thread) NewStreamKind(kind string) (s executor.Stream, err error) {
	err = t.do(func() error { s, err = t.b.NewStreamKind(kind); return err })
	return s, err
}

func (t *thread) NewEvent() (e executor.Event, err error) {
	err = t.do(func() error { e, err = t.b.NewEvent(); return err })
	return e, err
}

func (t *thread) Alloc(d executor.BufferDesc) (h executor.Buffer, err error) {
	err = t.do(func() error { h, err = t.b.Alloc(d); return err })
	return h, err
}

func (t *thread) Write(h executor.Buffer, data []byte) error {
	return t.do(func() error { return t.b.Write(h, data) })
}

func (t *thread) Read(h executor.Buffer) (data []byte, err error) {
	err = t.do(func() error { data, err = t.b.Read(h); return err })
	return data, err
}

func (t *thread) Record(e executor.Event, s executor.Stream) error {
	return t.do(func() error { return t.b.Record(e, s) })
}

func (t *thread) Wait(s executor.Stream, e executor.Event) error {
	return t.do(func() error { return t.b.Wait(s, e) })
}

func (t *thread) Launch(s executor.Stream, l *executor.LaunchDesc) error {
	return t.do(func() error { return t.b.Launch(s, l) })
}

func (t *thread) LaunchFunc(s executor.Stream, l *executor.LaunchDesc, f executor.StageFunc) error {
	return t.do(func() error { return t.b.LaunchFunc(s, l, f) })
}

// Synchronize is the backend's: it orders every thread's work.
func (t *thread) Synchronize() error {
	return t.do(t.b.Synchronize)
}

func (t *thread) DestroyStream(s executor.Stream) error {
	return t.do(func() error { return t.b.DestroyStream(s) })
}

func (t *thread) DestroyEvent(e executor.Event) error {
	return t.do(func() error { return t.b.DestroyEvent(e) })
}

func (t *thread) Free(h executor.Buffer) error {
	return t.do(func() error { return t.b.Free(h) })
}

// Close does nothing: a view lives until the backend's Close.
func (t *thread) Close() error { return nil }

// SyncEvent waits without holding the other threads up: it takes the
// event's latest record as a call, blocks outside, and joins its clock as
// another call (unless the wait is blind).
func (t *thread) SyncEvent(he executor.Event) error {
	var sl *slot
	var blind bool
	if err := t.do(func() error {
		e, err := t.b.event(he)
		if err == nil {
			sl, blind = e.latest, t.b.unordered(e.latest)
		}
		return err
	}); err != nil || sl == nil {
		return err
	}
	<-sl.done
	if blind {
		return nil
	}
	return t.do(func() error { t.b.hostJoin(sl.clock); return nil })
}

func (t *thread) QueryEvent(e executor.Event) (done bool, err error) {
	err = t.do(func() error { done, err = t.b.QueryEvent(e); return err })
	return done, err
}

func (t *thread) HostWrite(h executor.Buffer, off int64, data []byte) error {
	return t.do(func() error { return t.b.HostWrite(h, off, data) })
}

func (t *thread) HostRead(h executor.Buffer, off int64, data []byte) error {
	return t.do(func() error { return t.b.HostRead(h, off, data) })
}
