package yamlscan

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// dump writes n's tree as the scanner promises to build it: each node's
// kind, tag, collection or quoting style, value and line:column.
func dump(b *strings.Builder, n *yaml.Node, depth int) {
	fmt.Fprintf(b, "%*s%d %s %d %q %d:%d\n", 2*depth, "", n.Kind, n.Tag, n.Style, n.Value, n.Line, n.Column)
	for _, c := range n.Content {
		dump(b, c, depth+1)
	}
}

func dumpString(n *yaml.Node) string {
	var b strings.Builder
	dump(&b, n, 0)
	return b.String()
}

// v3Root parses data with yaml.v3: the root of its one document, or nil
// with the error.
func v3Root(data string) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(data), &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, fmt.Errorf("not one document")
	}
	return doc.Content[0], nil
}

// sameTree scans data with o (without OnItem) and fails unless the scanner
// gives up (ErrOutsideSubset, YAML) or builds the tree yaml.v3 builds. It
// returns whether the scanner built the tree.
func sameTree(t *testing.T, name, data string, o Options) bool {
	t.Helper()
	got, err := Scan(data, o)
	if err != nil {
		if o.JSON && !o.YAMLJSON {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(err.Error(), ErrOutsideSubset.Error()) {
			t.Fatalf("%s: the scanner fails with %v, want ErrOutsideSubset", name, err)
		}
		return false
	}
	want, err := v3Root(data)
	if err != nil {
		t.Fatalf("%s: the scanner parses what yaml.v3 refuses (%v):\n%s", name, err, data)
	}
	if g, w := dumpString(got), dumpString(want); g != w {
		t.Fatalf("%s: the scanner's tree differs from yaml.v3's:\n%s\nyaml.v3:\n%s", name, g, w)
	}
	return true
}

// repoFiles lists the repository's specs and test specs with extension
// ext (specs/ and two levels of folders below it, dag/testdata/load).
func repoFiles(t *testing.T, ext string) []string {
	var files []string
	for _, g := range []string{"../../specs/*/*", "../../specs/*/*/*", "../../dag/testdata/load/*"} {
		m, _ := filepath.Glob(g + ext)
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("only %d %s files found", len(files), ext)
	}
	return files
}

func readFile(t *testing.T, f string) string {
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// On every YAML spec of the repository, alone and after a document start
// marker, the scanner builds yaml.v3's tree (or gives up), and it parses
// most of them itself.
func TestScanMatchesYAMLv3(t *testing.T) {
	files := repoFiles(t, ".yaml")
	scanned := 0
	for _, f := range files {
		data := readFile(t, f)
		if sameTree(t, f, data, Options{}) {
			scanned++
		}
		for _, head := range []string{"---\n", "--- \n", "# a spec\n\n---  # its one document\n"} {
			sameTree(t, f+" after "+head, head+data, Options{})
		}
	}
	if scanned < len(files)*3/4 {
		t.Errorf("the scanner parsed %d of %d spec files", scanned, len(files))
	}
	t.Logf("the scanner parsed %d of %d spec files", scanned, len(files))
}

// JSON files (the repository's operator graphs) scanned as JSON give
// yaml.v3's tree; as YAML that starts like JSON, too, or a give-up.
func TestScanJSONMatchesYAMLv3(t *testing.T) {
	for _, f := range repoFiles(t, ".json") {
		data := readFile(t, f)
		sameTree(t, f, data, Options{JSON: true})
		sameTree(t, f, data, Options{JSON: true, YAMLJSON: true})
	}
}

// Constructs outside the subset make the scanner give up, where yaml.v3
// reads them one way or another.
func TestScanGivesUp(t *testing.T) {
	for _, src := range []string{
		"version: 1\nstages:\n  - &s {name: s, kernel: spin}\n",
		"version: 1\nname: |\n  x\nstages: [{name: s, kernel: spin}]\n",
		"version: 1\nname: a\n  b\nstages: [{name: s, kernel: spin}]\n",
		"version: 1\nname: \"a\\x41\"\nstages: [{name: s, kernel: spin}]\n",
		"version: 1\rstages: [{name: s, kernel: spin}]\r",
		"version: 1\nname: a\rstages: [{name: s, kernel: spin}]\r\n",
		"version: 1\nstages:\n\t- {name: s, kernel: spin}\n",
		"--- version: 1\n",
		"---\n---\nversion: 1\nstages: [{name: s, kernel: spin}]\n",
		"%YAML 1.2\n---\nversion: 1\nstages: [{name: s, kernel: spin}]\n",
		"version: 1\n---\nstages: [{name: s, kernel: spin}]\n",
		"version: 1\nstages: [{name: s, kernel: spin}]\n---\n",
		"version: 1\nname: !!str x\nstages: [{name: s, kernel: spin}]\n",
		"version: 1\nstages:\n-\n  name: s\n  kernel: spin\n",
		"version: 1\nstages:\n  - name: s\n    kernel: spin\n    args:\n",
		"version: 1\nname: a\u2028b\nstages: [{name: s, kernel: spin}]\n",
		"version: 1\nname: \"a\\/b\"\nstages: [{name: s, kernel: spin}]\n",
		"version: 1\nname: \"a\\ud83d\\ude00\"\nstages: [{name: s, kernel: spin}]\n",
		"version: 1\nname: \"a\\ud800\"\nstages: [{name: s, kernel: spin}]\n",
	} {
		if sameTree(t, src, src, Options{}) {
			t.Errorf("the scanner parsed %q", src)
		}
	}
	// YAML that starts like JSON, where yaml.v3 reads it otherwise than
	// JSON: \/, surrogates, numbers past float64's range, a lone CR.
	for _, src := range []string{
		`{"version": 1, "name": "a\/b", "stages": [{"name": "s", "kernel": "spin"}]}`,
		`{"version": 1, "name": "a\ud83d\ude00", "stages": [{"name": "s", "kernel": "spin"}]}`,
		`{"version": 1e400, "stages": [{"name": "s", "kernel": "spin"}]}`,
		"{\"version\": 1,\r \"stages\": [{\"name\": \"s\", \"kernel\": \"spinx\"}]}",
	} {
		if sameTree(t, src, src, Options{JSON: true, YAMLJSON: true}) {
			t.Errorf("the scanner parsed %q as YAML", src)
		}
	}
}

// Streamed items reach OnItem in file order, each the tree yaml.v3 builds
// for it, Batch at a time; the root's streamed lists are left empty and
// the rest of the tree is yaml.v3's.
func TestScanStream(t *testing.T) {
	n := 3*Batch + 7
	var b strings.Builder
	b.WriteString("version: 1\nbuffers:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: b%d, bytes: 64}\n", i)
	}
	b.WriteString("name: x\nstages:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: s%d\n    kernel: spin\n    reads: [b%d]\n    args: {us: %d.5}\n", i, i, i)
	}
	data := b.String()
	want, err := v3Root(data)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var lists []*yaml.Node
	root, err := Scan(data, Options{Stream: []string{"buffers", "stages"}, OnItem: func(key string, list, item *yaml.Node) {
		got = append(got, key+"\n"+dumpString(item))
		if len(lists) == 0 || lists[len(lists)-1] != list {
			lists = append(lists, list)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	var wantItems []string
	for i := 0; i < len(want.Content); i += 2 {
		k, v := want.Content[i], want.Content[i+1]
		if k.Value == "buffers" || k.Value == "stages" {
			for _, it := range v.Content {
				wantItems = append(wantItems, k.Value+"\n"+dumpString(it))
			}
			v.Content = nil
		}
	}
	if len(got) != 2*n || !slices.Equal(got, wantItems) {
		t.Fatalf("streamed %d items, want %d as yaml.v3 builds them", len(got), len(wantItems))
	}
	if len(lists) != 2 {
		t.Errorf("items came in %d lists, want 2", len(lists))
	}
	if g, w := dumpString(root), dumpString(want); g != w {
		t.Errorf("the root differs from yaml.v3's (streamed lists emptied):\n%s\nyaml.v3:\n%s", g, w)
	}
}

// JSON syntax errors have the line and column of the offending text.
func TestScanJSONErrors(t *testing.T) {
	for _, c := range []struct {
		src, msg  string
		line, col int
	}{
		{`{"version": 1, "stages": [}`, "unexpected '}': want a value", 1, 27},
		{`{"version": 1,}`, "a ',' before '}'", 1, 15},
		{"{\"version\": 1,\n \"name\": \"caf\xe9\"}", "the file is not valid UTF-8 (byte 0xe9)", 2, 14},
		{`{"a": ` + strings.Repeat("[", 70), "lists and objects nested deeper than 64 levels", 1, 71},
	} {
		_, err := Scan(c.src, Options{JSON: true})
		je, ok := err.(*JSONError)
		if !ok || je.Msg != c.msg || je.Line != c.line || je.Col != c.col {
			t.Errorf("%q: got %#v, want %d:%d %s", c.src, err, c.line, c.col, c.msg)
		}
	}
}

// FuzzScan holds the scanner to yaml.v3 on arbitrary text: it builds
// yaml.v3's tree or gives up.
//
//	go test -run XXX -fuzz FuzzScan -fuzztime 3m ./internal/yamlscan/
func FuzzScan(f *testing.F) {
	for _, g := range []string{"../../specs/*/*.yaml", "../../dag/testdata/load/*.yaml"} {
		files, _ := filepath.Glob(g)
		for _, p := range files {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("a: [1, {b: 'c'}, \"d\\u00e9\"]\nb:\n  - x\n  - -1.5e3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameTree(t, "fuzz", string(data), Options{})
	})
}

func TestFloatText(t *testing.T) {
	re := regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
	for _, s := range []string{"", "1", "1.", ".5", "+.5", "-1.5e3", "1e", "1e+", "1e+5", ".", "-", "+", "..5", "1.5.2", "e5", "1E5", "00.5", "1_0", "0x10"} {
		if floatText(s) != re.MatchString(s) {
			t.Errorf("floatText(%q) = %v", s, floatText(s))
		}
	}
}

// subsetText's 8-byte test says what the byte-wise test says, for every
// byte in every position of a word and on random text.
func TestSubsetTextWords(t *testing.T) {
	slow := func(data string) bool {
		for i := 0; i < len(data); {
			c := data[i]
			if c < 0x80 {
				if (c < 0x20 && c != '\n') || c == 0x7f {
					return false
				}
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(data[i:])
			if r == utf8.RuneError || !(r >= 0xA0 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD) || r == 0xFEFF || r == 0x2028 || r == 0x2029 {
				return false
			}
			i += size
		}
		return true
	}
	base := []byte("name: a1\n  - {x: 1}\n")
	for pos := range 8 {
		for c := range 256 {
			b := slices.Clone(base)
			b[pos] = byte(c)
			if got, want := subsetText(string(b)), slow(string(b)); got != want {
				t.Fatalf("byte %#x at %d: subsetText %v, want %v", c, pos, got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab: -\n{}[]#\x7f\x1f\x00\x09\xc3\xa9\xe2\x80\xa8~ ")
	for range 20000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if got, want := subsetText(string(b)), slow(string(b)); got != want {
			t.Fatalf("%q: subsetText %v, want %v", b, got, want)
		}
	}
}
