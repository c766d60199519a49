// Package radix sorts integer keys by least significant digit first
// radix sort.
package radix

import "slices"

// Sort sorts x (values ≥ 0) in place by their bits from shift up: a
// least significant digit first radix sort by 16-bit digits (Knuth, The
// Art of Computer Programming, vol. 3, §5.2.5), stable, skipping the
// passes whose digit is the same in every value; short slices go to
// slices.Sort (by the whole value). scratch is its second array, made
// when shorter than x and returned for the next call. Cost: O(n) a pass,
// at most four passes.
func Sort[T int64 | uint64](x, scratch []T, shift uint) []T {
	if len(x) < 1<<10 {
		slices.Sort(x)
		return scratch
	}
	var diff uint64 // the bits in which some value differs from the first
	for _, v := range x {
		diff |= uint64(v ^ x[0])
	}
	if len(scratch) < len(x) {
		scratch = make([]T, len(x))
	}
	var count [1 << 16]int32
	src, dst := x, scratch[:len(x)]
	for ; shift < 64; shift += 16 {
		if diff>>shift&0xffff == 0 {
			continue // one digit: the pass would not move anything
		}
		clear(count[:])
		for _, v := range src {
			count[uint64(v)>>shift&0xffff]++
		}
		sum := int32(0)
		for d, c := range count {
			count[d], sum = sum, sum+c
		}
		for _, v := range src {
			d := uint64(v) >> shift & 0xffff
			dst[count[d]] = v
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &x[0] {
		copy(x, src)
	}
	return scratch
}
