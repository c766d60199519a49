package plan_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/rivo/uniseg"
)

// TestPlanStringsAreCopies pins that a plan built from a loaded spec holds
// none of the spec's strings: a plan that kept one would keep the spec's
// memory (its text or its names' chunks) alive after the spec is let go.
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
	p, err := planner.Build(s, planner.Options{})
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

// TestTableWideCharacters: the plan table aligns its columns by display
// width, so stream and stage names of CJK characters (two columns each)
// line up with ASCII ones.
func TestTableWideCharacters(t *testing.T) {
	p := build(t, loadSpec(t, `version: 1
name: cjk
buffers:
  - {name: 入力, bytes: 4096, role: input}
  - {name: 出力, bytes: 4096, role: output}
  - {name: t, bytes: 4096}
stages:
  - {name: 読み込み処理段階, kernel: copy, reads: [入力], writes: [t], stream: 計算ストリーム}
  - {name: b, kernel: copy, reads: [t], writes: [出力], stream: s}
`), planner.Options{})
	var b strings.Builder
	p.WriteTable(&b)
	// skip returns the index after the cell starting at i and the spaces
	// after it (a cell has no two spaces in a row).
	skip := func(line string, i int) int {
		k := strings.Index(line[i:], "  ")
		if k < 0 {
			return len(line)
		}
		i += k
		for i < len(line) && line[i] == ' ' {
			i++
		}
		return i
	}
	var want []int
	rows := 0
	for _, line := range strings.Split(b.String(), "\n")[1:] {
		op := strings.TrimLeft(line, " ")
		at := len(line) - len(op) // after an empty stream cell
		if at == 0 {
			at = skip(line, 0)
		}
		if !slices.ContainsFunc([]string{"op ", "launch ", "record ", "wait "}, func(w string) bool { return strings.HasPrefix(line[at:], w) }) {
			continue
		}
		rows++
		ev := skip(line, at)
		cols := []int{uniseg.StringWidth(line[:at]), uniseg.StringWidth(line[:ev])}
		if tail := skip(line, ev); tail < len(line) {
			cols = append(cols, uniseg.StringWidth(line[:tail]))
			if len(want) == 2 {
				want = append(want, cols[2])
			}
		}
		if want == nil {
			want = cols
		}
		for k := range cols {
			if k < len(want) && cols[k] != want[k] {
				t.Errorf("row %q: columns %v, want %v\n%s", line, cols, want, b.String())
				break
			}
		}
	}
	if rows != 7 {
		t.Errorf("%d rows, want 7 (the header and 6 ops)\n%s", rows, b.String())
	}
}
