//go:build cuda

package cudart

/*
#include <cuda.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
)

// DriverError is a failed driver call: what was being done, the driver's
// result code and name, and a hint at what the user can do.
type DriverError struct {
	Op    string // e.g. `launch stage "prep" (mix)`, "cuMemAlloc 4096 bytes"
	Code  int    // CUresult
	Name  string // e.g. CUDA_ERROR_ILLEGAL_ADDRESS
	Hint  string
	cause error
}

func (e *DriverError) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d)", e.Op, e.Name, e.Code)
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

func (e *DriverError) Unwrap() error { return e.cause }

// resultCode extracts the CUresult from an error of this package's raw calls
// or of gorgonia.org/cu (an unexported int type), unwrapping as needed.
func resultCode(err error) (int, bool) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if r, ok := e.(rawResult); ok {
			return int(r), true
		}
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Int && v.Type().PkgPath() == "gorgonia.org/cu" {
			return int(v.Int()), true
		}
	}
	return 0, false
}

// faultCodes are the sticky errors of a kernel fault: the context is unusable
// after one of them.
var faultCodes = map[int]bool{
	C.CUDA_ERROR_ILLEGAL_ADDRESS:       true,
	C.CUDA_ERROR_ILLEGAL_INSTRUCTION:   true,
	C.CUDA_ERROR_MISALIGNED_ADDRESS:    true,
	C.CUDA_ERROR_INVALID_ADDRESS_SPACE: true,
	C.CUDA_ERROR_INVALID_PC:            true,
	C.CUDA_ERROR_LAUNCH_FAILED:         true,
	C.CUDA_ERROR_ASSERT:                true,
	C.CUDA_ERROR_HARDWARE_STACK_ERROR:  true,
	C.CUDA_ERROR_LAUNCH_TIMEOUT:        true,
}

func hintFor(code int) string {
	switch {
	case faultCodes[code]:
		return "a kernel faulted (the context is now unusable); rerun with --sync-each to name the stage, or under compute-sanitizer --tool memcheck"
	}
	switch code {
	case C.CUDA_ERROR_OUT_OF_MEMORY:
		return "out of device memory: use smaller buffers or fewer copies"
	case C.CUDA_ERROR_NO_DEVICE:
		return "no CUDA device visible: check nvidia-smi and CUDA_VISIBLE_DEVICES"
	case C.CUDA_ERROR_INVALID_DEVICE:
		return "no device with that ordinal: check nvidia-smi and CUDA_VISIBLE_DEVICES"
	case C.CUDA_ERROR_INVALID_PTX, C.CUDA_ERROR_INVALID_IMAGE:
		return "the PTX did not compile: see the JIT log"
	case C.CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
		return "the PTX's .version is newer than this driver understands: update the driver or rebuild the PTX with an older nvcc"
	case C.CUDA_ERROR_NO_BINARY_FOR_GPU:
		return "the PTX targets a newer architecture than this GPU: rebuild it with a lower -arch=compute_XX"
	case C.CUDA_ERROR_NOT_FOUND:
		return "no such entry in the module: check the kernel's entry name (extern \"C\", or the mangled name)"
	case C.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
		return "too many threads per block for this kernel's registers: lower the block size"
	case C.CUDA_ERROR_INVALID_VALUE:
		return "an argument was rejected: check grid/block sizes (at most 1024 threads per block) and parameters"
	case C.CUDA_ERROR_INVALID_HANDLE:
		return "a stream, event or buffer handle was already destroyed or belongs to another backend"
	case C.CUDA_ERROR_NOT_INITIALIZED, C.CUDA_ERROR_DEINITIALIZED:
		return "the driver is not initialised: is this backend closed?"
	case C.CUDA_ERROR_INVALID_CONTEXT:
		return "no context current on this thread (a bug in cudart: driver calls must run on the worker)"
	}
	return ""
}

// wrap turns a driver error into a *DriverError with a hint; nil stays nil.
func wrap(err error, op string, args ...any) error {
	if err == nil {
		return nil
	}
	if len(args) > 0 {
		op = fmt.Sprintf(op, args...)
	}
	var de *DriverError
	if errors.As(err, &de) {
		return fmt.Errorf("%s: %w", op, err)
	}
	code, ok := resultCode(err)
	if !ok {
		return fmt.Errorf("cuda: %s: %w", op, err)
	}
	return &DriverError{Op: op, Code: code, Name: rawResult(code).Error(), Hint: hintFor(code), cause: err}
}

// IsFault reports whether err is a sticky kernel fault.
func IsFault(err error) bool {
	c, ok := resultCode(err)
	return ok && faultCodes[c]
}
