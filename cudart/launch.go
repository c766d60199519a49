//go:build cuda

package cudart

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
)

// Mix limits: the mix kernel takes its pointers in one by-value parameter
// (MixArgs in kernels/builtins.cu).
const (
	mixMaxWrites = 8
	mixMaxReads  = 32
	mixArgsSize  = 704
)

// Default launch shape of the built-in kernels (grid-stride loops: any grid
// is correct; this one fills the GPU without launching idle blocks).
const (
	defaultBlock   = 256
	maxDefaultGrid = 4096
)

// params packs kernel parameters: each starts 8-byte aligned in blob, and
// offs holds where (dr_launch hands the driver blob+offs[i]).
type params struct {
	blob []byte
	offs []int32
}

func (p *params) add(b []byte) {
	for len(p.blob)%8 != 0 {
		p.blob = append(p.blob, 0)
	}
	p.offs = append(p.offs, int32(len(p.blob)))
	p.blob = append(p.blob, b...)
}
func (p *params) u64(v uint64)       { p.add(binary.LittleEndian.AppendUint64(nil, v)) }
func (p *params) u32(v uint32)       { p.add(binary.LittleEndian.AppendUint32(nil, v)) }
func (p *params) f32(v float32)      { p.u32(math.Float32bits(v)) }
func (p *params) ptr(v cu.DevicePtr) { p.u64(uint64(v)) }

// kernelLaunch is a prepared launch, run on the worker.
type kernelLaunch struct {
	fn          cu.Function // context 0's
	grid, block [3]int
	p           params
	// name is the built-in's short name, or for a user kernel (user set)
	// its PTX path + "\x00" + entry: what fnIn looks up in another
	// context (devices.go).
	name string
	user *plan.Kernel
}

// argPtr returns the device address of an access: its buffer's base plus
// its offset.
func argPtr(a executor.Arg) (cu.DevicePtr, *buffer, error) {
	buf, err := asBuffer(a.Buffer)
	if err != nil {
		return 0, nil, fmt.Errorf("access %s: %w", a.Name, err)
	}
	if !contract.InBounds(a.Offset, a.Bytes, buf.bytes) {
		return 0, nil, fmt.Errorf("access %s at offset %d, %d bytes, outside the buffer's %d bytes", a.Name, a.Offset, a.Bytes, buf.bytes)
	}
	return buf.dptr + cu.DevicePtr(a.Offset), buf, nil
}

func shape(l *executor.LaunchDesc, words int64, warpMultiple bool) (grid, block [3]int) {
	grid, block = l.Grid, l.Block
	if block[0] <= 0 {
		block = [3]int{defaultBlock, 1, 1}
	}
	if warpMultiple {
		block[0] = (block[0] + 31) / 32 * 32
	}
	for i := 1; i < 3; i++ {
		block[i] = max(block[i], 1)
	}
	if grid[0] <= 0 {
		per := int64(block[0] * block[1] * block[2])
		grid = [3]int{int(min(max((words+per-1)/per, 1), maxDefaultGrid)), 1, 1}
	}
	for i := 1; i < 3; i++ {
		grid[i] = max(grid[i], 1)
	}
	return grid, block
}

// Launch queues stage l on stream s. Argument and shape errors come back at
// once; driver errors at the next Synchronize (at once with SyncEach).
//
// The first launch of a descriptor prepares it (see prepared): it checks
// the launch against the built-in contract, resolves its device addresses
// and packs its kernel parameters. Later launches of the same
// *executor.LaunchDesc reuse that work while the descriptor still holds
// what it was prepared from.
func (b *backend) Launch(hs executor.Stream, l *executor.LaunchDesc) error {
	s, ok := hs.(*stream)
	if !ok || s == nil {
		return fmt.Errorf("cudart: launch %s: %T is not a cuda stream", l.Name, hs)
	}
	switch {
	case l.Collective != nil:
		return b.launchRank(s, l) // nccl.go
	case b.group != nil:
		return b.groupOpen("launch of stage " + l.Name)
	case l.Copy == plan.CopySync:
		return b.syncCopy(l) // rules.go
	case l.HostFunc:
		return b.hostFunc(s, l) // rules.go
	}
	p, err := b.prepared(l)
	if err != nil {
		return err
	}
	what := p.what
	switch p.kind {
	case prepMemset:
		dst, v, n := p.dst, p.word, p.n
		return b.queueStage(s, l, what, func(w *worker) error {
			return wrap(cu.MemsetD32Async(dst, uint(v), n, s.s), "%s: cuMemsetD32Async", what)
		})
	case prepCopy:
		return b.queueStage(s, l, what, p.copyStep(s))
	case prepPeerCopy:
		return b.queueStage(s, l, what, b.peerCopyStep(p, s)) // devices.go
	case prepChecksum:
		// Zero out[0..1] on the same stream, then accumulate atomically.
		zero := func(w *worker) error {
			return wrap(cu.MemsetD32Async(p.dst, 0, 2, s.s), "%s: cuMemsetD32Async", what)
		}
		if p.zero != nil {
			zero = p.zero.step(s, what)
		}
		return b.queueStage(s, l, what, zero, p.k.step(s, what))
	case prepMix:
		k, snaps, err := b.mixLaunch(s, l, p)
		if err != nil {
			return fmt.Errorf("cudart: %s: %w", what, err)
		}
		if len(snaps) > 0 {
			var steps []func(*worker) error
			for _, c := range snaps {
				steps = append(steps, func(w *worker) error {
					return wrap(cu.MemcpyAsync(c.dst, c.src, c.n, s.s), "%s: snapshot of an in-place read: cuMemcpyAsync %d bytes", what, c.n)
				})
			}
			return b.queueStage(s, l, what, append(steps, k.step(s, what))...)
		}
		return b.queueStage(s, l, what, k.step(s, what))
	}
	return b.queueStage(s, l, what, p.k.step(s, what))
}

// maxPrepared bounds the prepared launches a backend keeps; past it the
// cache starts over.
const maxPrepared = 1 << 14

// prepKind is how a prepared launch runs.
type prepKind int

const (
	prepKernel   prepKind = iota // the kernel k
	prepMemset                   // fill of device memory: cuMemsetD32Async of n words of word at dst
	prepCopy                     // copy: n bytes from src to dst
	prepChecksum                 // zero words 0 and 1 at dst (memset, or the kernel zero), then the kernel k
	prepMix                      // the kernel k after per-launch patches (mixLaunch)
	prepPeerCopy                 // copy of n bytes from src to dst, device buffers of two plan devices (cuMemcpyPeerAsync)
)

// prep is a launch prepared once: checked, its device addresses resolved and
// its parameters packed. It never changes after prepare returns it, so the
// worker may read it while the caller launches it again.
type prep struct {
	src  executor.LaunchDesc // what it was prepared from (Reads, Writes and Args copied)
	what string              // "launch stage "name" (kernel)", for messages
	kind prepKind
	k    *kernelLaunch
	zero *kernelLaunch // prepChecksum on a pinned write: the fill kernel zeroing words 0 and 1

	dst, srcPtr      cu.DevicePtr
	n                int64 // prepMemset: words; prepCopy, prepPeerCopy: bytes
	srcCtx, dstCtx   int   // prepPeerCopy: the source's and the destination's contexts
	word             uint32
	srcHost, dstHost unsafe.Pointer // prepCopy: pinned memory as host pointers, nil for device memory

	// prepMix: reads first copied to the stream's scratch buffer; dst is
	// the offset in it.
	snaps        []snapshot
	scratchBytes int64
}

// prepared returns the prepared launch of l: the cached one when l was
// prepared before and still holds what it was prepared from, else a fresh
// preparation, cached by l unless its handles or arguments cannot be
// compared. The cache holds at most maxPrepared launches and is emptied
// when a buffer is freed, so it never outlives the addresses it holds.
func (b *backend) prepared(l *executor.LaunchDesc) (*prep, error) {
	b.prepMu.Lock()
	p := b.preps[l]
	b.prepMu.Unlock()
	if p != nil && p.matches(l) {
		return p, nil
	}
	p, err := b.prepare(l)
	if err != nil {
		return nil, err
	}
	if cacheable(l) {
		b.prepMu.Lock()
		if len(b.preps) >= maxPrepared {
			clear(b.preps)
		}
		b.preps[l] = p
		b.prepMu.Unlock()
	}
	return p, nil
}

// dropPrepared empties the cache of prepared launches.
func (b *backend) dropPrepared() {
	b.prepMu.Lock()
	clear(b.preps)
	b.prepMu.Unlock()
}

// cacheable reports whether l's handles and argument values can be
// compared with ==: the preparation of l may then be reused.
func cacheable(l *executor.LaunchDesc) bool {
	for _, set := range [2][]executor.Arg{l.Reads, l.Writes} {
		for _, a := range set {
			if _, ok := a.Buffer.(*buffer); !ok {
				return false
			}
		}
	}
	for _, v := range l.Args {
		switch v.(type) {
		case nil, bool, string, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64, json.Number:
		default:
			return false
		}
	}
	return true
}

// matches reports whether l holds what p was prepared from.
func (p *prep) matches(l *executor.LaunchDesc) bool {
	d := &p.src
	if l.Kernel != d.Kernel || l.Name != d.Name || l.Stage != d.Stage || l.Seed != d.Seed || l.Grid != d.Grid || l.Block != d.Block ||
		l.DurationUS != d.DurationUS || l.UserKernel != d.UserKernel || len(l.Args) != len(d.Args) ||
		!slices.Equal(l.Reads, d.Reads) || !slices.Equal(l.Writes, d.Writes) {
		return false
	}
	for k, v := range d.Args {
		if x, ok := l.Args[k]; !ok || x != v {
			return false
		}
	}
	return true
}

// prepare checks l (a built-in against the contract, executor.CheckLaunch;
// a user kernel against its parameters), resolves its device addresses and
// packs its kernel parameters.
func (b *backend) prepare(l *executor.LaunchDesc) (*prep, error) {
	p := &prep{what: fmt.Sprintf("launch stage %q (%s)", l.Name, l.Kernel)}
	var err error
	if l.UserKernel != nil {
		p.k, err = b.userLaunch(l)
	} else if err = executor.CheckLaunch(l); err == nil {
		err = b.prepareBuiltin(p, l)
	}
	if err != nil {
		return nil, fmt.Errorf("cudart: %s: %w", p.what, err)
	}
	p.src = *l
	p.src.Reads, p.src.Writes, p.src.Args = slices.Clone(l.Reads), slices.Clone(l.Writes), maps.Clone(l.Args)
	return p, nil
}

// prepareBuiltin prepares a launch of a built-in that passed
// executor.CheckLaunch, reading its arguments through the contract's
// accessors.
func (b *backend) prepareBuiltin(p *prep, l *executor.LaunchDesc) error {
	switch l.Kernel {
	case contract.BuiltinFill:
		v, err := contract.FillWord(l.Args)
		if err != nil {
			return err
		}
		dst, buf, err := argPtr(l.Writes[0])
		if err != nil {
			return err
		}
		n := l.Writes[0].Bytes / contract.WordBytes
		if buf.host == nil {
			p.kind, p.dst, p.n, p.word = prepMemset, dst, n, v
			return nil
		}
		p.k = b.fillLaunch(l, dst, n, v)
	case contract.BuiltinCopy:
		src, sb, err := argPtr(l.Reads[0])
		if err != nil {
			return err
		}
		dst, db, err := argPtr(l.Writes[0])
		if err != nil {
			return err
		}
		p.kind, p.srcPtr, p.dst, p.n = prepCopy, src, dst, l.Writes[0].Bytes
		if sb.host == nil && db.host == nil && sb.dev != db.dev {
			p.kind, p.srcCtx, p.dstCtx = prepPeerCopy, sb.c, db.c
		}
		if sb.host != nil {
			p.srcHost = unsafe.Add(sb.host, l.Reads[0].Offset)
		}
		if db.host != nil {
			p.dstHost = unsafe.Add(db.host, l.Writes[0].Offset)
		}
	case contract.BuiltinScale, contract.BuiltinAxpy:
		a, err := contract.ScaleFactor(l.Args)
		if err != nil {
			return err
		}
		x, _, err := argPtr(l.Reads[0])
		if err != nil {
			return err
		}
		y, _, err := argPtr(l.Writes[0])
		if err != nil {
			return err
		}
		n := l.Writes[0].Bytes / contract.WordBytes
		k := b.kernel(l.Kernel)
		k.grid, k.block = shape(l, n, false)
		k.p.ptr(y)
		k.p.ptr(x)
		k.p.u64(uint64(n))
		k.p.f32(a)
		p.k = k
	case contract.BuiltinMix:
		return b.prepareMix(p, l)
	case contract.BuiltinSpin:
		us, err := contract.SpinUS(l.Kernel, l.Args, l.DurationUS)
		if err != nil {
			return err
		}
		p.k = b.kernel("spin")
		p.k.grid, p.k.block = [3]int{1, 1, 1}, [3]int{32, 1, 1}
		p.k.p.u64(b.spinNS(us))
	case contract.BuiltinChecksum:
		in, _, err := argPtr(l.Reads[0])
		if err != nil {
			return err
		}
		out, ob, err := argPtr(l.Writes[0])
		if err != nil {
			return err
		}
		p.kind, p.dst = prepChecksum, out
		if ob.host != nil {
			p.zero = b.fillLaunch(&executor.LaunchDesc{}, out, 2, 0)
		}
		n := l.Reads[0].Bytes / contract.WordBytes
		k := b.kernel("checksum")
		k.grid, k.block = shape(l, n, true)
		k.p.ptr(out)
		k.p.ptr(in)
		k.p.u64(uint64(n))
		p.k = k
	default:
		return fmt.Errorf("unknown kernel %q: not a built-in and no user kernel given", l.Kernel)
	}
	return nil
}

// copyStep returns the worker step of a prepared copy on s: the driver copy
// for its pair of placements.
func (p *prep) copyStep(s *stream) func(*worker) error {
	dst, src, n, what := p.dst, p.srcPtr, p.n, p.what
	srcHost, dstHost := p.srcHost, p.dstHost
	return func(w *worker) error {
		switch {
		case srcHost == nil && dstHost == nil:
			return wrap(cu.MemcpyDtoDAsync(dst, src, n, s.s), "%s: cuMemcpyDtoDAsync %d bytes", what, n)
		case srcHost != nil && dstHost == nil:
			return wrap(cu.MemcpyHtoDAsync(dst, srcHost, n, s.s), "%s: cuMemcpyHtoDAsync %d bytes", what, n)
		case srcHost == nil && dstHost != nil:
			return wrap(cu.MemcpyDtoHAsync(dstHost, src, n, s.s), "%s: cuMemcpyDtoHAsync %d bytes", what, n)
		}
		return wrap(cu.MemcpyAsync(dst, src, n, s.s), "%s: cuMemcpyAsync %d bytes", what, n)
	}
}

func (b *backend) fillLaunch(l *executor.LaunchDesc, dst cu.DevicePtr, n int64, v uint32) *kernelLaunch {
	k := b.kernel("fill")
	k.grid, k.block = shape(l, n, false)
	k.p.ptr(dst)
	k.p.u64(uint64(n))
	k.p.u32(v)
	return k
}

// spinNS converts a requested spin in µs to the kernel's ns, less the
// calibrated launch overhead (never below 0).
func (b *backend) spinNS(us float64) uint64 {
	ns := us*1000 - b.spinOverheadNS
	if ns <= 0 || math.IsNaN(ns) {
		return 0
	}
	return uint64(ns)
}

// snapshot is a device-to-device copy queued before a launch.
type snapshot struct {
	dst, src cu.DevicePtr
	n        int64 // bytes
}

// MixArgs offsets (kernels/builtins.cu): the read pointers and the
// timestamp slot address.
const (
	mixReadPtrs = 168
	mixStamp    = 696
)

// prepareMix packs a mix launch. The kernel reads word i mod n_k of each
// read and writes word i of each write, thread by thread; that equals the
// contract's all-reads-before-writes order unless an in-place read (one that
// is also written) is shorter than the longest write, so that one thread
// reads a word another thread writes. Such reads are noted in p.snaps: each
// launch first copies them to the stream's scratch buffer (queued before the
// kernel on the same stream) and the kernel reads the copy (mixLaunch).
func (b *backend) prepareMix(p *prep, l *executor.LaunchDesc) error {
	if len(l.Writes) > mixMaxWrites {
		return fmt.Errorf("mix has %d writes; the cuda backend supports 1..%d", len(l.Writes), mixMaxWrites)
	}
	if len(l.Reads) > mixMaxReads {
		return fmt.Errorf("mix has %d reads; the cuda backend supports at most %d", len(l.Reads), mixMaxReads)
	}
	maxWords, err := contract.MixMaxWords(l.Args)
	if err != nil {
		return err
	}
	spinUS, err := contract.SpinUS(l.Kernel, l.Args, l.DurationUS)
	if err != nil {
		return err
	}
	a := make([]byte, mixArgsSize)
	le := binary.LittleEndian
	var maxn int64
	for wi, wr := range l.Writes {
		ptr, _, err := argPtr(wr)
		if err != nil {
			return err
		}
		n := min(wr.Bytes/contract.WordBytes, maxWords)
		maxn = max(maxn, n)
		le.PutUint64(a[8*wi:], uint64(ptr))
		le.PutUint64(a[64+8*wi:], uint64(n))
		le.PutUint32(a[128+4*wi:], contract.MixSeed(l.Seed, wi))
	}
	le.PutUint32(a[160:], uint32(len(l.Writes)))
	le.PutUint32(a[164:], uint32(len(l.Reads)))
	for ri, rd := range l.Reads {
		ptr, _, err := argPtr(rd)
		if err != nil {
			return err
		}
		if rd.Bytes/contract.WordBytes < maxn && overlapsAny(rd, l.Writes) {
			p.snaps = append(p.snaps, snapshot{src: ptr, dst: cu.DevicePtr(p.scratchBytes), n: rd.Bytes})
			p.scratchBytes += (rd.Bytes + 255) &^ 255
		}
		le.PutUint64(a[mixReadPtrs+8*ri:], uint64(ptr))
		le.PutUint64(a[424+8*ri:], uint64(rd.Bytes/contract.WordBytes))
	}
	le.PutUint64(a[680:], uint64(maxn))
	spinNS := uint64(0)
	if spinUS > 0 {
		spinNS = max(b.spinNS(spinUS), 1)
	}
	le.PutUint64(a[688:], spinNS)
	k := b.kernel("mix")
	k.grid, k.block = shape(l, maxn, false)
	k.p.add(a)
	p.kind, p.k = prepMix, k
	return nil
}

// mixLaunch returns the kernel of one launch of the prepared mix p on s:
// p's kernel itself, or, when the launch copies reads to s's scratch buffer
// or takes a timestamp slot, a copy with those addresses patched in, and
// the copies to queue before it.
func (b *backend) mixLaunch(s *stream, l *executor.LaunchDesc, p *prep) (*kernelLaunch, []snapshot, error) {
	if len(p.snaps) == 0 && !b.opts.KernelTimestamps {
		return p.k, nil, nil
	}
	k := *p.k
	k.p.blob = slices.Clone(p.k.p.blob)
	a := k.p.blob[k.p.offs[0]:]
	le := binary.LittleEndian
	var snaps []snapshot
	if len(p.snaps) > 0 {
		base, err := b.scratch(s, p.scratchBytes)
		if err != nil {
			return nil, nil, err
		}
		snaps = make([]snapshot, len(p.snaps))
		for i, c := range p.snaps {
			c.dst += base
			snaps[i] = c
			for ri := range len(p.src.Reads) {
				if ptr := cu.DevicePtr(le.Uint64(a[mixReadPtrs+8*ri:])); ptr == c.src {
					le.PutUint64(a[mixReadPtrs+8*ri:], uint64(c.dst))
				}
			}
		}
	}
	le.PutUint64(a[mixStamp:], b.stampSlot(l))
	return &k, snaps, nil
}

// kernel returns a launch of built-in kernel name (its function in context
// 0: the handles are filled in by the worker's init before New returns and
// never change).
func (b *backend) kernel(name string) *kernelLaunch {
	return &kernelLaunch{fn: b.builtinFns[name], name: name}
}

// step returns the worker function that launches k on s (in s's context:
// k's function there, devices.go).
func (k *kernelLaunch) step(s *stream, what string) func(*worker) error {
	if s.c != 0 {
		return func(w *worker) error {
			fn, err := w.fnIn(s.c, k)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return wrap(launchRaw(fn, k.grid, k.block, s.s, k.p.blob, k.p.offs), "%s: cuLaunchKernel grid %v block %v", what, k.grid, k.block)
		}
	}
	return func(w *worker) error {
		return wrap(launchRaw(k.fn, k.grid, k.block, s.s, k.p.blob, k.p.offs), "%s: cuLaunchKernel grid %v block %v", what, k.grid, k.block)
	}
}

// queueStage queues the driver calls of one stage (steps, run in order on
// the worker) as one op. With Options.Profile they are bracketed by timed
// events: plain records in stream mode, event-record nodes in a capture.
// In both profile modes (Profile, KernelTimestamps) they run inside an
// NVTX range named after the stage (nvtx.go).
func (b *backend) queueStage(s *stream, l *executor.LaunchDesc, what string, steps ...func(*worker) error) error {
	if b.opts.Profile {
		stage, name := l.Stage, l.Name
		return b.queueOn(s.c, what, func(w *worker) error {
			return w.nvtxRange(name, func() error { return w.timedStage(s, stage, name, what, steps) })
		})
	}
	if b.opts.KernelTimestamps { // the other profile mode: a named NVTX range per stage too (nvtx.go)
		name := l.Name
		return b.queueOn(s.c, what, func(w *worker) error {
			return w.nvtxRange(name, func() error {
				for _, f := range steps {
					if err := f(w); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
	if len(steps) == 1 {
		return b.queueOn(s.c, what, steps[0])
	}
	return b.queueOn(s.c, what, func(w *worker) error {
		for _, f := range steps {
			if err := f(w); err != nil {
				return err
			}
		}
		return nil
	})
}

// timedStage runs steps between two timed events. Outside a capture (stream
// mode, and eager work on a stream that is not captured while a capture is
// open), the first timed stage after a Synchronize first records the origin
// event on its stream; in a capture, the graph's first node is the origin.
func (w *worker) timedStage(s *stream, stage int, name, what string, steps []func(*worker) error) error {
	captured := w.capturing(s)
	if !captured && !w.hasOrigin {
		o, err := w.timedEvent()
		if err != nil {
			return err
		}
		if err := w.recordTimed(o, s); err != nil {
			w.evPool = append(w.evPool, o)
			return fmt.Errorf("%s: %w", what, err)
		}
		w.origin, w.hasOrigin = o, true
	}
	start, err := w.timedEvent()
	if err != nil {
		return err
	}
	end, err := w.timedEvent()
	if err != nil {
		w.evPool = append(w.evPool, start)
		return err
	}
	rec := profRec{stage: name, idx: stage, start: start, end: end}
	if captured {
		w.capture.prof = append(w.capture.prof, rec)
	} else {
		w.prof = append(w.prof, rec)
	}
	if err := w.recordTimed(start, s); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, f := range steps {
		if err := f(w); err != nil {
			return err
		}
	}
	if err := w.recordTimed(end, s); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// userLaunch prepares a launch of a user PTX kernel: it loads the module
// (once per path) and packs the parameters from the stage's args in the
// declared order. A ptr parameter names a buffer the stage reads or writes;
// it gets that access's address (buffer base + offset).
func (b *backend) userLaunch(l *executor.LaunchDesc) (*kernelLaunch, error) {
	uk := l.UserKernel
	path := b.ptxPath(uk.PTX)
	key := path + "\x00" + uk.Entry
	b.mu.Lock()
	fn, ok := b.userFns[key]
	b.mu.Unlock()
	if !ok {
		err := b.call("load "+path, func(w *worker) error {
			mod, ok := w.mods[path]
			if !ok {
				var err error
				if mod, err = loadUserPTX(uk.Name, path); err != nil {
					return err
				}
				w.mods[path] = mod
			}
			f, err := mod.Function(uk.Entry)
			if err != nil {
				return wrap(err, "kernel %s: entry %q in %s", uk.Name, uk.Entry, path)
			}
			fn = f
			return nil
		})
		if err != nil {
			return nil, err
		}
		b.mu.Lock()
		b.userFns[key] = fn
		b.mu.Unlock()
	}
	k := &kernelLaunch{fn: fn, name: key, user: uk}
	var words int64
	for _, a := range append(append([]executor.Arg(nil), l.Writes...), l.Reads...) {
		words = max(words, a.Bytes/4)
	}
	k.grid, k.block = shape(l, words, false)
	for _, ps := range uk.Params {
		name, typ, ok := strings.Cut(ps, ":")
		if !ok {
			return nil, fmt.Errorf("kernel %s: param %q, want name:type", uk.Name, ps)
		}
		v, present := l.Args[name]
		if !present {
			return nil, fmt.Errorf("kernel %s: stage gives no arg %s (%s)", uk.Name, name, typ)
		}
		if typ == "ptr" {
			bufName, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("kernel %s: arg %s is a ptr and wants a buffer name, got %T", uk.Name, name, v)
			}
			var found *executor.Arg
			for i := range l.Writes {
				if l.Writes[i].Name == bufName {
					found = &l.Writes[i]
					break
				}
			}
			for i := range l.Reads {
				if found == nil && l.Reads[i].Name == bufName {
					found = &l.Reads[i]
				}
			}
			if found == nil {
				return nil, fmt.Errorf("kernel %s: arg %s names buffer %s, which the stage neither reads nor writes", uk.Name, name, bufName)
			}
			p, _, err := argPtr(*found)
			if err != nil {
				return nil, err
			}
			k.p.ptr(p)
			continue
		}
		bits, err := contract.ParamBits(l.Args, name, typ)
		if err != nil {
			return nil, fmt.Errorf("kernel %s: %w", uk.Name, err)
		}
		switch typ {
		case "u32", "i32", "f32":
			k.p.u32(uint32(bits))
		default: // u64, i64, f64 (ParamBits refuses other types)
			k.p.u64(bits)
		}
	}
	if len(k.p.offs) > maxParams {
		return nil, fmt.Errorf("kernel %s: %d params, at most %d", uk.Name, len(k.p.offs), maxParams)
	}
	return k, nil
}

// loadUserPTX loads the PTX file at path, of user kernel name, in the
// current context.
func loadUserPTX(name, path string) (cu.Module, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return cu.Module{}, fmt.Errorf("kernel %s: %w", name, err)
	}
	return loadPTX(src, fmt.Sprintf("kernel %s (%s)", name, path))
}

// overlapsAny reports whether a overlaps an argument of set
// (contract.Range.Overlaps of their ranges, by buffer name).
func overlapsAny(a executor.Arg, set []executor.Arg) bool {
	for _, w := range set {
		if a.Range().Overlaps(w.Range()) {
			return true
		}
	}
	return false
}

// scratch returns stream s's scratch buffer of at least n bytes, growing it
// (synchronously, rare) when needed. Work on s uses it in stream order, so
// one buffer per stream is enough.
func (b *backend) scratch(s *stream, n int64) (cu.DevicePtr, error) {
	if s.scratchBytes >= n {
		return s.scratch, nil
	}
	err := b.callOn(s.c, "scratch", func(w *worker) error {
		if s.scratch != 0 && w.capture != nil {
			// Copies captured earlier use the old buffer: keep it.
			s.retired = append(s.retired, s.scratch)
			s.scratch, s.scratchBytes = 0, 0
		}
		if s.scratch != 0 {
			if err := w.syncAll("before growing a scratch buffer"); err != nil {
				return err
			}
			if err := cu.MemFree(s.scratch); err != nil {
				return wrap(err, "cuMemFree scratch")
			}
			s.scratch, s.scratchBytes = 0, 0
		}
		p, err := cu.MemAlloc(n)
		if err != nil {
			return wrap(err, "cuMemAlloc %d bytes of scratch for an in-place mix", n)
		}
		s.scratch, s.scratchBytes = p, n
		return nil
	})
	return s.scratch, err
}
