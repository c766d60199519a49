//go:build cuda

package cudart

// Collectives through NCCL (executor.Collectiver), loaded at run time with
// dlopen: no NCCL header or library is needed to build, and a binary that
// runs no collective never loads it. The few types and functions below
// are declared here with the ABI of NCCL's nccl.h (src/nccl.h.in of
// github.com/NVIDIA/nccl, unchanged since NCCL 2.0 for these calls; the
// enums are C enums, int-sized on x86-64): ncclResult_t, ncclDataType_t
// (ncclFloat32 = 7), ncclRedOp_t (ncclSum = 0, ncclProd = 1, ncclMax = 2,
// ncclMin = 3), ncclComm_t (an opaque pointer), and
//
//	ncclResult_t ncclGetVersion(int *version);
//	ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);
//	ncclResult_t ncclCommDestroy(ncclComm_t comm);
//	ncclResult_t ncclGroupStart(void);
//	ncclResult_t ncclGroupEnd(void);
//	ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
//	    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
//	const char  *ncclGetErrorString(ncclResult_t result);
//	const char  *ncclGetLastError(ncclComm_t comm);   (NCCL 2.13 and later; optional)
//
// cudaStream_t and CUstream are the same type (struct CUstream_st *).
// One process drives every device, so the communicators come from
// ncclCommInitAll (one per device of the collective, rank r on
// devlist[r]), made on the first collective over a list of ordinals and
// kept until Close; the ranks' calls of one collective sit between
// ncclGroupStart and ncclGroupEnd, as NCCL requires when one thread issues
// for several devices.

/*
#cgo LDFLAGS: -ldl
#include <cuda.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

typedef struct ncclComm *ncclComm_t;
typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;

static void *nccl_lib;
static ncclResult_t (*p_ncclGetVersion)(int *);
static ncclResult_t (*p_ncclCommInitAll)(ncclComm_t *, int, const int *);
static ncclResult_t (*p_ncclCommDestroy)(ncclComm_t);
static ncclResult_t (*p_ncclGroupStart)(void);
static ncclResult_t (*p_ncclGroupEnd)(void);
static ncclResult_t (*p_ncclAllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream);
static const char *(*p_ncclGetErrorString)(ncclResult_t);
static const char *(*p_ncclGetLastError)(ncclComm_t);

// nccl_open loads the library at path and its symbols; it returns NULL,
// or dlerror's text, or the name of a missing symbol (*missing set).
static const char *nccl_open(const char *path, int *missing) {
	*missing = 0;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) return dlerror();
#define SYM(name) \
	*(void **)(&p_##name) = dlsym(h, #name); \
	if (p_##name == NULL) { *missing = 1; dlclose(h); return #name; }
	SYM(ncclGetVersion)
	SYM(ncclCommInitAll)
	SYM(ncclCommDestroy)
	SYM(ncclGroupStart)
	SYM(ncclGroupEnd)
	SYM(ncclAllReduce)
	SYM(ncclGetErrorString)
#undef SYM
	*(void **)(&p_ncclGetLastError) = dlsym(h, "ncclGetLastError");
	nccl_lib = h;
	return NULL;
}

static ncclResult_t nccl_version(int *v) { return p_ncclGetVersion(v); }
static ncclResult_t nccl_init_all(ncclComm_t *c, int n, const int *devs) { return p_ncclCommInitAll(c, n, devs); }
static ncclResult_t nccl_destroy(ncclComm_t c) { return p_ncclCommDestroy(c); }
static ncclResult_t nccl_group_start(void) { return p_ncclGroupStart(); }
static ncclResult_t nccl_group_end(void) { return p_ncclGroupEnd(); }
static ncclResult_t nccl_all_reduce(CUdeviceptr send, CUdeviceptr recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, CUstream s) {
	return p_ncclAllReduce((const void *)send, (void *)recv, count, t, op, c, s);
}
static const char *nccl_error_string(ncclResult_t r) { return p_ncclGetErrorString(r); }
static const char *nccl_last_error(ncclComm_t c) { return p_ncclGetLastError ? p_ncclGetLastError(c) : ""; }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/plan"
)

// ncclFloat32 and the reductions of ncclRedOp_t (nccl.h).
const ncclFloat32 = 7

var ncclOps = map[string]C.ncclRedOp_t{"sum": 0, "prod": 1, "max": 2, "min": 3}

// ErrNoNCCL is returned (wrapped) by LoadNCCL and by a collective when
// libnccl.so.2 cannot be loaded; the error names every path tried.
var ErrNoNCCL = errors.New("NCCL (libnccl.so.2) not found: install it (pip install nvidia-nccl-cu12, or the libnccl2 package) or set DAGRUN_NCCL=/path/to/libnccl.so.2")

var ncclLib struct {
	sync.Mutex
	done    bool
	path    string
	version int
	err     error
}

// ncclCandidates returns the paths LoadNCCL tries, in order: DAGRUN_NCCL
// alone when it is set; else the dynamic loader's search for libnccl.so.2
// (LD_LIBRARY_PATH, /etc/ld.so.cache), then the copies that Python wheels
// install (nvidia-nccl-cu*: site-packages/nvidia/nccl/lib; torch/lib) under
// the usual site-packages folders.
func ncclCandidates() []string {
	if p := os.Getenv("DAGRUN_NCCL"); p != "" {
		return []string{p}
	}
	out := []string{"libnccl.so.2"}
	var roots []string
	for _, pat := range []string{"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages", "/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages"} {
		m, _ := filepath.Glob(pat)
		roots = append(roots, m...)
	}
	if home, err := os.UserHomeDir(); err == nil {
		m, _ := filepath.Glob(filepath.Join(home, ".local/lib/python3*/site-packages"))
		roots = append(roots, m...)
	}
	for _, r := range roots {
		for _, rel := range []string{"nvidia/nccl/lib/libnccl.so.2", "torch/lib/libnccl.so.2"} {
			if p := filepath.Join(r, rel); fileExists(p) {
				out = append(out, p)
			}
		}
	}
	return out
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// LoadNCCL loads NCCL once per process (dlopen) and returns the path it
// loaded and its version (ncclGetVersion: e.g. 22703 for 2.27.3). The
// paths tried are DAGRUN_NCCL when set, else libnccl.so.2 through the
// dynamic loader's search, then Python wheels' copies (ncclCandidates).
// Errors wrap ErrNoNCCL and list each path tried with the loader's
// message; a conclusive answer is cached.
func LoadNCCL() (path string, version int, err error) {
	ncclLib.Lock()
	defer ncclLib.Unlock()
	if ncclLib.done {
		return ncclLib.path, ncclLib.version, ncclLib.err
	}
	ncclLib.done = true
	var tried []string
	for _, p := range ncclCandidates() {
		cp := C.CString(p)
		var missing C.int
		msg := C.nccl_open(cp, &missing)
		C.free(unsafe.Pointer(cp))
		if msg != nil {
			why := C.GoString(msg)
			if missing != 0 {
				why = "no symbol " + why + " (not NCCL 2.x?)"
			}
			tried = append(tried, fmt.Sprintf("%s: %s", p, why))
			continue
		}
		var v C.int
		if r := C.nccl_version(&v); r != 0 {
			ncclLib.err = fmt.Errorf("cudart: %s: ncclGetVersion: %s", p, ncclError(r))
			return "", 0, ncclLib.err
		}
		ncclLib.path, ncclLib.version = p, int(v)
		return p, int(v), nil
	}
	src := "tried"
	if os.Getenv("DAGRUN_NCCL") != "" {
		src = "tried DAGRUN_NCCL"
	}
	ncclLib.err = fmt.Errorf("cudart: %w; %s:\n\t%s", ErrNoNCCL, src, strings.Join(tried, "\n\t"))
	return "", 0, ncclLib.err
}

// ncclError is NCCL's text for result r (ncclGetErrorString).
func ncclError(r C.ncclResult_t) string {
	return fmt.Sprintf("%s (ncclResult_t %d)", C.GoString(C.nccl_error_string(r)), int(r))
}

// ncclComms are the communicators of one list of ordinals (rank r on
// ordinals[r]).
type ncclComms struct {
	ordinals []int
	comms    []C.ncclComm_t
}

// commsFor returns the communicators over ords, made on first use
// (ncclCommInitAll). Worker thread only; NCCL sets devices itself, so the
// worker's current context is unknown afterwards (w.cur = −1).
func (w *worker) commsFor(ords []int) (*ncclComms, error) {
	b := w.b
	b.ncclMu.Lock()
	defer b.ncclMu.Unlock()
	for _, c := range b.comms {
		if slices.Equal(c.ordinals, ords) {
			return c, nil
		}
	}
	c := &ncclComms{ordinals: slices.Clone(ords), comms: make([]C.ncclComm_t, len(ords))}
	devs := make([]C.int, len(ords))
	for i, o := range ords {
		devs[i] = C.int(o)
	}
	w.cur = -1
	if r := C.nccl_init_all(&c.comms[0], C.int(len(ords)), &devs[0]); r != 0 {
		return nil, fmt.Errorf("cudart: ncclCommInitAll(%d ranks on ordinals %v): %s", len(ords), ords, ncclError(r))
	}
	b.comms = append(b.comms, c)
	return c, nil
}

// closeComms destroys the communicators (ncclCommDestroy). Worker thread.
func (w *worker) closeComms() {
	b := w.b
	b.ncclMu.Lock()
	defer b.ncclMu.Unlock()
	for _, c := range b.comms {
		for _, comm := range c.comms {
			C.nccl_destroy(comm)
		}
	}
	b.comms = nil
	w.cur = -1
}

var _ executor.Collectiver = (*backend)(nil)

// CollectiveLibrary loads NCCL (LoadNCCL) and names it with its version
// and path; the error wraps ErrNoNCCL and lists the paths tried.
func (b *backend) CollectiveLibrary() (string, error) {
	path, v, err := LoadNCCL()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("NCCL %d.%d.%d (%s)", v/10000, v/100%100, v%100, path), nil
}

// allReduce issues an all-reduce (reduce: sum, prod, max, min) over the
// ranks, rank r's stage ranks[r] on streams[r], as one NCCL group
// (ncclGroupStart, one ncclAllReduce per rank, ncclGroupEnd) over the
// communicators of the ranks' ordinals. It checks the ranks first: one
// send range and one receive range each, device memory of the rank's
// stream's device, the same size on every rank (float32 words), distinct
// ordinals (NCCL runs one rank per GPU). NCCL is loaded on the first
// collective (LoadNCCL: ErrNoNCCL when it cannot be); its errors come back
// at the next Synchronize, with ncclGetErrorString's text and
// ncclGetLastError's detail.
func (b *backend) allReduce(name, reduce string, ranks []*executor.LaunchDesc, streams []*stream) error {
	op, ok := ncclOps[reduce]
	if !ok {
		return fmt.Errorf("cudart: collective %s: reduction %q, want sum, prod, max or min", name, reduce)
	}
	n := len(ranks)
	if n == 0 || len(streams) != n {
		return fmt.Errorf("cudart: collective %s: %d ranks, %d streams: want one stream per rank", name, n, len(streams))
	}
	type rank struct {
		s         *stream
		send, rcv cu.DevicePtr
	}
	rs := make([]rank, n)
	ords := make([]int, n)
	var bytes int64
	for r, l := range ranks {
		s := streams[r]
		if len(l.Reads) != 1 || len(l.Writes) != 1 {
			return fmt.Errorf("cudart: collective %s, rank %d (stage %s): reads %d ranges and writes %d; a rank reads its send range and writes its receive range", name, r, l.Name, len(l.Reads), len(l.Writes))
		}
		send, sb, err := argPtr(l.Reads[0])
		if err != nil {
			return fmt.Errorf("cudart: collective %s, rank %d: %w", name, r, err)
		}
		rcv, rb, err := argPtr(l.Writes[0])
		if err != nil {
			return fmt.Errorf("cudart: collective %s, rank %d: %w", name, r, err)
		}
		if sb.host != nil || rb.host != nil || sb.dev != s.dev || rb.dev != s.dev {
			return fmt.Errorf("cudart: collective %s, rank %d: buffers %s and %s must be device memory of the rank's device %d (its stream's)", name, r, sb.name, rb.name, s.dev)
		}
		nb := l.Reads[0].Bytes
		if nb != l.Writes[0].Bytes || nb%4 != 0 || (r > 0 && nb != bytes) {
			return fmt.Errorf("cudart: collective %s, rank %d: sends %d bytes and receives %d (rank 0: %d): want the same multiple of 4 bytes (float32 words) on every rank", name, r, nb, l.Writes[0].Bytes, bytes)
		}
		bytes = nb
		ords[r] = b.ctxs[s.c].ordinal
		for q := range r {
			if ords[q] == ords[r] {
				return fmt.Errorf("cudart: collective %s: ranks %d and %d are both on ordinal %d: %w; NCCL runs one rank per GPU: map the plan's devices onto distinct GPUs (Options.Devices, dagrun run --devices)", name, q, r, ords[r], executor.ErrRanksShareGPU)
			}
		}
		rs[r] = rank{s, send, rcv}
	}
	if _, _, err := LoadNCCL(); err != nil {
		return err
	}
	count := C.size_t(bytes / 4)
	what := fmt.Sprintf("collective %s (all_reduce %s, %d ranks, %d bytes)", name, reduce, n, bytes)
	return b.queue(what, func(w *worker) error {
		comms, err := w.commsFor(ords)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if r := C.nccl_group_start(); r != 0 {
			return fmt.Errorf("cudart: %s: ncclGroupStart: %s", what, ncclError(r))
		}
		var first error
		for i, rk := range rs {
			if r := C.nccl_all_reduce(C.CUdeviceptr(rk.send), C.CUdeviceptr(rk.rcv), count, ncclFloat32, op, comms.comms[i], C.CUstream(unsafe.Pointer(cuStream(rk.s.s)))); r != 0 && first == nil {
				first = fmt.Errorf("cudart: %s: ncclAllReduce, rank %d: %s: %s", what, i, ncclError(r), C.GoString(C.nccl_last_error(comms.comms[i])))
			}
		}
		if r := C.nccl_group_end(); r != 0 && first == nil {
			first = fmt.Errorf("cudart: %s: ncclGroupEnd: %s: %s", what, ncclError(r), C.GoString(C.nccl_last_error(comms.comms[0])))
		}
		w.cur = -1 // NCCL set its devices current
		return first
	})
}

// rankGroup is a collective whose first ranks were launched: the rest
// must follow before any other call (executor.Collectiver).
type rankGroup struct {
	c       plan.Collective // rank 0's
	name    string          // rank 0's stage
	ranks   []*executor.LaunchDesc
	streams []*stream
}

// launchRank takes rank stage l on s; at the collective's last rank it
// issues the group (allReduce). Errors: a rank out of order, another
// collective's rank before this one's group is complete.
func (b *backend) launchRank(s *stream, l *executor.LaunchDesc) error {
	c := l.Collective
	g := b.group
	if g == nil {
		if c.Rank != 0 {
			return fmt.Errorf("cudart: stage %s: rank %d of collective group %d launched before its rank 0; the ranks of a collective are launched one after another, rank 0 first", l.Name, c.Rank, c.Group)
		}
		g = &rankGroup{c: *c, name: l.Name}
		b.group = g
	}
	if c.Group != g.c.Group || c.Rank != len(g.ranks) || c.Ranks != g.c.Ranks || c.Reduce != g.c.Reduce {
		b.group = nil
		return fmt.Errorf("cudart: stage %s: rank %d of collective group %d launched while ranks 0 to %d of group %d (stage %s) wait for rank %d: %w", l.Name, c.Rank, c.Group, len(g.ranks)-1, g.c.Group, g.name, len(g.ranks), errGroupOrder)
	}
	g.ranks = append(g.ranks, l)
	g.streams = append(g.streams, s)
	if len(g.ranks) < g.c.Ranks {
		return nil
	}
	b.group = nil
	return b.allReduce(g.name, g.c.Reduce, g.ranks, g.streams)
}

// errGroupOrder says why a collective's ranks must be consecutive.
var errGroupOrder = errors.New("the ranks of a collective must be launched one after another (NCCL issues them as one group: ncclGroupStart, a call per rank, ncclGroupEnd); the plan's issue order separates them (dagrun check reports the order)")

// groupOpen returns an error when a collective's ranks wait for the rest
// of their group and op, another call, comes first (and forgets the group).
func (b *backend) groupOpen(op string) error {
	g := b.group
	if g == nil {
		return nil
	}
	b.group = nil
	return fmt.Errorf("cudart: %s while ranks 0 to %d of collective group %d (stage %s) wait for rank %d: %w", op, len(g.ranks)-1, g.c.Group, g.name, len(g.ranks), errGroupOrder)
}
