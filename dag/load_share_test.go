package dag

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
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

// stringsInto calls f with the path and value of every non-empty string
// reachable from v (struct fields, slices, maps' keys and values).
func stringsInto(v reflect.Value, path string, f func(path, s string)) {
	switch v.Kind() {
	case reflect.String:
		if v.Len() > 0 {
			f(path, v.String())
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			stringsInto(v.Elem(), path, f)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			stringsInto(v.Field(i), path+"."+v.Type().Field(i).Name, f)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			stringsInto(v.Index(i), path+"[]", f)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			stringsInto(it.Key(), path+"{key}", f)
			stringsInto(it.Value(), path+"{}", f)
		}
	}
}

// A loaded spec keeps no string of the file's text (the scanner's scalars
// are substrings of it), so that the text is freed after loading: on the
// repository's specs and JSON, every string field checked.
func TestLoadDetachesText(t *testing.T) {
	files, _ := filepath.Glob("../specs/*/*.yaml")
	local, _ := filepath.Glob(filepath.Join(loadDir, "*.yaml"))
	files = append(files, local...)
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, asJSON := range []bool{false, true} {
			text, name := string(data), f
			if asJSON {
				var v any
				if yaml.Unmarshal(data, &v) != nil {
					break
				}
				j, err := json.Marshal(v)
				if err != nil {
					break
				}
				text, name = string(j), strings.TrimSuffix(f, ".yaml")+".json"
			}
			s, err, scanned := loadText(text, name, filepath.Dir(f), LoadOptions{}, false)
			if err != nil || !scanned {
				continue
			}
			d := detacher{text: text}
			stringsInto(reflect.ValueOf(s), "Spec", func(path, v string) {
				seen[path] = true
				if d.in(v) && path != "Spec.Dir" && path != "Spec.File" {
					t.Errorf("%s: %s %q points into the file's text", name, path, v)
				}
			})
		}
	}
	for _, p := range []string{"Spec.Name", "Spec.Sync", "Spec.Buffers[].Name", "Spec.Buffers[].Role", "Spec.Buffers[].Where",
		"Spec.Buffers[].DType", "Spec.Buffers[].Alloc", "Spec.Buffers[].Init.Path", "Spec.Kernels[].Name", "Spec.Kernels[].Entry",
		"Spec.Kernels[].Params[].Name", "Spec.Stages[].Name", "Spec.Stages[].Kernel", "Spec.Stages[].Args{key}", "Spec.Stages[].Args{}",
		"Spec.Stages[].Reads[].Buffer", "Spec.Stages[].Writes[].Buffer", "Spec.Stages[].After[]", "Spec.Stages[].Stream",
		"Spec.Stages[].Waits[]", "Spec.Stages[].WaitFor[].Stage", "Spec.Stages[].WaitFor[].Event", "Spec.Stages[].Event",
		"Spec.Streams[].Name", "Spec.Streams[].Thread", "Spec.Captures[].First", "Spec.Captures[].Last", "Spec.Options.Strategy"} {
		if !seen[p] {
			t.Errorf("no loaded spec has %s: the test does not check it", p)
		}
	}
}
