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
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// SpecVersion is the spec format version this package reads and writes.
const SpecVersion = 1

// LoadFile reads the spec at path and validates it (see Load). Relative
// paths in the spec (PTX files, init files) resolve against path's directory.
// A file that cannot be read is reported as an ErrorList too, so that callers
// treat it like any other bad input.
func LoadFile(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, ErrorList{{
			Pos:  Pos{File: path},
			Msg:  "cannot read spec: " + unwrapPathError(err),
			Hint: "check the path of the spec file",
		}}
	}
	return Load(data, path, filepath.Dir(path))
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
	if dir == "" && file != "" {
		dir = filepath.Dir(file)
	}
	l := &loader{file: file, dir: dir}
	s := l.load(data)
	if err := l.errs.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// loader holds the state of one Load call.
type loader struct {
	file, dir string
	errs      ErrorList

	// Source nodes of what decode produced, for positions in check.
	stageSrc []*stageSrc
	bufSrc   []*bufferSrc
	kernSrc  []*kernelSrc
	syncNode *yaml.Node
}

func (l *loader) pos(n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: l.file}
	}
	return Pos{File: l.file, Line: n.Line, Col: n.Column}
}

// errorf records an error at n's position.
func (l *loader) errorf(n *yaml.Node, hint, format string, args ...any) {
	l.errAt(l.pos(n), hint, format, args...)
}

func (l *loader) errAt(p Pos, hint, format string, args ...any) {
	l.errs = append(l.errs, &Error{Pos: p, Msg: fmt.Sprintf(format, args...), Hint: hint})
}

// Field sets of every mapping in the format, in the order WriteYAML writes them.
var (
	specFields    = []string{"version", "name", "sync", "options", "buffers", "kernels", "stages"}
	optionFields  = []string{"strategy", "max_streams", "arena", "memory_budget"}
	bufferFields  = []string{"name", "bytes", "dtype", "shape", "where", "role", "init", "copies"}
	initFields    = []string{InitFill, InitFile, InitRandom}
	kernelFields  = []string{"name", "ptx", "entry", "params"}
	paramFields   = []string{"name", "type"}
	stageFields   = []string{"name", "kernel", "args", "grid", "block", "reads", "writes", "after", "stream", "duration_us", "waits", "event"}
	waitFields    = []string{"stage", "event", "lag"}
	accessFields  = []string{"buffer", "offset", "bytes"}
	strategies    = []string{"default", "single", "round-robin", "naive"}
	paramTypes    = []string{"ptr", "u32", "i32", "u64", "i64", "f32", "f64"}
	wheres        = []string{WhereDevice, WhereHostPinned}
	roles         = []string{RoleInput, RoleOutput, RoleTemp}
	syncModes     = []string{SyncAuto, SyncManual}
	arenaModes    = []string{ArenaPlanned, ArenaOff, ArenaStreamOrder}
	dtypeSizes    = map[string]int64{"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "u32": 4, "i8": 1, "u8": 1, "f64": 8, "i64": 8}
	dtypeNames    = []string{"f32", "f16", "bf16", "i32", "u32", "i8", "u8", "f64", "i64"}
	yamlLineError = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

// load parses data and runs both phases.
func (l *loader) load(data []byte) *Spec {
	root := l.parse(data)
	if root == nil {
		return nil
	}
	s := &Spec{File: l.file, Dir: l.dir, Sync: SyncAuto}
	l.decodeSpec(root, s)
	l.check(s)
	return s
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
		l.yamlError(err)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		l.errorf(&extra, "keep one spec per file; remove the second '---' document", "file holds more than one YAML document")
		return nil
	} else if !errors.Is(err, io.EOF) {
		l.yamlError(err)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		l.errAt(Pos{File: l.file}, "start from the example in docs/spec.md", "spec is empty")
		return nil
	}
	root = doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		l.errorf(root, "start from the example in docs/spec.md", "spec is empty")
		return nil
	}
	return root
}

// yamlError records a syntax error from yaml.v3, which reports lines only.
func (l *loader) yamlError(err error) {
	msg := err.Error()
	if m := yamlLineError.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		l.errAt(Pos{File: l.file, Line: line, Col: 1}, "fix the YAML syntax here or in the lines after it, in the block or bracket that starts here (yaml reports where that block starts): indentation, ':' after keys, closing brackets and quotes", "YAML syntax error: %s", m[2])
		return
	}
	l.errAt(Pos{File: l.file}, "fix the YAML syntax", "YAML syntax error: %s", strings.TrimPrefix(msg, "yaml: "))
}

// --- generic node helpers ---

// deref follows aliases to the node they name.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// kindName describes n's YAML type for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("the string %q", clip(n.Value))
		case "!!int":
			return "the integer " + clip(n.Value)
		case "!!float":
			return "the number " + clip(n.Value)
		case "!!bool":
			return "the boolean " + clip(n.Value)
		case "!!null":
			return "nothing (null)"
		}
		return fmt.Sprintf("%s %q", n.ShortTag(), clip(n.Value))
	}
	return "an unknown YAML node"
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// fields is a decoded mapping: the value node and key node of each field.
type fields struct {
	n    *yaml.Node
	val  map[string]*yaml.Node
	key  map[string]*yaml.Node
	what string // "buffer frame", for messages
}

// mapping checks that n is a mapping whose keys are all in known and appear
// once, and returns its fields. what names the object in messages.
func (l *loader) mapping(n *yaml.Node, what string, known []string) (*fields, bool) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		l.errorf(n, "write it as a mapping of fields: {"+strings.Join(known, ": ..., ")+": ...}", "%s must be a mapping, got %s", what, kindName(n))
		return nil, false
	}
	f := &fields{n: n, val: map[string]*yaml.Node{}, key: map[string]*yaml.Node{}, what: what}
	if contains(known, "name") {
		// Name the object in every message about it, when it has a usable name.
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := deref(n.Content[i]), deref(n.Content[i+1])
			if k.Kind == yaml.ScalarNode && k.Value == "name" && v.Kind == yaml.ScalarNode && nameProblem(v.Value) == "" {
				f.what = what + " " + v.Value
				break
			}
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			l.errorf(k, "field names are plain words such as "+known[0], "%s: field name must be a string, got %s", f.what, kindName(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			l.errorf(k, "write the fields out instead of merging them with <<", "%s: YAML merge keys (<<) are not supported", f.what)
			continue
		}
		name := k.Value
		if !contains(known, name) {
			hint := "known fields: " + strings.Join(known, ", ")
			if s := l.suggest(name, func() []string { return known }); s != "" {
				hint = fmt.Sprintf("did you mean %q? (%s)", s, hint)
			}
			l.errorf(k, hint, "%s: unknown field %q", f.what, clip(name))
			continue
		}
		if prev, dup := f.key[name]; dup {
			l.errorf(k, "remove one of them", "%s: field %q given twice (first at line %d)", f.what, name, prev.Line)
			continue
		}
		f.key[name], f.val[name] = k, v
	}
	return f, true
}

// get returns field name's value node, or nil.
func (f *fields) get(name string) *yaml.Node { return f.val[name] }

// require returns field name's value node, reporting its absence.
func (l *loader) require(f *fields, name, hint string) *yaml.Node {
	v := f.val[name]
	if v == nil {
		l.errorf(f.n, hint, "%s: missing required field %q", f.what, name)
	}
	return v
}

// list checks that n is a sequence and returns its items (aliases followed).
func (l *loader) list(n *yaml.Node, what, hint string) ([]*yaml.Node, bool) {
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		l.errorf(n, hint, "%s must be a list, got %s", what, kindName(n))
		return nil, false
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = deref(c)
	}
	return out, true
}

// str returns n's value if it is a string scalar.
func (l *loader) str(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
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
		l.errorf(n, hint, "%s: unknown value %q", what, clip(v))
		return "", false
	}
	return v, true
}

var integerText = regexp.MustCompile(`^[-+]?[0-9]+$`)

// int64Val returns n's value if it is an integer that fits in int64.
func (l *loader) int64Val(n *yaml.Node, what string) (int64, bool) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" && integerText.MatchString(n.Value) {
		l.errorf(n, "use a value below 2^63", "%s: %s does not fit in a 64-bit integer", what, clip(n.Value))
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		l.errorf(n, "write a whole number such as 4096", "%s must be an integer, got %s", what, kindName(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		l.errorf(n, "use a value below 2^63", "%s: %s does not fit in a 64-bit integer", what, clip(n.Value))
		return 0, false
	}
	return v, true
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
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		l.errorf(n, "write a number such as 12.5", "%s must be a number, got %s", what, kindName(n))
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		l.errorf(n, "write a finite number such as 12.5", "%s must be a finite number, got %s", what, clip(n.Value))
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
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
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
	if msg := nameProblem(v); msg != "" {
		l.errorf(n, "names are non-empty and hold no spaces, brackets, commas or control characters (letters, digits and _ . - / : are fine)", "%s %q %s", what, clip(v), msg)
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
		}
	}
	return ""
}

// --- decoding of each part ---

func (l *loader) decodeSpec(root *yaml.Node, s *Spec) {
	f, ok := l.mapping(root, "spec", specFields)
	if !ok {
		return
	}
	if v := l.require(f, "version", "start the spec with: version: 1"); v != nil {
		if n, ok := l.int64Val(v, "version"); ok {
			if n != SpecVersion {
				l.errorf(v, "set version: 1", "version %d is not supported; this dagrun reads version %d", n, SpecVersion)
			} else {
				s.Version = int(n)
			}
		}
	}
	if v := f.get("name"); v != nil {
		if n, ok := l.name(v, "spec name"); ok {
			s.Name = n
		}
	} else {
		s.Name = defaultName(l.file)
	}
	if v := f.get("sync"); v != nil {
		l.syncNode = v
		if m, ok := l.oneOf(v, "sync", syncModes); ok {
			s.Sync = m
		}
	}
	if v := f.get("options"); v != nil {
		l.decodeOptions(v, &s.Options)
	}
	if v := f.get("buffers"); v != nil && !isNull(v) {
		if items, ok := l.list(v, "buffers", "write buffers as a list: buffers: [{name: x, bytes: 4096}]"); ok {
			for _, it := range items {
				b, src := l.decodeBuffer(it)
				s.Buffers = append(s.Buffers, b)
				l.bufSrc = append(l.bufSrc, src)
			}
		}
	}
	if v := f.get("kernels"); v != nil && !isNull(v) {
		if items, ok := l.list(v, "kernels", "write kernels as a list: kernels: [{name: k, ptx: k.ptx, entry: k}]"); ok {
			for _, it := range items {
				k, src := l.decodeKernel(it)
				s.Kernels = append(s.Kernels, k)
				l.kernSrc = append(l.kernSrc, src)
			}
		}
	}
	v := l.require(f, "stages", "add a list of stages: stages: [{name: a, kernel: spin}]")
	if v != nil {
		if items, ok := l.list(v, "stages", "write stages as a list of mappings"); ok {
			if len(items) == 0 {
				l.errorf(v, "add at least one stage", "stages is empty")
			}
			for _, it := range items {
				st, src := l.decodeStage(it)
				s.Stages = append(s.Stages, st)
				l.stageSrc = append(l.stageSrc, src)
			}
		}
	}
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

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

func (l *loader) decodeOptions(n *yaml.Node, o *Options) {
	f, ok := l.mapping(n, "options", optionFields)
	if !ok {
		return
	}
	if v := f.get("strategy"); v != nil {
		if s, ok := l.oneOf(v, "options: strategy", strategies); ok {
			o.Strategy = s
		}
	}
	if v := f.get("max_streams"); v != nil {
		if m, ok := l.intIn(v, "options: max_streams", 0, math.MaxInt32); ok {
			o.MaxStreams = int(m)
		}
	}
	if v := f.get("arena"); v != nil {
		if s, ok := l.oneOf(v, "options: arena", arenaModes); ok {
			o.Arena = s
		}
	}
	if v := f.get("memory_budget"); v != nil {
		if v.Kind == yaml.ScalarNode && v.Value == "auto" {
			o.MemoryBudget = MemoryBudgetAuto
		} else if m, ok := l.intIn(v, "options: memory_budget (bytes, or auto)", 0, math.MaxInt64); ok {
			o.MemoryBudget = m
		}
	}
}

// bufferSrc keeps the nodes of a buffer for check.
type bufferSrc struct {
	n        *yaml.Node
	name     *yaml.Node
	init     *yaml.Node // the init value node, if any
	sizeOK   bool       // Bytes is known and valid
	initFile *yaml.Node // the file: value node
}

func (l *loader) decodeBuffer(n *yaml.Node) (BufferSpec, *bufferSrc) {
	b := BufferSpec{Pos: l.pos(n), Where: WhereDevice, Role: RoleTemp, Init: Init{Kind: InitZeros}}
	src := &bufferSrc{n: n}
	f, ok := l.mapping(n, "buffer", bufferFields)
	if !ok {
		return b, src
	}
	if v := l.require(f, "name", "give the buffer a name: {name: x, bytes: 4096}"); v != nil {
		src.name = v
		if s, ok := l.name(v, "buffer name"); ok {
			b.Name = s
			f.what = "buffer " + s
		}
	}
	what := f.what
	bytesN, dtypeN, shapeN := f.get("bytes"), f.get("dtype"), f.get("shape")
	sizeOK := true
	var given int64
	if bytesN != nil {
		given, ok = l.intIn(bytesN, what+": bytes", 1, math.MaxInt64)
		sizeOK = sizeOK && ok
	}
	var computed int64
	switch {
	case dtypeN == nil && shapeN == nil:
		if bytesN == nil {
			l.errorf(f.n, "give bytes: N, or dtype: and shape: (e.g. dtype: f32, shape: [3, 64, 64])", "%s: missing size", what)
			sizeOK = false
		}
	case dtypeN == nil:
		l.errorf(shapeN, "add dtype: (one of "+strings.Join(dtypeNames, ", ")+")", "%s: shape needs a dtype", what)
		sizeOK = false
	case shapeN == nil:
		l.errorf(dtypeN, "add shape: [d0, d1, ...] in elements", "%s: dtype needs a shape", what)
		sizeOK = false
	default:
		dt, ok1 := l.oneOf(dtypeN, what+": dtype", dtypeNames)
		shape, ok2 := l.decodeShape(shapeN, what+": shape")
		if ok1 && ok2 {
			b.DType, b.Shape = dt, shape
			total, ok := mulChecked(dtypeSizes[dt], shape)
			switch {
			case !ok:
				l.errorf(shapeN, "use smaller dimensions", "%s: size %s × %v overflows int64", what, dt, shape)
				sizeOK = false
			case bytesN != nil && sizeOK && total != given:
				l.errorf(bytesN, "drop bytes: (dtype and shape determine it) or fix it", "%s: bytes %d disagrees with dtype %s × shape %v = %d bytes", what, given, dt, shape, total)
				sizeOK = false
			default:
				computed = total
			}
		} else {
			sizeOK = false
		}
	}
	if sizeOK {
		if computed != 0 {
			b.Bytes = computed
		} else {
			b.Bytes = given
		}
	}
	src.sizeOK = sizeOK
	if v := f.get("where"); v != nil {
		if w, ok := l.oneOf(v, what+": where", wheres); ok {
			b.Where = w
		}
	}
	if v := f.get("role"); v != nil {
		if r, ok := l.oneOf(v, what+": role", roles); ok {
			b.Role = r
		}
	}
	if v := f.get("init"); v != nil {
		src.init = v
		l.decodeInit(v, what, &b.Init, src)
	}
	if v := f.get("copies"); v != nil {
		if c, ok := l.intIn(v, what+": copies", 1, 1<<20); ok {
			b.Copies = int(c)
		}
	}
	return b, src
}

// decodeShape reads a list of positive dimensions (may be empty: a scalar).
func (l *loader) decodeShape(n *yaml.Node, what string) ([]int64, bool) {
	items, ok := l.list(n, what, "write the shape as a list of element counts: [3, 64, 64]")
	if !ok {
		return nil, false
	}
	shape := make([]int64, 0, len(items))
	good := true
	for _, it := range items {
		d, ok := l.int64Val(it, what)
		if !ok {
			good = false
			continue
		}
		if d <= 0 {
			l.errorf(it, "every dimension must be ≥ 1", "%s: dimension %d is not positive", what, d)
			good = false
			continue
		}
		shape = append(shape, d)
	}
	return shape, good
}

// mulChecked returns size × the product of shape, reporting int64 overflow.
func mulChecked(size int64, shape []int64) (int64, bool) {
	total := size
	for _, d := range shape {
		if d != 0 && total > math.MaxInt64/d {
			return 0, false
		}
		total *= d
	}
	return total, true
}

const initHint = "write init: zeros, init: {fill: 1.5}, init: {file: data.bin} or init: {random: 7}"

func (l *loader) decodeInit(n *yaml.Node, what string, in *Init, src *bufferSrc) {
	what += ": init"
	if n.Kind == yaml.ScalarNode {
		if n.ShortTag() == "!!str" && n.Value == InitZeros {
			in.Kind = InitZeros
			return
		}
		l.errorf(n, initHint, "%s: unknown initial contents %s", what, kindName(n))
		return
	}
	f, ok := l.mapping(n, what, initFields)
	if !ok {
		return
	}
	if len(f.val) != 1 {
		if len(f.val) > 1 {
			l.errorf(f.n, initHint, "%s: give exactly one of fill, file, random", what)
		} else if len(n.Content) == 0 {
			l.errorf(f.n, initHint, "%s: empty mapping", what)
		}
		return
	}
	switch {
	case f.get(InitFill) != nil:
		v := f.get(InitFill)
		x, ok := l.num(v, what+": fill")
		if !ok {
			return
		}
		if math.Abs(x) > math.MaxFloat32 {
			l.errorf(v, "use a value within float32 range (±3.4e38)", "%s: fill value %s overflows float32", what, v.Value)
			return
		}
		*in = Init{Kind: InitFill, Value: x}
	case f.get(InitFile) != nil:
		v := f.get(InitFile)
		p, ok := l.str(v, what+": file")
		if !ok {
			return
		}
		if p == "" {
			l.errorf(v, "give the path of a raw file, relative to the spec", "%s: file path is empty", what)
			return
		}
		*in = Init{Kind: InitFile, Path: p}
		src.initFile = v
	case f.get(InitRandom) != nil:
		v := f.get(InitRandom)
		seed, ok := l.int64Val(v, what+": random seed")
		if !ok {
			return
		}
		*in = Init{Kind: InitRandom, Seed: seed}
	}
}

// kernelSrc keeps the nodes of a kernel for check.
type kernelSrc struct {
	n, name, ptx, entry *yaml.Node
	ok                  bool // decoded without errors (worth checking the PTX)
}

func (l *loader) decodeKernel(n *yaml.Node) (KernelSpec, *kernelSrc) {
	k := KernelSpec{Pos: l.pos(n)}
	src := &kernelSrc{n: n}
	f, ok := l.mapping(n, "kernel", kernelFields)
	if !ok {
		return k, src
	}
	before := len(l.errs)
	if v := l.require(f, "name", "give the kernel a name: {name: k, ptx: k.ptx, entry: k}"); v != nil {
		src.name = v
		if s, ok := l.name(v, "kernel name"); ok {
			k.Name = s
			f.what = "kernel " + s
		}
	}
	what := f.what
	if v := l.require(f, "ptx", "give the PTX file, relative to the spec: ptx: kernels/my.ptx"); v != nil {
		src.ptx = v
		if s, ok := l.str(v, what+": ptx"); ok {
			if s == "" {
				l.errorf(v, "give the PTX file, relative to the spec", "%s: ptx path is empty", what)
			}
			k.PTX = s
		}
	}
	if v := l.require(f, "entry", "give the .entry name of the kernel in the PTX file: entry: my_kernel"); v != nil {
		src.entry = v
		if s, ok := l.str(v, what+": entry"); ok {
			if s == "" {
				l.errorf(v, "give the .entry name of the kernel in the PTX file", "%s: entry is empty", what)
			}
			k.Entry = s
		}
	}
	if v := f.get("params"); v != nil && !isNull(v) {
		items, ok := l.list(v, what+": params", "write params as a list: [{name: x, type: ptr}, {name: n, type: u32}]")
		if ok {
			seen := map[string]int{}
			for _, it := range items {
				pf, ok := l.mapping(it, what+": param", paramFields)
				if !ok {
					continue
				}
				var p ParamSpec
				if pv := l.require(pf, "name", "give the parameter a name: {name: x, type: ptr}"); pv != nil {
					if s, ok := l.name(pv, what+": param name"); ok {
						if line, dup := seen[s]; dup {
							l.errorf(pv, "give each parameter its own name", "%s: parameter %q declared twice (first at line %d)", what, s, line)
						}
						seen[s] = pv.Line
						p.Name = s
					}
				}
				if tv := l.require(pf, "type", "give the parameter a type: one of "+strings.Join(paramTypes, ", ")); tv != nil {
					if s, ok := l.oneOf(tv, what+": param type", paramTypes); ok {
						p.Type = s
					}
				}
				k.Params = append(k.Params, p)
			}
		}
	}
	src.ok = len(l.errs) == before
	return k, src
}

// stageSrc keeps the nodes of a stage for check.
type stageSrc struct {
	n       *yaml.Node
	f       *fields
	argKeys map[string]*yaml.Node
	argVals map[string]*yaml.Node
	reads   []*accessSrc // parallel to StageSpec.Reads
	writes  []*accessSrc // parallel to StageSpec.Writes
	after   []*yaml.Node // parallel to StageSpec.After
	waits   []*yaml.Node // parallel to StageSpec.Waits
	waitFor []*yaml.Node // parallel to StageSpec.WaitFor
}

// accessSrc is an access before its buffer is resolved.
type accessSrc struct {
	n        *yaml.Node
	ok       bool // decoded without errors
	hasBytes bool // false: to the end of the buffer
}

func (l *loader) decodeStage(n *yaml.Node) (StageSpec, *stageSrc) {
	st := StageSpec{Pos: l.pos(n)}
	src := &stageSrc{n: n}
	f, ok := l.mapping(n, "stage", stageFields)
	if !ok {
		return st, src
	}
	src.f = f
	if v := l.require(f, "name", "give the stage a name: {name: prep, kernel: mix}"); v != nil {
		if s, ok := l.name(v, "stage name"); ok {
			st.Name = s
			f.what = "stage " + s
		}
	}
	what := f.what
	if v := l.require(f, "kernel", "name a built-in ("+strings.Join(Builtins, ", ")+") or a kernel from kernels:"); v != nil {
		if s, ok := l.name(v, what+": kernel"); ok {
			st.Kernel = s
		}
	}
	if v := f.get("args"); v != nil && !isNull(v) {
		st.Args = l.decodeArgs(v, what, src)
	}
	if v := f.get("grid"); v != nil {
		st.Launch.Grid = l.decodeDim3(v, what+": grid")
	}
	if v := f.get("block"); v != nil {
		st.Launch.Block = l.decodeDim3(v, what+": block")
	}
	if v := f.get("reads"); v != nil && !isNull(v) {
		st.Reads, src.reads = l.decodeAccesses(v, what+": reads")
	}
	if v := f.get("writes"); v != nil && !isNull(v) {
		st.Writes, src.writes = l.decodeAccesses(v, what+": writes")
	}
	if v := f.get("after"); v != nil && !isNull(v) {
		st.After, src.after = l.decodeNames(v, what+": after", "write after as a list of earlier stage names: after: [prep]")
	}
	if v := f.get("stream"); v != nil {
		if s, ok := l.name(v, what+": stream"); ok {
			st.Stream = s
		}
	}
	if v := f.get("duration_us"); v != nil {
		if d, ok := l.nonNegNum(v, what+": duration_us"); ok {
			st.DurationUS = d
		}
	}
	if v := f.get("waits"); v != nil && !isNull(v) {
		st.Waits, src.waits, st.WaitFor, src.waitFor = l.decodeWaits(v, what+": waits")
	}
	if v := f.get("event"); v != nil {
		if s, ok := l.name(v, what+": event"); ok {
			st.Event = s
		}
	}
	return st, src
}

const waitsHint = "write waits as a list of earlier stage names, {stage: NAME, lag: N} or {event: NAME}: waits: [prep, {stage: d2h, lag: 1}]"

// decodeWaits reads a waits list: stage names, and mappings with a stage
// or an event and an optional lag.
func (l *loader) decodeWaits(n *yaml.Node, what string) ([]string, []*yaml.Node, []WaitSpec, []*yaml.Node) {
	items, ok := l.list(n, what, waitsHint)
	if !ok {
		return nil, nil, nil, nil
	}
	var names []string
	var nodes, wnodes []*yaml.Node
	var ws []WaitSpec
	for _, it := range items {
		if it.Kind != yaml.MappingNode {
			if s, ok := l.name(it, what); ok {
				names = append(names, s)
				nodes = append(nodes, it)
			}
			continue
		}
		f, ok := l.mapping(it, what+" entry", waitFields)
		if !ok {
			continue
		}
		w := WaitSpec{Pos: l.pos(it)}
		if v := f.get("stage"); v != nil {
			w.Stage, _ = l.name(v, what+": stage")
		}
		if v := f.get("event"); v != nil {
			w.Event, _ = l.name(v, what+": event")
		}
		if (w.Stage == "") == (w.Event == "") && (f.get("stage") == nil) == (f.get("event") == nil) {
			l.errorf(it, waitsHint, "%s: a wait names a stage or an event (exactly one)", what)
			continue
		}
		if v := f.get("lag"); v != nil {
			if lag, ok := l.intIn(v, what+": lag", 0, 1<<20); ok {
				w.Lag = int(lag)
			}
		}
		ws = append(ws, w)
		wnodes = append(wnodes, it)
	}
	return names, nodes, ws, wnodes
}

// decodeArgs reads a mapping of scalar arguments: integers become int,
// other numbers float64, strings string.
func (l *loader) decodeArgs(n *yaml.Node, what string, src *stageSrc) map[string]any {
	what += ": args"
	if n.Kind != yaml.MappingNode {
		l.errorf(n, "write args as a mapping: args: {a: 2.0}", "%s must be a mapping, got %s", what, kindName(n))
		return nil
	}
	args := map[string]any{}
	src.argKeys, src.argVals = map[string]*yaml.Node{}, map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			l.errorf(k, "argument names are plain words", "%s: argument name must be a string, got %s", what, kindName(k))
			continue
		}
		if prev, dup := src.argKeys[k.Value]; dup {
			l.errorf(k, "remove one of them", "%s: argument %q given twice (first at line %d)", what, k.Value, prev.Line)
			continue
		}
		src.argKeys[k.Value], src.argVals[k.Value] = k, v
		if v.Kind != yaml.ScalarNode {
			l.errorf(v, "argument values are numbers or buffer names", "%s: %s must be a number or a string, got %s", what, k.Value, kindName(v))
			continue
		}
		switch v.ShortTag() {
		case "!!int":
			var x int
			if err := v.Decode(&x); err != nil {
				l.errorf(v, "use a value below 2^63", "%s: %s: %s does not fit in a 64-bit integer", what, k.Value, clip(v.Value))
				continue
			}
			args[k.Value] = x
		case "!!float":
			x, ok := l.num(v, what+": "+k.Value)
			if !ok {
				continue
			}
			args[k.Value] = x
		case "!!str":
			args[k.Value] = v.Value
		default:
			l.errorf(v, "argument values are numbers or buffer names; quote a string", "%s: %s must be a number or a string, got %s", what, k.Value, kindName(v))
		}
	}
	if len(args) == 0 {
		return nil
	}
	return args
}

// decodeDim3 reads a launch dimension: a list of 1 to 3 positive integers;
// missing trailing dimensions are 1.
func (l *loader) decodeDim3(n *yaml.Node, what string) [3]int {
	var d [3]int
	items, ok := l.list(n, what, "write a list of 1 to 3 positive integers: [256, 1, 1]")
	if !ok {
		return d
	}
	if len(items) < 1 || len(items) > 3 {
		l.errorf(n, "write a list of 1 to 3 positive integers: [256, 1, 1]", "%s has %d dimensions", what, len(items))
		return d
	}
	d = [3]int{1, 1, 1}
	for i, it := range items {
		v, ok := l.intIn(it, what, 1, math.MaxInt32)
		if !ok {
			return [3]int{}
		}
		d[i] = int(v)
	}
	return d
}

// decodeNames reads a list of stage names.
func (l *loader) decodeNames(n *yaml.Node, what, hint string) ([]string, []*yaml.Node) {
	items, ok := l.list(n, what, hint)
	if !ok {
		return nil, nil
	}
	var names []string
	var nodes []*yaml.Node
	for _, it := range items {
		s, ok := l.name(it, what)
		if !ok {
			continue
		}
		names = append(names, s)
		nodes = append(nodes, it)
	}
	return names, nodes
}

const accessHint = "write a buffer name (x), a byte range (x[0:512]) or {buffer: x, offset: 0, bytes: 512}"

// decodeAccesses reads a list of accesses. Offsets and Bytes are resolved
// against the buffer sizes in check.
func (l *loader) decodeAccesses(n *yaml.Node, what string) ([]Access, []*accessSrc) {
	items, ok := l.list(n, what, "write a list: [x, y[0:512]]")
	if !ok {
		return nil, nil
	}
	var accs []Access
	var srcs []*accessSrc
	for _, it := range items {
		a, src := l.decodeAccess(it, what)
		accs = append(accs, a)
		srcs = append(srcs, src)
	}
	return accs, srcs
}

// decodeAccess reads one access: "x", "x[a:b]", "x[a:]", "x[:b]", or
// {buffer: x, offset: a, bytes: n}.
func (l *loader) decodeAccess(n *yaml.Node, what string) (Access, *accessSrc) {
	a := Access{Pos: l.pos(n)}
	src := &accessSrc{n: n}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() != "!!str" {
			l.errorf(n, accessHint, "%s: access must be a buffer name, got %s", what, kindName(n))
			return a, src
		}
		buf, off, nbytes, hasBytes, msg := parseShortAccess(n.Value)
		if msg != "" {
			l.errorf(n, accessHint, "%s: bad access %q: %s", what, clip(n.Value), msg)
			return a, src
		}
		if !l.validName(n, what+": buffer", buf) {
			return a, src
		}
		a.Buffer, a.Offset, a.Bytes, src.hasBytes = buf, off, nbytes, hasBytes
		src.ok = true
	case yaml.MappingNode:
		f, ok := l.mapping(n, what+": access", accessFields)
		if !ok {
			return a, src
		}
		good := true
		if v := l.require(f, "buffer", accessHint); v != nil {
			if s, ok := l.name(v, what+": buffer"); ok {
				a.Buffer = s
			} else {
				good = false
			}
		} else {
			good = false
		}
		if v := f.get("offset"); v != nil {
			if o, ok := l.int64Val(v, what+": offset"); ok {
				if o < 0 {
					l.errorf(v, "offsets are ≥ 0 bytes from the start of the buffer", "%s: offset %d is negative", what, o)
					good = false
				}
				a.Offset = o
			} else {
				good = false
			}
		}
		if v := f.get("bytes"); v != nil {
			if b, ok := l.int64Val(v, what+": bytes"); ok {
				if b <= 0 {
					l.errorf(v, "an access covers at least one byte; leave bytes out to mean 'to the end of the buffer'", "%s: bytes %d is not positive", what, b)
					good = false
				}
				a.Bytes = b
				src.hasBytes = true
			} else {
				good = false
			}
		}
		src.ok = good
	default:
		l.errorf(n, accessHint, "%s: access must be a buffer name or a mapping, got %s", what, kindName(n))
	}
	return a, src
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
			return "", 0, 0, false, fmt.Sprintf("start %q is not a byte offset", clip(lo))
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
		return "", 0, 0, false, fmt.Sprintf("end %q is not a byte offset", clip(hi))
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
