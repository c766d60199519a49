package dag

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/internal/yamlscan"
)

// sameLoad loads data with the streaming scanner and with yaml.v3 alone
// and fails unless both give the same spec or the same errors. It returns
// whether the scanner parsed the file.
func sameLoad(t *testing.T, data []byte, file string) bool {
	t.Helper()
	s1, err1, scanned := loadBytes(data, file, loadDir, false)
	s2, err2, _ := loadBytes(data, file, loadDir, true)
	if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
		t.Fatalf("%s: scanner and yaml.v3 disagree (scanned %v):\nscanner: %v\nyaml.v3: %v\n%s", file, scanned, err1, err2, data)
	}
	if !reflect.DeepEqual(s1, s2) {
		t.Fatalf("%s: scanner and yaml.v3 load different specs (scanned %v):\n%+v\n%+v", file, scanned, s1, s2)
	}
	return scanned
}

// The scanner is an optimization: on every spec of the repository, every
// loader test case and WriteYAML's output, Load through it gives exactly
// what yaml.v3 gives, errors and positions included; and it parses
// WriteYAML's output and the repository's specs itself.
func TestScannerMatchesYAMLv3(t *testing.T) {
	for _, tc := range errorCases {
		sameLoad(t, []byte(tc.src), "t.yaml")
	}
	local, _ := filepath.Glob(filepath.Join(loadDir, "*.yaml"))
	files := append(repoSpecs(), local...)
	if len(files) < 5 {
		t.Fatalf("only %d spec files found", len(files))
	}
	scanned := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if sameLoad(t, data, f) {
			scanned++
		}
		s, err := Load(data, f, filepath.Dir(f))
		if err != nil {
			continue
		}
		var buf bytes.Buffer
		if err := WriteYAML(&buf, s); err != nil {
			t.Fatal(err)
		}
		if !sameLoad(t, buf.Bytes(), f) {
			t.Errorf("%s: the scanner gave up on WriteYAML's output:\n%s", f, buf.Bytes())
		}
	}
	if scanned < len(files)*3/4 {
		t.Errorf("the scanner parsed %d of %d spec files", scanned, len(files))
	}
	t.Logf("the scanner parsed %d of %d spec files", scanned, len(files))
}

// A spec with CRLF line endings loads as yaml.v3 loads it, positions and
// errors included, and the scanner parses it where it parses the spec with
// LF ones: every repository spec and loader test case, converted.
func TestScannerCRLF(t *testing.T) {
	srcs := []string{}
	for _, f := range repoSpecs() {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, string(data))
	}
	for _, tc := range errorCases {
		srcs = append(srcs, tc.src)
	}
	both := 0
	for _, src := range srcs {
		if strings.Contains(src, "\r") {
			continue
		}
		_, _, lf := loadBytes([]byte(src), "t.yaml", loadDir, false)
		crlf := sameLoad(t, []byte(strings.ReplaceAll(src, "\n", "\r\n")), "t.yaml")
		if lf && !crlf {
			t.Errorf("the scanner parses this spec with LF line endings, not with CRLF ones:\n%s", src)
		}
		if crlf {
			both++
		}
	}
	if both < len(srcs)/2 {
		t.Errorf("the scanner parsed %d of %d specs with CRLF line endings", both, len(srcs))
	}
}

// A spec that starts with a document start marker (---, alone on its line
// or with a comment) loads as yaml.v3 loads it, and the scanner parses it
// where it parses the spec without one.
func TestScannerStartMarker(t *testing.T) {
	files, _ := filepath.Glob("../specs/*/*.yaml")
	if len(files) < 5 {
		t.Fatalf("only %d spec files found", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, _, plain := loadBytes(data, f, loadDir, false)
		for _, head := range []string{"---\n", "--- \n", "# a spec\n\n---  # its one document\n"} {
			if marked := sameLoad(t, append([]byte(head), data...), f); plain && !marked {
				t.Errorf("%s: the scanner parses it, not with %q before it", f, head)
			}
		}
	}
}

// repoSpecs lists the repository's YAML specs (specs/ and one level of
// folders below it).
func repoSpecs() []string {
	files, _ := filepath.Glob("../specs/*/*.yaml")
	more, _ := filepath.Glob("../specs/*/*/*.yaml")
	return append(files, more...)
}

// Constructs outside the subset are left to yaml.v3, with the same result.
func TestScannerGivesUp(t *testing.T) {
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
		// JSON's escapes that yaml.v3 refuses: \/ and UTF-16 surrogates.
		"version: 1\nname: \"a\\/b\"\nstages: [{name: s, kernel: spin}]\n",
		"version: 1\nname: \"a\\ud83d\\ude00\"\nstages: [{name: s, kernel: spin}]\n",
		"version: 1\nname: \"a\\ud800\"\nstages: [{name: s, kernel: spin}]\n",
		// YAML that starts like JSON, where yaml.v3 reads it otherwise than
		// JSON: \/, surrogates, numbers past float64's range, a lone CR.
		`{"version": 1, "name": "a\/b", "stages": [{"name": "s", "kernel": "spin"}]}`,
		`{"version": 1, "name": "a\ud83d\ude00", "stages": [{"name": "s", "kernel": "spin"}]}`,
		`{"version": 1e400, "stages": [{"name": "s", "kernel": "spin"}]}`,
		`{"version": 1, "stages": [{"name": "s", "kernel": "spin", "args": {"us": 1}, "duration_us": -1e400}]}`,
		"{\"version\": 1,\r \"stages\": [{\"name\": \"s\", \"kernel\": \"spinx\"}]}",
	} {
		if sameLoad(t, []byte(src), "t.yaml") {
			t.Errorf("the scanner parsed %q", src)
		}
	}
}

// The same spec in JSON loads to the same Spec as in YAML, with positions
// in the JSON file; JSON syntax errors have line:column.
func TestLoadJSON(t *testing.T) {
	y := "version: 1\nbuffers:\n  - {name: x, bytes: 64}\nstages:\n  - {name: a, kernel: fill, args: {value: 1.5}, writes: [x]}\n  - {name: b, kernel: copy, reads: [\"x[0:32]\"], writes: [\"x[32:64]\"], duration_us: 2}\n"
	j := `{"version": 1,
 "buffers": [{"name": "x", "bytes": 64}],
 "stages": [
  {"name": "a", "kernel": "fill", "args": {"value": 1.5}, "writes": ["x"]},
  {"name": "b", "kernel": "copy", "reads": ["x[0:32]"], "writes": ["x[32:64]"], "duration_us": 2}
 ]}`
	sy, err := Load([]byte(y), "p.yaml", loadDir)
	if err != nil {
		t.Fatal(err)
	}
	sj, err, scanned := loadBytes([]byte(j), "p.json", loadDir, false)
	if err != nil || !scanned {
		t.Fatal(err, scanned)
	}
	if got := sj.Stages[1].Reads[0].Pos; got != (Pos{File: "p.json", Line: 5, Col: 45}) {
		t.Errorf("position of b's read = %v", got)
	}
	if !reflect.DeepEqual(clearPos(sy), clearPos(sj)) {
		t.Errorf("JSON and YAML specs differ:\n%+v\n%+v", sy, sj)
	}
	// A leading byte order mark is ignored and takes no column.
	sb, err, scanned := loadBytes([]byte("\ufeff"+j), "p.json", loadDir, false)
	if err != nil || !scanned || !reflect.DeepEqual(clearPos(sb), clearPos(sj)) {
		t.Fatalf("with a byte order mark: %v (scanned %v)", err, scanned)
	}
	if _, err := Load([]byte("\ufeff"+`{"version": 1, "stages": [}`), "p.json", loadDir); err == nil || !strings.HasPrefix(err.Error(), "p.json:1:27: JSON syntax error") {
		t.Errorf("with a byte order mark: %v, want the error at 1:27", err)
	}
	for _, c := range []struct{ src, want string }{
		{`{"version": 1, "stages": [}`, "p.json:1:27: JSON syntax error: unexpected '}': want a value"},
		{`{"version": 1,}`, "p.json:1:15: JSON syntax error: a ',' before '}'"},
		{"{\"version\": 1,\n \"stages\": [{name: \"a\"}]}", "p.json:2:14: JSON syntax error: unexpected 'n': an object's keys are strings in double quotes"},
		{`{"version": 1} x`, "p.json:1:16: JSON syntax error: unexpected 'x' after the end of the document"},
		{`{"version": 01}`, `p.json:1:13: JSON syntax error: unexpected "01": want a string in double quotes, a number, true, false or null`},
		{`{"version": 1, "stages": [{"name": "a", "kernel": "mixx"}]}`, `p.json:1:51: stage a: unknown kernel "mixx"`},
		// Nesting past the limit says so, at the value past it.
		{`{"version": 1, "name": ` + strings.Repeat("[", 70), "p.json:1:88: JSON syntax error: lists and objects nested deeper than 64 levels\n\thint: a JSON spec nests at most 64 levels"},
		// A string the file ends in is placed at its opening quote.
		{"{\"version\": 1,\n \"name\": \"abc", "p.json:2:10: JSON syntax error: unterminated string: the file ends before its closing quote"},
		{"{\"version\": 1,\n \"name\": \"abc\\", "p.json:2:10: JSON syntax error: unterminated string"},
		// Bytes that are not UTF-8 are placed where they are.
		{"{\"version\": 1,\n \"name\": \"caf\xe9\"}", "p.json:2:14: JSON syntax error: the file is not valid UTF-8 (byte 0xe9)"},
		{"\ufeff{\"version\": 1, \"name\": \"caf\xe9\"}", "p.json:1:28: JSON syntax error: the file is not valid UTF-8 (byte 0xe9)"}, // the byte order mark takes no column
		// YAML in a file named .json: the hint says how to name it.
		{"version: 1\nstages: [{name: a, kernel: spin, args: {us: 1}}]\n", "p.json:1:1: JSON syntax error: unexpected \"version\": want a string in double quotes, a number, true, false or null\n\thint: a JSON spec is one object, {\"version\": 1, ...}; a file whose name ends in .json is read as JSON, so name a YAML spec .yaml"},
		// Past float64's range a JSON number is still a number (YAML reads 1e400 as a string).
		{`{"version": 1e400, "stages": [{"name": "a", "kernel": "spin", "args": {"us": 1}}]}`, `p.json:1:13: version must be an integer, got the number 1e400`},
		{`{"version": 1, "stages": [{"name": "a", "kernel": "spin", "args": {"us": 1}, "duration_us": -1e400}]}`, `p.json:1:93: stage a: duration_us must be a finite number, got -1e400`},
	} {
		_, err := Load([]byte(c.src), "p.json", loadDir)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %s", c.src, err, c.want)
		}
	}
}

// FuzzScanner holds the scanner to yaml.v3 on arbitrary input: Load
// through the scanner gives the same spec or the same errors.
//
//	go test -run XXX -fuzz FuzzScanner -fuzztime 3m ./dag/
func FuzzScanner(f *testing.F) {
	for i, tc := range errorCases {
		f.Add([]byte(tc.src))
		if i%4 == 0 { // with CRLF line endings, and after a document start marker
			f.Add([]byte(strings.ReplaceAll(tc.src, "\n", "\r\n")))
			f.Add([]byte("---\n" + tc.src))
		}
	}
	files, _ := filepath.Glob(filepath.Join(loadDir, "*.yaml"))
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameLoad(t, data, "fuzz.yaml")
	})
}

// The scanner hands items over in batches of yamlscan.Batch, decoded on a
// goroutine of their own: in a spec of several batches, the errors of
// items in different batches come in file order with their positions, as
// yaml.v3 gives them, and a scan that gives up after some batches (a tab
// near the end) leaves no trace of what was decoded.
func TestScannerBatches(t *testing.T) {
	n := 3*yamlscan.Batch + 7
	spec := func(bad map[int]string, tail string) []byte {
		var b strings.Builder
		b.WriteString("version: 1\nbuffers:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {name: b%d, bytes: %s}\n", i, cmp.Or(bad[-i-1], "64"))
		}
		b.WriteString("stages:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - name: s%d\n    kernel: %s\n    reads: [b%d]\n    writes: [b%d]\n", i, cmp.Or(bad[i], "spin"), i, (i+1)%n)
		}
		b.WriteString(tail)
		return []byte(b.String())
	}
	if !sameLoad(t, spec(nil, ""), "t.yaml") {
		t.Fatalf("the scanner gave up on a plain spec of %d stages", n)
	}
	bad := map[int]string{3: "[x]", yamlscan.Batch + 1: "{a: 1}", n - 1: "[y]", -2: "-5", -(2*yamlscan.Batch + 3): "big"}
	if !sameLoad(t, spec(bad, ""), "t.yaml") {
		t.Fatalf("the scanner gave up on a spec with bad values")
	}
	_, err, _ := loadBytes(spec(bad, ""), "t.yaml", loadDir, false)
	var el ErrorList
	if !errors.As(err, &el) || len(el) < len(bad) {
		t.Fatalf("want %d errors or more, got %v", len(bad), err)
	}
	for i := 1; i < len(el); i++ {
		if el[i].Pos.Line < el[i-1].Pos.Line {
			t.Errorf("errors out of file order: %v before %v", el[i-1], el[i])
		}
	}
	if sameLoad(t, spec(bad, "name:\t x\n"), "t.yaml") {
		t.Errorf("the scanner took a tab")
	}
}
