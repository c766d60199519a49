// Package memory holds the specs of four failure patterns of memory reused
// or read across streams, each planned (right output, no race report) and
// racy (the lifetime or the host wait taken out: Verify and the
// simulator's detector report it; on the GPU the output is wrong in most
// trials):
//
//	a-stream-reuse.yaml      a temp gets the bytes of a buffer another stream still copies
//	b-bucket-reuse.yaml      the next gather takes a bucket another stream still reads
//	c-pinned-refill.yaml     the host refills a pinned buffer an async copy still reads
//	d-pinned-readback.yaml   the host reads a device-to-host copy's destination too early
//
// with the racy variants in *-racy.yaml: a and b plan the arena with
// `arena: stream-order` (the caching allocator without record_stream), c
// and d are hand-synchronized (`sync: manual`) without the host's wait.
// The tests run them on the simulator; with the cuda tag, gpu_test.go runs
// them on the GPU for a number of trials and compares the model graphs'
// checksums with the simulator's, arena on.
package memory

// Patterns lists the patterns: planned spec file, racy spec file.
var Patterns = [][2]string{
	{"a-stream-reuse.yaml", "a-stream-reuse-racy.yaml"},
	{"b-bucket-reuse.yaml", "b-bucket-reuse-racy.yaml"},
	{"c-pinned-refill.yaml", "c-pinned-refill-racy.yaml"},
	{"d-pinned-readback.yaml", "d-pinned-readback-racy.yaml"},
}
