package dag

// After a file is loaded through the scanner, the spec's strings are
// substrings of the file's text (the scanner's scalars are). detach gives
// them text of their own, compact, so that the file's text (as large as
// the file) is freed once Load returns instead of living as long as the
// spec.

import (
	"strings"
	"unsafe"
)

// arena hands out strings cut from shared chunks of text: a Builder only
// appends, so the strings it returned stay as they were.
type arena struct {
	b     strings.Builder
	chunk int // bytes of a chunk
}

// add returns the concatenation of parts, cut from the current chunk.
func (a *arena) add(parts ...string) string {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if a.b.Len()+n > a.b.Cap() {
		a.b = strings.Builder{}
		a.b.Grow(max(a.chunk, n))
	}
	start := a.b.Len()
	for _, p := range parts {
		a.b.WriteString(p)
	}
	return a.b.String()[start:]
}

// detacher copies the strings of a spec that point into text.
type detacher struct {
	text  string
	names arena             // unique names (stages, buffers)
	seen  map[string]string // interned copies of other strings (kernels, streams, enums)
	// last is the string own copied last, and its copy: the stages of a
	// big spec mostly name the kernel of the stage before.
	last, lastCopy string
}

// maxInterned bounds detacher.seen; past it strings are copied as they come.
const maxInterned = 1 << 16

// in reports whether s is a non-empty substring of d.text's memory.
func (d *detacher) in(s string) bool {
	if s == "" || d.text == "" {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	base := uintptr(unsafe.Pointer(unsafe.StringData(d.text)))
	return p >= base && p-base < uintptr(len(d.text))
}

// unique returns s, copied into the arena if it points into the text.
func (d *detacher) unique(s string) string {
	if !d.in(s) {
		return s
	}
	return d.names.add(s)
}

// own returns s, or one copy of it shared by every equal string if it
// points into the text.
func (d *detacher) own(s string) string {
	if !d.in(s) {
		return s
	}
	if s == d.last {
		return d.lastCopy
	}
	c, ok := d.seen[s]
	if !ok {
		c = d.names.add(s)
		if len(d.seen) < maxInterned {
			d.seen[c] = c
		}
	}
	d.last, d.lastCopy = s, c
	return c
}

// detach gives every string of the checked spec c.s that points into
// text a copy of its own: names of stages and buffers in a compact arena,
// other strings interned. References to stages and buffers (after, waits,
// captures, accesses) become the referenced object's own name string, as
// the check phase left the accesses.
func (c *checker) detach(text string) {
	d := &detacher{text: text, names: arena{chunk: 256 << 10}, seen: map[string]string{}}
	s := c.s
	s.Name, s.Sync = d.own(s.Name), d.own(s.Sync)
	o := &s.Options
	o.Strategy, o.Arena, o.Placement = d.own(o.Strategy), d.own(o.Arena), d.own(o.Placement)
	for i := range s.Buffers {
		b := &s.Buffers[i]
		b.Name = d.unique(b.Name)
		b.DType, b.Where, b.Role, b.Alloc = d.own(b.DType), d.own(b.Where), d.own(b.Role), d.own(b.Alloc)
		b.Init.Kind, b.Init.Path = d.own(b.Init.Kind), d.own(b.Init.Path)
	}
	for i := range s.Kernels {
		k := &s.Kernels[i]
		k.Name, k.PTX, k.Entry = d.own(k.Name), d.own(k.PTX), d.own(k.Entry)
		for j := range k.Params {
			p := &k.Params[j]
			p.Name, p.Type = d.own(p.Name), d.own(p.Type)
		}
	}
	for i := range s.Stages {
		s.Stages[i].Name = d.unique(s.Stages[i].Name)
	}
	stage := func(name string) string {
		if k, ok := c.stages[name]; ok && s.Stages[k].Name == name {
			return s.Stages[k].Name
		}
		return d.own(name)
	}
	for i := range s.Stages {
		st, src := &s.Stages[i], c.stageSrc.at(i)
		st.Kernel, st.Stream, st.Event, st.Copy = d.own(st.Kernel), d.own(st.Stream), d.own(st.Event), d.own(st.Copy)
		c.detachAccesses(d, st.Reads, src.reads)
		c.detachAccesses(d, st.Writes, src.writes)
		for j := range st.After {
			st.After[j] = stage(st.After[j])
		}
		for j := range st.Waits {
			st.Waits[j] = stage(st.Waits[j])
		}
		for j := range st.WaitFor {
			w := &st.WaitFor[j]
			w.Stage, w.Event = stage(w.Stage), d.own(w.Event)
		}
	}
	for i := range s.Streams {
		x := &s.Streams[i]
		x.Name, x.Kind, x.Thread = d.own(x.Name), d.own(x.Kind), d.own(x.Thread)
	}
	for i := range s.Captures {
		x := &s.Captures[i]
		x.Stream, x.First, x.Last, x.Mode = d.own(x.Stream), stage(x.First), stage(x.Last), d.own(x.Mode)
	}
}

// detachAccesses points each access at its buffer's own name.
func (c *checker) detachAccesses(d *detacher, accs []Access, srcs []accessSrc) {
	for j := range accs {
		if j < len(srcs) && srcs[j].buf > 0 {
			accs[j].Buffer = c.s.Buffers[srcs[j].buf-1].Name
		} else {
			accs[j].Buffer = d.own(accs[j].Buffer)
		}
	}
}
