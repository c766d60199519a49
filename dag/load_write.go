package dag

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// WriteYAML writes s in the spec format that Load reads (docs/spec.md).
// Fields come in a fixed order and defaults are left out (where: device,
// role: temp, init: zeros, sync: auto, whole-buffer accesses written as the
// bare buffer name), so the output is stable: the same Spec gives the same
// bytes. For a valid spec, Load of the output gives back s, apart from Pos,
// File and Dir.
//
// WriteYAML does not validate s; it returns an error only for an argument
// value of a type YAML specs cannot hold (Args values must be integers,
// floats or strings) or when w fails.
func WriteYAML(w io.Writer, s *Spec) error {
	doc, err := specNode(s)
	if err != nil {
		return err
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("dag: writing spec %s: %w", s.Name, err)
	}
	return enc.Close()
}

// MarshalYAML makes a *Spec encode (with yaml.Marshal) exactly as WriteYAML writes it.
func (s *Spec) MarshalYAML() (any, error) { return specNode(s) }

func specNode(s *Spec) (*yaml.Node, error) {
	version := s.Version
	if version == 0 {
		version = SpecVersion
	}
	m := newMap(false)
	m.add("version", intNode(int64(version)))
	if s.Name != "" {
		m.add("name", strNode(s.Name))
	}
	if s.Sync != "" && s.Sync != SyncAuto {
		m.add("sync", strNode(s.Sync))
	}
	if s.Options != (Options{}) {
		o := newMap(true)
		if s.Options.Strategy != "" {
			o.add("strategy", strNode(s.Options.Strategy))
		}
		if s.Options.MaxStreams != 0 {
			o.add("max_streams", intNode(int64(s.Options.MaxStreams)))
		}
		m.add("options", o.n)
	}
	sizes := map[string]int64{}
	if len(s.Buffers) > 0 {
		list := newList(false)
		for _, b := range s.Buffers {
			sizes[b.Name] = b.Bytes
			list.n.Content = append(list.n.Content, bufferNode(b))
		}
		m.add("buffers", list.n)
	}
	if len(s.Kernels) > 0 {
		list := newList(false)
		for _, k := range s.Kernels {
			list.n.Content = append(list.n.Content, kernelNode(k))
		}
		m.add("kernels", list.n)
	}
	stages := newList(false)
	for _, st := range s.Stages {
		n, err := stageNode(st, sizes)
		if err != nil {
			return nil, err
		}
		stages.n.Content = append(stages.n.Content, n)
	}
	m.add("stages", stages.n)
	return m.n, nil
}

func bufferNode(b BufferSpec) *yaml.Node {
	m := newMap(true)
	m.add("name", strNode(b.Name))
	if b.DType != "" {
		m.add("dtype", strNode(b.DType))
		shape := newList(true)
		for _, d := range b.Shape {
			shape.push(intNode(d))
		}
		m.add("shape", shape.n)
	} else {
		m.add("bytes", intNode(b.Bytes))
	}
	if b.Where != "" && b.Where != WhereDevice {
		m.add("where", strNode(b.Where))
	}
	if b.Role != "" && b.Role != RoleTemp {
		m.add("role", strNode(b.Role))
	}
	switch b.Init.Kind {
	case InitFill:
		m.add("init", newMap(true).add(InitFill, floatNode(b.Init.Value)).n)
	case InitFile:
		m.add("init", newMap(true).add(InitFile, strNode(b.Init.Path)).n)
	case InitRandom:
		m.add("init", newMap(true).add(InitRandom, intNode(b.Init.Seed)).n)
	}
	if b.Copies != 0 {
		m.add("copies", intNode(int64(b.Copies)))
	}
	return m.n
}

func kernelNode(k KernelSpec) *yaml.Node {
	m := newMap(true)
	m.add("name", strNode(k.Name))
	m.add("ptx", strNode(k.PTX))
	m.add("entry", strNode(k.Entry))
	if len(k.Params) > 0 {
		params := newList(true)
		for _, p := range k.Params {
			params.push(newMap(true).add("name", strNode(p.Name)).add("type", strNode(p.Type)).n)
		}
		m.add("params", params.n)
	}
	return m.n
}

func stageNode(st StageSpec, sizes map[string]int64) (*yaml.Node, error) {
	m := newMap(false)
	m.add("name", strNode(st.Name))
	m.add("kernel", strNode(st.Kernel))
	if len(st.Args) > 0 {
		keys := make([]string, 0, len(st.Args))
		for k := range st.Args {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		args := newMap(true)
		for _, k := range keys {
			v, err := argNode(st.Args[k])
			if err != nil {
				return nil, fmt.Errorf("dag: writing stage %s: argument %s: %w", st.Name, k, err)
			}
			args.add(k, v)
		}
		m.add("args", args.n)
	}
	if st.Launch.Grid != [3]int{} {
		m.add("grid", dim3Node(st.Launch.Grid))
	}
	if st.Launch.Block != [3]int{} {
		m.add("block", dim3Node(st.Launch.Block))
	}
	if len(st.Reads) > 0 {
		m.add("reads", accessesNode(st.Reads, sizes))
	}
	if len(st.Writes) > 0 {
		m.add("writes", accessesNode(st.Writes, sizes))
	}
	if len(st.After) > 0 {
		m.add("after", namesNode(st.After))
	}
	if st.Stream != "" {
		m.add("stream", strNode(st.Stream))
	}
	if st.DurationUS != 0 {
		m.add("duration_us", floatNode(st.DurationUS))
	}
	if len(st.Waits) > 0 {
		m.add("waits", namesNode(st.Waits))
	}
	return m.n, nil
}

// accessText is the short form of an access: the buffer name when it covers
// the whole buffer (or Bytes is unset), else name[start:end].
func accessText(a Access, sizes map[string]int64) string {
	if a.Bytes == 0 || (a.Offset == 0 && a.Bytes == sizes[a.Buffer]) {
		return a.Buffer
	}
	return a.Buffer + "[" + strconv.FormatInt(a.Offset, 10) + ":" + strconv.FormatInt(a.End(), 10) + "]"
}

func accessesNode(accs []Access, sizes map[string]int64) *yaml.Node {
	l := newList(true)
	for _, a := range accs {
		l.push(strNode(accessText(a, sizes)))
	}
	return l.n
}

func namesNode(names []string) *yaml.Node {
	l := newList(true)
	for _, s := range names {
		l.push(strNode(s))
	}
	return l.n
}

func dim3Node(d [3]int) *yaml.Node {
	l := newList(true)
	for _, x := range d {
		l.push(intNode(int64(x)))
	}
	return l.n
}

func argNode(v any) (*yaml.Node, error) {
	switch x := v.(type) {
	case int:
		return intNode(int64(x)), nil
	case int8:
		return intNode(int64(x)), nil
	case int16:
		return intNode(int64(x)), nil
	case int32:
		return intNode(int64(x)), nil
	case int64:
		return intNode(x), nil
	case uint8:
		return intNode(int64(x)), nil
	case uint16:
		return intNode(int64(x)), nil
	case uint32:
		return intNode(int64(x)), nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return nil, fmt.Errorf("%d does not fit in int64", x)
		}
		return intNode(int64(x)), nil
	case uint64:
		if x > math.MaxInt64 {
			return nil, fmt.Errorf("%d does not fit in int64", x)
		}
		return intNode(int64(x)), nil
	case float32:
		return floatNode(float64(x)), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("%v is not a finite number", x)
		}
		return floatNode(x), nil
	case string:
		return strNode(x), nil
	}
	return nil, fmt.Errorf("value %v of type %T: want an integer, float or string", v, v)
}

// --- node builders ---

type nodeBuilder struct{ n *yaml.Node }

func newMap(flow bool) nodeBuilder {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if flow {
		n.Style = yaml.FlowStyle
	}
	return nodeBuilder{n}
}

func newList(flow bool) nodeBuilder {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	if flow {
		n.Style = yaml.FlowStyle
	}
	return nodeBuilder{n}
}

// add appends the field k: v to a mapping.
func (b nodeBuilder) add(k string, v *yaml.Node) nodeBuilder {
	b.n.Content = append(b.n.Content, strNode(k), v)
	return b
}

// push appends an item to a list.
func (b nodeBuilder) push(v *yaml.Node) nodeBuilder {
	b.n.Content = append(b.n.Content, v)
	return b
}

func strNode(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func intNode(v int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v, 10)}
}

// floatNode writes v so that it reads back as the same float64 and as a
// float, not an integer (2 is written 2.0).
func floatNode(v float64) *yaml.Node {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEnN") {
		s += ".0"
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: s}
}
