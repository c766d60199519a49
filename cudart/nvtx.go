//go:build cuda

package cudart

// NVTX ranges: in profile modes (Options.Profile, Options.KernelTimestamps)
// each stage's driver calls are wrapped in an NVTX range named after the
// stage, so that Nsight Systems (nsys profile --trace=cuda,nvtx) shows
// stage names on the CUDA API row and, projected, on the GPU's kernels.
// NVTX3 is header-only: its calls are no-ops unless a tool injects itself
// (Nsight Systems sets NVTX_INJECTION64_PATH), so they cost nothing
// elsewhere. The headers come with the CUDA headers (scripts/build-gpu.sh
// takes nvtx3/ from the same package); a build without them has no ranges
// (NVTXBuilt reports false).

/*
#if defined(__has_include)
#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define DAGRUN_NVTX 1
#endif
#endif
#ifdef DAGRUN_NVTX
static int dagrun_nvtx_built(void) { return 1; }
static void dagrun_nvtx_push(const char *s) { nvtxRangePushA(s); }
static void dagrun_nvtx_pop(void) { nvtxRangePop(); }
#else
static int dagrun_nvtx_built(void) { return 0; }
static void dagrun_nvtx_push(const char *s) { (void)s; }
static void dagrun_nvtx_pop(void) {}
#endif
*/
import "C"

import "unsafe"

// NVTXBuilt reports whether this binary was built with the NVTX3 headers,
// so that profile modes name each stage's range for Nsight Systems.
func NVTXBuilt() bool { return C.dagrun_nvtx_built() != 0 }

// nvtxRange runs f inside an NVTX range named name, on the worker's OS
// thread (NVTX ranges are per thread). Names are converted to C strings
// once per worker.
func (w *worker) nvtxRange(name string, f func() error) error {
	if w.nvtxNames == nil {
		w.nvtxNames = map[string]unsafe.Pointer{}
	}
	cs, ok := w.nvtxNames[name]
	if !ok {
		cs = unsafe.Pointer(C.CString(name)) // kept for the worker's life: one per stage name
		w.nvtxNames[name] = cs
	}
	C.dagrun_nvtx_push((*C.char)(cs))
	defer C.dagrun_nvtx_pop()
	return f()
}
