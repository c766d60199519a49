package dag

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// WriteYAML writes s in the spec format that Load reads (docs/spec.md).
// Fields come in a fixed order and defaults are left out (where: device,
// role: temp, init: zeros, sync: auto, whole-buffer accesses written as the
// bare buffer name, ranges as "x[a:b]"), so the output is stable: the same
// Spec gives the same bytes. For a spec that Load accepts, Load of the output
// gives back s, apart from Pos, File and Dir. A Version of 0 is written as 1.
//
// WriteYAML does not validate s; it returns an error for an argument value
// of a type a spec cannot hold (Args values must be integers, floats or
// strings), or when w fails.
//
// It writes the text itself rather than through yaml.v3's encoder, which
// keeps every event of a document in memory (about 45 KB per stage).
func WriteYAML(w io.Writer, s *Spec) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := writeSpec(bw, s); err != nil {
		return err
	}
	return bw.Flush()
}

// writeSpec writes s's fields as the field tables (load_fields.go and the
// files it names) say: the header fields one per line, buffers and kernels
// as flow mappings one per line, stages as block mappings.
func writeSpec(w *bufio.Writer, s *Spec) error {
	wr := &writing{sizes: make(map[string]int64, len(s.Buffers)), multi: s.Devices > 1 || s.Options.Placement == PlacementBalance}
	for _, sd := range s.Streams {
		if sd.Kind == KindHost {
			if wr.hosts == nil {
				wr.hosts = map[string]bool{}
			}
			wr.hosts[sd.Name] = true
		}
	}
	for _, b := range s.Buffers {
		wr.sizes[b.Name] = b.Bytes
	}
	for _, f := range specTable {
		switch f.key {
		case "buffers":
			if len(s.Buffers) > 0 {
				w.WriteString("buffers:\n")
				for i := range s.Buffers {
					if err := writeFlow(w, bufferTable, &s.Buffers[i], wr); err != nil {
						return err
					}
				}
			}
		case "kernels":
			if len(s.Kernels) > 0 {
				w.WriteString("kernels:\n")
				for i := range s.Kernels {
					if err := writeFlow(w, kernelTable, &s.Kernels[i], wr); err != nil {
						return err
					}
				}
			}
		case "stages":
			if len(s.Stages) == 0 {
				w.WriteString("stages: []\n")
				continue
			}
			w.WriteString("stages:\n")
			for i := range s.Stages {
				first := true
				err := writeFields(stageTable, &s.Stages[i], wr, func(k, v string) {
					if first {
						w.WriteString("  - ")
						first = false
					} else {
						w.WriteString("    ")
					}
					w.WriteString(k)
					w.WriteString(": ")
					w.WriteString(v)
					w.WriteByte('\n')
				})
				if err != nil {
					return err
				}
			}
		default:
			v, err := f.write(s, wr)
			if err != nil {
				return err
			}
			if v != "" {
				fmt.Fprintf(w, "%s: %s\n", f.key, v)
			}
		}
	}
	return nil
}

// writeFlow writes x as one flow-mapping item of a block list.
func writeFlow[T, S any](w *bufio.Writer, table []field[T, S], x *T, wr *writing) error {
	var f flowMap
	if err := writeFields(table, x, wr, f.add); err != nil {
		return err
	}
	fmt.Fprintf(w, "  - %s\n", f)
	return nil
}

// accessText is the short form of an access: the buffer name when it covers
// the whole buffer (or Bytes is unset), else name[start:end].
func accessText(a Access, sizes map[string]int64) string {
	if a.Bytes == 0 && a.Offset != 0 {
		return a.Buffer + "[" + strconv.FormatInt(a.Offset, 10) + ":]"
	}
	if a.Bytes == 0 || (a.Offset == 0 && a.Bytes == sizes[a.Buffer]) {
		return a.Buffer
	}
	return a.Buffer + "[" + strconv.FormatInt(a.Offset, 10) + ":" + strconv.FormatInt(a.End(), 10) + "]"
}

func accessesText(accs []Access, sizes map[string]int64) string {
	items := make([]string, len(accs))
	for i, a := range accs {
		items[i] = yamlString(accessText(a, sizes))
	}
	return flowList(items)
}

func namesText(names []string) string {
	items := make([]string, len(names))
	for i, s := range names {
		items[i] = yamlString(s)
	}
	return flowList(items)
}

func dim3Text(d [3]int) string {
	return flowList([]string{strconv.Itoa(d[0]), strconv.Itoa(d[1]), strconv.Itoa(d[2])})
}

func argText(v any) (string, error) {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x), nil
	case int8:
		return strconv.FormatInt(int64(x), 10), nil
	case int16:
		return strconv.FormatInt(int64(x), 10), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint8:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint16:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint32:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return "", fmt.Errorf("%d does not fit in int64", x)
		}
		return strconv.FormatUint(uint64(x), 10), nil
	case uint64:
		if x > math.MaxInt64 {
			return "", fmt.Errorf("%d does not fit in int64", x)
		}
		return strconv.FormatUint(x, 10), nil
	case float32:
		return yamlFloat(float64(x)), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return "", fmt.Errorf("%v is not a finite number", x)
		}
		return yamlFloat(x), nil
	case string:
		return yamlString(x), nil
	}
	return "", fmt.Errorf("value %v of type %T: want an integer, float or string", v, v)
}

// --- scalars and flow collections ---

// plainSafe matches strings that YAML reads back as the same string when
// written plain, in block and flow context alike: a letter or underscore,
// then letters, digits and _ . - /. (Words YAML reads as booleans or null
// are excluded separately.)
var plainSafe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_./-]*$`)

// yamlString writes s as a YAML scalar that reads back as the string s:
// plain when that is unambiguous, else double-quoted. Go's quoting is valid
// YAML double-quoted style (\" \\ \n \t \xNN \uNNNN \UNNNNNNNN) for valid UTF-8.
func yamlString(s string) string {
	if plainSafe.MatchString(s) && !yamlKeyword(s) {
		return s
	}
	return strconv.Quote(s)
}

// yamlKeyword reports whether s, written plain, could be read as something
// other than a string by YAML 1.1 or 1.2 readers.
func yamlKeyword(s string) bool {
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null":
		return true
	}
	return false
}

// yamlFloat writes v so that it reads back as the same float64, and as a
// float rather than an integer (2 is written 2.0).
func yamlFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return ".inf"
	case math.IsInf(v, -1):
		return "-.inf"
	case math.IsNaN(v):
		return ".nan"
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// flowMap is a flow mapping under construction: {k: v, ...}. Keys and values
// are already YAML text.
type flowMap []string

func (f *flowMap) add(k, v string) { *f = append(*f, k+": "+v) }

func (f flowMap) String() string { return "{" + strings.Join(f, ", ") + "}" }

// flowList is a flow sequence of items that are already YAML text.
func flowList(items []string) string { return "[" + strings.Join(items, ", ") + "]" }

// writing is what WriteYAML knows while it writes a field.
type writing struct {
	sizes map[string]int64 // buffer sizes, for whole-buffer accesses
	// multi: the spec has several devices or placement: balance, so
	// device 0 is written too (it is not the only device).
	multi bool
	hosts map[string]bool // host streams (a host stage has no device)
}

// deviceIf is a device index as text: "" for AnyDevice, and for 0 unless
// the spec has several devices.
func (w *writing) deviceIf(d int) string {
	if d == AnyDevice || d == 0 && !w.multi {
		return ""
	}
	return strconv.Itoa(d)
}

// writeFields calls write for each field of table that x has, in order.
func writeFields[T, S any](table []field[T, S], x *T, w *writing, write func(key, val string)) error {
	for i := range table {
		v, err := table[i].write(x, w)
		if err != nil {
			return err
		}
		if v != "" {
			write(table[i].key, v)
		}
	}
	return nil
}

func str(s string) string { return yamlString(s) }

// strIf is s as YAML text, or "" when s is empty or the default def.
func strIf(s, def string) string {
	if s == "" || s == def {
		return ""
	}
	return str(s)
}

// intIf is v as text, or "" when v is 0.
func intIf(v int64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

func dim3If(d [3]int) string {
	if d == [3]int{} {
		return ""
	}
	return dim3Text(d)
}

func accessesIf(accs []Access, sizes map[string]int64) string {
	if len(accs) == 0 {
		return ""
	}
	return accessesText(accs, sizes)
}

func waitsText(st *StageSpec) string {
	if len(st.Waits) == 0 && len(st.WaitFor) == 0 {
		return ""
	}
	items := make([]string, 0, len(st.Waits)+len(st.WaitFor))
	for _, n := range st.Waits {
		items = append(items, str(n))
	}
	for _, ws := range st.WaitFor {
		var f flowMap
		if ws.Stage != "" || ws.Event == "" {
			f.add("stage", str(ws.Stage))
		}
		if ws.Event != "" {
			f.add("event", str(ws.Event))
		}
		if ws.Lag != 0 {
			f.add("lag", strconv.Itoa(ws.Lag))
		}
		items = append(items, f.String())
	}
	return flowList(items)
}

// flowItems writes items as a flow list of flow mappings, "" when empty.
func flowItems[T any](table []field[T, struct{}], items []T, w *writing) (string, error) {
	if len(items) == 0 {
		return "", nil
	}
	out := make([]string, len(items))
	for i := range items {
		var f flowMap
		if err := writeFields(table, &items[i], w, f.add); err != nil {
			return "", err
		}
		out[i] = f.String()
	}
	return flowList(out), nil
}
