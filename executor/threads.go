package executor

// Host threads: a plan whose streams name the host thread that issues them
// (plan.Stream.Thread) runs one goroutine per thread. The plan is
// lowered once, as for one thread, and each instruction goes to the list
// of the thread that issues its stream; every thread runs its list with
// the one issue loop (exec.issue), iteration after iteration, on its own
// view of the backend (Threader). A host event handed from one thread to
// another (a record on a thread's host stream that another thread's host
// stream waits on) becomes a pair of instructions: opSignal on the
// recording thread, opAwait on the waiting one, which blocks until the
// signal of the iteration it waits for (lag included) was issued. Nothing
// else orders the threads: a device wait on an event another thread
// records takes whatever record was issued last, as cuStreamWaitEvent
// does.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dagrun/dagrun/plan"
)

// Threader is an optional Backend interface: a backend that plans issued
// from several host threads run on. Run uses it for plans whose streams
// name host threads.
type Threader interface {
	// Thread returns the backend as host thread name issues to it ("" is
	// the main thread): a Backend whose calls, made from one goroutine
	// (the thread's), are issued by that thread, on the streams, events
	// and buffers of the backend. The same name gives the same view; views
	// live until the backend's Close. The executor calls Synchronize on
	// the backend itself, after every thread has issued its last op; it
	// orders everything issued by every thread.
	Thread(name string) (Backend, error)
}

// HostHandoff is an optional interface of a thread's view (Threader) for
// race detectors: the happens-before of a host event handed from one
// thread to another, as a release/acquire pair. Release is called on the
// signalling thread as it signals and returns what the receiving thread
// acquires; Acquire is called on the receiving thread once the signal has
// arrived, before its next call.
type HostHandoff interface {
	Release() any
	Acquire(token any)
}

// ErrNoThreads is returned (wrapped) by Run when a plan issued from several
// host threads meets a backend that is no Threader.
var ErrNoThreads = errors.New("backend cannot issue from several host threads")

// threadProg is what one host thread issues: per phase, its instructions.
type threadProg struct {
	name   string
	phases [][]instr
}

// hostThreads finds the plan's host threads and its host events handed
// across threads, and rejects what a run from several threads cannot do.
// It sets x.threads (nil with one thread) and the handoff tables that
// appendIteration lowers into opSignal and opAwait.
func (x *program) hostThreads(o *Options, dynamic bool) error {
	p := x.p
	id := map[string]int{"": 0}
	names := []string{""}
	thread := make([]int, len(p.Streams))
	for s, str := range p.Streams {
		t, ok := id[str.Thread]
		if !ok {
			t = len(names)
			id[str.Thread] = t
			names = append(names, str.Thread)
		}
		thread[s] = t
	}
	if len(names) == 1 {
		return nil
	}
	what := ""
	switch {
	case x.graph:
		what = "graph mode (a capture is issued from one thread)"
	case dynamic:
		what = "--alloc dynamic (the free stream is the main thread's)"
	case o.hostIO() || o.InFlight > 0:
		what = "host inputs, outputs, progress or an in-flight bound (the host side of an iteration is the main thread's)"
	case o.SyncEach:
		what = "sync-each (a synchronize orders every thread's work)"
	}
	if what != "" {
		return fmt.Errorf("executor: the plan is issued from %d host threads, which %s does not support: use stream mode without it", len(names), what)
	}
	x.threads = make([]threadProg, len(names))
	for t, n := range names {
		x.threads[t].name = n
	}
	x.thread = thread
	// A host wait on another thread's host record: the record it takes is
	// the latest before it in issue order (lag 0) or the last of the
	// iteration (a lag).
	lastRec := make([]int, p.Events)
	for e := range lastRec {
		lastRec[e] = -1
	}
	final := make([]int, p.Events)
	for k, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpRecord {
			final[o.Event] = k
		}
	}
	x.signals, x.awaits = map[int]int32{}, map[int]int32{}
	for k, so := range p.IssueOrder {
		str := &p.Streams[so[0]]
		o := str.Ops[so[1]]
		switch o.Kind {
		case plan.OpRecord:
			lastRec[o.Event] = k
		case plan.OpWait:
			r := lastRec[o.Event]
			if o.Lag > 0 {
				r = final[o.Event]
			}
			if !str.Host || r < 0 {
				continue
			}
			rs := p.IssueOrder[r][0]
			if !p.Streams[rs].Host || thread[rs] == thread[so[0]] {
				continue
			}
			h, ok := x.signals[r]
			if !ok {
				h = int32(len(x.awaitsPer))
				x.signals[r] = h
				x.awaitsPer = append(x.awaitsPer, 0)
			}
			x.awaits[k] = h
			x.awaitsPer[h]++
		}
	}
	return nil
}

// splitThreads deals the lowered phases out to the threads, by the thread
// of each instruction's plan stream.
func (x *program) splitThreads() {
	if x.threads == nil {
		return
	}
	for t := range x.threads {
		x.threads[t].phases = make([][]instr, len(x.phases))
	}
	for ph, prog := range x.phases {
		for _, in := range prog {
			t := 0
			if in.src >= 0 {
				t = x.thread[x.p.IssueOrder[in.src][0]]
			}
			x.threads[t].phases[ph] = append(x.threads[t].phases[ph], in)
		}
	}
	x.phases = x.threads[0].phases
}

// handoffs is the host events handed across threads while a run issues:
// per handoff, how many iterations have signalled it, and for a
// HostHandoff backend the token of each signal not yet taken by all its
// awaits.
type handoffs struct {
	mu     sync.Mutex
	cond   sync.Cond
	count  []int
	tokens []map[int]*token
	per    []int // awaits of each handoff per iteration
	failed bool  // a thread stopped: awaits give up
}

type token struct {
	v    any
	left int // awaits that have not taken it
}

func newHandoffs(per []int) *handoffs {
	h := &handoffs{count: make([]int, len(per)), tokens: make([]map[int]*token, len(per)), per: per}
	h.cond.L = &h.mu
	for i := range per {
		h.tokens[i] = map[int]*token{}
	}
	return h
}

// signal notes iteration it's signal of handoff i, with the releasing
// thread's token (nil without a HostHandoff).
func (h *handoffs) signal(i int32, it int, hh HostHandoff) {
	h.mu.Lock()
	if hh != nil {
		h.tokens[i][it] = &token{v: hh.Release(), left: h.per[i]}
	}
	h.count[i] = it + 1
	h.mu.Unlock()
	h.cond.Broadcast()
}

// await blocks until iteration it's signal of handoff i was issued and
// acquires its token; false if a thread stopped first.
func (h *handoffs) await(i int32, it int, hh HostHandoff) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.count[i] <= it && !h.failed {
		h.cond.Wait()
	}
	if h.count[i] <= it {
		return false
	}
	if t := h.tokens[i][it]; t != nil {
		if hh != nil {
			hh.Acquire(t.v)
		}
		if t.left--; t.left <= 0 {
			delete(h.tokens[i], it)
		}
	}
	return true
}

// fail wakes every await: a thread stopped and will signal no more.
func (h *handoffs) fail() {
	h.mu.Lock()
	h.failed = true
	h.mu.Unlock()
	h.cond.Broadcast()
}

// errHandoff is the error of an await given up because another thread
// stopped; the run reports that thread's error.
var errHandoff = errors.New("another host thread stopped before it signalled")

// threadViews gives each host thread its view of the backend.
func (e *exec) threadViews() error {
	th := e.b.(Threader) // program.requires checked it
	e.views = make([]Backend, len(e.x.threads))
	for t, tp := range e.x.threads {
		v, err := th.Thread(tp.name)
		if err != nil {
			return fmt.Errorf("executor: %s: host thread %s: %w", e.b.Name(), threadName(tp.name), err)
		}
		if _, ok := v.(HostSyncer); e.x.host && !ok {
			return fmt.Errorf("executor: %s: host thread %s: %w (needed for host stages)", e.b.Name(), threadName(tp.name), ErrNoHostSync)
		}
		e.views[t] = v
	}
	e.handoffs = newHandoffs(e.x.awaitsPer)
	return nil
}

func threadName(n string) string {
	if n == "" {
		return "main"
	}
	return n
}

// runThreads issues the program's iterations from one goroutine per host
// thread, each with the issue loop on its view of the backend, then runs
// the shared tail once every thread has issued its last op.
func (e *exec) runThreads(ctx context.Context) (*Result, error) {
	x := e.x
	start := time.Now()
	T := len(x.threads)
	ts := make([]exec, T)
	errs := make([]error, T)
	e.pending = true
	var wg sync.WaitGroup
	for t := range T {
		te := &ts[t]
		*te = *e
		te.b = e.views[t]
		te.hs, _ = te.b.(HostSyncer)
		te.fl, _ = te.b.(FuncLauncher)
		te.hh, _ = te.b.(HostHandoff)
		te.launches, te.waits, te.records = 0, 0, 0
		// A thread allocates the lazy workspaces of its own streams
		// (lazyAlloc) into lists of its own; they join e.owned below,
		// for release, whether the thread finished or stopped.
		te.owned, te.lazyDone = nil, nil
		wg.Add(1)
		go func() {
			defer wg.Done()
			phases := x.threads[t].phases
			for it := 0; it < x.iters; it++ {
				err := ctx.Err()
				if err != nil {
					err = fmt.Errorf("executor: host thread %s stopped before iteration %d of %d: %w", threadName(x.threads[t].name), it+1, x.iters, err)
				} else {
					err = te.issue(phases[it%len(phases)], it)
				}
				if err != nil {
					errs[t] = err
					e.handoffs.fail()
					return
				}
				te.issued = it + 1
			}
		}()
	}
	wg.Wait()
	e.issued = x.iters
	for t := range ts {
		e.owned = append(e.owned, ts[t].owned...)
		e.launches += ts[t].launches
		e.waits += ts[t].waits
		e.records += ts[t].records
		e.issued = min(e.issued, ts[t].issued)
	}
	var first []error
	for _, err := range errs {
		if err != nil && !errors.Is(err, errHandoff) {
			first = append(first, err)
		}
	}
	if len(first) == 0 {
		first = errs // only given-up awaits: report them
	}
	if err := errors.Join(first...); err != nil {
		return nil, err
	}
	return e.tail(start)
}
