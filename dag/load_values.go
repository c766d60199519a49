package dag

// Decoders of YAML nodes into values: aliases, mappings of known fields,
// lists, strings, names, integers and numbers, each reporting what is
// wrong at the node's position. The *Of functions are fast paths: the
// common, valid value, decoded without building the field's name for
// messages (obj+field); anything else goes to the full decoder with that
// name.

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/internal/yamlscan"
	"gopkg.in/yaml.v3"
)

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

// boolVal reads a YAML boolean (true or false).
func (l *loader) boolVal(n *yaml.Node, what string) (bool, bool) {
	if n.Kind == yaml.ScalarNode && tagOf(n) == "!!bool" {
		switch n.Value {
		case "true", "True", "TRUE":
			return true, true
		case "false", "False", "FALSE":
			return false, true
		}
	}
	l.errorf(n, "write true or false", "%s must be true or false, got %s", what, kindName(n))
	return false, false
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && tagOf(n) == "!!null" }

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
		case contract.RuneHidden(r) != "":
			return contract.RuneHidden(r)
		}
	}
	return ""
}

// named sets d.what to "KIND NAME" unless mapping named the object so.
func (d *decoding[T, S]) named(kind, name string) {
	if !isNamed(d.what, kind, name) {
		d.what = kind + " " + name
	}
}

// isNamed reports whether what is kind + " " + name.
func isNamed(what, kind, name string) bool {
	return len(what) == len(kind)+1+len(name) && what[len(kind)] == ' ' && what[:len(kind)] == kind && what[len(kind)+1:] == name
}

// nameOK reports whether nameProblem(v) == "".
func nameOK(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c >= utf8.RuneSelf || nameBad[c] {
			return nameProblem(v) == ""
		}
	}
	return true
}

// nameBad marks the ASCII bytes nameProblem refuses.
var nameBad = func() (t [utf8.RuneSelf]bool) {
	for c := range utf8.RuneSelf {
		t[c] = c <= ' ' || c == 0x7f || strings.ContainsRune("[],{}#&*!|>'\"%@`", rune(c))
	}
	return t
}()

// nameOf is name(n, obj+field).
func (l *loader) nameOf(n *yaml.Node, obj, field string) (string, bool) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!str" || n.Tag == "!!int") && nameOK(n.Value) {
		return n.Value, true
	}
	return l.name(n, obj+field)
}

// oneOfOf is oneOf(n, obj+field, allowed).
func (l *loader) oneOfOf(n *yaml.Node, obj, field string, allowed []string) (string, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && contains(allowed, n.Value) {
		return n.Value, true
	}
	return l.oneOf(n, obj+field, allowed)
}

// fastInt is n's value if it is a decimal integer scalar (int64Val's
// common case).
func fastInt(n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, false
	}
	return yamlscan.Decimal(n.Value)
}

// intInOf is intIn(n, obj+field, lo, hi).
func (l *loader) intInOf(n *yaml.Node, obj, field string, lo, hi int64) (int64, bool) {
	if v, ok := fastInt(n); ok && v >= lo && v <= hi {
		return v, true
	}
	return l.intIn(n, obj+field, lo, hi)
}

// nonNegNumOf is nonNegNum(n, obj+field).
func (l *loader) nonNegNumOf(n *yaml.Node, obj, field string) (float64, bool) {
	if n.Kind == yaml.ScalarNode {
		switch n.Tag {
		case "!!int":
			if i, ok := yamlscan.Decimal(n.Value); ok && i >= 0 {
				return float64(i), true
			}
		case "!!float":
			if f, ok := yamlscan.SimpleFloat(n.Value); ok && f >= 0 && !math.IsInf(f, 0) {
				return f, true
			}
		}
	}
	return l.nonNegNum(n, obj+field)
}

// listOf is list(n, obj+field, hint).
func (l *loader) listOf(n *yaml.Node, obj, field, hint string) ([]*yaml.Node, bool) {
	if n.Kind == yaml.SequenceNode {
		return l.list(n, "", hint)
	}
	return l.list(n, obj+field, hint)
}
