package planner

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
)

// TestPlanStringsAreCopies pins that a plan built from a loaded spec holds
// none of the spec's strings, which are substrings of the spec file's
// text: a plan that kept one would keep the whole file in memory.
func TestPlanStringsAreCopies(t *testing.T) {
	const spec = `version: 1
name: copies
buffers:
  - {name: a, bytes: 256}
  - {name: b, bytes: 256}
  - {name: c, bytes: 256}
stages:
  - {name: s1, kernel: mix, writes: [a]}
  - {name: s2, kernel: mix, reads: [a], writes: [b], stream: pinned}
  - {name: s3, kernel: mix, reads: [a, b], writes: [c]}
`
	path := filepath.Join(t.TempDir(), "copies.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := dag.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	shared := func(what, x, y string) {
		t.Helper()
		if x != "" && unsafe.StringData(x) == unsafe.StringData(y) {
			t.Errorf("%s %q is the spec's string, not a copy", what, x)
		}
	}
	shared("plan name", p.Spec, s.Name)
	for i, sg := range s.Stages {
		st := p.Stages[i]
		shared("stage name", st.Name, sg.Name)
		shared("kernel", st.Kernel, sg.Kernel)
		shared("pinned stream", st.Pinned, sg.Stream)
		for k, a := range sg.Reads {
			shared("read buffer", st.Reads[k].Buffer, a.Buffer)
		}
		for k, a := range sg.Writes {
			shared("written buffer", st.Writes[k].Buffer, a.Buffer)
		}
		for _, str := range p.Streams {
			shared("stream name", str.Name, sg.Stream)
		}
	}
	for i, b := range s.Buffers {
		shared("buffer name", p.Buffers[i].Name, b.Name)
		for _, l := range p.Lifetimes {
			shared("lifetime buffer", l.Buffer, b.Name)
		}
	}
}
