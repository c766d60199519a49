package yamlscan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// ErrOutsideSubset is what Scan returns for YAML text outside the
// scanner's subset (as a *SubsetError, or bare when the text as a whole is
// outside it): parse it with yaml.v3 instead.
var ErrOutsideSubset = errors.New("outside the scanner's YAML subset")

// SubsetError is ErrOutsideSubset at the place the scanner gave up: 1-based
// line and column.
type SubsetError struct{ Line, Col int }

func (e *SubsetError) Error() string { return ErrOutsideSubset.Error() }
func (e *SubsetError) Unwrap() error { return ErrOutsideSubset }

// JSONError is a JSON syntax error at a 1-based line and column (in
// characters): Msg says what is wrong ("unexpected '}': want a value"),
// Hint, when not empty, what to do instead of the generic advice.
type JSONError struct {
	Line, Col int
	Msg       string
	Hint      string
}

func (e *JSONError) Error() string { return e.Msg }

// at is a position in the text: 1-based line and column.
type at struct{ line, col int32 }

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
	// named in stream; nil: build whole trees.
	onItem func(key string, list, item *yaml.Node)
	stream []string
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

// Batch is how many items the scanner hands Options.OnItem's goroutine at
// a time: the goroutines meet once per batch, not per item.
const Batch = 256

// ptrsCap is the capacity of an item content slab (pointers).
const ptrsCap = 1 << 14

const slabChunk = 256

// Options say how Scan reads a text.
type Options struct {
	// JSON reads the text as JSON (RFC 8259): the scanner is the parser,
	// and a syntax error is a *JSONError.
	JSON bool
	// YAMLJSON, with JSON, reads YAML text that starts like JSON: where
	// JSON and yaml.v3 read it differently (\/, UTF-16 surrogates,
	// numbers past float64's range, a CR that does not end a line), Scan
	// gives up (ErrOutsideSubset) instead of reporting a JSON error.
	YAMLJSON bool
	// Stream names the root mapping's fields whose list items go to
	// OnItem as they are parsed (the first value of each such field, if
	// its key is a plain string and its value a list).
	Stream []string
	// OnItem receives each streamed item with its list, on a goroutine
	// of its own, Batch items at a time in file order; the item's nodes
	// are reused once OnItem returns, so it must not keep them. Nil:
	// Scan builds and returns whole trees.
	OnItem func(key string, list, item *yaml.Node)
}

// Scan parses data as one document and returns its root, a tree of
// yaml.Node as yaml.v3 builds it (kinds, tags, styles of collections,
// values, lines and columns), in which the streamed lists are empty.
// Errors: ErrOutsideSubset (YAML, possibly as a *SubsetError) or a
// *JSONError (JSON). Scan returns once OnItem has taken every item
// handed to it, whether the scan succeeded or not.
func Scan(data string, o Options) (root *yaml.Node, err error) {
	json, yamlJSON, onItem := o.JSON, o.YAMLJSON, o.OnItem
	p := &scanner{data: data, json: json, yamlJSON: json && yamlJSON, line: 1, col: 1, onItem: onItem, stream: o.Stream}
	defer func() {
		if r := recover(); r != nil {
			switch e := r.(type) {
			case *JSONError:
				root, err = nil, e
			case error:
				if errors.Is(e, ErrOutsideSubset) {
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
			return nil, ErrOutsideSubset
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

func (p *scanner) bail() { panic(&SubsetError{Line: p.line, Col: p.i - p.lineStart + 1}) }

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
	panic(&JSONError{Line: int(a.line), Col: int(a.col), Msg: fmt.Sprintf(format, args...)})
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
// batch over when it is full (Batch items, or its content slab nearly
// is).
func (p *scanner) item(key string, list, n *yaml.Node) {
	p.batch = append(p.batch, itemRef{key, list, n})
	if len(p.batch) == Batch || cap(p.ptrs) > 0 && len(p.ptrs) > cap(p.ptrs)-ptrsCap/16 {
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
	p.batch = make([]itemRef, 0, Batch)
	for range 2 {
		p.free <- &nodeSet{items: make([]itemRef, 0, Batch)}
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
	for _, k := range p.stream {
		if k == key.Value {
			return true
		}
	}
	return false
}
