//go:build cuda

package cudart

import "testing"

// scripts/build-gpu.sh takes NVTX3 with cuda.h, so the cuda build has
// stage-named ranges for Nsight Systems.
func TestNVTXBuilt(t *testing.T) {
	if !NVTXBuilt() {
		t.Fatal("built without nvtx3/nvToolsExt.h: no NVTX ranges (rebuild with scripts/build-gpu.sh, which fetches it)")
	}
}
