// YAML block structure: block mappings and lists, by indentation.

package yamlscan

import (
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

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
