package dag

import "syscall"

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): fault the pages
// in, writable, in one call.
const madvPopulateWrite = 23

// populate maps the pages of b (page-aligned), writable, and reports
// whether the system did.
func populate(b []byte) bool { return len(b) > 0 && syscall.Madvise(b, madvPopulateWrite) == nil }
