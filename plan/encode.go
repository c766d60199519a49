package plan

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// EncodeJSON writes p as its plan file to w, streaming: each stage,
// buffer, lifetime, issue-order entry and stream op (launches by stage
// name, each wait with its reason: WaitReasons, worked out as the wait is
// written) is encoded on its own and written through a buffer, so that a
// plan of a million stages never exists as one JSON value in memory and is
// not indented in a second pass. With indent the bytes are those of
// json.MarshalIndent(p, "", "  ") (two spaces, for people), else those of
// json.Marshal(p) (compact, for big plans); both end without a newline.
// Fields come in Plan's order, "streams" last. The plan's own types are
// encoded by hand (the bytes encoding/json writes, which the tests
// check); the rest (stats, notes, iteration info, kernel arguments) by
// encoding/json. Errors are w's and encoding/json's.
func (p *Plan) EncodeJSON(w io.Writer, indent bool) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	e := &planEncoder{w: bw, indent: indent}
	v := reflect.ValueOf(p).Elem()
	bw.WriteByte('{')
	for _, f := range reflect.VisibleFields(v.Type()) {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || f.Anonymous || len(f.Index) > 1 || name == "-" || f.Name == "Streams" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fv := v.FieldByIndex(f.Index)
		if strings.Contains(opts, "omitempty") && emptyJSON(fv) {
			continue
		}
		e.key(name)
		switch x := fv.Interface().(type) {
		case []Stage:
			if x != nil {
				e.list(len(x), func(b []byte, i int) []byte { return e.appendStage(b, &x[i]) })
				continue
			}
		case []Buffer:
			if x != nil {
				e.list(len(x), func(b []byte, i int) []byte { return e.appendBuffer(b, &x[i]) })
				continue
			}
		case []Lifetime:
			if x != nil {
				e.list(len(x), func(b []byte, i int) []byte { return appendLifetime(b, &x[i]) })
				continue
			}
		case [][2]int:
			if x != nil {
				e.list(len(x), func(b []byte, i int) []byte {
					b = append(b, '[')
					b = strconv.AppendInt(b, int64(x[i][0]), 10)
					b = append(b, ',')
					b = strconv.AppendInt(b, int64(x[i][1]), 10)
					return append(b, ']')
				})
				continue
			}
		}
		if fv.Kind() == reflect.Slice && !fv.IsNil() {
			e.list(fv.Len(), func(b []byte, i int) []byte { return e.marshal(b, fv.Index(i).Interface()) })
		} else {
			e.put(e.marshal(e.scratch[:0], fv.Interface()), "  ")
		}
	}
	e.key("streams") // a list, even of no streams
	wr := p.waitReasoner()
	e.list(len(p.Streams), func(b []byte, i int) []byte { return p.appendStream(b, i, wr, e) })
	if indent {
		bw.WriteByte('\n')
	}
	bw.WriteByte('}')
	if e.err != nil {
		return e.err
	}
	return bw.Flush()
}

// streamJSON is stream i in its JSON form (the oracle of the encoder's
// tests; EncodeJSON writes the same bytes op by op).
func (p *Plan) streamJSON(i int, why [][]*WaitReason) streamJSON {
	s := p.Streams[i]
	sj := streamJSON{ID: s.ID, Name: s.Name, Host: s.Host, Kind: s.Kind, Thread: s.Thread, Device: s.Device, Ops: make([]opJSON, len(s.Ops))}
	for j, o := range s.Ops {
		switch o.Kind {
		case OpLaunch:
			sj.Ops[j] = opJSON{Op: "launch", Stage: p.Stages[o.Stage].Name}
		default:
			e := o.Event
			var r *WaitReason
			if i < len(why) && j < len(why[i]) {
				r = why[i][j]
			}
			sj.Ops[j] = opJSON{Op: o.Kind.String(), Event: &e, Lag: o.Lag, Why: r}
		}
	}
	return sj
}

// planEncoder writes the top-level object of a plan file.
type planEncoder struct {
	w       *bufio.Writer
	indent  bool
	fields  int
	scratch []byte // one element's compact bytes
	buf     bytes.Buffer
	err     error
	// args has the encoded bytes of kernel-argument maps met so far, by
	// the map's identity: a loaded spec's stages share one map for args
	// written alike (so a chain of model copies has few), and a map is
	// not changed while the plan is written. At most argsCacheMax maps.
	args map[uintptr][]byte
}

// argsCacheMax bounds planEncoder.args (maps), so that a plan whose
// stages each have a map of their own costs a lookup per stage and no
// more memory. (A variable so that a benchmark can turn the cache off.)
var argsCacheMax = 1 << 14

// appendArgs appends the kernel arguments m as encoding/json writes them.
func (e *planEncoder) appendArgs(b []byte, m map[string]any) []byte {
	id := reflect.ValueOf(m).Pointer() // maps do not move
	if out, ok := e.args[id]; ok {
		return append(b, out...)
	}
	n := len(b)
	b = e.marshal(b, m)
	if e.args == nil {
		e.args = make(map[uintptr][]byte)
	}
	if len(e.args) < argsCacheMax && e.err == nil {
		e.args[id] = slices.Clone(b[n:])
	}
	return b
}

func (e *planEncoder) key(name string) {
	if e.fields > 0 {
		e.w.WriteByte(',')
	}
	e.fields++
	if e.indent {
		e.w.WriteString("\n  ")
	}
	e.w.WriteString(`"` + name + `":`)
	if e.indent {
		e.w.WriteByte(' ')
	}
}

// marshal appends v as encoding/json writes it.
func (e *planEncoder) marshal(b []byte, v any) []byte {
	out, err := json.Marshal(v)
	if err != nil && e.err == nil {
		e.err = err
	}
	return append(b, out...)
}

// put writes the compact value b, indented for a line that starts with
// prefix.
func (e *planEncoder) put(b []byte, prefix string) {
	e.scratch = b[:0]
	if e.err != nil {
		return
	}
	if !e.indent {
		e.w.Write(b)
		return
	}
	e.buf.Reset()
	if e.err = json.Indent(&e.buf, b, prefix, "  "); e.err == nil {
		e.w.Write(e.buf.Bytes())
	}
}

// list writes a JSON array of n elements, one encoded at a time by elem
// (which appends element i's compact bytes).
func (e *planEncoder) list(n int, elem func(b []byte, i int) []byte) {
	e.w.WriteByte('[')
	for i := range n {
		if i > 0 {
			e.w.WriteByte(',')
		}
		if e.indent {
			e.w.WriteString("\n    ")
		}
		e.put(elem(e.scratch[:0], i), "    ")
		if e.err != nil {
			return
		}
	}
	if e.indent && n > 0 {
		e.w.WriteString("\n  ")
	}
	e.w.WriteByte(']')
}

// appendStream appends stream i as streamJSON encodes, each wait with its
// reason from wr. Compact output goes straight to the writer, op by op;
// b collects what is left (all of it, indented, for e.put to indent).
func (p *Plan) appendStream(b []byte, i int, wr *reasoner, e *planEncoder) []byte {
	s := &p.Streams[i]
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, int64(s.ID), 10)
	b = append(b, `,"name":`...)
	b = appendString(b, s.Name)
	if s.Host {
		b = append(b, `,"host":true`...)
	}
	if s.Kind != "" {
		b = append(b, `,"kind":`...)
		b = appendString(b, s.Kind)
	}
	if s.Thread != "" {
		b = append(b, `,"thread":`...)
		b = appendString(b, s.Thread)
	}
	if s.Device != 0 {
		b = append(b, `,"device":`...)
		b = strconv.AppendInt(b, int64(s.Device), 10)
	}
	b = append(b, `,"ops":[`...)
	for j, o := range s.Ops {
		if j > 0 {
			b = append(b, ',')
		}
		if o.Kind == OpLaunch {
			b = append(b, `{"op":"launch"`...)
			if name := p.Stages[o.Stage].Name; name != "" {
				b = append(b, `,"stage":`...)
				b = appendString(b, name)
			}
			b = append(b, '}')
		} else {
			b = append(b, `{"op":`...)
			b = appendString(b, o.Kind.String())
			b = append(b, `,"event":`...)
			b = strconv.AppendInt(b, int64(o.Event), 10)
			if o.Lag != 0 {
				b = append(b, `,"lag":`...)
				b = strconv.AppendInt(b, int64(o.Lag), 10)
			}
			if r := &wr.scratch; wr.reason(i, j, r) {
				b = append(b, `,"why":`...)
				b = appendReason(b, r)
			}
			b = append(b, '}')
		}
		if !e.indent && len(b) >= 1<<15 {
			e.w.Write(b)
			b = b[:0]
		}
	}
	return append(b, "]}"...)
}

func appendReason(b []byte, r *WaitReason) []byte {
	b = append(b, `{"from":`...)
	b = appendString(b, r.From)
	b = append(b, `,"to":`...)
	b = appendString(b, r.To)
	if r.Lag != 0 {
		b = append(b, `,"lag":`...)
		b = strconv.AppendInt(b, int64(r.Lag), 10)
	}
	if len(r.Hazards) > 0 {
		b = append(b, `,"hazards":[`...)
		for k, h := range r.Hazards {
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"kind":`...)
			b = appendString(b, h.Kind.String())
			b = append(b, `,"buffer":`...)
			b = appendString(b, h.Buffer)
			b = append(b, `,"offset":`...)
			b = strconv.AppendInt(b, h.Offset, 10)
			b = append(b, `,"bytes":`...)
			b = strconv.AppendInt(b, h.Bytes, 10)
			b = append(b, `,"stage":`...)
			b = appendString(b, h.Stage)
			if h.Shared != "" {
				b = append(b, `,"shared":`...)
				b = appendString(b, h.Shared)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendStage appends s as encoding/json writes a Stage.
func (e *planEncoder) appendStage(b []byte, s *Stage) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, s.Name)
	b = append(b, `,"stream":`...)
	b = strconv.AppendInt(b, int64(s.Stream), 10)
	b = append(b, `,"duration_us":`...)
	b = e.appendFloat(b, s.DurationUS)
	b = append(b, `,"kernel":`...)
	b = appendString(b, s.Kernel)
	if s.Go {
		b = append(b, `,"go":true`...)
	}
	if len(s.Args) > 0 {
		b = append(b, `,"args":`...)
		b = e.appendArgs(b, s.Args)
	}
	b = append(b, `,"grid":`...)
	b = appendDim3(b, s.Grid)
	b = append(b, `,"block":`...)
	b = appendDim3(b, s.Block)
	b = append(b, `,"reads":`...)
	b = appendAccesses(b, s.Reads)
	b = append(b, `,"writes":`...)
	b = appendAccesses(b, s.Writes)
	if s.Pinned != "" {
		b = append(b, `,"pinned":`...)
		b = appendString(b, s.Pinned)
	}
	if s.Source != "" {
		b = append(b, `,"source":`...)
		b = appendString(b, s.Source)
	}
	if s.Copy != "" {
		b = append(b, `,"copy":`...)
		b = appendString(b, s.Copy)
	}
	if s.HostFunc {
		b = append(b, `,"host_func":true`...)
	}
	if s.Collective != nil {
		b = append(b, `,"collective":`...)
		b = e.marshal(b, s.Collective)
	}
	if s.Seed != nil {
		b = append(b, `,"seed":`...)
		b = strconv.AppendInt(b, int64(*s.Seed), 10)
	}
	return append(b, '}')
}

func appendDim3(b []byte, d [3]int) []byte {
	b = append(b, '[')
	for i, x := range d {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return append(b, ']')
}

func appendAccesses(b []byte, as []Access) []byte {
	if as == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, a := range as {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"buffer":`...)
		b = appendString(b, a.Buffer)
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, a.Offset, 10)
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, a.Bytes, 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendBuffer appends x as encoding/json writes a Buffer.
func (e *planEncoder) appendBuffer(b []byte, x *Buffer) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, x.Name)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, x.Bytes, 10)
	b = append(b, `,"where":`...)
	b = appendString(b, x.Where)
	b = append(b, `,"role":`...)
	b = appendString(b, x.Role)
	if x.Init != "" {
		b = append(b, `,"init":`...)
		b = appendString(b, x.Init)
	}
	if x.InitValue != 0 {
		b = append(b, `,"init_value":`...)
		b = e.appendFloat(b, x.InitValue)
	}
	if x.InitPath != "" {
		b = append(b, `,"init_path":`...)
		b = appendString(b, x.InitPath)
	}
	if x.InitSeed != 0 {
		b = append(b, `,"init_seed":`...)
		b = strconv.AppendInt(b, x.InitSeed, 10)
	}
	if x.Copies != 0 {
		b = append(b, `,"copies":`...)
		b = strconv.AppendInt(b, int64(x.Copies), 10)
	}
	if x.ArenaOffset != nil {
		b = append(b, `,"arena_offset":`...)
		b = strconv.AppendInt(b, *x.ArenaOffset, 10)
	}
	if x.Alloc != "" {
		b = append(b, `,"alloc":`...)
		b = appendString(b, x.Alloc)
	}
	if x.Device != 0 {
		b = append(b, `,"device":`...)
		b = strconv.AppendInt(b, int64(x.Device), 10)
	}
	return append(b, '}')
}

// appendLifetime appends l as encoding/json writes a Lifetime.
func appendLifetime(b []byte, l *Lifetime) []byte {
	b = append(b, `{"buffer":`...)
	b = appendString(b, l.Buffer)
	b = append(b, `,"done":`...)
	if l.Done == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, d := range l.Done {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"stream":`...)
			b = strconv.AppendInt(b, int64(d.Stream), 10)
			b = append(b, `,"event":`...)
			b = strconv.AppendInt(b, int64(d.Event), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if l.First != "" {
		b = append(b, `,"first":`...)
		b = appendString(b, l.First)
	}
	return append(b, '}')
}

// appendString appends s as encoding/json quotes it (HTML-safe: <, > and
// & escaped; invalid UTF-8 as U+FFFD; U+2028 and U+2029 escaped).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			out, _ := json.Marshal(s) // strings always marshal
			return append(b, out...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat appends f as encoding/json writes a float64 (shortest
// form; exponent form below 1e-6 and from 1e21). NaN and infinities are
// not JSON: e.err is encoding/json's error for them.
func (e *planEncoder) appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return e.marshal(b, f)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json does
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// emptyJSON is encoding/json's omitempty test.
func emptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}
