package dag

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
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

func writeSpec(w *bufio.Writer, s *Spec) error {
	version := s.Version
	if version == 0 {
		version = SpecVersion
	}
	fmt.Fprintf(w, "version: %d\n", version)
	if s.Name != "" {
		fmt.Fprintf(w, "name: %s\n", yamlString(s.Name))
	}
	if s.Sync != "" && s.Sync != SyncAuto {
		fmt.Fprintf(w, "sync: %s\n", yamlString(s.Sync))
	}
	if s.Options != (Options{}) {
		var f flowMap
		if s.Options.Strategy != "" {
			f.add("strategy", yamlString(s.Options.Strategy))
		}
		if s.Options.MaxStreams != 0 {
			f.add("max_streams", strconv.Itoa(s.Options.MaxStreams))
		}
		if s.Options.Arena != "" {
			f.add("arena", yamlString(s.Options.Arena))
		}
		switch {
		case s.Options.MemoryBudget == MemoryBudgetAuto:
			f.add("memory_budget", "auto")
		case s.Options.MemoryBudget != 0:
			f.add("memory_budget", strconv.FormatInt(s.Options.MemoryBudget, 10))
		}
		fmt.Fprintf(w, "options: %s\n", f)
	}
	sizes := make(map[string]int64, len(s.Buffers))
	if len(s.Buffers) > 0 {
		w.WriteString("buffers:\n")
		for _, b := range s.Buffers {
			sizes[b.Name] = b.Bytes
			fmt.Fprintf(w, "  - %s\n", bufferText(b))
		}
	}
	if len(s.Kernels) > 0 {
		w.WriteString("kernels:\n")
		for _, k := range s.Kernels {
			fmt.Fprintf(w, "  - %s\n", kernelText(k))
		}
	}
	w.WriteString("stages:\n")
	for _, st := range s.Stages {
		if err := writeStage(w, st, sizes); err != nil {
			return err
		}
	}
	return nil
}

func bufferText(b BufferSpec) flowMap {
	var f flowMap
	f.add("name", yamlString(b.Name))
	if b.DType != "" {
		f.add("dtype", yamlString(b.DType))
		dims := make([]string, len(b.Shape))
		for i, d := range b.Shape {
			dims[i] = strconv.FormatInt(d, 10)
		}
		f.add("shape", flowList(dims))
	} else {
		f.add("bytes", strconv.FormatInt(b.Bytes, 10))
	}
	if b.Where != "" && b.Where != WhereDevice {
		f.add("where", yamlString(b.Where))
	}
	if b.Role != "" && b.Role != RoleTemp {
		f.add("role", yamlString(b.Role))
	}
	switch b.Init.Kind {
	case InitFill:
		f.add("init", "{fill: "+yamlFloat(b.Init.Value)+"}")
	case InitFile:
		f.add("init", "{file: "+yamlString(b.Init.Path)+"}")
	case InitRandom:
		f.add("init", "{random: "+strconv.FormatInt(b.Init.Seed, 10)+"}")
	}
	if b.Copies != 0 {
		f.add("copies", strconv.Itoa(b.Copies))
	}
	return f
}

func kernelText(k KernelSpec) flowMap {
	var f flowMap
	f.add("name", yamlString(k.Name))
	f.add("ptx", yamlString(k.PTX))
	f.add("entry", yamlString(k.Entry))
	if len(k.Params) > 0 {
		params := make([]string, len(k.Params))
		for i, p := range k.Params {
			var pf flowMap
			pf.add("name", yamlString(p.Name))
			pf.add("type", yamlString(p.Type))
			params[i] = pf.String()
		}
		f.add("params", flowList(params))
	}
	return f
}

func writeStage(w *bufio.Writer, st StageSpec, sizes map[string]int64) error {
	fmt.Fprintf(w, "  - name: %s\n", yamlString(st.Name))
	fmt.Fprintf(w, "    kernel: %s\n", yamlString(st.Kernel))
	if len(st.Args) > 0 {
		keys := make([]string, 0, len(st.Args))
		for k := range st.Args {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var f flowMap
		for _, k := range keys {
			v, err := argText(st.Args[k])
			if err != nil {
				return fmt.Errorf("dag: writing stage %s: argument %s: %w", st.Name, k, err)
			}
			f.add(yamlString(k), v)
		}
		fmt.Fprintf(w, "    args: %s\n", f)
	}
	if st.Launch.Grid != [3]int{} {
		fmt.Fprintf(w, "    grid: %s\n", dim3Text(st.Launch.Grid))
	}
	if st.Launch.Block != [3]int{} {
		fmt.Fprintf(w, "    block: %s\n", dim3Text(st.Launch.Block))
	}
	if len(st.Reads) > 0 {
		fmt.Fprintf(w, "    reads: %s\n", accessesText(st.Reads, sizes))
	}
	if len(st.Writes) > 0 {
		fmt.Fprintf(w, "    writes: %s\n", accessesText(st.Writes, sizes))
	}
	if len(st.After) > 0 {
		fmt.Fprintf(w, "    after: %s\n", namesText(st.After))
	}
	if st.Stream != "" {
		fmt.Fprintf(w, "    stream: %s\n", yamlString(st.Stream))
	}
	if st.DurationUS != 0 {
		fmt.Fprintf(w, "    duration_us: %s\n", yamlFloat(st.DurationUS))
	}
	if len(st.Waits) > 0 || len(st.WaitFor) > 0 {
		items := make([]string, 0, len(st.Waits)+len(st.WaitFor))
		for _, n := range st.Waits {
			items = append(items, yamlString(n))
		}
		for _, ws := range st.WaitFor {
			item := "{stage: " + yamlString(ws.Stage)
			if ws.Event != "" {
				item = "{event: " + yamlString(ws.Event)
			}
			if ws.Lag > 0 {
				item += fmt.Sprintf(", lag: %d", ws.Lag)
			}
			items = append(items, item+"}")
		}
		fmt.Fprintf(w, "    waits: [%s]\n", strings.Join(items, ", "))
	}
	if st.Event != "" {
		fmt.Fprintf(w, "    event: %s\n", yamlString(st.Event))
	}
	return nil
}

// accessText is the short form of an access: the buffer name when it covers
// the whole buffer (or Bytes is unset), else name[start:end].
func accessText(a Access, sizes map[string]int64) string {
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
