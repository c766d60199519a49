//go:build !linux

package dag

// populate reports that this system cannot map pages in one call.
func populate(b []byte) bool { return false }
