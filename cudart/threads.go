//go:build cuda

package cudart

// Host threads (executor.Threader): a plan whose streams name host threads
// is issued by one goroutine per thread, each through its thread's view of
// the backend. A view has its own worker goroutine, locked to its own OS
// thread with the device's primary context current (cuCtxSetCurrent), so
// that each host thread's driver calls come from a thread of their own, as
// in the programs the plan models: a host wait (cuEventSynchronize) blocks
// only its thread, and CU_STREAM_PER_THREAD is the issuing thread's
// per-thread default stream. Views share the streams, events, buffers and
// loaded kernels of the context.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/executor"
)

var _ executor.Threader = (*backend)(nil)

// Thread returns host thread name's view ("" is the backend itself): its
// calls run on a worker of its own, on an OS thread with the context
// current. The same name gives the same view; views live until Close.
// Errors: profiling and SyncEach (their state is the main thread's), or
// the driver's.
func (b *backend) Thread(name string) (executor.Backend, error) {
	if name == "" || name == b.thread {
		return b, nil
	}
	if b.opts.Profile || b.opts.KernelTimestamps || b.opts.SyncEach {
		return nil, errors.New("cudart: host threads: profiling (Profile, KernelTimestamps) and SyncEach time and check one thread's ops: run a plan with host threads without them")
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errors.New("cudart: Thread: backend is closed")
	}
	if v, ok := b.threads[name]; ok {
		b.mu.Unlock()
		return v, nil
	}
	b.mu.Unlock()
	v := &backend{shared: b.shared, q: make(chan op, queueLen), done: make(chan struct{}), reply: make(chan error, 1), thread: name}
	started := make(chan error, 1)
	go v.run(started)
	if err := <-started; err != nil {
		return nil, fmt.Errorf("cudart: host thread %s: %w", name, err)
	}
	b.mu.Lock()
	if b.threads == nil {
		b.threads = map[string]*backend{}
	}
	b.threads[name] = v
	b.mu.Unlock()
	return v, nil
}

// initThread makes the device's primary context current on a view's
// worker thread; the built-in kernels are the main worker's (a module is
// the context's, callable from any thread where it is current).
func (w *worker) initThread() error {
	if err := w.makeCurrent(); err != nil {
		return err
	}
	w.fns = w.b.builtinFns
	return nil
}

// closeThread unloads the modules the view loaded and releases its hold
// on the primary context.
func (w *worker) closeThread() {
	for _, m := range w.mods {
		m.Unload()
	}
	w.dev.ReleasePrimaryCtx()
}

// views returns the other threads' views, by name.
func (b *backend) views() []*backend {
	b.mu.Lock()
	defer b.mu.Unlock()
	names := make([]string, 0, len(b.threads))
	for n := range b.threads {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*backend, len(names))
	for i, n := range names {
		out[i] = b.threads[n]
	}
	return out
}

// drainThreads waits until each other thread's worker has issued every op
// queued to it, so that the main thread's Synchronize orders them too.
func (b *backend) drainThreads() error {
	if b.thread != "" {
		return nil
	}
	var errs []error
	for _, v := range b.views() {
		if err := v.call("drain host thread "+v.thread, func(w *worker) error { return nil }); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// closeThreads stops the views' workers once their queues are drained.
func (b *backend) closeThreads() {
	for _, v := range b.views() {
		close(v.q)
		<-v.done
	}
	b.mu.Lock()
	b.threads = nil
	b.mu.Unlock()
}

var _ executor.HostHandoff = (*backend)(nil)

// Release is called as this thread hands a host event to another one: it
// returns once the view's worker has made every driver call queued before
// it, so that the other thread's calls after the handoff come after them
// (a cuEventRecord queued here is made before the other thread's
// cuStreamWaitEvent on it). The token is nil.
func (b *backend) Release() any {
	b.call("host event handoff", func(w *worker) error { return nil })
	return nil
}

// Acquire does nothing: the Go handoff orders the receiving thread's later
// calls after Release returned.
func (b *backend) Acquire(any) {}
