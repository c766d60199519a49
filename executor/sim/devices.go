package sim

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
)

// Several devices (executor.Devicer, executor.Collectiver). Each stream
// and each device buffer belongs to one simulated device; host memory
// (host_pinned, host_pageable) to none, and every device reaches it. A
// launch that touches another device's memory is refused (on a GPU, an
// illegal address), except a copy between two devices on a stream of one
// of them: a peer copy, which moves the bytes between the devices' memories.
//
// A collective's rank (LaunchDesc.Collective) is a rendezvous: the rank's
// stream blocks at it until every rank of its group has reached its own
// stream's turn; the last to arrive computes the all-reduce (each receive
// range becomes the float32 sum, word by word, of every rank's send range,
// ranks added in order 0, 1, …, as the all_reduce built-in says), and
// every rank's stream then goes on. For the race detector each rank
// reads its send range and writes its receive range at its arrival, and
// after the rendezvous each rank's stream knows what every rank's stream
// knew before its rank (the verifier's rendezvous rule): work after a rank
// is ordered after the work before every rank, not after the other ranks
// themselves.
//
// Not modelled: link bandwidth and contention (a peer copy costs what a
// copy on one device does), NCCL's algorithms (rings, trees, its own
// buffers and the order it adds partial sums in: here ranks are added in
// order, so a GPU's sums may differ in the last bits for more than two
// ranks), and what the ranks do on each other's memory while they run.
//
// Deadlock: a rank whose stream, before it, waits for another rank's
// completion never reaches the rendezvous the other rank waits in.
// Synchronize detects that no stream can move (every stream idle or
// blocked, one of them in a rendezvous, and no progress for a while),
// releases the rendezvous without computing it, and returns the deadlock
// as a fault naming the ranks that arrived and those that did not.

// DefaultDevices is the number of simulated devices when Options.Devices
// is 0: as many as a spec may name (dag.MaxDevices), so that every plan
// runs on the simulator.
const DefaultDevices = dag.MaxDevices

// Devices is the number of simulated devices (executor.Devicer).
func (b *Backend) Devices() int { return cmp.Or(b.opt.Devices, DefaultDevices) }

// NewStreamOn creates a stream of device dev (executor.Devicer): kind ""
// (non-blocking) on any device, other kinds (NewStreamKind) on device 0.
func (b *Backend) NewStreamOn(dev int, kind string) (executor.Stream, error) {
	if dev < 0 || dev >= b.Devices() {
		return nil, fmt.Errorf("sim: stream on device %d: the simulator has devices 0 to %d (sim.Options.Devices)", dev, b.Devices()-1)
	}
	var hs executor.Stream
	var err error
	switch {
	case kind == "":
		hs, err = b.NewStream()
	case dev == 0:
		hs, err = b.NewStreamKind(kind)
	default:
		return nil, fmt.Errorf("sim: a %s stream on device %d: streams of other kinds than non-blocking are device 0's", kind, dev)
	}
	if err != nil {
		return nil, err
	}
	hs.(*stream).device = dev
	return hs, nil
}

// CollectiveLibrary says what runs collectives here (executor.Collectiver).
func (b *Backend) CollectiveLibrary() (string, error) {
	return "the simulator's all-reduce (float32 sums in rank order on the host)", nil
}

// checkDevices returns an error for a launch on s that touches device
// memory of another device (a peer copy may touch two, one its own).
func (b *Backend) checkDevices(s *stream, l *executor.LaunchDesc) error {
	other := func(a executor.Arg) (int, bool) {
		buf := a.Buffer.(*buffer)
		return buf.device, buf.where == contract.WhereDevice && buf.device != s.device
	}
	if l.Kernel == contract.BuiltinCopy && l.UserKernel == nil && l.Collective == nil && len(l.Reads) == 1 && len(l.Writes) == 1 {
		r, rw := l.Reads[0].Buffer.(*buffer), l.Writes[0].Buffer.(*buffer)
		if r.where == contract.WhereDevice && rw.where == contract.WhereDevice && r.device != rw.device {
			if s.device != r.device && s.device != rw.device {
				return fmt.Errorf("sim: stage %s: a peer copy from device %d to device %d on stream %d of device %d", l.Name, r.device, rw.device, s.num, s.device)
			}
			return nil
		}
	}
	for k, list := range [2][]executor.Arg{l.Reads, l.Writes} {
		for _, a := range list {
			if d, bad := other(a); bad {
				return fmt.Errorf("sim: stage %s on stream %d of device %d %s buffer %s of device %d: a kernel touches only its own device's memory and host memory", l.Name, s.num, s.device, [2]string{"reads", "writes"}[k], a.Name, d)
			}
		}
	}
	return nil
}

// rendezvous is one issue of a collective: its ranks' launches, filled in
// as the host launches them (rank 0 first), and their arrivals on their
// streams.
type rendezvous struct {
	ranks   []*executor.LaunchDesc
	streams []*stream
	issued  int

	mu      sync.Mutex
	arrived []bool
	count   int
	pre     [][]uint64 // per rank: its stream's clock before the rank
	done    chan struct{}
	aborted bool // released by deadlock detection: not computed
}

// issueRank adds rank l, launched on s, to its group's pending rendezvous
// (rank 0 starts one); the backend's issuing goroutine calls it.
func (b *Backend) issueRank(s *stream, l *executor.LaunchDesc) (*rendezvous, error) {
	c := l.Collective
	if c.Ranks < 1 || c.Rank < 0 || c.Rank >= c.Ranks {
		return nil, fmt.Errorf("sim: stage %s: rank %d of %d", l.Name, c.Rank, c.Ranks)
	}
	if b.rvs == nil {
		b.rvs = map[int]*rendezvous{}
	}
	rv := b.rvs[c.Group]
	if rv == nil || rv.issued == len(rv.ranks) {
		rv = &rendezvous{ranks: make([]*executor.LaunchDesc, c.Ranks), streams: make([]*stream, c.Ranks),
			arrived: make([]bool, c.Ranks), pre: make([][]uint64, c.Ranks), done: make(chan struct{})}
		b.rvs[c.Group] = rv
		b.mu.Lock()
		b.open = append(b.open, rv)
		b.mu.Unlock()
	}
	if len(rv.ranks) != c.Ranks || rv.ranks[c.Rank] != nil {
		return nil, fmt.Errorf("sim: stage %s: rank %d of collective group %d launched again before its other ranks", l.Name, c.Rank, c.Group)
	}
	rv.ranks[c.Rank], rv.streams[c.Rank] = l, s
	rv.issued++
	return rv, nil
}

// rank runs rank l of rv on s: the race detector's check of its own
// accesses, the arrival, the last arrival's all-reduce, the wait for every
// rank, then the join of every rank's clock from before its rank.
func (s *stream) rank(l *executor.LaunchDesc, rv *rendezvous) {
	r := l.Collective.Rank
	var pre []uint64
	if s.b.detect {
		pre = append([]uint64(nil), s.clock...)
		s.check(l)
	}
	rv.mu.Lock()
	rv.arrived[r], rv.pre[r] = true, pre
	rv.count++
	last := rv.count == len(rv.ranks)
	if last && !rv.aborted {
		if err := rv.reduce(); err != nil {
			s.b.fault(fmt.Errorf("sim: collective %s: %w", l.Name, err))
		}
		close(rv.done)
	}
	rv.mu.Unlock()
	s.state.Store(stateRendezvous)
	<-rv.done
	s.state.Store(stateRunning)
	if s.b.detect && !rv.aborted {
		for _, c := range rv.pre {
			s.join(c)
		}
	}
	if last {
		s.b.mu.Lock()
		for i, o := range s.b.open {
			if o == rv {
				s.b.open = append(s.b.open[:i], s.b.open[i+1:]...)
				break
			}
		}
		s.b.mu.Unlock()
	}
}

// reduce computes the all-reduce of rv's ranks: every receive range
// becomes the float32 sum of the send ranges, word by word, in rank
// order. The send ranges are read before any receive range is written
// (in place is allowed). Buffers are locked in creation order.
func (rv *rendezvous) reduce() error {
	var bufs bufLocks
	n := rv.ranks[0].Reads[0].Bytes
	for _, l := range rv.ranks {
		if l.Reads[0].Bytes != n || l.Writes[0].Bytes != n || n%contract.WordBytes != 0 {
			return fmt.Errorf("rank %s sends %d bytes and receives %d; rank 0 sends %d: every rank reduces the same whole words", l.Name, l.Reads[0].Bytes, l.Writes[0].Bytes, n)
		}
		if op, _ := l.Args["op"].(string); op != "" && op != contract.ReduceSum || l.Collective.Reduce != contract.ReduceSum {
			return fmt.Errorf("rank %s: reduction %q: the simulator reduces with sum", l.Name, l.Collective.Reduce)
		}
		bufs.add(l.Reads[0].Buffer.(*buffer), false)
		bufs.add(l.Writes[0].Buffer.(*buffer), true)
	}
	bufs.lock()
	defer bufs.unlock()
	sum := make([]float32, n/contract.WordBytes)
	for _, l := range rv.ranks {
		a := l.Reads[0]
		src := a.Buffer.(*buffer).data[a.Offset : a.Offset+a.Bytes]
		for i := range sum {
			sum[i] += math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	}
	for _, l := range rv.ranks {
		a := l.Writes[0]
		dst := a.Buffer.(*buffer).data[a.Offset : a.Offset+a.Bytes]
		for i, v := range sum {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	}
	return nil
}

// Stream states for deadlock detection (stream.state).
const (
	stateRunning    int32 = iota // running an op, or about to
	stateIdle                    // its queue is empty
	stateWaiting                 // in a wait on an event not yet complete
	stateRendezvous              // in a collective's rendezvous
)

// deadlockAfter is how long no stream may move, every one idle or
// blocked with one in a rendezvous, before Synchronize calls it a
// deadlock. (A variable for tests.)
var deadlockAfter = 200 * time.Millisecond

// waitPending is Synchronize's wait for the queued work: it returns when
// every op has run. Each time the streams deadlock in a collective's
// rendezvous it releases the rendezvous and goes on waiting (a later
// iteration may deadlock again); it returns the deadlocks met, joined.
func (b *Backend) waitPending() error {
	done := make(chan struct{})
	go func() { b.pending.Wait(); close(done) }()
	tick := time.NewTicker(deadlockAfter / 4)
	defer tick.Stop()
	var stuck time.Duration
	var last uint64
	var errs []error
	for {
		select {
		case <-done:
			return errors.Join(errs...)
		case <-tick.C:
		}
		p := b.progress.Load()
		if p != last || !b.stuck() {
			last, stuck = p, 0
			continue
		}
		if stuck += deadlockAfter / 4; stuck < deadlockAfter {
			continue
		}
		errs = append(errs, b.releaseDeadlock())
		stuck = 0
	}
}

// stuck reports whether no stream can move: each is idle or blocked, and
// one waits in a rendezvous.
func (b *Backend) stuck() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	inRV := false
	for s := range b.streams {
		switch s.state.Load() {
		case stateRunning:
			return false
		case stateRendezvous:
			inRV = true
		}
	}
	return inRV
}

// releaseDeadlock releases every rendezvous a rank waits in that is not
// complete (its ranks are not computed) and describes the deadlock.
func (b *Backend) releaseDeadlock() error {
	b.mu.Lock()
	open := append([]*rendezvous(nil), b.open...)
	b.mu.Unlock()
	var lines []string
	var released []*rendezvous
	for _, rv := range open {
		rv.mu.Lock()
		if rv.count > 0 && rv.count < len(rv.ranks) && !rv.aborted { // a rank waits in it
			var in, out []string
			for r, l := range rv.ranks {
				name := fmt.Sprintf("rank %d", r)
				if l != nil {
					name = fmt.Sprintf("%s (stream %d, device %d)", l.Name, rv.streams[r].num, rv.streams[r].device)
				}
				if rv.arrived[r] {
					in = append(in, name)
				} else {
					out = append(out, name)
				}
			}
			lines = append(lines, fmt.Sprintf("%s waited for %s, whose stream never reached it", strings.Join(in, ", "), strings.Join(out, ", ")))
			rv.aborted = true
			close(rv.done)
			released = append(released, rv)
		}
		rv.mu.Unlock()
	}
	b.mu.Lock()
	b.open = slices.DeleteFunc(b.open, func(rv *rendezvous) bool { return slices.Contains(released, rv) })
	b.mu.Unlock()
	return fmt.Errorf("sim: deadlock in a collective: %s (a rank's stream waits, before the rank, for work that needs the collective to complete; no rank completes before every rank has started)", strings.Join(lines, "; "))
}
