package planner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
)

// EncodeJSON writes p as its plan file to w, streaming: each stage,
// buffer, lifetime, issue-order entry and stream (launches by stage name,
// each wait with its reason: WaitReasons) is marshalled on its own and
// written through a buffer, so that a plan of a million stages never
// exists as one JSON value in memory and is not indented in a second
// pass. With indent the bytes are those of json.MarshalIndent(p, "", "  ")
// (two spaces, for people), else those of json.Marshal(p) (compact, for
// big plans); both end without a newline. Fields come in Plan's order,
// "streams" last. Errors are w's and encoding/json's.
func (p *Plan) EncodeJSON(w io.Writer, indent bool) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	e := &planEncoder{w: bw, indent: indent}
	why := p.WaitReasons()
	v := reflect.ValueOf(p).Elem()
	bw.WriteByte('{')
	for _, f := range reflect.VisibleFields(v.Type()) {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || f.Anonymous || name == "-" || f.Name == "Streams" {
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
		if fv.Kind() == reflect.Slice && !fv.IsNil() {
			e.list(fv.Len(), func(i int) any { return fv.Index(i).Interface() })
		} else {
			e.value(fv.Interface(), "  ")
		}
	}
	e.key("streams") // a list, even of no streams
	e.list(len(p.Streams), func(i int) any { return p.streamJSON(i, why) })
	if indent {
		bw.WriteByte('\n')
	}
	bw.WriteByte('}')
	if e.err != nil {
		return e.err
	}
	return bw.Flush()
}

// streamJSON is stream i in its JSON form.
func (p *Plan) streamJSON(i int, why [][]*WaitReason) streamJSON {
	s := p.Streams[i]
	sj := streamJSON{ID: s.ID, Name: s.Name, Host: s.Host, Kind: s.Kind, Thread: s.Thread, Ops: make([]opJSON, len(s.Ops))}
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
	w      *bufio.Writer
	indent bool
	fields int
	buf    bytes.Buffer
	err    error
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

// value writes v, indented for a line that starts with prefix.
func (e *planEncoder) value(v any, prefix string) {
	if e.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		e.err = err
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

// list writes a JSON array of n elements, one marshalled at a time.
func (e *planEncoder) list(n int, elem func(int) any) {
	e.w.WriteByte('[')
	for i := range n {
		if i > 0 {
			e.w.WriteByte(',')
		}
		if e.indent {
			e.w.WriteString("\n    ")
		}
		e.value(elem(i), "    ")
	}
	if e.indent && n > 0 {
		e.w.WriteString("\n  ")
	}
	e.w.WriteByte(']')
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
