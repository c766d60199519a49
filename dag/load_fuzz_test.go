package dag

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// FuzzLoadSpec feeds arbitrary bytes to Load. It must never panic; a failure
// must be a non-empty ErrorList of positioned *Error values; a success must
// satisfy the loader's contract (sizes and ranges filled in and in bounds)
// and survive WriteYAML → Load unchanged.
//
//	go test -run XXX -fuzz FuzzLoadSpec -fuzztime 3m ./dag/
func FuzzLoadSpec(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(loadDir, "*.yaml"))
	seeds, _ := filepath.Glob("../specs/*/*.yaml")
	for _, p := range append(files, seeds...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, tc := range errorCases {
		f.Add([]byte(tc.src))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Load(data, "fuzz.yaml", loadDir)
		if err != nil {
			if s != nil {
				t.Fatal("Load returned a spec and an error")
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 || len(list) > MaxErrors+1 {
				t.Fatalf("error is not a non-empty, capped ErrorList: %T %v", err, err)
			}
			for _, e := range list {
				if e == nil || e.Msg == "" || e.Hint == "" || e.Pos.File != "fuzz.yaml" || e.Pos.Line < 0 || e.Pos.Col < 0 {
					t.Fatalf("malformed error %#v in\n%v", e, err)
				}
			}
			return
		}
		checkLoaded(t, s)
		roundTrip(t, s, loadDir)
	})
}

// checkLoaded checks the contract of a successfully loaded spec.
func checkLoaded(t *testing.T, s *Spec) {
	t.Helper()
	if s.Version != SpecVersion || s.Sync == "" || len(s.Stages) == 0 {
		t.Fatalf("spec header not filled in: %+v", s)
	}
	size := map[string]int64{}
	for _, b := range s.Buffers {
		if b.Bytes <= 0 || b.Where == "" || b.Role == "" || b.Init.Kind == "" {
			t.Fatalf("buffer not filled in: %+v", b)
		}
		if _, dup := size[b.Name]; dup {
			t.Fatalf("duplicate buffer %s accepted", b.Name)
		}
		size[b.Name] = b.Bytes
	}
	stages := map[string]int{}
	for i, st := range s.Stages {
		if _, dup := stages[st.Name]; dup {
			t.Fatalf("duplicate stage %s accepted", st.Name)
		}
		stages[st.Name] = i
		for _, list := range [][]Access{st.Reads, st.Writes} {
			for _, a := range list {
				n, ok := size[a.Buffer]
				if !ok || a.Offset < 0 || a.Bytes <= 0 || a.Offset > n || a.Bytes > n-a.Offset {
					t.Fatalf("stage %s: access %v out of bounds (buffer %d bytes)", st.Name, a, n)
				}
			}
		}
		for _, name := range st.After {
			if j, ok := stages[name]; !ok || j >= i {
				t.Fatalf("stage %s: after %s is not an earlier stage", st.Name, name)
			}
		}
		for _, name := range st.Waits {
			if name == st.Name || s.StageIndex(name) < 0 {
				t.Fatalf("stage %s: waits %s is not another stage", st.Name, name)
			}
		}
		if s.Sync == SyncManual && st.Stream == "" {
			t.Fatalf("stage %s: manual sync without stream", st.Name)
		}
	}
}

// FuzzYAMLString checks that WriteYAML's scalar quoting reads back as the
// same string, alone, in a flow list and as a flow-mapping value.
func FuzzYAMLString(f *testing.F) {
	for _, s := range []string{"", "a", "true", "Yes", "null", "~", "1", "0x10", "1e3", ".inf", "-", "- a", "a: b", "a:b", "a,b",
		"x[0:4]", "#c", "a #c", "'q'", `"q"`, "\\", "tab\there", "nl\nx", " lead", "trail ", "ü", "\u0085", "\ufeff", "&a", "*a", "!t", "%x", "@", "`", "?", "<<", "=", "a/b.c-d_e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // specs are UTF-8; yaml.v3 rejects anything else
		}
		q := yamlString(s)
		for _, doc := range []string{"v: " + q + "\n", "v: [" + q + ", " + q + "]\n", "v: {k: " + q + "}\n"} {
			var v struct{ V any }
			if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
				t.Fatalf("%q: %v", doc, err)
			}
			var got any
			switch x := v.V.(type) {
			case []any:
				got = x[1]
			case map[string]any:
				got = x["k"]
			default:
				got = x
			}
			if got != s {
				t.Fatalf("%q read back as %#v, want %q", doc, got, s)
			}
		}
	})
}
