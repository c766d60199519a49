// Inline nodes (YAML scalars) and how yaml.v3 reads plain scalars.

package yamlscan

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Decimal returns the value of s if it is a decimal integer that yaml.v3
// reads as written: an optional '-', then 0 or up to 18 digits with no
// leading zero (no base prefixes, underscores or octal forms).
func Decimal(s string) (int64, bool) {
	t := s
	if len(t) > 0 && t[0] == '-' {
		t = t[1:]
	}
	if len(t) == 0 || len(t) > 18 || len(t) > 1 && t[0] == '0' {
		return 0, false
	}
	var v int64
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if len(t) < len(s) {
		v = -v
	}
	return v, true
}

// SimpleFloat returns the value of s if it is a float that yaml.v3 reads
// as strconv.ParseFloat does: digits, '.', an exponent, a sign.
func SimpleFloat(s string) (float64, bool) {
	if s == "" || s[0] == '.' && len(s) > 1 && (s[1] < '0' || s[1] > '9') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9', c == '.', c == 'e', c == 'E', c == '+', c == '-':
		default:
			return 0, false
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// Clip shortens s to at most 40 bytes (37 and "..."), for quoting text in
// messages.
func Clip(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

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
		if _, ok := Decimal(v); ok {
			return "!!int"
		}
		if strings.ContainsAny(v, ".eE") && floatText(v) {
			if _, ok := SimpleFloat(v); ok {
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
