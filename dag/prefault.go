package dag

import "unsafe"

// prefault maps the memory of s's whole capacity before it is written:
// the loader's big arrays are fresh memory, and left alone the garbage
// collector reads their unfilled part first (mapping the shared zero
// page), so that every page written later costs a second, copy-on-write
// fault (with TLB shootdowns on every CPU that runs the process). Mapped
// up front (populate, or a write to each page where the system cannot),
// each page costs one fault or none. The contents do not change.
func prefault[T any](s []T) {
	const minBytes = 256 << 10 // smaller arrays are not worth a system call
	n := uintptr(cap(s)) * unsafe.Sizeof(*new(T))
	if n < minBytes {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s[:cap(s)]))), n)
	const page = 4096
	start := (page - uintptr(unsafe.Pointer(&b[0]))%page) % page
	if start >= n {
		return
	}
	b = b[start:]
	b = b[:len(b)&^(page-1)]
	if populate(b) {
		return
	}
	for i := 0; i < len(b); i += page {
		b[i] = 0 // already 0: a write, so the page is mapped once, writable
	}
}
