package dag

// Decoders of a stage's composite values: waits, args, launch shapes,
// name lists and accesses (a buffer name, x[a:b], or a mapping).

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/internal/yamlscan"
	"gopkg.in/yaml.v3"
)

const waitsHint = "write waits as a list of earlier stage names, {stage: NAME, lag: N} or {event: NAME}: waits: [prep, {stage: d2h, lag: 1}]"

// decodeWaits reads a waits list: stage names, and mappings with a stage
// or an event and an optional lag.
func (l *loader) decodeWaits(n *yaml.Node, what string) ([]string, []at, []WaitSpec, []at) {
	items, ok := l.list(n, what, waitsHint)
	if !ok {
		return nil, nil, nil, nil
	}
	var names []string
	var nodes, wnodes []at
	var ws []WaitSpec
	for _, it := range items {
		if it.Kind != yaml.MappingNode {
			if s, ok := l.name(it, what); ok {
				names = append(names, s)
				nodes = append(nodes, atOf(it))
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
			if lag, ok := l.intIn(v, what+": lag", 0, maxLag); ok {
				w.Lag = int(lag)
			}
		}
		ws = append(ws, w)
		wnodes = append(wnodes, atOf(it))
	}
	return names, nodes, ws, wnodes
}

// argKey returns the copy of args key k (loader.argKeys).
func (l *loader) argKey(k string) string {
	if c, ok := l.argKeys[k]; ok {
		return c
	}
	c := strings.Clone(k)
	if len(l.argKeys) < 4096 {
		if l.argKeys == nil {
			l.argKeys = map[string]string{}
		}
		l.argKeys[c] = c
	}
	return c
}

// maxArgSets bounds the loader's cache of decoded args (loader.argSets).
const maxArgSets = 4096

// decodeArgs reads a mapping of scalar arguments: integers become int,
// other numbers float64, strings string. Keys and strings are copies, not
// substrings of the file's text (a plan keeps the maps). Stages whose args
// are written alike (the same keys, tags and values in the same order)
// share one decoded map and argSet (loader.argSets), so that a spec of a
// million stages with a handful of distinct args holds a handful of maps;
// each stage keeps only the positions of its own keys and values.
func (l *loader) decodeArgs(n *yaml.Node, obj string, src *stageSrc) map[string]any {
	// The field's name, obj + ": args", is built for messages only.
	if n.Kind != yaml.MappingNode {
		l.errorf(n, "write args as a mapping: args: {a: 2.0}", "%s must be a mapping, got %s", obj+": args", kindName(n))
		return nil
	}
	key, shareable := l.argsText(n)
	if shareable {
		if set, ok := l.argSets[string(key)]; ok {
			src.args, src.argAt = set, l.argPositions(n)
			return set.m
		}
	}
	before := len(l.errs)
	src.argAt = carve(&l.atSlab, len(n.Content)&^1)
	set := l.decodeArgSet(n, obj, src.argAt)
	src.args = set
	if shareable && len(l.errs) == before && len(l.argSets) < maxArgSets {
		if l.argSets == nil {
			l.argSets = map[string]*argSet{}
		}
		l.argSets[string(key)] = set
	}
	return set.m
}

// argsText returns what decodeArgSet's result depends on for the args
// mapping n, as one key (in l.argBuf, valid until the next call): each
// key's and value's tag, style and text. shareable is false when n holds
// aliases or collections, whose decoding also counts toward the alias
// budget or reports errors.
func (l *loader) argsText(n *yaml.Node) ([]byte, bool) {
	b := l.argBuf[:0]
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			return nil, false
		}
		b = strconv.AppendInt(b, int64(len(c.Tag)), 10)
		b = append(b, ':')
		b = append(b, c.Tag...)
		b = strconv.AppendInt(b, int64(c.Style), 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(len(c.Value)), 10)
		b = append(b, ':')
		b = append(b, c.Value...)
	}
	l.argBuf = b
	return b, true
}

// argPositions returns the positions of the keys and values of the args
// mapping n, in order (argAt), carved from a shared slab.
func (l *loader) argPositions(n *yaml.Node) []at {
	ats := carve(&l.atSlab, len(n.Content)&^1)
	for i := range ats {
		ats[i] = atOf(n.Content[i])
	}
	return ats
}

// decodeArgSet decodes the args mapping n (see decodeArgs), reporting
// what is wrong, and fills ats with the positions of its keys and values.
func (l *loader) decodeArgSet(n *yaml.Node, obj string, ats []at) *argSet {
	args := make(map[string]any, len(n.Content)/2)
	set := &argSet{list: make([]argSrc, 0, len(n.Content)/2)}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := l.deref(n.Content[i]), l.deref(n.Content[i+1])
		ats[i], ats[i+1] = atOf(k), atOf(v)
		if k.Kind != yaml.ScalarNode || tagOf(k) == "!!merge" {
			l.errorf(k, "argument names are plain words", "%s: argument name must be a string, got %s", obj+": args", kindName(k))
			set.list = append(set.list, argSrc{})
			continue
		}
		if prev := set.arg(k.Value); prev >= 0 {
			first := ats[2*prev]
			l.errorf(k, "remove one of them", "%s: argument %q given twice (first at %s)", obj+": args", k.Value, firstAt(k.Line, int(first.line), int(first.col)))
			set.list = append(set.list, argSrc{})
			continue
		}
		a := argSrc{name: k.Value, given: true}
		if v.Kind == yaml.ScalarNode {
			a.tag, a.text, a.tagged = tagOf(v), v.Value, v.Style&yaml.TaggedStyle != 0
		}
		set.list = append(set.list, a)
		if v.Kind != yaml.ScalarNode {
			l.errorf(v, "argument values are numbers or buffer names", "%s: %s must be a number or a string, got %s", obj+": args", k.Value, kindName(v))
			continue
		}
		switch a.tag {
		case "!!int":
			if x, ok := yamlscan.Decimal(v.Value); ok {
				args[l.argKey(k.Value)] = int(x)
				continue
			}
			var x int
			if err := v.Decode(&x); err != nil {
				l.errorf(v, "use a value below 2^63", "%s: %s: %s does not fit in a 64-bit integer", obj+": args", k.Value, yamlscan.Clip(v.Value))
				continue
			}
			args[l.argKey(k.Value)] = x
		case "!!float":
			if x, ok := yamlscan.SimpleFloat(v.Value); ok && v.Tag == "!!float" && !math.IsInf(x, 0) {
				args[l.argKey(k.Value)] = x
				continue
			}
			x, ok := l.num(v, obj+": args: "+k.Value)
			if !ok {
				continue
			}
			args[l.argKey(k.Value)] = x
		case "!!str":
			args[l.argKey(k.Value)] = strings.Clone(v.Value)
		default:
			l.errorf(v, "argument values are numbers or buffer names; quote a string", "%s: %s must be a number or a string, got %s", obj+": args", k.Value, kindName(v))
		}
	}
	if len(args) > 0 {
		set.m = args
	}
	return set
}

// decodeDim3 reads a launch dimension: a list of 1 to 3 positive integers;
// missing trailing dimensions are 1.
func (l *loader) decodeDim3(n *yaml.Node, obj, field string) [3]int {
	var d [3]int
	if n.Kind == yaml.SequenceNode && len(n.Content) >= 1 && len(n.Content) <= 3 {
		// The common case without building the field's name for messages.
		d = [3]int{1, 1, 1}
		for i, it := range n.Content {
			v, ok := fastInt(it)
			if !ok || v < 1 || v > math.MaxInt32 {
				d = [3]int{}
				break
			}
			d[i] = int(v)
		}
		if d != ([3]int{}) {
			return d
		}
	}
	what := obj + field
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
func (l *loader) decodeNames(n *yaml.Node, obj, field, hint string) ([]string, []at) {
	items, ok := l.listOf(n, obj, field, hint)
	if !ok {
		return nil, nil
	}
	names := make([]string, 0, len(items))
	nodes := make([]at, 0, len(items))
	for _, it := range items {
		s, ok := l.nameOf(it, obj, field)
		if !ok {
			continue
		}
		names = append(names, s)
		nodes = append(nodes, atOf(it))
	}
	return names, nodes
}

const accessHint = "write a buffer name (x), a byte range (x[0:512]) or {buffer: x, offset: 0, bytes: 512}"

// decodeAccesses reads a list of accesses. Offsets and Bytes are resolved
// against the buffer sizes in check.
func (l *loader) decodeAccesses(n *yaml.Node, obj, field string) ([]Access, []accessSrc) {
	items, ok := l.listOf(n, obj, field, "write a list: [x, y[0:512]]")
	if !ok {
		return nil, nil
	}
	// Past a limit, one unresolved access stands for the list (so that
	// the stage's other checks do not count it as empty).
	if len(items) > MaxStageAccesses {
		l.errorf(n, "split the stage, or list fewer, larger ranges", "%s: %d accesses, more than the %d a stage may have in one list (dag.MaxStageAccesses)", obj+field, len(items), MaxStageAccesses)
		return []Access{{Pos: l.pos(n)}}, []accessSrc{{}}
	}
	if l.accesses += len(items); l.accesses > limits.accesses {
		if l.accesses-len(items) <= limits.accesses {
			l.errorf(n, "split the pipeline into several specs", "%s: more than %d reads and writes in the spec (dag.MaxAccesses)", obj+field, limits.accesses)
		}
		return []Access{{Pos: l.pos(n)}}, []accessSrc{{}}
	}
	accs := carve(&l.accSlab, len(items))
	srcs := carve(&l.accSrcSlab, len(items))
	for i, it := range items {
		if it.Kind == yaml.ScalarNode {
			accs[i], srcs[i] = l.decodeShortAccess(it, obj, field)
			continue
		}
		accs[i], srcs[i] = l.decodeAccess(it, obj+field)
	}
	return accs, srcs
}

// carve returns n zero values carved from a shared slab (which keeps the
// values of many small lists in few allocations).
func carve[T any](slab *[]T, n int) []T {
	if len(*slab) < n {
		*slab = make([]T, max(n, 2*chunkLen))
		prefault(*slab)
	}
	x := (*slab)[:n:n]
	*slab = (*slab)[n:]
	return x
}

// decodeShortAccess reads an access written as a scalar: "x", "x[a:b]",
// "x[a:]" or "x[:b]" (decodeAccess, naming the field only for messages).
func (l *loader) decodeShortAccess(n *yaml.Node, obj, field string) (Access, accessSrc) {
	if n.Tag == "!!str" {
		buf, off, nbytes, hasBytes, msg := parseShortAccess(n.Value)
		if msg == "" && nameOK(buf) {
			return Access{Buffer: buf, Offset: off, Bytes: nbytes, Pos: l.pos(n)}, accessSrc{hasBytes: hasBytes, ok: true}
		}
	}
	return l.decodeAccess(n, obj+field)
}

// decodeAccess reads one access: "x", "x[a:b]", "x[a:]", "x[:b]", or
// {buffer: x, offset: a, bytes: n}.
func (l *loader) decodeAccess(n *yaml.Node, what string) (Access, accessSrc) {
	a := Access{Pos: l.pos(n)}
	var src accessSrc
	switch n.Kind {
	case yaml.ScalarNode:
		if tagOf(n) != "!!str" {
			l.errorf(n, accessHint, "%s: access must be a buffer name, got %s", what, kindName(n))
			return a, src
		}
		buf, off, nbytes, hasBytes, msg := parseShortAccess(n.Value)
		if msg != "" {
			l.errorf(n, accessHint, "%s: bad access %q: %s", what, yamlscan.Clip(n.Value), msg)
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
		defer l.release(f)
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
