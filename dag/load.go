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
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dagrun/dagrun/internal/yamlscan"
	"gopkg.in/yaml.v3"

	"github.com/dagrun/dagrun/internal/safefile"
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

// --- generic node helpers ---

// MaxAliasNodes is the most YAML nodes that aliases (*name) may expand to
// in one spec, counted over every use: an alias of a list of 3000 reads
// used 3000 times is 9 million. Past it the spec is refused, so that a
// small file cannot make the loader build a huge spec.
const MaxAliasNodes = 1 << 20

// errAliasBudget aborts a load whose aliases expand past MaxAliasNodes.
var errAliasBudget = errors.New("alias budget")

// deref follows aliases to the node they name, counting the nodes each
// use of an alias expands to against MaxAliasNodes.
func (l *loader) deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
		if n == nil {
			break
		}
		if l.aliasSize == nil {
			l.aliasSize = map[*yaml.Node]int{}
		}
		size, ok := l.aliasSize[n]
		if !ok {
			size = nodeCount(n, 0)
			l.aliasSize[n] = size
		}
		l.aliased += size
		if l.aliased > MaxAliasNodes {
			panic(errAliasBudget)
		}
	}
	return n
}

// nodeCount is the number of nodes under n (n included), up to MaxAliasNodes+1.
func nodeCount(n *yaml.Node, depth int) int {
	if n == nil || depth > 1000 {
		return 1
	}
	c := 1
	for _, m := range n.Content {
		if m.Kind == yaml.AliasNode {
			c += nodeCount(m.Alias, depth+1)
		} else {
			c += nodeCount(m, depth+1)
		}
		if c > MaxAliasNodes {
			break
		}
	}
	return c
}

// kindName describes n's YAML type for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return scalarKindName(tagOf(n), n.Value)
	}
	return "an unknown YAML node"
}

// tagOf is n.ShortTag(): the tags yaml.v3 and the scanner set are short
// already ("!!str"); others (none, or long forms) are resolved by yaml.v3.
func tagOf(n *yaml.Node) string {
	if t := n.Tag; len(t) > 2 && t[0] == '!' && t[1] == '!' {
		return t
	}
	return n.ShortTag()
}

// scalarKindName describes a scalar of YAML tag tag written as value.
func scalarKindName(tag, value string) string {
	switch tag {
	case "!!str":
		return fmt.Sprintf("the string %q", yamlscan.Clip(value))
	case "!!int":
		return "the integer " + yamlscan.Clip(value)
	case "!!float":
		return "the number " + yamlscan.Clip(value)
	case "!!bool":
		return "the boolean " + yamlscan.Clip(value)
	case "!!null":
		return "nothing (null)"
	}
	return fmt.Sprintf("%s %q", tag, yamlscan.Clip(value))
}

// fields is a decoded mapping: the key and value node of each known field,
// by its index in the mapping's list of keys.
type fields struct {
	n     *yaml.Node
	known []string
	val   []*yaml.Node
	key   []*yaml.Node
	what  string // "buffer frame", for messages
}

// mapping checks that n is a mapping whose keys are all in known and appear
// once, and returns its fields. what names the object in messages.
func (l *loader) mapping(n *yaml.Node, what string, known []string) (*fields, bool) {
	n = l.deref(n)
	if n.Kind != yaml.MappingNode {
		l.errorf(n, "write it as a mapping of fields: {"+strings.Join(known, ": ..., ")+": ...}", "%s must be a mapping, got %s", what, kindName(n))
		return nil, false
	}
	f := l.newFields(n, known, what)
	if known[0] == "name" {
		// Name the object in every message about it, when it has a usable name.
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := l.deref(n.Content[i]), l.deref(n.Content[i+1])
			if k.Kind == yaml.ScalarNode && k.Value == "name" && v.Kind == yaml.ScalarNode && nameOK(v.Value) {
				f.what = l.join(what, v.Value)
				break
			}
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := l.deref(n.Content[i]), l.deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			l.errorf(k, "field names are plain words such as "+known[0], "%s: field name must be a string, got %s", f.what, kindName(k))
			continue
		}
		if tagOf(k) == "!!merge" {
			l.errorf(k, "write the fields out instead of merging them with <<", "%s: YAML merge keys (<<) are not supported", f.what)
			continue
		}
		name := k.Value
		j := slices.Index(known, name)
		if j < 0 {
			hint := "known fields: " + strings.Join(known, ", ")
			if s := l.suggest(name, func() []string { return known }); s != "" {
				hint = fmt.Sprintf("did you mean %q? (%s)", s, hint)
			}
			l.errorf(k, hint, "%s: unknown field %q", f.what, yamlscan.Clip(name))
			continue
		}
		if prev := f.key[j]; prev != nil {
			l.errorf(k, "remove one of them", "%s: field %q given twice (first at %s)", f.what, name, firstAt(k.Line, prev.Line, prev.Column))
			continue
		}
		f.key[j], f.val[j] = k, v
	}
	return f, true
}

// newFields returns empty fields for the mapping n, reusing those given
// back by release.
func (l *loader) newFields(n *yaml.Node, known []string, what string) *fields {
	var f *fields
	if k := len(l.freeFields); k > 0 {
		f = l.freeFields[k-1]
		l.freeFields = l.freeFields[:k-1]
	} else {
		f = new(fields)
	}
	nodes := f.val[:cap(f.val)]
	if cap(nodes) < 2*len(known) {
		nodes = make([]*yaml.Node, 2*len(known))
	} else {
		nodes = nodes[:2*len(known)]
		clear(nodes)
	}
	*f = fields{n: n, known: known, val: nodes[:len(known)], key: nodes[len(known):], what: what}
	return f
}

// release gives f back for reuse; f is not used after.
func (l *loader) release(f *fields) {
	if len(l.freeFields) < 64 {
		l.freeFields = append(l.freeFields, f)
	}
}

// get returns field name's value node, or nil.
func (f *fields) get(name string) *yaml.Node {
	if i := slices.Index(f.known, name); i >= 0 {
		return f.val[i]
	}
	return nil
}

// given is the number of fields present.
func (f *fields) given() int {
	n := 0
	for _, v := range f.val {
		if v != nil {
			n++
		}
	}
	return n
}

// require returns field name's value node, reporting its absence.
func (l *loader) require(f *fields, name, hint string) *yaml.Node {
	v := f.get(name)
	if v == nil {
		l.errorf(f.n, hint, "%s: missing required field %q", f.what, name)
	}
	return v
}

// list checks that n is a sequence and returns its items (aliases followed).
func (l *loader) list(n *yaml.Node, what, hint string) ([]*yaml.Node, bool) {
	n = l.deref(n)
	if n.Kind != yaml.SequenceNode {
		l.errorf(n, hint, "%s must be a list, got %s", what, kindName(n))
		return nil, false
	}
	for i, c := range n.Content {
		if c.Kind == yaml.AliasNode {
			out := make([]*yaml.Node, len(n.Content))
			copy(out, n.Content[:i])
			for j := i; j < len(n.Content); j++ {
				out[j] = l.deref(n.Content[j])
			}
			return out, true
		}
	}
	return n.Content, true // no aliases: the items as they are (read only)
}

// str returns n's value if it is a string scalar.
func (l *loader) str(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || tagOf(n) != "!!str" {
		hint := "write a string"
		if n.Kind == yaml.ScalarNode {
			hint = fmt.Sprintf("quote it if you mean the string: %q", n.Value)
		}
		l.errorf(n, hint, "%s must be a string, got %s", what, kindName(n))
		return "", false
	}
	return n.Value, true
}

// oneOf returns n's value if it is one of the strings in allowed.
func (l *loader) oneOf(n *yaml.Node, what string, allowed []string) (string, bool) {
	v, ok := l.str(n, what)
	if !ok {
		return "", false
	}
	if !contains(allowed, v) {
		hint := "use one of: " + strings.Join(allowed, ", ")
		if s := l.suggest(v, func() []string { return allowed }); s != "" {
			hint = fmt.Sprintf("did you mean %q? (%s)", s, hint)
		}
		l.errorf(n, hint, "%s: unknown value %q", what, yamlscan.Clip(v))
		return "", false
	}
	return v, true
}

var integerText = regexp.MustCompile(`^[-+]?[0-9]+$`)

// int64Val returns n's value if it is an integer that fits in int64.
func (l *loader) int64Val(n *yaml.Node, what string) (int64, bool) {
	if n.Kind == yaml.ScalarNode && tagOf(n) == "!!float" && n.Style&yaml.TaggedStyle != 0 && integerText.MatchString(n.Value) {
		l.errorf(n, fmt.Sprintf("drop the tag: write %s: %s", lastWord(what), yamlscan.Clip(n.Value)), "%s: %s is tagged !!float, but an integer is wanted", what, yamlscan.Clip(n.Value))
		return 0, false
	}
	if n.Kind == yaml.ScalarNode && tagOf(n) == "!!float" && integerText.MatchString(n.Value) {
		l.errorf(n, "use a value below 2^63", "%s: %s does not fit in a 64-bit integer", what, yamlscan.Clip(n.Value))
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || tagOf(n) != "!!int" {
		l.errorf(n, "write a whole number such as 4096", "%s must be an integer, got %s", what, kindName(n))
		return 0, false
	}
	if v, ok := yamlscan.Decimal(n.Value); ok {
		return v, true
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		if !integerText.MatchString(strings.ReplaceAll(n.Value, "_", "")) && !strings.HasPrefix(n.Value, "0x") && !strings.HasPrefix(n.Value, "0o") {
			// A tag on what is no integer: !!int 64.5.
			l.errorf(n, "write a whole number such as 4096", "%s: %s is tagged !!int, but is no integer", what, yamlscan.Clip(n.Value))
			return 0, false
		}
		l.errorf(n, "use a value below 2^63", "%s: %s does not fit in a 64-bit integer", what, yamlscan.Clip(n.Value))
		return 0, false
	}
	return v, true
}

// lastWord is the field name at the end of what ("buffer a: bytes" → "bytes").
func lastWord(what string) string {
	if i := strings.LastIndexAny(what, " :"); i >= 0 {
		return what[i+1:]
	}
	return what
}

// intIn returns n's value if it is an integer in [lo, hi].
func (l *loader) intIn(n *yaml.Node, what string, lo, hi int64) (int64, bool) {
	v, ok := l.int64Val(n, what)
	if !ok {
		return 0, false
	}
	if v < lo || v > hi {
		if hi == math.MaxInt64 {
			l.errorf(n, fmt.Sprintf("use a value ≥ %d", lo), "%s must be ≥ %d, got %d", what, lo, v)
		} else {
			l.errorf(n, fmt.Sprintf("use a value in [%d, %d]", lo, hi), "%s must be in [%d, %d], got %d", what, lo, hi, v)
		}
		return 0, false
	}
	return v, true
}

// num returns n's value if it is a finite number (integer or float).
func (l *loader) num(n *yaml.Node, what string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (tagOf(n) != "!!int" && tagOf(n) != "!!float") {
		l.errorf(n, "write a number such as 12.5", "%s must be a number, got %s", what, kindName(n))
		return 0, false
	}
	var v float64
	var err error
	if i, ok := yamlscan.Decimal(n.Value); ok && n.Tag == "!!int" {
		v = float64(i)
	} else if f, ok := yamlscan.SimpleFloat(n.Value); ok && n.Tag == "!!float" {
		v = f
	} else {
		err = n.Decode(&v)
	}
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		l.errorf(n, "write a finite number such as 12.5", "%s must be a finite number, got %s", what, yamlscan.Clip(n.Value))
		return 0, false
	}
	return v, true
}

// nonNegNum returns n's value if it is a finite number ≥ 0.
func (l *loader) nonNegNum(n *yaml.Node, what string) (float64, bool) {
	v, ok := l.num(n, what)
	if ok && v < 0 {
		l.errorf(n, "use a value ≥ 0", "%s must be ≥ 0, got %s", what, n.Value)
		return 0, false
	}
	return v, ok
}

// name returns n's value if it is a valid name of a buffer, kernel or stage.
func (l *loader) name(n *yaml.Node, what string) (string, bool) {
	if n.Kind == yaml.ScalarNode && tagOf(n) == "!!int" {
		// Names like 1 or 0x10 are easy to write; keep them as written.
		return n.Value, l.validName(n, what, n.Value)
	}
	v, ok := l.str(n, what)
	if !ok {
		return "", false
	}
	return v, l.validName(n, what, v)
}

func (l *loader) validName(n *yaml.Node, what, v string) bool {
	if nameOK(v) {
		return true
	}
	if msg := nameProblem(v); msg != "" {
		l.errorf(n, "names are non-empty and hold no spaces, brackets, commas or control characters (letters, digits and _ . - / : are fine)", "%s %q %s", what, yamlscan.Clip(v), msg)
		return false
	}
	return true
}

// nameProblem says what is wrong with a name, or "" if nothing.
// Brackets are reserved for byte ranges (buf[0:64]).
func nameProblem(v string) string {
	if v == "" {
		return "is empty"
	}
	for _, r := range v {
		switch {
		case r <= ' ' || r == 0x7f:
			return "contains a space or control character"
		case strings.ContainsRune("[],{}#&*!|>'\"%@`", r):
			return fmt.Sprintf("contains %q", r)
		case hidden(r):
			return hiddenMsg(r)
		}
	}
	return ""
}

// hidden reports whether a terminal shows r wrongly or not at all: C0
// and C1 controls, DEL, spaces other than ' ' (no-break, line and
// paragraph separators), format characters (bidi overrides, zero-width
// spaces), the other default-ignorable code points that Unicode's
// DerivedCoreProperties lists (variation selectors, the Hangul fillers,
// the combining grapheme joiner: letters and marks that print as
// nothing), and bytes that are not UTF-8. Two names that look alike
// would differ, and a control character in a message acts on the
// terminal.
func hidden(r rune) bool {
	if r < utf8.RuneSelf {
		return r < ' ' || r == 0x7f
	}
	return !unicode.IsPrint(r) || r == utf8.RuneError ||
		unicode.In(r, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

func hiddenMsg(r rune) string {
	return fmt.Sprintf("contains %U, a control, format, space or invisible character that a terminal shows wrongly or not at all", r)
}

// NameHidden says, for a name of a stage, buffer, stream or kernel that
// holds a character a terminal shows wrongly or not at all, what it holds
// ("contains U+202E, ..."), as the loader says it of a name in a spec; ""
// for any other name. Plan files are held to it (plan.Plan.Validate).
func NameHidden(name string) string {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= utf8.RuneSelf || c < ' ' || c == 0x7f {
			for _, r := range name[i:] {
				if hidden(r) {
					return hiddenMsg(r)
				}
			}
			return ""
		}
	}
	return ""
}

func (l *loader) decodeSpec(root *yaml.Node, s *Spec) {
	f := decodeObject(l, root, "spec", specTable, specKeys, s, &struct{}{})
	if f != nil && f.get("name") == nil {
		s.Name = defaultName(l.file)
	}
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && tagOf(n) == "!!null" }

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

// parseShortAccess parses "x", "x[a:b]", "x[a:]" or "x[:b]". It returns the
// buffer, offset, length (when hasBytes), or a message saying what is wrong.
func parseShortAccess(s string) (buf string, off, n int64, hasBytes bool, msg string) {
	i := strings.IndexByte(s, '[')
	if i < 0 {
		if strings.ContainsRune(s, ']') {
			return "", 0, 0, false, "unbalanced ']'"
		}
		return s, 0, 0, false, ""
	}
	buf = s[:i]
	if buf == "" {
		return "", 0, 0, false, "missing buffer name before '['"
	}
	rest := s[i+1:]
	if !strings.HasSuffix(rest, "]") {
		return "", 0, 0, false, "a byte range ends with ']'"
	}
	rest = rest[:len(rest)-1]
	lo, hi, ok := strings.Cut(rest, ":")
	if !ok {
		return "", 0, 0, false, "a byte range is [start:end] (end exclusive), e.g. x[0:512]"
	}
	lo, hi = strings.TrimSpace(lo), strings.TrimSpace(hi)
	if lo != "" {
		v, err := strconv.ParseInt(lo, 10, 64)
		if err != nil {
			return "", 0, 0, false, fmt.Sprintf("start %q is not a byte offset", yamlscan.Clip(lo))
		}
		if v < 0 {
			return "", 0, 0, false, fmt.Sprintf("start %d is negative", v)
		}
		off = v
	}
	if hi == "" {
		return buf, off, 0, false, ""
	}
	end, err := strconv.ParseInt(hi, 10, 64)
	if err != nil {
		return "", 0, 0, false, fmt.Sprintf("end %q is not a byte offset", yamlscan.Clip(hi))
	}
	if end <= off {
		return "", 0, 0, false, fmt.Sprintf("end %d is not after start %d", end, off)
	}
	return buf, off, end - off, true, ""
}

// --- small helpers ---

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
