package dag

import (
	"strings"
	"testing"
)

// TestDeviceChecksOneDevice: a spec that names no device is on device 0
// alone and skips the per-stage device checks, while one that names a
// device keeps them (a stage on device 0 reading a buffer of device 1 is
// an error at the access).
func TestDeviceChecksOneDevice(t *testing.T) {
	const named = `version: 1
devices: 2
buffers:
  - {name: a, bytes: 64, device: 1}
  - {name: b, bytes: 64}
stages:
  - {name: s, kernel: spin, reads: [a], writes: [b], device: 0}
`
	_, err := Load([]byte(named), "named.yaml", "")
	if err == nil || !strings.Contains(err.Error(), "named.yaml:7:37: stage s runs on device 0 but reads buffer a on device 1") {
		t.Fatalf("a device named: %v, want the access on another device", err)
	}
	const none = `version: 1
buffers:
  - {name: a, bytes: 64}
  - {name: b, bytes: 64}
streams:
  - {name: x}
stages:
  - {name: s, kernel: spin, reads: [a], writes: [b], stream: x}
  - {name: u, kernel: spin, reads: [b], writes: [a]}
`
	s, err := Load([]byte(none), "none.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Devices != 1 || s.Stages[0].Device != 0 || s.Stages[1].Device != 0 || s.Streams[0].Device != 0 || s.Buffers[0].Device != 0 {
		t.Errorf("no device named: devices %d, stages on %d and %d, stream on %d, buffer on %d; want all on device 0", s.Devices, s.Stages[0].Device, s.Stages[1].Device, s.Streams[0].Device, s.Buffers[0].Device)
	}
}
