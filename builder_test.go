package dagrun_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dagrun/dagrun"
)

// A spec built in Go plans exactly as the same spec written in YAML.
func TestBuilderPlansAsYAML(t *testing.T) {
	yaml := `version: 1
name: ring
buffers:
  - {name: w, bytes: 4096, role: input, init: {random: 7}}
  - {name: frame, dtype: f32, shape: [1024], where: host_pinned, role: input, copies: 2, init: {fill: 1.5}}
  - {name: feat, bytes: 4096}
  - {name: out, bytes: 8192, role: output}
stages:
  - {name: pre, kernel: scale, args: {a: 0.5}, reads: [frame], writes: [feat], duration_us: 20}
  - {name: left, kernel: mix, reads: [feat, w], writes: ["out[0:4096]"], duration_us: 50}
  - {name: right, kernel: mix, reads: ["feat[0:2048]", w], writes: ["out[4096:8192]"], duration_us: 50}
  - {name: tail, kernel: spin, args: {us: 5}, after: [left], stream: tail}
`
	dir := t.TempDir()
	path := filepath.Join(dir, "ring.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := dagrun.Load(path)
	if err != nil {
		t.Fatal(err)
	}

	b := dagrun.NewSpec("ring")
	w := b.Buffer("w", 4096, dagrun.Input(), dagrun.Random(7))
	frame := b.Tensor("frame", "f32", []int64{1024}, dagrun.HostPinned(), dagrun.Input(), dagrun.Copies(2), dagrun.Fill(1.5))
	feat := b.Buffer("feat", 4096)
	out := b.Buffer("out", 8192, dagrun.Output())
	b.Stage("pre", "scale", dagrun.Arg("a", 0.5), dagrun.Reads(frame), dagrun.Writes(feat), dagrun.Duration(20)).
		Stage("left", "mix", dagrun.Reads(feat, w), dagrun.Writes(out.Range(0, 4096)), dagrun.Duration(50)).
		Stage("right", "mix", dagrun.Reads(feat.Range(0, 2048), w), dagrun.Writes(out.Range(4096, 4096)), dagrun.Duration(50)).
		Stage("tail", "spin", dagrun.Arg("us", 5), dagrun.After("left"), dagrun.OnStream("tail"))

	table := func(s *dagrun.Spec) string {
		p, err := dagrun.Plan(s, dagrun.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		p.WriteTable(&buf)
		return regexp.MustCompile(`planning=[0-9.]+ms`).ReplaceAllString(buf.String(), "")
	}
	if got, want := table(b.Spec()), table(loaded); got != want {
		t.Errorf("built in Go:\n%s\nfrom YAML:\n%s", got, want)
	}
	// The builder's spec is a snapshot: later stages do not change it.
	s := b.Spec()
	b.Stage("more", "spin", dagrun.Arg("us", 1))
	if len(s.Stages) != 4 {
		t.Errorf("Spec() changed by a later Stage: %d stages", len(s.Stages))
	}
}

// Specs of several devices built in Go plan as the same specs in YAML:
// stages and buffers that name no device are inferred (a stage on its
// buffers' device) or, with placement balance, placed by the planner.
func TestBuilderDevicesPlanAsYAML(t *testing.T) {
	table := func(s *dagrun.Spec) string {
		t.Helper()
		p, err := dagrun.Plan(s, dagrun.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		p.WriteTable(&buf)
		return regexp.MustCompile(`planning=[0-9.]+ms`).ReplaceAllString(buf.String(), "")
	}
	load := func(yaml string) *dagrun.Spec {
		t.Helper()
		path := filepath.Join(t.TempDir(), "s.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := dagrun.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// docs/spec.md's peer copy: use runs on device 1, its buffers'.
	peer := dagrun.NewSpec("peer").Devices(2)
	a := peer.Buffer("a", 4096, dagrun.InDevice(0))
	bb := peer.Buffer("b", 4096, dagrun.InDevice(1))
	out := peer.Buffer("out", 8, dagrun.Output(), dagrun.InDevice(1))
	peer.Stage("produce", "fill", dagrun.Arg("value", 1.0), dagrun.Writes(a)).
		Stage("send", "copy", dagrun.Reads(a), dagrun.Writes(bb)).
		Stage("use", "checksum", dagrun.Reads(bb), dagrun.Writes(out))
	if got, want := table(peer.Spec()), table(load(`version: 1
name: peer
devices: 2
buffers:
  - {name: a, bytes: 4096, device: 0}
  - {name: b, bytes: 4096, device: 1}
  - {name: out, bytes: 8, role: output, device: 1}
stages:
  - {name: produce, kernel: fill, args: {value: 1.0}, writes: [a]}
  - {name: send, kernel: copy, reads: [a], writes: [b]}
  - {name: use, kernel: checksum, reads: [b], writes: [out]}
`)); got != want {
		t.Errorf("peer copy built in Go:\n%s\nfrom YAML:\n%s", got, want)
	}

	// docs/spec.md's placement example, and a copy run on its source's
	// device by OnDevice.
	pl := dagrun.NewSpec("pl").Devices(2).Placement("balance")
	x := pl.Buffer("x", 65536, dagrun.Input(), dagrun.Random(3))
	left := pl.Buffer("left", 65536)
	right := pl.Buffer("right", 65536)
	res := pl.Buffer("out", 65536, dagrun.Output())
	pl.Stage("l", "mix", dagrun.Reads(x), dagrun.Writes(left), dagrun.Duration(400)).
		Stage("r", "mix", dagrun.Reads(x), dagrun.Writes(right), dagrun.Duration(400)).
		Stage("join", "mix", dagrun.Reads(left, right), dagrun.Writes(res), dagrun.Duration(10), dagrun.OnDevice(1))
	got, want := table(pl.Spec()), table(load(`version: 1
name: pl
devices: 2
options: {placement: balance}
buffers:
  - {name: x, bytes: 65536, role: input, init: {random: 3}}
  - {name: left, bytes: 65536}
  - {name: right, bytes: 65536}
  - {name: out, bytes: 65536, role: output}
stages:
  - {name: l, kernel: mix, reads: [x], writes: [left], duration_us: 400}
  - {name: r, kernel: mix, reads: [x], writes: [right], duration_us: 400}
  - {name: join, kernel: mix, reads: [left, right], writes: [out], duration_us: 10, device: 1}
`))
	if got != want || !strings.Contains(got, "peer copies added") {
		t.Errorf("placement built in Go:\n%s\nfrom YAML:\n%s", got, want)
	}
}

// Mistakes in a built spec are Plan's errors with a nil plan.
func TestBuilderMistakes(t *testing.T) {
	b := dagrun.NewSpec("bad")
	x := b.Buffer("x", 64)
	b.Stage("a", "fill", dagrun.Arg("value", 1.0), dagrun.Writes(x)).
		Stage("b", "copy", dagrun.Reads(dagrun.Buf{}), dagrun.Writes(x))
	p, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
	if p != nil || err == nil {
		t.Fatalf("plan %v, error %v; want a nil plan and an error", p != nil, err)
	}
}
