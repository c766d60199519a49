// Flow collections (YAML) and JSON values.

package yamlscan

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

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
		a := p.mark()
		panic(&JSONError{Line: int(a.line), Col: int(a.col), Msg: fmt.Sprintf("lists and objects nested deeper than %d levels", maxNesting),
			Hint: fmt.Sprintf("a JSON spec nests at most %d levels (a spec needs a few); flatten the value here", maxNesting)})
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
		p.fail("unexpected %q: want a string in double quotes, a number, true, false or null", Clip(text))
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
