package dag

import (
	"syscall"
	"testing"
)

func minorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// prefault maps an array's pages up front, keeping its contents: writing
// every page afterwards costs fewer page faults than writing a fresh array
// (mapped here, so that it is fresh however the heap was used before).
func TestPrefault(t *testing.T) {
	const n, page = 64 << 20, 4096
	fresh := func() []byte {
		b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			t.Skip(err)
		}
		t.Cleanup(func() { syscall.Munmap(b) })
		return b
	}
	write := func(b []byte) int64 {
		before := minorFaults(t)
		for i := 0; i < len(b); i += page {
			b[i] = byte(i>>12) | 1
		}
		return minorFaults(t) - before
	}
	freshFaults := write(fresh())
	if freshFaults < n/page/2 {
		t.Skipf("writing a fresh array cost %d page faults: this system maps pages otherwise", freshFaults)
	}
	b := fresh()
	b[1], b[len(b)-1] = 7, 9
	prefault(b)
	// Faults other than the array's (the race detector's shadow memory)
	// cost the same in both.
	if got := write(b); got > freshFaults-n/page/2 {
		t.Errorf("writing a prefaulted array cost %d page faults, a fresh one %d (%d pages)", got, freshFaults, n/page)
	}
	if b[1] != 7 || b[len(b)-1] != 9 {
		t.Errorf("prefault changed the contents")
	}
	prefault(b[:0]) // an empty slice's capacity
	prefault([]int64(nil))
}
