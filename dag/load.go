package dag

// Strict loading of spec files (docs/spec.md is the format reference).
//
// Loading runs in two phases. decode* functions walk the yaml.Node tree and
// turn each mapping into plain data, reporting unknown or duplicate fields,
// missing required fields and values of the wrong YAML type. check* functions
// (load_check.go) then resolve names and check what depends on them: byte
// ranges, built-in arities, kernel arguments, after and waits. Every error is
// collected with its position; Load returns them all (up to MaxErrors).
import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dagrun/dagrun/internal/safefile"
	"github.com/dagrun/dagrun/internal/yamlscan"
	"gopkg.in/yaml.v3"
)

// SpecVersion is the spec format version this package reads and writes.
const SpecVersion = 1

// LoadFile reads the spec at path and validates it (see Load). Relative
// paths in the spec (PTX files, init files) resolve against path's directory.
// A file that cannot be read is reported as an ErrorList too, so that callers
// treat it like any other bad input.
func LoadFile(path string) (*Spec, error) { return loadFile(path, LoadOptions{}) }

func loadFile(path string, o LoadOptions) (*Spec, error) {
	text, err := readText(path)
	if err != nil {
		var refused *safefile.RefusedError
		hint := "check the path of the spec file"
		if errors.As(err, &refused) {
			hint = "give the path of a spec file (YAML or JSON)"
			if !refused.Irregular {
				hint = fmt.Sprintf("a spec file has at most %d bytes (dag.MaxSpecBytes)", MaxSpecBytes)
			}
		}
		return nil, ErrorList{{
			Pos:  Pos{File: path},
			Msg:  "cannot read spec: " + unwrapPathError(err),
			Hint: hint,
		}}
	}
	s, err, _ := loadText(text, path, filepath.Dir(path), o, false)
	return s, err
}

// readText reads the spec file at path as a string (a regular file of at
// most MaxSpecBytes, safefile's checks), without the copy of os.ReadFile
// and a conversion: the scanner's scalars are substrings of it until check
// detaches them (load_detach.go).
func readText(path string) (string, error) {
	f, size, err := safefile.Open(path, MaxSpecBytes, "spec")
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b strings.Builder
	b.Grow(int(size) + 1)
	n, err := io.Copy(&b, io.LimitReader(f, MaxSpecBytes+1))
	if err != nil {
		return "", err
	}
	if n > MaxSpecBytes {
		return "", &safefile.RefusedError{Path: path, What: "spec", Size: n, Limit: MaxSpecBytes}
	}
	return b.String(), nil
}

// Load parses and validates a spec (YAML, format version 1). file names the
// spec in positions ("" is allowed); dir is the directory that relative paths
// in the spec resolve against (if "", file's directory; if both are "", the
// current directory). Load reads the PTX and init files the spec names to
// check that they exist, have the right size and define the named entries.
//
// On success every default is filled in: Name (file's base name if absent),
// Sync, Where, Role, Init.Kind, Bytes of every buffer, and Offset/Bytes of
// every Access. On failure it returns (nil, ErrorList) with every error found,
// sorted by position and capped at MaxErrors.
func Load(data []byte, file, dir string) (*Spec, error) {
	s, err, _ := loadText(string(data), file, dir, LoadOptions{}, false)
	return s, err
}

// loadBytes is Load, parsing YAML with yaml.v3 only when yamlv3 is set;
// scanned says whether the streaming scanner parsed the file.
func loadBytes(data []byte, file, dir string, yamlv3 bool) (*Spec, error, bool) {
	return loadText(string(data), file, dir, LoadOptions{}, yamlv3)
}

func loadText(data string, file, dir string, o LoadOptions, yamlv3 bool) (*Spec, error, bool) {
	if dir == "" && file != "" {
		dir = filepath.Dir(file)
	}
	if len(data) > MaxSpecBytes {
		return nil, ErrorList{{Pos: Pos{File: file}, Msg: fmt.Sprintf("the spec is %d bytes, more than the %d a spec may have", len(data), MaxSpecBytes),
			Hint: "split the pipeline, or shorten names (dag.MaxSpecBytes)"}}, false
	}
	if strings.HasPrefix(data, "\x1f\x8b") { // gzip's magic bytes (RFC 1952 §2.3.1)
		return nil, ErrorList{{Pos: Pos{File: file}, Msg: "the file is gzip-compressed, not YAML or JSON text",
			Hint: "decompress it first (gunzip -k FILE writes FILE without its .gz), then give dagrun the decompressed file"}}, false
	}
	l := &loader{file: file, dir: dir, forceYAMLv3: yamlv3, allowOutside: o.AllowOutside}
	s := l.load(data)
	if err := l.errs.Err(); err != nil {
		return nil, err, l.scanned
	}
	return s, nil, l.scanned
}

// loader holds the state of one Load call.
type loader struct {
	file, dir string
	errs      ErrorList

	// Source positions of what decode produced, for check (parallel to
	// Spec.Stages, Buffers and Kernels). They hold no YAML nodes, so that
	// a node tree can go as soon as its part is decoded.
	stageSrc chunks[stageSrc] // by stage index; chunked: no copies as it grows
	keySlab  []keyAt          // where stages' key positions are carved from
	// where the stages' accesses are carved from
	accSlab    []Access
	accSrcSlab []accessSrc
	bufSrc     []bufferSrc
	kernSrc    []kernelSrc

	// streamed counts the items of each list the scanner streamed.
	streamed     map[*yaml.Node]int
	forceYAMLv3  bool                 // tests: parse YAML with yaml.v3 only
	allowOutside bool                 // LoadOptions.AllowOutside
	scanned      bool                 // the scanner parsed the file
	bail         yamlscan.SubsetError // where the scanner left the file to yaml.v3
	// text is the file's text when the scanner parses it: the spec's
	// strings point into it until check detaches them.
	text      string
	devicesAt at // the devices: value, if any

	accesses  int                // reads and writes decoded so far (MaxAccesses)
	over      map[string]bool    // the lists past their limit, reported
	aliased   int                // nodes expanded through aliases so far
	aliasSize map[*yaml.Node]int // node count of each anchored node used

	freeFields []*fields // given back by release, for mapping
	names      arena     // join's text
	decs       []any     // decodeObject's states given back, for reuse
	// argKeys holds one copy of each args key (decodeArgs): the spec's
	// args maps do not point into the file's text.
	argKeys map[string]string
	// argSets holds the args decoded so far without errors, by what they
	// were decoded from (argsText), for stages written alike to share.
	argSets map[string]*argSet
	argBuf  []byte // argsText's key
	atSlab  []at   // where the stages' args positions are carved from
}

// join returns a + " " + b ("stage prep", an object named in messages),
// cut from a shared chunk of text instead of a string of its own.
func (l *loader) join(a, b string) string {
	if l.names.chunk == 0 {
		l.names.chunk = 64 << 10
	}
	return l.names.add(a, " ", b)
}

// chunks is a list that grows in fixed chunks, so that appending never
// copies what it holds (the loader's per-item positions, for specs of
// millions of stages).
type chunks[T any] struct{ c [][]T }

const chunkLen = 4096

func (x *chunks[T]) add(v T) {
	if n := len(x.c); n == 0 || len(x.c[n-1]) == chunkLen {
		x.c = append(x.c, make([]T, 0, chunkLen))
		prefault(x.c[len(x.c)-1])
	}
	x.c[len(x.c)-1] = append(x.c[len(x.c)-1], v)
}

func (x *chunks[T]) at(i int) *T { return &x.c[i/chunkLen][i%chunkLen] }

// at is a position in the spec file: 1-based line and column; the zero at
// is no position. It is what the loader keeps of a YAML node after decode.
type at struct{ line, col int32 }

func atOf(n *yaml.Node) at {
	if n == nil {
		return at{}
	}
	return at{int32(n.Line), int32(n.Column)}
}

func (l *loader) pos(n *yaml.Node) Pos { return l.posAt(atOf(n)) }

func (l *loader) posAt(a at) Pos { return Pos{File: l.file, Line: int(a.line), Col: int(a.col)} }

// errorf records an error at n's position.
func (l *loader) errorf(n *yaml.Node, hint, format string, args ...any) {
	l.errAt(l.pos(n), hint, format, args...)
}

// errorAt records an error at a kept position.
func (l *loader) errorAt(a at, hint, format string, args ...any) {
	l.errAt(l.posAt(a), hint, format, args...)
}

func (l *loader) errAt(p Pos, hint, format string, args ...any) {
	l.errs = append(l.errs, &Error{Pos: p, Msg: fmt.Sprintf(format, args...), Hint: hint})
}

// Value sets of the format (the enums of Format).
var (
	initFields     = []string{InitFill, InitFile, InitRandom}
	paramFields    = []string{"name", "type"}
	waitFields     = []string{"stage", "event", "lag"}
	accessFields   = []string{"buffer", "offset", "bytes"}
	goKernelFields = []string{"go"}
	strategies     = []string{"default", "single", "round-robin", "naive"}
	paramTypes     = []string{"ptr", "u32", "i32", "u64", "i64", "f32", "f64"}
	wheres         = []string{WhereDevice, WhereHostPinned, WhereHostPageable}
	roles          = []string{RoleInput, RoleOutput, RoleTemp}
	syncModes      = []string{SyncAuto, SyncManual}
	arenaModes     = []string{ArenaPlanned, ArenaOff, ArenaStreamOrder}
	dtypeSizes     = map[string]int64{"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "u32": 4, "i8": 1, "u8": 1, "f64": 8, "i64": 8}
	dtypeNames     = []string{"f32", "f16", "bf16", "i32", "u32", "i8", "u8", "f64", "i64"}
	yamlLineError  = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

// load parses data and runs both phases.
//
// Specs in JSON, and YAML specs within the scanner's subset (internal/yamlscan),
// are decoded item by item as they are parsed; other YAML goes through
// yaml.v3's node tree of the whole document.
func (l *loader) load(data string) *Spec {
	if s, done := l.loadScanned(data); done {
		return s
	}
	if len(data) > maxYAMLv3Bytes {
		at := "in its characters"
		if l.bail.Line > 0 {
			at = fmt.Sprintf("first at line %d, column %d", l.bail.Line, l.bail.Col)
		}
		l.errAt(Pos{File: l.file, Line: l.bail.Line, Col: l.bail.Col}, "write the spec in the plain subset (block and flow lists and mappings, one-line scalars, comments: what dag.WriteYAML and dagrun import write), or as JSON; or split the pipeline",
			"the spec is %d bytes of YAML outside the loader's streaming subset (%s; outside it are anchors and aliases, tags, block and multi-line scalars, tabs and directives: docs/spec.md): such a spec is parsed whole, about 70 bytes of memory per byte, and may have at most %d bytes (dag.MaxYAMLv3Bytes)", len(data), at, maxYAMLv3Bytes)
		return nil
	}
	root := l.parse([]byte(data))
	if root == nil {
		return nil
	}
	s := &Spec{File: l.file, Dir: l.dir, Sync: SyncAuto}
	if !l.decodeGuarded(root, s) {
		return nil
	}
	l.check(s)
	return s
}

// loadScanned loads data with the streaming scanner. done is false when
// the file is YAML outside the scanner's subset (or content that looked
// like JSON and is not), which the caller then parses with yaml.v3.
func (l *loader) loadScanned(data string) (s *Spec, done bool) {
	json := isJSONFile(l.file)
	if !json && l.forceYAMLv3 {
		return nil, false
	}
	sniffed := !json && looksLikeJSON(data)
	if !json && !sniffed && strings.Contains(data, "\r\n") {
		// CRLF line endings (Windows editors): the scanner reads the
		// same text with LF ones. Every line:column stays, as the CR only
		// ends its line; the names are cut from this text (l.text). A CR
		// on its own breaks a line too in YAML, and stays for subsetText
		// to leave the file to yaml.v3.
		data = strings.ReplaceAll(data, "\r\n", "\n")
	}
	s = &Spec{File: l.file, Dir: l.dir, Sync: SyncAuto}
	// Room for the stages up front (each names its kernel once), so that
	// a spec of a million stages is not copied as the list grows.
	kernelKey := "kernel:"
	if json || sniffed {
		kernelKey = `"kernel"`
	}
	if n := strings.Count(data, kernelKey); n > chunkLen {
		s.Stages = make([]StageSpec, 0, min(n, limits.stages))
		prefault(s.Stages)
	}
	// Likewise the buffers (each gives bytes or a dtype; accesses written
	// as mappings and names that hold these words count too: room left
	// over is given back below).
	if n := strings.Count(data, "bytes") + strings.Count(data, "dtype"); n > chunkLen {
		s.Buffers = make([]BufferSpec, 0, min(n, limits.buffers))
		l.bufSrc = make([]bufferSrc, 0, cap(s.Buffers))
		prefault(s.Buffers)
		prefault(l.bufSrc)
	}
	first := map[string]*yaml.Node{} // the list each streamed field names first
	l.streamed = map[*yaml.Node]int{}
	root, err := yamlscan.Scan(data, yamlscan.Options{JSON: json || sniffed, YAMLJSON: sniffed, Stream: streamKeys, OnItem: func(key string, list, item *yaml.Node) {
		if f, ok := first[key]; ok && f != list {
			return // a field given twice: reported, its second value ignored
		}
		first[key] = list
		l.streamed[list]++
		switch key {
		case "buffers":
			l.decodeBuffer(s, item)
		case "kernels":
			l.decodeKernel(s, item)
		case "stages":
			l.decodeStage(s, item)
		}
	}})
	if err != nil {
		var je *yamlscan.JSONError
		if json && errors.As(err, &je) {
			*l = loader{file: l.file, dir: l.dir, allowOutside: l.allowOutside}
			hint := "fix the JSON syntax here (RFC 8259: keys and strings in double quotes, no trailing commas)"
			if t := strings.TrimLeft(strings.TrimPrefix(data, "\ufeff"), " \t\r\n"); t != "" && t[0] != '{' && t[0] != '[' && utf8.ValidString(data) {
				hint = "a JSON spec is one object, {\"version\": 1, ...}; a file whose name ends in .json is read as JSON, so name a YAML spec .yaml"
			}
			if je.Hint != "" {
				hint = je.Hint
			}
			l.errorAt(at{int32(je.Line), int32(je.Col)}, hint, "JSON syntax error: %s", je.Msg)
			return nil, true
		}
		*l = loader{file: l.file, dir: l.dir, forceYAMLv3: l.forceYAMLv3, allowOutside: l.allowOutside}
		var se *yamlscan.SubsetError
		if errors.As(err, &se) {
			l.bail = *se
		}
		return nil, false
	}
	l.scanned, l.text = true, data
	if c := cap(s.Buffers); c > chunkLen && c > 2*len(s.Buffers) {
		s.Buffers = slices.Clone(s.Buffers)
	}
	l.decodeSpec(root, s)
	l.streamed = nil
	l.check(s)
	return s, true
}

// streamKeys are the root fields whose list items the scanner streams.
var streamKeys = []string{"buffers", "kernels", "stages"}

// isJSONFile reports whether file names a JSON spec (extension .json).
func isJSONFile(file string) bool { return strings.EqualFold(filepath.Ext(file), ".json") }

// looksLikeJSON reports whether data starts like a JSON object.
func looksLikeJSON(data string) bool {
	for _, c := range []byte(data) {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}

// tooMany reports (once per list) and returns true when a list already
// has limit items, so that item n is not decoded.
func (l *loader) tooMany(n *yaml.Node, have, limit int, list, name string) bool {
	if have < limit {
		return false
	}
	if !l.over[list] {
		if l.over == nil {
			l.over = map[string]bool{}
		}
		l.over[list] = true
		l.errorf(n, "split the pipeline into several specs", "more than %d %s: a spec has at most %d (dag.%s)", limit, list, limit, name)
	}
	return true
}

// items calls decode on each item of the list n (or counts the items the
// scanner already streamed) and returns how many there are; ok is false
// when n is not a list (reported).
func (l *loader) items(n *yaml.Node, what, hint string, decode func(*yaml.Node)) (int, bool) {
	if c, ok := l.streamed[n]; ok {
		return c, true
	}
	items, ok := l.list(n, what, hint)
	for _, it := range items {
		decode(it)
	}
	return len(items), ok
}

// decodeGuarded decodes root into s, turning an alias budget overrun into
// an error.
func (l *loader) decodeGuarded(root *yaml.Node, s *Spec) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if r != errAliasBudget {
				panic(r)
			}
			l.errs = append(l.errs[:0:0], &Error{Pos: Pos{File: l.file}, Msg: fmt.Sprintf("YAML aliases (*name) expand to more than %d nodes", MaxAliasNodes),
				Hint: "write the repeated parts out, or use fewer aliases of large anchors (&name)"})
			ok = false
		}
	}()
	l.decodeSpec(root, s)
	return true
}

// parse turns data into the root node of its single YAML document.
func (l *loader) parse(data []byte) (root *yaml.Node) {
	defer func() {
		// yaml.v3 has panicked on malformed input before (CVE-2022-28948);
		// a spec loader must answer with an error, not crash the caller.
		if r := recover(); r != nil {
			l.errAt(Pos{File: l.file}, "check the file is well-formed YAML", "cannot parse YAML: %v", r)
			root = nil
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			l.errAt(Pos{File: l.file}, "start from the example in docs/spec.md", "spec is empty")
			return nil
		}
		l.yamlError(err, data)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		l.errorf(&extra, "keep one spec per file; remove the second '---' document", "file holds more than one YAML document")
		return nil
	} else if !errors.Is(err, io.EOF) {
		l.yamlError(err, data)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		l.errAt(Pos{File: l.file}, "start from the example in docs/spec.md", "spec is empty")
		return nil
	}
	root = doc.Content[0]
	if root.Kind == yaml.ScalarNode && tagOf(root) == "!!null" {
		l.errorf(root, "start from the example in docs/spec.md", "spec is empty")
		return nil
	}
	return root
}

// firstAt says where a key given twice was first given, from the line of
// the second: "line L", or "column C of this line" when both are on it
// (flow mappings, JSON on one line).
func firstAt(line, firstLine, firstCol int) string {
	if firstLine == line {
		return fmt.Sprintf("column %d of this line", firstCol)
	}
	return fmt.Sprintf("line %d", firstLine)
}

// yamlParserProblems are the problems yaml.v3's parser (not its scanner)
// reports. For these it gives the 0-based line of the block or bracket
// being parsed (of the problem when that is on the first line), and no
// line at all for 0: the loader adds one. Scanner errors' lines are
// 1-based already.
var yamlParserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// yamlError records a syntax error from yaml.v3 in data, which reports
// lines only.
func (l *loader) yamlError(err error, data []byte) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineError.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if yamlParserProblems[msg] {
		// Never past the file's last line (the problem at its end).
		line = min(line+1, max(bytes.Count(bytes.TrimRight(data, "\n"), []byte("\n"))+1, 1))
	}
	if line > 0 {
		l.errAt(Pos{File: l.file, Line: line, Col: 1}, "fix the YAML syntax here or in the lines after it, in the block or bracket that starts here (yaml reports where that block starts): indentation, ':' after keys, closing brackets and quotes", "YAML syntax error: %s", msg)
		return
	}
	l.errAt(Pos{File: l.file}, "fix the YAML syntax", "YAML syntax error: %s", msg)
}

// defaultName is the spec name used when the file gives none: the file's
// base name without extension.
func defaultName(file string) string {
	if file == "" {
		return "spec"
	}
	base := filepath.Base(file)
	if ext := filepath.Ext(base); ext != "" && ext != base {
		base = strings.TrimSuffix(base, ext)
	}
	if nameProblem(base) != "" {
		return "spec"
	}
	return base
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// suggest is suggest, skipped once MaxErrors errors are known: past that
// the hints are not shown, and on huge specs full of unknown names the
// search would be quadratic.
func (l *loader) suggest(s string, candidates func() []string) string {
	if len(l.errs) >= MaxErrors {
		return ""
	}
	return suggest(s, candidates())
}

// suggest returns the candidate closest to s by edit distance, if it is
// close enough to be a likely typo, or "".
func suggest(s string, candidates []string) string {
	if len(s) > 64 {
		return ""
	}
	best, bestD := "", 3
	for _, c := range candidates {
		if len(c) > 64 || c == s {
			continue
		}
		// Close means at most 2 edits, and fewer than half the length.
		if d := editDistance(s, c); d < bestD && 2*d < max(len(s), len(c)) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func unwrapPathError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
