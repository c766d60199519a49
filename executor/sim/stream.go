package sim

import (
	"fmt"
	"github.com/dagrun/dagrun/contract"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dagrun/dagrun/executor"
)

type opKind uint8

const (
	opLaunch opKind = iota
	opRecord
	opWait
	opLifetime // AllocAsync or FreeAsync reaching the stream (alloc.go)
)

// op is one queued stream op.
type op struct {
	kind opKind
	desc *executor.LaunchDesc // opLaunch
	slot *slot                // opRecord: the generation it completes; opWait: the one it waits for (nil: none)
	fn   executor.StageFunc   // opLaunch of a Go-function stage (gofunc.go)
	host []uint64             // the host's clock when the op was issued (hostio.go), nil if the host never waited or accessed
	buf  *buffer              // opLifetime: the buffer allocated (alloc) or freed
	free bool                 // opLifetime: a free
	// blind, on a wait: the record it takes is another host thread's and
	// not ordered before the wait by a host handoff (threads.go): the
	// stream waits for it, the race detector takes it as waiting for
	// nothing, as the verifier does.
	blind bool
	rv    *rendezvous // opLaunch of a collective's rank (devices.go)
}

// maxQueued bounds a stream's queued ops, as a CUDA stream's launch queue
// does (the host blocks in the launch when it is full): the host cannot
// run ahead of a stream by more, so a long run's memory does not grow with
// its iterations. Queued ops depend only on ops issued before them, so a
// full queue always drains.
const maxQueued = 1024

// stream is an executor.Stream: a FIFO of at most maxQueued ops drained by
// one goroutine.
type stream struct {
	b   *Backend
	num int // stream number in reports (reused after destroy)
	vc  int // index of this stream's component in vector clocks (never reused)

	stopped bool // set by the issuing goroutine on destroy

	// Owned by the issuing goroutine (kinds.go): the stream's kind, whether
	// a blocking stream has ops issued since the legacy stream last waited
	// for it, the legacy stream's ops issued (issued) and the count a
	// blocking stream last waited for (seenLegacy).
	kind               string
	dirty              bool
	issued, seenLegacy int

	mu      sync.Mutex
	cond    *sync.Cond // signalled when an op is queued or the stream closes
	space   *sync.Cond // signalled when an op leaves a full queue
	q       []op
	head    int
	closing bool

	// Owned by the stream goroutine.
	rng   *rand.Rand
	clock []uint64

	device int          // its device (devices.go), set at creation
	state  atomic.Int32 // stateRunning, stateIdle, … (devices.go)
}

// push issues o on s with CUDA's implicit order (kinds.go) around it.
func (s *stream) push(o op) {
	s.b.implicitBefore(s)
	s.pushRaw(o)
	s.b.implicitAfter(s)
}

func (s *stream) pushRaw(o op) {
	o.host = s.b.hostSnapshot()
	s.b.pending.Add(1)
	s.mu.Lock()
	for len(s.q)-s.head >= maxQueued {
		s.space.Wait()
	}
	s.q = append(s.q, o)
	s.mu.Unlock()
	s.cond.Signal()
}

// stop makes the goroutine exit once its queue is empty.
func (s *stream) stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.cond.Signal()
}

func (s *stream) pop() (op, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.head == len(s.q) {
		if s.closing {
			return op{}, false
		}
		s.state.Store(stateIdle)
		s.cond.Wait()
	}
	s.state.Store(stateRunning)
	o := s.q[s.head]
	s.q[s.head] = op{}
	s.head++
	switch {
	case s.head == len(s.q):
		s.q, s.head = s.q[:0], 0
	case s.head >= maxQueued: // keep the slice from growing while the queue never empties
		n := copy(s.q, s.q[s.head:])
		clear(s.q[n:])
		s.q, s.head = s.q[:n], 0
	}
	if len(s.q)-s.head == maxQueued-1 {
		s.space.Signal()
	}
	return o, true
}

func (s *stream) loop() {
	defer s.b.running.Done()
	for {
		o, ok := s.pop()
		if !ok {
			return
		}
		s.delay()
		if o.host != nil && s.b.detect {
			s.join(o.host) // host accesses before the op was issued happen-before it
		}
		switch o.kind {
		case opLaunch:
			if o.rv != nil {
				t0 := time.Now()
				s.rank(o.desc, o.rv) // devices.go
				if s.b.opt.Spans {
					s.b.span(o.desc, t0, time.Now())
				}
				break
			}
			if s.b.opt.Spans {
				t0 := time.Now()
				s.launch(o.desc, o.fn)
				s.b.span(o.desc, t0, time.Now())
			} else {
				s.launch(o.desc, o.fn)
			}
		case opRecord:
			if s.b.detect {
				o.slot.clock = append([]uint64(nil), s.clock...)
			}
			close(o.slot.done)
		case opWait:
			if o.slot != nil {
				s.state.Store(stateWaiting)
				<-o.slot.done
				s.state.Store(stateRunning)
				if s.b.detect && !o.blind {
					s.join(o.slot.clock)
				}
			}
		case opLifetime:
			s.lifetime(o.buf, o.free)
		}
		s.b.progress.Add(1)
		s.b.pending.Done()
	}
}

// delay waits a random time in [0, maxDelay].
func (s *stream) delay() {
	if s.b.maxDelay <= 0 {
		return
	}
	wait(time.Duration(s.rng.Int64N(int64(s.b.maxDelay) + 1)))
}

// wait sleeps for d: yielding in a loop below 50 µs, where time.Sleep is too
// coarse, and with time.Sleep above.
func wait(d time.Duration) {
	if d <= 0 {
		return
	}
	if d >= 50*time.Microsecond {
		time.Sleep(d)
		return
	}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		runtime.Gosched()
	}
}

// join merges a recorded clock into the stream's clock (element-wise max).
func (s *stream) join(c []uint64) {
	if len(c) > len(s.clock) {
		s.clock = append(s.clock, make([]uint64, len(c)-len(s.clock))...)
	}
	for i, v := range c {
		s.clock[i] = max(s.clock[i], v)
	}
}

// tick advances the stream's own clock component and returns its new value.
func (s *stream) tick() uint64 {
	if s.vc >= len(s.clock) {
		s.clock = append(s.clock, make([]uint64, s.vc+1-len(s.clock))...)
	}
	s.clock[s.vc]++
	return s.clock[s.vc]
}

// launch runs one kernel: check the accesses against the shadow state, lock
// the buffers, snapshot the reads, run the body, unlock, spin.
func (s *stream) launch(l *executor.LaunchDesc, fn executor.StageFunc) {
	defer func() {
		if r := recover(); r != nil {
			s.b.fault(fmt.Errorf("sim: stage %s (stream %d) panicked: %v", l.Name, s.num, r))
		}
	}()
	bufs := make(bufLocks, 0, len(l.Reads)+len(l.Writes))
	add := func(a executor.Arg, write bool) bool {
		buf := a.Buffer.(*buffer)
		if buf.freed.Load() {
			s.b.fault(fmt.Errorf("sim: stage %s (stream %d) uses buffer %s after it was freed", l.Name, s.num, a.Name))
			return false
		}
		bufs.add(buf, write)
		return true
	}
	if s.b.detect {
		s.check(l) // first: a use of a buffer already freed may also be a race with its free (alloc.go)
	}
	for _, a := range l.Reads {
		if !add(a, false) {
			return
		}
	}
	for _, a := range l.Writes {
		if !add(a, true) {
			return
		}
	}
	bufs.lock()
	err := s.safeBody(l, fn)
	bufs.unlock()
	if err != nil {
		s.b.fault(fmt.Errorf("sim: stage %s (stream %d): %w", l.Name, s.num, err))
		return
	}
	if us, _ := contract.SpinUS(l.Kernel, l.Args, l.DurationUS); us > 0 {
		d := time.Duration(us * s.b.opt.SpinScale * float64(time.Microsecond))
		if s.b.opt.MaxSpin > 0 {
			d = min(d, s.b.opt.MaxSpin)
		}
		wait(d)
	}
}

type lockedBuf struct {
	buf   *buffer
	write bool
}

// bufLocks are the buffers one launch (or one collective's ranks) holds
// while it runs: each once, written if any access writes it.
type bufLocks []lockedBuf

// add takes buf into the set; a write access makes its lock exclusive.
func (b *bufLocks) add(buf *buffer, write bool) {
	for i := range *b {
		if (*b)[i].buf == buf {
			(*b)[i].write = (*b)[i].write || write
			return
		}
	}
	*b = append(*b, lockedBuf{buf, write})
}

// lock takes every lock in creation order of the buffers (so two launches
// never wait on each other's locks) and marks written buffers not fresh.
func (b bufLocks) lock() {
	for i := 1; i < len(b); i++ {
		for j := i; j > 0 && b[j].buf.id < b[j-1].buf.id; j-- {
			b[j], b[j-1] = b[j-1], b[j]
		}
	}
	for _, lb := range b {
		if lb.write {
			lb.buf.mu.Lock()
			lb.buf.fresh = false
		} else {
			lb.buf.mu.RLock()
		}
	}
}

// unlock releases what lock took.
func (b bufLocks) unlock() {
	for _, lb := range b {
		if lb.write {
			lb.buf.mu.Unlock()
		} else {
			lb.buf.mu.RUnlock()
		}
	}
}

// check runs the race detector on l's accesses at a new epoch of the stream.
func (s *stream) check(l *executor.LaunchDesc) {
	now := s.tick()
	for _, set := range [2]struct {
		args  []executor.Arg
		write bool
	}{{l.Reads, false}, {l.Writes, true}} {
		for _, a := range set.args {
			acc := access{stream: s.num, vc: s.vc, clock: now, stage: l.Stage, name: l.Name, write: set.write}
			races := a.Buffer.(*buffer).shadow.apply(a.Offset, a.Offset+a.Bytes, acc, s.clock)
			for _, r := range races {
				s.b.report(a.Name, r, acc)
			}
		}
	}
}

// safeBody runs body, turning a panic (a bug, or a user CPU body's) into an
// error so the buffer locks are always released.
func (s *stream) safeBody(l *executor.LaunchDesc, fn executor.StageFunc) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return s.body(l, fn)
}

// body runs the kernel on the locked buffers. A read that overlaps a write
// of the same launch (in place) is copied first, so the kernel sees the old
// values; other reads are passed live (no other launch can write them while
// the read lock is held). A mix copies only the words it will use.
func (s *stream) body(l *executor.LaunchDesc, fn executor.StageFunc) error {
	maxWords := int64(math.MaxInt64)
	if l.UserKernel == nil && l.Kernel == contract.BuiltinMix {
		var err error
		if maxWords, err = contract.MixMaxWords(l.Args); err != nil {
			return err
		}
	}
	in := make([][]byte, len(l.Reads))
	n := make([]int, len(l.Reads))
	for i, a := range l.Reads {
		live := a.Buffer.(*buffer).data[a.Offset : a.Offset+a.Bytes]
		n[i] = (len(live) + 3) / 4
		in[i] = live
		for _, w := range l.Writes {
			if w.Buffer == a.Buffer && w.Range().Overlaps(a.Range()) {
				keep := int64(len(live))
				if maxWords < keep/4 {
					keep = 4 * maxWords
				}
				in[i] = append([]byte(nil), live[:keep]...)
				break
			}
		}
	}
	out := make([][]byte, len(l.Writes))
	for i, a := range l.Writes {
		out[i] = a.Buffer.(*buffer).data[a.Offset : a.Offset+a.Bytes]
	}
	if fn != nil {
		return runFunc(l, fn, in, out)
	}
	if l.UserKernel != nil {
		if f := s.b.opt.Kernels[l.Kernel]; f != nil {
			return f(l, in, out)
		}
		if f, ok := executor.LookupCPUKernel(l.UserKernel.Entry); ok {
			return f(l, in, out)
		}
		mix(l.Seed, in, n, out, math.MaxInt64)
		return nil
	}
	if l.Kernel == contract.BuiltinMix {
		mix(l.Seed, in, n, out, maxWords)
		return nil
	}
	return builtin(l, in, out)
}
