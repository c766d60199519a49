//go:build cuda

package cudart

// Driver calls that gorgonia.org/cu v0.9.6 lacks or makes slow:
//   - cuMemAllocHost (pinned host memory; cu has MemFreeHost only),
//   - a launch that builds its parameter array on the C stack (cu's
//     Function.Launch mallocs two arrays per call: 4.1–4.9 µs a launch on
//     the H200 against 3.5–4.1 µs for a bare cuLaunchKernel),
//   - cuGetErrorName.
// They run on the backend's worker thread like every other driver call.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdint.h>

#define DR_MAX_PARAMS 64

// dr_launch launches f with n parameters; parameter i is the bytes at
// blob+offs[i] (cuLaunchKernel copies them before it returns).
static CUresult dr_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                          unsigned bx, unsigned by, unsigned bz, CUstream s,
                          void *blob, const int *offs, int n) {
	void *args[DR_MAX_PARAMS];
	if (n > DR_MAX_PARAMS) return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < n; i++) args[i] = (char *)blob + offs[i];
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, 0, s, args, NULL);
}

static CUresult dr_alloc_host(void **p, size_t n) { return cuMemAllocHost(p, n); }
static CUresult dr_alloc_host_portable(void **p, size_t n) { return cuMemHostAlloc(p, n, CU_MEMHOSTALLOC_PORTABLE); }

static const char *dr_error_name(CUresult r) {
	const char *s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == NULL) return "CUDA_ERROR_UNKNOWN_CODE";
	return s;
}

static int dr_header_version(void) { return CUDA_VERSION; }
*/
import "C"

import (
	"unsafe"

	"gorgonia.org/cu"
)

// maxParams is the most kernel parameters dr_launch passes.
const maxParams = 64

// cuFunc and cuStream read the driver handle out of gorgonia's wrappers,
// which are one-field structs around it (checked in init below).
func cuFunc(f cu.Function) C.CUfunction { return *(*C.CUfunction)(unsafe.Pointer(&f)) }
func cuStream(s cu.Stream) C.CUstream   { return *(*C.CUstream)(unsafe.Pointer(&s)) }

func init() {
	if unsafe.Sizeof(cu.Function{}) != unsafe.Sizeof(C.CUfunction(nil)) || unsafe.Sizeof(cu.Stream{}) != unsafe.Sizeof(C.CUstream(nil)) {
		panic("cudart: gorgonia.org/cu Function/Stream layout changed; update driver.go")
	}
}

// rawResult is a driver result code from a call made here; its Error is
// the driver's name for it (cuGetErrorName, through dr_error_name).
type rawResult int

func (r rawResult) Error() string { return C.GoString(C.dr_error_name(C.CUresult(r))) }

func rawErr(r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return rawResult(r)
}

// launchRaw launches f on s; params is a packed parameter blob and offs the
// byte offset of each parameter in it. Must run on the worker thread.
func launchRaw(f cu.Function, grid, block [3]int, s cu.Stream, params []byte, offs []int32) error {
	var blob unsafe.Pointer
	if len(params) > 0 {
		blob = unsafe.Pointer(&params[0])
	}
	var po *C.int
	if len(offs) > 0 {
		po = (*C.int)(unsafe.Pointer(&offs[0]))
	}
	return rawErr(C.dr_launch(cuFunc(f), C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]),
		C.uint(block[0]), C.uint(block[1]), C.uint(block[2]), cuStream(s), blob, po, C.int(len(offs))))
}

// allocHost allocates n bytes of page-locked host memory (cuMemAllocHost;
// portable: pinned for every context, cuMemHostAlloc with
// CU_MEMHOSTALLOC_PORTABLE, for a backend of several contexts).
func allocHost(n int64, portable bool) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	r := C.dr_alloc_host(&p, C.size_t(n))
	if portable {
		r = C.dr_alloc_host_portable(&p, C.size_t(n))
	}
	if err := rawErr(r); err != nil {
		return nil, err
	}
	return p, nil
}

// headerVersion is CUDA_VERSION of the cuda.h this binary was built with.
func headerVersion() int { return int(C.dr_header_version()) }
