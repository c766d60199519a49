package dag

import (
	"strings"
	"testing"
)

func TestLoadRules(t *testing.T) {
	const pre = "version: 1\nsync: manual\nbuffers:\n  - {name: x, bytes: 4096}\n  - {name: h, bytes: 4096, where: host_pageable}\n"
	for _, c := range []struct{ name, body, want string }{
		{"two legacy streams", "streams:\n  - {name: a, kind: legacy}\n  - {name: b, kind: legacy}\nstages:\n  - {name: s, kernel: spin, stream: a}\n  - {name: t, kernel: spin, stream: b}\n", "streams a and b are both kind: legacy"},
		{"unknown kind", "streams:\n  - {name: a, kind: fast}\nstages:\n  - {name: s, kernel: spin, stream: a}\n", "kind"},
		{"unused stream", "streams:\n  - {name: a, kind: blocking}\nstages:\n  - {name: s, kernel: spin, stream: b}\n", "no stage runs on it"},
		{"sync copy on a non-blocking stream", "stages:\n  - {name: s, kernel: copy, copy: sync, reads: [h], writes: [x], stream: a}\n", "cuMemcpy runs on a default stream"},
		{"copy mode on a fill", "stages:\n  - {name: s, kernel: fill, args: {value: 1.0}, copy: sync, writes: [x], stream: a}\n", "only copy stages have a copy mode"},
		{"host function on device memory", "stages:\n  - {name: s, kernel: fill, args: {value: 1.0}, host_func: true, writes: [x], stream: a}\n", "a host function reaches only host memory"},
		{"host function not a bool", "stages:\n  - {name: s, kernel: fill, args: {value: 1.0}, host_func: 1, writes: [h], stream: a}\n", "must be true or false"},
		{"kernel on pageable memory", "stages:\n  - {name: s, kernel: fill, args: {value: 1.0}, writes: [h], stream: a}\n", "device kernels cannot reach pageable memory"},
		{"capture on another stream's stage", "stages:\n  - {name: s, kernel: spin, stream: a}\n  - {name: t, kernel: spin, stream: b}\ncaptures:\n  - {stream: a, first: s, last: t}\n", "stage t runs on stream b"},
		{"capture backwards", "stages:\n  - {name: s, kernel: spin, stream: a}\n  - {name: t, kernel: spin, stream: a}\ncaptures:\n  - {stream: a, first: t, last: s}\n", "comes after last stage"},
		{"captures overlap on a stream", "stages:\n  - {name: s, kernel: spin, stream: a}\n  - {name: t, kernel: spin, stream: a}\n  - {name: u, kernel: spin, stream: a}\ncaptures:\n  - {stream: a, first: s, last: t}\n  - {stream: a, first: t, last: u}\n", "t.yaml:12:5: capture of t…u on stream a overlaps the capture of s…t (t.yaml:11:5)"},
		{"threads in auto", "streams:\n  - {name: a, thread: w}\nstages:\n  - {name: s, kernel: spin, stream: a}\n", "need sync: manual"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := pre + c.body
			if c.name == "threads in auto" {
				body = strings.Replace(body, "sync: manual\n", "", 1)
			}
			_, err := Load([]byte(body), "t.yaml", ".")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Load = %v, want %q", err, c.want)
			}
		})
	}
	ok := pre + "streams:\n  - {name: d, kind: legacy}\n  - {name: w, kind: blocking, thread: main}\n  - {name: ch, kind: host, thread: c}\n  - {name: cs, thread: c}\n" +
		"stages:\n  - {name: up, kernel: copy, copy: sync, reads: [h], writes: [x], stream: d}\n  - {name: k, kernel: spin, reads: [x], stream: w}\n" +
		"  - {name: f, kernel: fill, args: {value: 1.0}, host_func: true, writes: [h], stream: cs}\n  - {name: r, kernel: spin, stream: ch}\n" +
		"captures:\n  - {stream: w, first: k, last: k, mode: relaxed}\n"
	s, err := Load([]byte(ok), "t.yaml", ".")
	if err != nil {
		t.Fatal(err)
	}
	if !s.IsHostStream("ch") || s.Stages[0].Copy != CopySync || !s.Stages[2].HostFunc || len(s.Captures) != 1 || s.Captures[0].Mode != CaptureRelaxed {
		t.Errorf("loaded %+v", s)
	}
	// WriteYAML round trip keeps the new fields.
	var b strings.Builder
	if err := WriteYAML(&b, s); err != nil {
		t.Fatal(err)
	}
	s2, err := Load([]byte(b.String()), "t.yaml", ".")
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if len(s2.Streams) != 4 || len(s2.Captures) != 1 || s2.Stages[0].Copy != CopySync || !s2.Stages[2].HostFunc || s2.Streams[2].Thread != "c" {
		t.Errorf("round trip lost fields:\n%s", b.String())
	}
}
