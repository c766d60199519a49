package dagrun

// SetMaxSimClockBytes lowers the simulator's clock bound for a test of
// the packages that run plans through Run; restore puts it back.
func SetMaxSimClockBytes(n float64) (restore func()) {
	old := maxSimClockBytes
	maxSimClockBytes = n
	return func() { maxSimClockBytes = old }
}

// StreamsSpec is streamsSpec for external tests.
var StreamsSpec = streamsSpec
