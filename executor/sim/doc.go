// Package sim is the simulator Backend of package executor: the default where
// there is no GPU. It runs every stream on its own goroutine with CUDA's
// stream and event semantics, computes the built-in kernels bit-exactly on
// host memory (package contract documents them), and checks every run with a dynamic race
// detector.
//
// Streams. Each stream is a goroutine fed by an unbounded FIFO: Launch,
// Record and Wait enqueue and return at once, as the CUDA driver calls do.
// Before each op the goroutine sleeps or spins for a random delay in
// [0, Options.MaxDelay] drawn from a per-stream PCG generator seeded with
// (Options.Seed, stream number), so different seeds give different
// interleavings.
//
// Events. Record(e, s) made on the host creates a new generation of e (the
// "most recent record"), which completes when s's goroutine reaches it.
// Wait(s, e) captures e's generation at the time of the host call: the stream
// later blocks until that generation completes. A Wait on an event that was
// never recorded captures nothing and waits for nothing (CUDA's
// wait-before-record trap). Because each queue is FIFO and every wait refers
// to a record issued earlier, the earliest-issued pending op can always run,
// so a run cannot deadlock.
//
// Memory. Buffers are []byte in host memory for both device and host_pinned
// placement. Stages really run concurrently, so a racy plan may touch the same
// bytes from two goroutines: each buffer's data is guarded by an RWMutex held
// for the kernel body (locks taken in buffer-creation order), so the
// simulator never trips Go's race detector; GPU races are simulated at the
// ordering level. Reads are snapshotted before writes, so in-place kernels
// see the old values.
//
// Race detection. A vector clock per stream, in the style of FastTrack
// (Flanagan and Freund, PLDI 2009, section 3): a launch ticks its stream's
// own component, a record stores a copy of the recording stream's clock when
// it executes, and a wait joins the stored clock into the waiting stream's.
// Each buffer keeps shadow state over byte ranges: the last write and the
// reads since it (at most one per stream: a read ordered before a later read
// is dropped, which loses no race, only a duplicate report). An access whose
// conflicting predecessor is not ordered before it (the predecessor's clock
// is above the current clock's component for its stream) is reported when it
// happens. Happens-before depends on the host issue order only, not on
// timing, so a racy plan is reported under every seed. Synchronize orders all
// earlier work before the host and clears the shadow state, which keeps it
// bounded; so does merging neighbouring ranges with equal state.
//
// Host threads. A plan issued from several host threads runs on the
// threads' views of the backend (Thread, threads.go): their calls are
// serialized, each with its thread's own host clock, and a wait on another
// thread's record that no host handoff made known to the waiting thread
// is taken by the detector as waiting for nothing, so such a race is
// reported under every seed however the threads interleave. The legacy
// default stream's implicit order is applied as the calls come, across
// threads too (the verifier takes another thread's ops into it only
// through handoffs).
//
// Resources. The backend counts live streams, events and buffers with the
// call site that created each; Close reports every one still alive.
package sim
