package dagrun_test

import (
	"bytes"
	"errors"
	"fmt"
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
	w := b.Buffer("w", 4096).Input().Random(7)
	frame := b.Tensor("frame", "f32", []int64{1024}).HostPinned().Input().Copies(2).Fill(1.5)
	feat := b.Buffer("feat", 4096)
	out := b.Buffer("out", 8192).Output()
	b.Stage("pre", "scale").Arg("a", 0.5).Reads(frame).Writes(feat).Duration(20)
	b.Stage("left", "mix").Reads(feat, w).Writes(out.Range(0, 4096)).Duration(50)
	b.Stage("right", "mix").Reads(feat.Range(0, 2048), w).Writes(out.Range(4096, 8192)).Duration(50)
	b.Stage("tail", "spin").Arg("us", 5).After("left").OnStream("tail")

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
	b.Stage("more", "spin").Arg("us", 1)
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
	a := peer.Buffer("a", 4096).InDevice(0)
	bb := peer.Buffer("b", 4096).InDevice(1)
	out := peer.Buffer("out", 8).Output().InDevice(1)
	peer.Stage("produce", "fill").Arg("value", 1.0).Writes(a)
	peer.Stage("send", "copy").Reads(a).Writes(bb)
	peer.Stage("use", "checksum").Reads(bb).Writes(out)
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
	pl := dagrun.NewSpec("pl").Devices(2).Placement(dagrun.PlacementBalance)
	x := pl.Buffer("x", 65536).Input().Random(3)
	left := pl.Buffer("left", 65536)
	right := pl.Buffer("right", 65536)
	res := pl.Buffer("out", 65536).Output()
	pl.Stage("l", "mix").Reads(x).Writes(left).Duration(400)
	pl.Stage("r", "mix").Reads(x).Writes(right).Duration(400)
	pl.Stage("join", "mix").Reads(left, right).Writes(res).Duration(10).OnDevice(1)
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
	b.Stage("a", "fill").Arg("value", 1.0).Writes(x)
	b.Stage("b", "copy").Reads(dagrun.Buf{}).Writes(x)
	p, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
	if p != nil || err == nil {
		t.Fatalf("plan %v, error %v; want a nil plan and an error", p != nil, err)
	}
}

// Mistakes in a spec built in Go have hints in Go's terms, not YAML's: an
// undeclared buffer is declared with SpecBuilder.Buffer, not under
// buffers:. The same mistake in a file keeps the YAML hint.
func TestBuilderHintsInGoTerms(t *testing.T) {
	b := dagrun.NewSpec("hints")
	x := b.Buffer("x", 64)
	ghost := dagrun.NewSpec("other").Buffer("ghost", 64)
	b.Stage("a", "fill").Arg("value", 1.0).Writes(x)
	b.Stage("b", "copy").Reads(ghost).Writes(x)
	b.Stage("c", "mix").Reads(x).Writes(x).After("d")
	b.Stage("d", "spin").Arg("us", 1)
	_, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
	var list dagrun.SpecErrors
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("Plan: %v; want two spec errors", err)
	}
	for i, want := range []string{"declare it with SpecBuilder.Buffer", "add d before c"} {
		if h := list[i].Hint; !strings.Contains(h, want) || strings.Contains(h, "buffers:") || strings.Contains(h, "declaration order") {
			t.Errorf("error %d: %s\n\thint: %s; want %q, in Go's terms", i, list[i].Msg, h, want)
		}
	}
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte("version: 1\nbuffers: [{name: x, bytes: 64}]\nstages:\n  - {name: b, kernel: copy, reads: [ghost], writes: [x]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := dagrun.Load(path); err == nil || !strings.Contains(err.Error(), "declare it under buffers:") {
		t.Errorf("Load: %v; want the YAML hint", err)
	}
}

// Range takes YAML's start and end: x.Range(8, 24) is x[8:24], 16 bytes;
// an end not after its start panics, as Go's slicing does.
func TestBufRange(t *testing.T) {
	b := dagrun.NewSpec("range")
	x := b.Buffer("x", 64).Output()
	b.Stage("a", "fill").Arg("value", 1.0).Writes(x.Range(8, 24))
	p, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Stages[0].Writes[0]; w.Offset != 8 || w.Bytes != 16 {
		t.Errorf("x.Range(8, 24) planned as offset %d, %d bytes; want 8, 16", w.Offset, w.Bytes)
	}
	for _, c := range [][2]int64{{8, 8}, {8, 7}, {-1, 4}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("x.Range(%d, %d) did not panic", c[0], c[1])
				}
			}()
			x.Range(c[0], c[1])
		}()
	}
	x.Range(0, 1) // the smallest range
}

// A range of a range is relative to it, as Go's slicing of a slice is:
// x.Range(16, 48).Range(4, 8) is x[20:24]; an end past the range's end
// panics.
func TestBufRangeOfRange(t *testing.T) {
	b := dagrun.NewSpec("range")
	x := b.Buffer("x", 64).Output()
	r := x.Range(16, 48)
	b.Stage("a", "fill").Arg("value", 1.0).Writes(r.Range(4, 8))
	b.Stage("b", "fill").Arg("value", 2.0).Writes(r.Range(0, 32))
	p, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][2]int64{{20, 4}, {16, 32}} {
		if w := p.Stages[i].Writes[0]; w.Offset != want[0] || w.Bytes != want[1] {
			t.Errorf("stage %s: planned as offset %d, %d bytes; want %d, %d", p.Stages[i].Name, w.Offset, w.Bytes, want[0], want[1])
		}
	}
	for _, c := range [][2]int64{{0, 33}, {31, 33}, {-1, 4}, {4, 4}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("x.Range(16, 48).Range(%d, %d) did not panic", c[0], c[1])
				}
			}()
			r.Range(c[0], c[1])
		}()
	}
}

// A negative device is a programmer's mistake that Plan could not see
// (InDevice(-1) would read as no device given): InDevice and OnDevice
// panic on it, as Range does on a negative start.
func TestBuilderNegativeDevicePanics(t *testing.T) {
	b := dagrun.NewSpec("dev")
	x := b.Buffer("x", 64)
	st := b.Stage("a", "fill").Arg("value", 1.0).Writes(x)
	for name, f := range map[string]func(){
		"InDevice(-1)": func() { x.InDevice(-1) },
		"OnDevice(-1)": func() { st.OnDevice(-1) },
		"InDevice(-5)": func() { x.InDevice(-5) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "want a device ≥ 0") {
					t.Errorf("%s: recovered %v, want a panic that wants a device ≥ 0", name, r)
				}
			}()
			f()
		}()
	}
	x.InDevice(0)
	st.OnDevice(0)
}

// A zero Buf (never declared), a range past the buffer's end and a missing
// argument of a built-in come back from Plan with hints in Go's terms,
// naming the builder's methods.
func TestBuilderBufHintsInGoTerms(t *testing.T) {
	b := dagrun.NewSpec("hints")
	x := b.Buffer("x", 64)
	y := b.Buffer("y", 64).Output()
	var zero dagrun.Buf
	b.Stage("a", "fill").Arg("value", 1.0).Writes(x)
	b.Stage("b", "copy").Reads(zero).Writes(y)
	b.Stage("c", "copy").Reads(x.Range(0, 128)).Writes(y)
	b.Stage("d", "fill").Writes(x)
	b.Stage("e", "scale").Reads(x).Writes(y)
	_, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
	var list dagrun.SpecErrors
	if !errors.As(err, &list) || len(list) < 4 {
		t.Fatalf("Plan: %v; want spec errors", err)
	}
	for _, e := range list {
		if strings.Contains(e.Hint, "args:") {
			t.Errorf("%s\n\thint: %s; want Go's terms (Arg), not YAML's", e.Msg, e.Hint)
		}
	}
	for _, want := range []string{"zero Buf", "x.Range(start, end) with end ≤ 64", `give Arg("value", 1.5) or Arg("bits", 0x3fc00000)`, `give it: Arg("a", 2.0)`} {
		found := false
		for _, e := range list {
			found = found || strings.Contains(e.Hint, want)
		}
		if !found {
			t.Errorf("Plan: %v\nno hint says %q", err, want)
		}
	}
}

// Devices(n) with n < 0 is Plan's error (devices must be in [1, …]), as
// YAML's devices: -2 is Load's; Devices(0) is the default.
func TestBuilderNegativeDevices(t *testing.T) {
	for _, n := range []int{-2, -1, 0} {
		b := dagrun.NewSpec("dev")
		x := b.Buffer("x", 64).Output()
		b.Stage("a", "fill").Arg("value", 1.0).Writes(x)
		b.Devices(n)
		_, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
		if n < 0 && (err == nil || !strings.Contains(err.Error(), "devices")) {
			t.Errorf("Devices(%d): Plan error %v, want one about devices", n, err)
		}
		if n == 0 && err != nil {
			t.Errorf("Devices(0): %v", err)
		}
	}
}

// An argument of a type a spec cannot hold is Plan's error at its stage's
// args, one for each such argument.
func TestBuilderArgTypes(t *testing.T) {
	b := dagrun.NewSpec("args")
	x := b.Buffer("x", 64).Output()
	b.Stage("a", "fill").Arg("value", []int{1}).Writes(x)
	b.Stage("b", "scale").Arg("a", struct{}{}).Reads(x).Writes(x)
	_, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
	var list dagrun.SpecErrors
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("Plan: %v; want two spec errors", err)
	}
	for i, want := range []string{"stages[0].args: stage a: argument value: value [1] of type []int", "stages[1].args: stage b: argument a: value {} of type struct {}"} {
		if !strings.HasPrefix(list[i].Error(), want) {
			t.Errorf("error %d: %v, want it to start %q", i, list[i], want)
		}
	}
}

// Copies(k) with k < 1 panics: a ring has at least one copy, and Plan could
// not tell Copies(0) from no Copies at all.
func TestBuilderCopiesBelowOnePanics(t *testing.T) {
	x := dagrun.NewSpec("c").Buffer("x", 64)
	for _, k := range []int{0, -1} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "want k ≥ 1") {
					t.Errorf("Copies(%d): recovered %v, want a panic that wants k ≥ 1", k, r)
				}
			}()
			x.Copies(k)
		}()
	}
	x.Copies(1)
}

// Mistakes of device placement in a spec built in Go have hints that name
// InDevice and OnDevice, not YAML's device: key.
func TestBuilderDeviceHintsInGoTerms(t *testing.T) {
	b := dagrun.NewSpec("dev").Devices(2)
	x := b.Buffer("x", 64).InDevice(0).Output()
	b.Stage("a", "fill").Arg("value", 1.0).Writes(x).OnDevice(1)
	g0 := b.Buffer("g0", 64).InDevice(0)
	g1 := b.Buffer("g1", 64).InDevice(1)
	b.Stage("ar", "all_reduce").Arg("op", "sum").Reads(g0, g1).Writes(g0, g1).OnDevice(0)
	_, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
	bal := dagrun.NewSpec("bal").Devices(2).Placement(dagrun.PlacementBalance)
	a0, a1 := bal.Buffer("a0", 64), bal.Buffer("a1", 64)
	bal.Stage("ar", "all_reduce").Arg("op", "sum").Reads(a0, a1).Writes(a0, a1)
	_, err2 := dagrun.Plan(bal.Spec(), dagrun.PlanOptions{})
	var list, list2 dagrun.SpecErrors
	if !errors.As(err, &list) || !errors.As(err2, &list2) {
		t.Fatalf("Plan: %v, %v; want spec errors", err, err2)
	}
	list = append(list, list2...)
	for _, e := range list {
		if strings.Contains(e.Hint, "device:") {
			t.Errorf("%s\n\thint: %s; want Go's terms (InDevice, OnDevice), not YAML's device:", e.Msg, e.Hint)
		}
	}
	for _, want := range []string{"x.InDevice(1)", "OnDevice(0)", "drop the stage's OnDevice", "with InDevice"} {
		found := false
		for _, e := range list {
			found = found || strings.Contains(e.Hint, want)
		}
		if !found {
			t.Errorf("no hint says %q: %v\n%v", want, err, err2)
		}
	}
}

// A device given to what is on no device (a host_pinned buffer, a stage on
// the host stream) is Plan's error, as device: there is Load's, with the
// hint to drop the InDevice or OnDevice.
func TestBuilderHostDevice(t *testing.T) {
	b := dagrun.NewSpec("host").Devices(2)
	h := b.Buffer("h", 64).HostPinned().InDevice(1).Output()
	b.Stage("hs", "fill").Arg("value", 1.0).Writes(h).OnStream("host").OnDevice(1)
	_, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
	for _, want := range []string{"drop the buffer's InDevice", "drop the stage's OnDevice"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Plan: %v; want a hint to %s", err, want)
		}
	}
}
