package dag

// A streaming parser for JSON and for the plain subset of YAML that
// machine-written specs (WriteYAML's output) and most hand-written ones
// use: block mappings and lists, flow lists and mappings, one-line plain
// and quoted scalars, comments. It builds the same yaml.Node trees as
// yaml.v3 (kinds, tags, values, line:column), but hands each item of the
// top-level lists (buffers, kernels, stages) to a callback once it is
// parsed, and reuses the item's nodes for later ones: only the nodes of a
// few batches of items are alive at a time, where yaml.v3 holds the whole
// document's (about 4 KB per stage). The callback runs on a goroutine of
// its own, a batch of pipeBatch items at a time in file order, while the
// scanner parses the next batch; scan returns once it has taken every
// item, whether the scan succeeded or not.
//
// CRLF line endings are read as LF ones (the loader passes the text with
// LF ones), and one document start marker (---) may head the file.
// For YAML, anything outside the subset (anchors and aliases, tags, block
// scalars, multi-line scalars, other document markers and directives,
// tabs, a CR that does not end a line, characters yaml.v3 does not take as
// printable, JSON's escapes that yaml.v3 refuses, syntax errors) makes the
// scanner give up, and Load parses the file with
// yaml.v3 instead, so that every YAML file means what yaml.v3 says and
// gets its messages. For JSON (RFC 8259) the scanner is the parser and
// reports syntax errors itself.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// errOutsideSubset stops the scanner: the YAML file is outside its subset.
var errOutsideSubset = errors.New("outside the scanner's YAML subset")

// subsetError is errOutsideSubset at the place the scanner gave up (line
// and column, 0 when the text as a whole is outside the subset).
type subsetError struct{ line, col int }

func (e *subsetError) Error() string { return errOutsideSubset.Error() }
func (e *subsetError) Unwrap() error { return errOutsideSubset }

// jsonError is a JSON syntax error at a position.
type jsonError struct {
	at   at
	msg  string
	hint string // "": the syntax hint
}

func (e *jsonError) Error() string { return e.msg }

// scanner is the state of one scan.
type scanner struct {
	data string // scalars are substrings of it
	i    int
	json bool
	// yamlJSON is set for YAML text that starts like JSON (scanned with
	// json set): what JSON and yaml.v3 read differently (\/, UTF-16
	// surrogates, numbers past float64's range, a CR that does not end
	// a line) is left to yaml.v3.
	yamlJSON bool

	line      int // line of i (1-based)
	lineStart int // offset of line's first byte
	colOff    int // offset whose column is col
	col       int // column of colOff (1-based, in characters)

	// onItem receives each item of the root mapping's list-valued fields
	// named in streamKeys; nil: build whole trees.
	onItem func(key string, list, item *yaml.Node)
	// slab holds the nodes of the item being parsed; reused per item.
	slab     [][]yaml.Node
	slabAt   int // chunk
	slabUse  int // nodes used in chunk slabAt
	inItem   bool
	ptrs     []*yaml.Node // content slab of the items (8 slots per collection; append moves larger ones out)
	lastMark int          // offset of the node marked last (a key's start, at its ':')
	// rootKeys are the root mapping's keys seen so far.
	rootKeys map[string]bool
	// head is set until the document's first content line: there a
	// document start marker (---) alone on its line starts the one
	// document, as some writers put at the head of a file.
	head bool

	// The pipeline to onItem's goroutine: batch is the items parsed into
	// the current node set (slab, ptrs) since the last hand-off; work
	// takes full sets to the goroutine, which gives them back on free
	// and closes decoded when work is closed and every item is taken.
	batch   []itemRef
	work    chan *nodeSet
	free    chan *nodeSet
	decoded chan struct{}
}

// itemRef is a parsed item of a streamed list, for onItem.
type itemRef struct {
	key        string
	list, item *yaml.Node
}

// nodeSet is a batch of parsed items and the slabs their nodes are in.
type nodeSet struct {
	slab  [][]yaml.Node
	ptrs  []*yaml.Node
	items []itemRef
}

// pipeBatch is how many items the scanner hands onItem's goroutine at a
// time: the goroutines meet once per batch, not per item.
const pipeBatch = 256

// ptrsCap is the capacity of an item content slab (pointers).
const ptrsCap = 1 << 14

// streamKeys are the root fields whose list items are streamed.
var streamKeys = []string{"buffers", "kernels", "stages"}

const slabChunk = 256

// scan parses data as one document and returns its root, or
// errOutsideSubset (YAML) or a *jsonError (JSON). yamlJSON (with json)
// scans YAML text that starts like JSON, giving up where yaml.v3 reads it
// otherwise (scanner.yamlJSON).
func scan(data string, json, yamlJSON bool, onItem func(key string, list, item *yaml.Node)) (root *yaml.Node, err error) {
	p := &scanner{data: data, json: json, yamlJSON: json && yamlJSON, line: 1, col: 1, onItem: onItem}
	defer func() {
		if r := recover(); r != nil {
			switch e := r.(type) {
			case *jsonError:
				root, err = nil, e
			case error:
				if errors.Is(e, errOutsideSubset) {
					root, err = nil, e
					return
				}
				panic(r)
			default:
				panic(r)
			}
		}
	}()
	if onItem != nil {
		p.startPipe()
		defer p.finishPipe() // before the recover above: onItem is done when scan returns
	}
	if !json {
		// The subset is printable ASCII and newlines; tabs, CR, other
		// control characters and non-ASCII text go to yaml.v3.
		if !subsetText(data) {
			return nil, errOutsideSubset
		}
	} else if !utf8.ValidString(data) {
		p.failInvalidUTF8()
	}
	if json {
		// A leading byte order mark is ignored (RFC 8259 §8.1 allows it;
		// editors write one), as YAML does; it takes no column.
		if strings.HasPrefix(data, "\ufeff") {
			p.i = len("\ufeff")
			p.lineStart, p.colOff = p.i, p.i
		}
		p.skipJSONSpace()
		if p.i == len(p.data) {
			p.fail("the file is empty")
		}
		root = p.flowValue(0, true)
		p.skipJSONSpace()
		if p.i < len(p.data) {
			p.fail("unexpected %s after the end of the document", p.what())
		}
		return root, nil
	}
	p.head = true
	ind := p.nextLine()
	if ind != 0 {
		p.bail() // empty, or an indented root: leave it to yaml.v3
	}
	root = p.blockValue(0, 0, true)
	if p.nextLine() >= 0 {
		p.bail()
	}
	return root, nil
}

func (p *scanner) bail() { panic(&subsetError{line: p.line, col: p.i - p.lineStart + 1}) }

// yamlText reports whether the text scanned is YAML (yaml.v3's reading
// decides), also where it is scanned as JSON (yamlJSON).
func (p *scanner) yamlText() bool { return !p.json || p.yamlJSON }

// subsetText reports whether data is text the scanner reads as yaml.v3
// does: newlines and characters yaml.v3 takes as printable (no tabs, CR,
// byte order marks, or the Unicode line separators YAML 1.1 breaks lines at).
func subsetText(data string) bool {
	for i := 0; i < len(data); {
		if i+8 <= len(data) && asciiText8(data[i:i+8]) {
			i += 8
			continue
		}
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

// asciiText8 reports whether the 8 bytes of w are all printable ASCII
// (0x20 to 0x7e) or newlines, testing them at once (SWAR: in each byte
// below 0x80, adding a constant below 0x80 carries into the byte's top bit
// only, and never into the next byte).
func asciiText8(w string) bool {
	const hi, lo = 0x8080808080808080, 0x7f7f7f7f7f7f7f7f
	x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
	if x&hi != 0 {
		return false // non-ASCII: the caller decodes it
	}
	printable := (x + 0x6060606060606060) & hi       // top bit: byte ≥ 0x20
	newline := ^((x ^ 0x0a0a0a0a0a0a0a0a) + lo) & hi // top bit: byte is '\n'
	notDel := ((x ^ 0x7f7f7f7f7f7f7f7f) + lo) & hi   // top bit: byte is not 0x7f
	return (printable|newline)&notDel == hi
}

// fail reports a JSON syntax error at the current position, or gives up
// on YAML.
func (p *scanner) fail(format string, args ...any) { p.failAt(p.mark(), format, args...) }

// failAt is fail with the error at a.
func (p *scanner) failAt(a at, format string, args ...any) {
	if !p.json {
		p.bail()
	}
	panic(&jsonError{at: a, msg: fmt.Sprintf(format, args...)})
}

// failInvalidUTF8 reports the first byte of data that is not UTF-8, at
// its line and column.
func (p *scanner) failInvalidUTF8() {
	k := 0
	for k < len(p.data) {
		r, size := utf8.DecodeRuneInString(p.data[k:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		k += size
	}
	p.line = 1 + strings.Count(p.data[:k], "\n")
	p.lineStart = strings.LastIndexByte(p.data[:k], '\n') + 1
	if p.lineStart == 0 && strings.HasPrefix(p.data, "\ufeff") {
		p.lineStart = len("\ufeff") // a leading byte order mark takes no column
	}
	p.colOff, p.col, p.i = p.lineStart, 1, k
	p.fail("the file is not valid UTF-8 (byte %#x)", p.data[k])
}

// what names the byte at i for messages.
func (p *scanner) what() string {
	if p.i >= len(p.data) {
		return "end of file"
	}
	r, _ := utf8.DecodeRuneInString(p.data[p.i:])
	return strconv.QuoteRune(r)
}

// mark is the position of i.
func (p *scanner) mark() at {
	p.lastMark = p.i
	if p.colOff < p.lineStart || p.colOff > p.i {
		p.colOff, p.col = p.lineStart, 1
	}
	p.col += utf8.RuneCountInString(p.data[p.colOff:p.i])
	p.colOff = p.i
	return at{int32(p.line), int32(p.col)}
}

// newline consumes the '\n' at i.
func (p *scanner) newline() {
	p.i++
	p.line++
	p.lineStart, p.colOff, p.col = p.i, p.i, 1
}

func (p *scanner) node(kind yaml.Kind, a at) *yaml.Node {
	var n *yaml.Node
	if p.inItem {
		if p.slabUse == slabChunk {
			p.slabAt, p.slabUse = p.slabAt+1, 0
		}
		if p.slabAt == len(p.slab) {
			p.slab = append(p.slab, make([]yaml.Node, slabChunk))
		}
		n = &p.slab[p.slabAt][p.slabUse]
		p.slabUse++
		*n = yaml.Node{}
	} else {
		n = new(yaml.Node)
	}
	n.Kind, n.Line, n.Column = kind, int(a.line), int(a.col)
	switch kind {
	case yaml.MappingNode:
		n.Tag = "!!map"
	case yaml.SequenceNode:
		n.Tag = "!!seq"
	}
	return n
}

// add appends nodes to a collection's content; inside an item, content
// lives in the item's pointer slab: 8 slots to start with, and twice as
// many carved from the slab whenever it fills (up to slabSlotMax; larger
// collections grow by append), so that a stage of many fields costs no
// allocation of its own.
func (p *scanner) add(content []*yaml.Node, nodes ...*yaml.Node) []*yaml.Node {
	if p.inItem && (content == nil || len(content)+len(nodes) > cap(content) && cap(content) < slabSlotMax) {
		n := 8
		if content != nil {
			n = 2 * cap(content)
		}
		if len(p.ptrs)+n > cap(p.ptrs) {
			p.ptrs = make([]*yaml.Node, 0, ptrsCap)
		}
		slot := p.ptrs[len(p.ptrs) : len(p.ptrs) : len(p.ptrs)+n]
		p.ptrs = p.ptrs[:len(p.ptrs)+n]
		content = append(slot, content...)
	}
	return append(content, nodes...)
}

// slabSlotMax is the largest content slot add carves from a pointer slab.
const slabSlotMax = 256

// item adds a parsed item of list to the batch for onItem, and hands the
// batch over when it is full (pipeBatch items, or its content slab nearly
// is).
func (p *scanner) item(key string, list, n *yaml.Node) {
	p.batch = append(p.batch, itemRef{key, list, n})
	if len(p.batch) == pipeBatch || cap(p.ptrs) > 0 && len(p.ptrs) > cap(p.ptrs)-ptrsCap/16 {
		p.handOff()
		s := <-p.free
		p.slab, p.ptrs, p.batch = s.slab, s.ptrs, s.items
		p.slabAt, p.slabUse = 0, 0
	}
}

// startPipe starts onItem's goroutine, with two node sets to spare
// besides the scanner's own.
func (p *scanner) startPipe() {
	p.work = make(chan *nodeSet, 2)
	p.free = make(chan *nodeSet, 3)
	p.decoded = make(chan struct{})
	p.batch = make([]itemRef, 0, pipeBatch)
	for range 2 {
		p.free <- &nodeSet{items: make([]itemRef, 0, pipeBatch)}
	}
	go func(work <-chan *nodeSet) {
		defer close(p.decoded)
		for s := range work {
			for _, it := range s.items {
				p.onItem(it.key, it.list, it.item)
			}
			clear(s.items) // the nodes stay in the slab until reused
			clear(s.ptrs)
			s.items, s.ptrs = s.items[:0], s.ptrs[:0]
			p.free <- s
		}
	}(p.work)
}

// handOff sends the current batch to onItem's goroutine.
func (p *scanner) handOff() {
	if len(p.batch) > 0 {
		p.work <- &nodeSet{slab: p.slab, ptrs: p.ptrs, items: p.batch}
		p.slab, p.ptrs, p.batch = nil, nil, nil
	}
}

// finishPipe hands over the last batch and waits until onItem has taken
// every item.
func (p *scanner) finishPipe() {
	p.handOff()
	close(p.work)
	<-p.decoded
}

// streamed reports whether the value of key at depth is streamed.
func (p *scanner) streamed(depth int, key *yaml.Node) bool {
	if p.onItem == nil || depth != 1 || key.Kind != yaml.ScalarNode {
		return false
	}
	// Only a field's first value streams: the loader reports the second
	// and ignores it, as it does with yaml.v3's tree.
	if p.rootKeys == nil {
		p.rootKeys = map[string]bool{}
	}
	if p.rootKeys[key.Value] {
		return false
	}
	p.rootKeys[key.Value] = true
	if key.Tag != "!!str" {
		return false
	}
	for _, k := range streamKeys {
		if k == key.Value {
			return true
		}
	}
	return false
}

// --- YAML block structure ---

// nextLine skips blank and comment lines (and the rest of the current
// line, which must be blank or a comment) and returns the indentation of
// the next content line, leaving i at its first non-space byte, or -1 at
// the end of the data.
func (p *scanner) nextLine() int {
	for {
		p.skipSpaces()
		if p.i < len(p.data) && p.data[p.i] == '#' {
			p.skipToEOL()
		}
		if p.i == len(p.data) {
			return -1
		}
		if p.data[p.i] != '\n' {
			if p.i != p.lineStart && !p.atLineContent() {
				p.bail()
			}
			ind := p.i - p.lineStart
			if ind == 0 && p.docMarker() {
				if p.head && p.data[p.i] == '-' {
					// ---: what follows on its line must be blank
					// or a comment, as the loop checks.
					p.i += 3
					p.head = false
					continue
				}
				p.bail()
			}
			p.head = false
			return ind
		}
		p.newline()
	}
}

// atLineContent reports whether i is the first non-space byte of its line.
func (p *scanner) atLineContent() bool {
	for j := p.lineStart; j < p.i; j++ {
		if p.data[j] != ' ' {
			return false
		}
	}
	return true
}

func (p *scanner) docMarker() bool {
	rest := p.data[p.i:]
	if len(rest) >= 3 && (rest[:3] == "---" || rest[:3] == "...") {
		return len(rest) == 3 || rest[3] == ' ' || rest[3] == '\n'
	}
	return rest[0] == '%'
}

func (p *scanner) skipSpaces() {
	for p.i < len(p.data) && p.data[p.i] == ' ' {
		p.i++
	}
}

func (p *scanner) skipToEOL() {
	for p.i < len(p.data) && p.data[p.i] != '\n' {
		p.i++
	}
}

// endOfLine checks that the rest of the line is blank or a comment.
func (p *scanner) endOfLine() {
	start := p.i
	p.skipSpaces()
	if p.i == len(p.data) || p.data[p.i] == '\n' {
		return
	}
	if p.data[p.i] == '#' && p.i > start {
		p.skipToEOL()
		return
	}
	p.bail()
}

// entry reports whether i is at a block list entry ("- " or "-" at EOL).
func (p *scanner) entry() bool {
	return p.i < len(p.data) && p.data[p.i] == '-' && (p.i+1 == len(p.data) || p.data[p.i+1] == ' ' || p.data[p.i+1] == '\n')
}

// blockValue parses the block node whose first line is at i, indented
// ind (≥ min).
func (p *scanner) blockValue(ind, depth int, root bool) *yaml.Node {
	if p.entry() {
		return p.blockList(ind, depth, nil)
	}
	return p.blockMappingOrScalar(ind, depth, root)
}

// blockMappingOrScalar parses a block mapping at indentation ind whose
// first key is at i; a lone scalar or flow node is allowed only where a
// value may be (not at the root).
func (p *scanner) blockMappingOrScalar(ind, depth int, root bool) *yaml.Node {
	a := p.mark()
	k := p.inline(depth + 1)
	if !p.keyColon() {
		p.bail() // a lone scalar or flow node on its own line
	}
	m := p.node(yaml.MappingNode, a)
	p.mappingFrom(m, k, ind, depth)
	return m
}

// keyColon consumes the ':' after a block mapping key.
func (p *scanner) keyColon() bool {
	if p.i < len(p.data) && p.data[p.i] == ':' && (p.i+1 == len(p.data) || p.data[p.i+1] == ' ' || p.data[p.i+1] == '\n') {
		p.longKey()
		p.i++
		return true
	}
	return false
}

// longKey gives up on a key that ends more than 1024 characters after it
// starts: yaml.v3 (libyaml) takes no longer implicit keys.
func (p *scanner) longKey() {
	if !p.json && utf8.RuneCountInString(p.data[p.lastMark:p.i]) > 1000 {
		p.bail()
	}
}

// mappingFrom parses the rest of block mapping m at indentation ind,
// whose first key k has been read with its ':'.
func (p *scanner) mappingFrom(m, k *yaml.Node, ind, depth int) {
	for {
		if k.Kind != yaml.ScalarNode {
			p.bail() // complex keys
		}
		stream := p.streamed(depth+1, k)
		v := p.blockMapValue(ind, depth+1, k, stream)
		m.Content = p.add(m.Content, k, v)
		next := p.nextLine()
		if next < ind {
			return
		}
		if next > ind || p.entry() {
			p.bail()
		}
		k = p.inline(depth + 1)
		if k.Kind != yaml.ScalarNode || !p.keyColon() {
			p.bail()
		}
	}
}

// blockMapValue parses the value after "key:" of a block mapping at
// indentation ind.
func (p *scanner) blockMapValue(ind, depth int, key *yaml.Node, stream bool) *yaml.Node {
	p.skipSpaces()
	if p.i < len(p.data) && p.data[p.i] != '\n' && p.data[p.i] != '#' {
		if stream && p.data[p.i] == '[' {
			return p.flowStream(depth, key.Value)
		}
		v := p.inline(depth)
		p.endOfLine()
		return v
	}
	next := p.nextLine()
	switch {
	case next > ind:
		if stream && p.entry() {
			return p.blockList(next, depth, key)
		}
		return p.blockValue(next, depth, false)
	case next == ind && p.entry():
		if stream {
			return p.blockList(next, depth, key)
		}
		return p.blockList(next, depth, nil)
	}
	p.bail() // an empty value
	return nil
}

// blockList parses a block list at indentation ind whose first entry is
// at i. With stream, its items go to onItem (named by stream.Value).
func (p *scanner) blockList(ind, depth int, stream *yaml.Node) *yaml.Node {
	l := p.node(yaml.SequenceNode, p.mark())
	for {
		p.i++ // '-'
		p.skipSpaces()
		if p.i == len(p.data) || p.data[p.i] == '\n' || p.data[p.i] == '#' || p.entry() {
			p.bail() // an item on the next lines, or a nested list
		}
		if stream != nil {
			p.inItem = true
		}
		it := p.listItem(p.i-p.lineStart, depth+1)
		if stream != nil {
			p.inItem = false
			p.item(stream.Value, l, it)
		} else {
			l.Content = p.add(l.Content, it)
		}
		next := p.nextLine()
		if next < ind {
			return l
		}
		if next > ind || !p.entry() {
			p.bail()
		}
	}
}

// listItem parses the block list item starting at i (after "- "), at
// column ind: a scalar or flow node, or a compact mapping ("- a: 1").
func (p *scanner) listItem(ind, depth int) *yaml.Node {
	a := p.mark()
	v := p.inline(depth)
	if !p.keyColon() {
		p.endOfLine()
		return v
	}
	m := p.node(yaml.MappingNode, a)
	p.mappingFrom(m, v, ind, depth)
	return m
}

// --- inline nodes (YAML) ---

// inline parses a scalar or flow node on the current line.
func (p *scanner) inline(depth int) *yaml.Node {
	if p.i == len(p.data) {
		p.bail()
	}
	switch c := p.data[p.i]; c {
	case '[', '{':
		return p.flowValue(depth, false)
	case '"':
		return p.doubleQuoted()
	case '\'':
		return p.singleQuoted()
	}
	return p.plain(false)
}

// plain parses a plain scalar (block or flow context).
func (p *scanner) plain(flow bool) *yaml.Node {
	a := p.mark()
	start := p.i
	c := p.data[p.i]
	switch c {
	case '-', '?', ':':
		if p.i+1 == len(p.data) || p.data[p.i+1] == ' ' || p.data[p.i+1] == '\n' || c != '-' {
			p.bail()
		}
	case ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', ' ', '\n':
		p.bail()
	}
	end := p.i
	for p.i < len(p.data) {
		c := p.data[p.i]
		if !plainSpecial[c] {
			p.i++
			end = p.i
			continue
		}
		if c == '\n' {
			break
		}
		if c == ':' && (p.i+1 == len(p.data) || p.data[p.i+1] == ' ' || p.data[p.i+1] == '\n' || flow && isFlowIndicator(p.data[p.i+1])) {
			break
		}
		if c == '#' && p.data[p.i-1] == ' ' {
			break
		}
		if flow && (isFlowIndicator(c) || c == '?') {
			break
		}
		p.i++
		if c != ' ' {
			end = p.i
		}
	}
	p.i = end
	n := p.node(yaml.ScalarNode, a)
	n.Value = p.data[start:end]
	n.Tag = plainTag(n)
	return n
}

// plainSpecial marks the bytes plain looks at: those that may end a plain
// scalar (in block or flow context) and the space, which does not extend
// it; any other byte is part of the scalar.
var plainSpecial = func() (t [256]bool) {
	for _, c := range []byte("\n:# ,[]{}?") {
		t[c] = true
	}
	return t
}()

// plainTag is the tag yaml.v3 resolves plain scalar n to, without its
// resolver for the common cases: words that start with a letter no YAML
// keyword starts with are strings, plain decimals integers.
func plainTag(n *yaml.Node) string {
	v := n.Value
	switch v {
	case "":
		return n.ShortTag()
	case "<<":
		return "!!merge" // as yaml.v3's parser tags a plain <<
	}
	switch c := v[0]; {
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_':
		switch v {
		case "true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL":
			return n.ShortTag()
		}
		return "!!str"
	case c >= '0' && c <= '9' || c == '-' || c == '.' || c == '+':
		if _, ok := decimal(v); ok {
			return "!!int"
		}
		if strings.ContainsAny(v, ".eE") && floatText(v) {
			if _, ok := simpleFloat(v); ok {
				return "!!float"
			}
		}
	}
	return n.ShortTag()
}

// floatText reports whether s matches yaml.v3's pattern of plain floats
// (yamlStyleFloat: ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$).
func floatText(s string) bool {
	i := 0
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	} else {
		if digits() == 0 {
			return false
		}
		if i < len(s) && s[i] == '.' {
			i++
			digits()
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

func isFlowIndicator(c byte) bool { return c == ',' || c == '[' || c == ']' || c == '{' || c == '}' }

func (p *scanner) singleQuoted() *yaml.Node {
	a := p.mark()
	p.i++
	start := p.i
	var buf []byte
	for {
		if p.i == len(p.data) || p.data[p.i] == '\n' {
			p.bail()
		}
		if p.data[p.i] == '\'' {
			if p.i+1 < len(p.data) && p.data[p.i+1] == '\'' {
				buf = append(buf, p.data[start:p.i+1]...)
				p.i += 2
				start = p.i
				continue
			}
			break
		}
		p.i++
	}
	n := p.node(yaml.ScalarNode, a)
	if buf != nil {
		n.Value = string(append(buf, p.data[start:p.i]...))
	} else {
		n.Value = p.data[start:p.i]
	}
	p.i++
	n.Tag, n.Style = "!!str", yaml.SingleQuotedStyle
	return n
}

// doubleQuoted parses a double-quoted scalar with JSON's escapes (YAML's
// others, and in YAML the JSON escapes yaml.v3 refuses, \/ and UTF-16
// surrogates, are outside the subset).
func (p *scanner) doubleQuoted() *yaml.Node {
	a := p.mark()
	p.i++
	start := p.i
	var buf []byte
	for {
		if p.i == len(p.data) {
			p.failAt(a, "unterminated string: the file ends before its closing quote")
		}
		c := p.data[p.i]
		if c == '"' {
			break
		}
		if c < 0x20 {
			if c == '\n' {
				p.fail("unterminated string (a newline in a string is written \\n)")
			}
			p.fail("control character %U in a string (write it as \\u%04x)", rune(c), c)
		}
		if c != '\\' {
			p.i++
			continue
		}
		buf = append(buf, p.data[start:p.i]...)
		if p.i+1 == len(p.data) {
			p.failAt(a, "unterminated string: the file ends before its closing quote")
		}
		e := p.data[p.i+1]
		p.i += 2
		if p.yamlText() && e == '/' {
			p.bail() // JSON's escape, not yaml.v3's
		}
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r := p.hex4()
			if utf16.IsSurrogate(r) {
				if p.yamlText() {
					p.bail() // yaml.v3 refuses UTF-16 surrogates
				}
				if p.i+1 < len(p.data) && p.data[p.i] == '\\' && p.data[p.i+1] == 'u' {
					p.i += 2
					r = utf16.DecodeRune(r, p.hex4())
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			p.i -= 2
			p.fail("unknown escape \\%c in a string", e)
		}
		start = p.i
	}
	n := p.node(yaml.ScalarNode, a)
	if buf != nil {
		n.Value = string(append(buf, p.data[start:p.i]...))
	} else {
		n.Value = p.data[start:p.i]
	}
	p.i++
	n.Tag, n.Style = "!!str", yaml.DoubleQuotedStyle
	return n
}

func (p *scanner) hex4() rune {
	if p.i+4 > len(p.data) {
		p.fail("a \\u escape takes 4 hex digits")
	}
	v, err := strconv.ParseUint(p.data[p.i:p.i+4], 16, 32)
	if err != nil {
		p.fail("a \\u escape takes 4 hex digits")
	}
	p.i += 4
	return rune(v)
}

// --- flow collections (YAML) and JSON values ---

// skipFlowSpace skips spaces, newlines and (YAML) comments inside a flow
// collection.
func (p *scanner) skipFlowSpace() {
	if p.json {
		p.skipJSONSpace()
		return
	}
	for p.i < len(p.data) {
		switch c := p.data[p.i]; {
		case c == ' ':
			p.i++
		case c == '\n':
			p.newline()
			if p.i < len(p.data) && p.data[p.i] != ' ' && p.data[p.i] != '\n' && p.docMarker() {
				p.bail()
			}
		case c == '#' && (p.i == p.lineStart || p.data[p.i-1] == ' ' || p.data[p.i-1] == '\n'):
			p.skipToEOL()
		default:
			return
		}
	}
}

func (p *scanner) skipJSONSpace() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t':
			p.i++
		case '\r':
			if p.yamlJSON && (p.i+1 == len(p.data) || p.data[p.i+1] != '\n') {
				p.bail() // a line break in YAML
			}
			p.i++
		case '\n':
			p.newline()
		default:
			return
		}
	}
}

// flowValue parses a flow node (JSON: any value) at i.
func (p *scanner) flowValue(depth int, root bool) *yaml.Node {
	if depth > maxNesting {
		if !p.json {
			p.bail()
		}
		panic(&jsonError{at: p.mark(), msg: fmt.Sprintf("lists and objects nested deeper than %d levels", maxNesting),
			hint: fmt.Sprintf("a JSON spec nests at most %d levels (a spec needs a few); flatten the value here", maxNesting)})
	}
	if p.i == len(p.data) {
		p.fail("unexpected end of file")
	}
	switch c := p.data[p.i]; c {
	case '[':
		return p.flowList(depth, "")
	case '{':
		return p.flowMapping(depth)
	case '"':
		return p.doubleQuoted()
	}
	if p.json {
		return p.jsonLiteral()
	}
	if p.data[p.i] == '\'' {
		return p.singleQuoted()
	}
	return p.plain(true)
}

// maxNesting bounds the depth of nested collections.
const maxNesting = 64

// flowStream parses a flow list whose items go to onItem.
func (p *scanner) flowStream(depth int, key string) *yaml.Node { return p.flowList(depth, key) }

// flowList parses [a, b, ...]; with stream != "", its items go to onItem.
func (p *scanner) flowList(depth int, stream string) *yaml.Node {
	l := p.node(yaml.SequenceNode, p.mark())
	l.Style = yaml.FlowStyle
	p.i++
	p.skipFlowSpace()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return l
	}
	for {
		if stream != "" {
			p.inItem = true
		}
		it := p.flowValue(depth+1, false)
		p.skipFlowSpace()
		if !p.json && p.i < len(p.data) && p.data[p.i] == ':' {
			p.bail() // a single-pair mapping in a list
		}
		if stream != "" {
			p.inItem = false
			p.item(stream, l, it)
		} else {
			l.Content = p.add(l.Content, it)
		}
		if p.flowSep(']', "a list") {
			return l
		}
	}
}

// flowMapping parses {k: v, ...} (JSON: {"k": v, ...}).
func (p *scanner) flowMapping(depth int) *yaml.Node {
	m := p.node(yaml.MappingNode, p.mark())
	m.Style = yaml.FlowStyle
	p.i++
	p.skipFlowSpace()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return m
	}
	for {
		if p.i == len(p.data) {
			p.fail("unexpected end of file in an object (a '}' is missing)")
		}
		var k *yaml.Node
		switch {
		case p.data[p.i] == '"':
			k = p.doubleQuoted()
		case p.json:
			p.fail("unexpected %s: an object's keys are strings in double quotes", p.what())
		case p.data[p.i] == '\'':
			k = p.singleQuoted()
		case p.data[p.i] == '[' || p.data[p.i] == '{':
			p.bail()
		default:
			k = p.plain(true)
		}
		keyLine := p.line
		p.skipFlowSpace()
		if p.i == len(p.data) || p.data[p.i] != ':' {
			p.fail("unexpected %s after a key: want ':'", p.what())
		}
		if !p.json && p.line != keyLine {
			p.bail() // YAML's implicit keys end on their line
		}
		p.longKey()
		p.i++
		if !p.json && p.i < len(p.data) && p.data[p.i] != ' ' && p.data[p.i] != '\n' && k.Style == 0 {
			p.bail()
		}
		p.skipFlowSpace()
		if p.i < len(p.data) && (p.data[p.i] == ',' || p.data[p.i] == '}') {
			p.fail("a key without a value")
		}
		var v *yaml.Node
		if p.streamed(depth+1, k) && p.i < len(p.data) && p.data[p.i] == '[' {
			v = p.flowStream(depth+1, k.Value)
		} else {
			v = p.flowValue(depth+1, false)
		}
		m.Content = p.add(m.Content, k, v)
		p.skipFlowSpace()
		if p.flowSep('}', "an object") {
			return m
		}
	}
}

// jsonLiteral parses a JSON number, true, false or null.
func (p *scanner) jsonLiteral() *yaml.Node {
	a := p.mark()
	start := p.i
	for p.i < len(p.data) {
		c := p.data[p.i]
		if c == ',' || c == ']' || c == '}' || c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == ':' {
			break
		}
		p.i++
	}
	text := p.data[start:p.i]
	n := p.node(yaml.ScalarNode, a)
	n.Value = text
	switch {
	case text == "true" || text == "false":
		n.Tag = "!!bool"
	case text == "null":
		n.Tag = "!!null"
	case jsonNumber(text):
		n.Tag = plainTag(n) // !!int or !!float, as YAML reads it
		if n.Tag == "!!str" {
			if p.yamlJSON {
				p.bail() // yaml.v3 reads it as a string
			}
			n.Tag = "!!float" // past float64's range (1e400), which YAML reads as a string; in JSON it is a number
		}
	default:
		p.i = start
		if text == "" {
			p.fail("unexpected %s: want a value", p.what())
		}
		p.fail("unexpected %q: want a string in double quotes, a number, true, false or null", clip(text))
	}
	return n
}

// jsonNumber reports whether s is a JSON number (RFC 8259, section 6).
func jsonNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i == len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i == len(s)
}

// flowSep reads what follows an element of a flow collection of kind what
// ("a list", "an object") that ends with close: a ',' (false: another
// element follows) or close (true: the collection ends). Anything else, a
// ',' right before close, or the end of the file fails the parse.
func (p *scanner) flowSep(close byte, what string) bool {
	if p.i == len(p.data) {
		p.fail("unexpected end of file in %s (a '%c' is missing)", what, close)
	}
	switch p.data[p.i] {
	case ',':
		p.i++
		p.skipFlowSpace()
		if p.i < len(p.data) && p.data[p.i] == close {
			p.fail("a ',' before '%c'", close)
		}
		return false
	case close:
		p.i++
		return true
	}
	p.fail("unexpected %s in %s: want ',' or '%c'", p.what(), what, close)
	return false
}
