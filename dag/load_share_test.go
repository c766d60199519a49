package dag

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Stages whose args are written alike share one map; others get their own.
func TestLoadArgsShared(t *testing.T) {
	src := pre + `  - {name: s1, kernel: mix, args: {max_words: 64, spin_us: 1.5}, writes: [a]}
  - {name: s2, kernel: mix, args: {max_words: 64, spin_us: 1.5}, writes: [b]}
  - {name: s3, kernel: mix, args: {max_words: 64, spin_us: 2.5}, writes: [a]}
  - {name: s4, kernel: mix, args: {max_words: 64, spin_us: "1.5"}, writes: [b]}
`
	for _, yamlv3 := range []bool{false, true} {
		s, err, _ := loadBytes([]byte(src), "t.yaml", loadDir, yamlv3)
		if err == nil {
			t.Fatalf("yaml.v3 %v: a string spin_us loads", yamlv3)
		}
		src2 := strings.Replace(src, `"1.5"`, "3.5", 1)
		s, err, _ = loadBytes([]byte(src2), "t.yaml", loadDir, yamlv3)
		if err != nil {
			t.Fatal(err)
		}
		ptr := func(i int) uintptr { return reflect.ValueOf(s.Stages[i].Args).Pointer() }
		if ptr(0) != ptr(1) {
			t.Errorf("yaml.v3 %v: stages with the same args have maps of their own", yamlv3)
		}
		if ptr(0) == ptr(2) || ptr(2) == ptr(3) {
			t.Errorf("yaml.v3 %v: stages with different args share a map", yamlv3)
		}
		want := map[string]any{"max_words": 64, "spin_us": 1.5}
		if !reflect.DeepEqual(s.Stages[1].Args, want) || s.Stages[2].Args["spin_us"] != 2.5 || s.Stages[3].Args["spin_us"] != 3.5 {
			t.Errorf("yaml.v3 %v: args %v %v %v", yamlv3, s.Stages[1].Args, s.Stages[2].Args, s.Stages[3].Args)
		}
	}
}

// A wrong argument shared by several stages is reported at each of them,
// at each one's own position.
func TestLoadArgsSharedErrors(t *testing.T) {
	src := pre + `  - {name: s1, kernel: mix, args: {max_words: 64.0, spin_us: 1.5}, writes: [a]}
  - {name: s2, kernel: mix, args: {max_words: 64.0, spin_us: 1.5}, writes: [b]}
  - {name: s3, kernel: mix, args: {spin_us: 1.5, bogus: 1}, writes: [a]}
  - {name: s4, kernel: mix,   args: {spin_us: 1.5, bogus: 1}, writes: [b]}
  - {name: s5, kernel: mix, args: {spin_us: 1.5, spin_us: 2}, writes: [a]}
  - {name: s6, kernel: mix, args: {spin_us: 1.5, spin_us: 2}, writes: [b]}
`
	_, err := Load([]byte(src), "t.yaml", loadDir)
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("err %v", err)
	}
	lines := strings.Split(src, "\n")
	col := func(line int, s string, nth int) int {
		i := -1
		for range nth {
			i += 1 + strings.Index(lines[line-1][i+1:], s)
		}
		return i + 1
	}
	wantAt := []struct {
		line, col int
		msg       string
	}{
		{8, col(8, "64.0", 1), "max_words must be"},
		{9, col(9, "64.0", 1), "max_words must be"},
		{10, col(10, "bogus", 1), "bogus"},
		{11, col(11, "bogus", 1), "bogus"},
		{12, col(12, "spin_us", 2), "given twice"},
		{13, col(13, "spin_us", 2), "given twice"},
	}
	if len(list) != len(wantAt) {
		t.Fatalf("got %d errors, want %d:\n%v", len(list), len(wantAt), err)
	}
	for i, w := range wantAt {
		if e := list[i]; e.Pos.Line != w.line || e.Pos.Col != w.col || !strings.Contains(e.Msg, w.msg) {
			t.Errorf("error %d: %v; want %d:%d %q", i, e, w.line, w.col, w.msg)
		}
	}
}
