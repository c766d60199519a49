package dag

import (
	"strings"
	"testing"
)

// TestDevicesDefaults: devices come from device: fields, a stream's
// stages, a copy's destination; every other spec is on device 0 alone.
func TestDevicesDefaults(t *testing.T) {
	s, err := Load([]byte(`version: 1
buffers:
  - {name: a, bytes: 64, device: 0}
  - {name: b, bytes: 64, device: 2}
  - {name: h, bytes: 64, where: host_pinned}
stages:
  - {name: w, kernel: fill, args: {value: 1}, writes: [a]}
  - {name: send, kernel: copy, reads: [a], writes: [b]}
  - {name: pinned, kernel: fill, args: {value: 1}, writes: [h], device: 1, stream: side}
  - {name: same, kernel: fill, args: {value: 2}, writes: [h], stream: side}
`), "d.yaml", ".")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"w": 0, "send": 2, "pinned": 1, "same": 1}
	for _, st := range s.Stages {
		if st.Device != want[st.Name] {
			t.Errorf("stage %s on device %d, want %d", st.Name, st.Device, want[st.Name])
		}
	}
	if s.Devices != 3 {
		t.Errorf("Devices = %d, want 3", s.Devices)
	}
	one, err := Load([]byte("version: 1\nstages:\n  - {name: a, kernel: spin}\n"), "one.yaml", ".")
	if err != nil || one.Devices != 1 || one.Stages[0].Device != 0 {
		t.Errorf("one device: %v, %+v", err, one)
	}
}

// TestDevicesErrors: each mistake of a spec of several devices is an
// error at its place.
func TestDevicesErrors(t *testing.T) {
	head := "version: 1\nbuffers:\n  - {name: a, dtype: f32, shape: [16], device: 0}\n  - {name: b, dtype: f32, shape: [16], device: 1}\n  - {name: h, bytes: 64, where: host_pinned}\nstages:\n"
	for _, c := range []struct{ name, body, want string }{
		{"kernel reads another device", "  - {name: k, kernel: copy, reads: [b], writes: [a], device: 1}\n  - {name: m, kernel: mix, reads: [b], writes: [a]}\n",
			"d.yaml:8:49: stage m runs on device 1 but writes buffer a on device 0"},
		{"host copy on another device", "  - {name: k, kernel: copy, reads: [h], writes: [b], device: 0}\n",
			"d.yaml:7:50: stage k runs on device 0 but writes buffer b on device 1: a copy between host memory and a device runs on that device"},
		{"peer copy on a third device", "  - {name: k, kernel: copy, reads: [a], writes: [b], device: 2}\n",
			"d.yaml:7:5: stage k: a peer copy from device 0 to device 1 runs on device 2"},
		{"device on host memory", "  - {name: k, kernel: fill, args: {value: 1}, writes: [h]}\nbuffers2: []\n", "unknown field"},
		{"stream of another device", "  - {name: k, kernel: fill, args: {value: 1}, writes: [a], stream: s, device: 0}\n  - {name: l, kernel: fill, args: {value: 1}, writes: [b], stream: s, device: 1}\n",
			"d.yaml:8:71: stage l: device 1, but its stream s is on device 0"},
		{"collective on one device", "  - {name: r, kernel: all_reduce, args: {op: sum}, reads: [a, a], writes: [a, a]}\n",
			"reads a and a are both on device 0"},
		{"collective sizes", "  - {name: r, kernel: all_reduce, args: {op: sum}, reads: [a, \"b[0:32]\"], writes: [a, \"b[0:32]\"]}\n",
			"rank 1 reduces 32 bytes"},
		{"collective one device", "  - {name: r, kernel: all_reduce, args: {op: sum}, reads: [a], writes: [a]}\n",
			"a collective over 1 device(s)"},
		{"collective write elsewhere", "  - {name: r, kernel: all_reduce, args: {op: sum}, reads: [a, b], writes: [b, a]}\n",
			"writes b on device 1 for the rank that reads a on device 0"},
		{"collective with a stream", "  - {name: r, kernel: all_reduce, args: {op: sum}, reads: [a, b], writes: [a, b], stream: s}\n",
			"a collective runs on one stream per device"},
		{"collective host memory", "  - {name: r, kernel: all_reduce, args: {op: sum}, reads: [a, h], writes: [a, h]}\n",
			"buffer h is host_pinned memory"},
		{"rank name taken", "  - {name: r/1, kernel: fill, args: {value: 1}, writes: [a]}\n  - {name: r, kernel: all_reduce, args: {op: sum}, reads: [a, b], writes: [a, b]}\n",
			"stage r/1: the name of rank 1 of collective r"},
		{"host stage with a device", "  - {name: k, kernel: fill, args: {value: 1}, writes: [h], stream: host, device: 1}\n",
			"a host stage is on no device"},
	} {
		src := head + c.body
		if c.name == "device on host memory" {
			src = "version: 1\nbuffers:\n  - {name: h, bytes: 64, where: host_pinned, device: 1}\nstages:\n  - {name: k, kernel: fill, args: {value: 1}, writes: [h]}\n"
			c.want = "d.yaml:3:54: buffer h is host_pinned memory, which is on no device"
		}
		_, err := Load([]byte(src), "d.yaml", ".")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %q", c.name, err, c.want)
		}
	}
	for _, c := range []struct{ src, want string }{
		{"version: 1\ndevices: 2\nbuffers:\n  - {name: a, bytes: 64, device: 3}\nstages:\n  - {name: k, kernel: fill, args: {value: 1}, writes: [a]}\n",
			"d.yaml:4:34: device 3, but the spec has devices: 2"},
		{"version: 1\ndevices: 2\nstreams:\n  - {name: s, kind: blocking}\nstages:\n  - {name: k, kernel: spin, stream: s}\n",
			"kind blocking with several devices is not modelled"},
		{"version: 1\nsync: manual\ndevices: 2\noptions: {placement: balance}\nstages:\n  - {name: k, kernel: spin, stream: s}\n",
			"placement: balance with sync: manual"},
	} {
		_, err := Load([]byte(c.src), "d.yaml", ".")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v\nwant %q", err, c.want)
		}
	}
}
