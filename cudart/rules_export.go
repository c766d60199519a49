//go:build cuda

package cudart

// The callback that cuLaunchHostFunc calls (rules.go): a file with an
// //export may declare C functions in its preamble but not define them.

// #include <stdint.h>
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

//export dagrunHostFunc
func dagrunHostFunc(p unsafe.Pointer) {
	h := cgo.Handle(uintptr(p))
	c := h.Value().(*hostCall)
	if c.once {
		h.Delete()
	}
	c.fn()
}
