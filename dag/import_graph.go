package dag

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dagrun/dagrun/internal/yamlscan"
	"gopkg.in/yaml.v3"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/internal/safefile"
)

// Graph is an operator graph as exported by a tracer (torch.fx or
// torch.export), the format of dagrun_torch's
// exporter (python/dagrun_torch/exporter.py, `python3 -m dagrun_torch export`):
// nodes in the order one stream runs them, each with the tensors it reads and
// writes and its measured GPU time. Dependencies are not listed: they follow
// from the read and write sets in node order.
type Graph struct {
	Model   string        `json:"model"`
	Source  string        `json:"source,omitempty"`
	Tracer  string        `json:"tracer,omitempty"`
	Batch   int           `json:"batch,omitempty"`
	Device  string        `json:"device,omitempty"`
	EagerMS float64       `json:"eager_ms,omitempty"`
	GraphMS float64       `json:"graph_ms,omitempty"`
	SumUS   float64       `json:"sum_node_us,omitempty"`
	Tensors []GraphTensor `json:"tensors"`
	Nodes   []GraphNode   `json:"nodes"`

	// src is where the graph was read from (ReadGraph, ReadGraphFile),
	// for the positions of errors; nil for a graph built in Go.
	src *graphSource
}

// graphSource is a graph's file and its JSON tree with line:column
// positions (the spec loader's JSON scanner).
type graphSource struct {
	file string
	root *yaml.Node
}

// GraphTensor is one tensor: id, size in bytes, and kind (input, activation,
// param). Alloc is "" or "producer": a tensor that the operator writing it
// allocates for itself (a library call that returns a new tensor, as
// PyTorch's operators do), so its bytes never come from the planner's arena.
// ImportGraph gives such a tensor `alloc: producer` (BufferSpec.Alloc
// AllocProducer) when it becomes a temp; an output drops it (its bytes are
// the caller's), and an input or param with it is an error.
type GraphTensor struct {
	ID    string `json:"id"`
	Bytes int64  `json:"bytes"`
	Kind  string `json:"kind"`
	Alloc string `json:"alloc,omitempty"`
}

// GraphNode is one operator: the tensor ids it reads and writes and its GPU
// time in µs. In-place nodes read and write the same tensor id. Stream, when
// set, pins the node's stage to that named stream (StageSpec.Stream): nodes
// with one stream name share a stream, in node order; a schedule made
// outside the planner (dagrun_torch's staged schedule) hands its stream
// assignment to the planner this way, which still places the waits and
// verifies the plan.
type GraphNode struct {
	ID         string   `json:"id"`
	Op         string   `json:"op"`
	Reads      []string `json:"reads"`
	Writes     []string `json:"writes"`
	DurationUS float64  `json:"duration_us"`
	Inplace    bool     `json:"inplace"`
	ParamBytes int64    `json:"param_bytes"`
	Stream     string   `json:"stream,omitempty"`
}

// ImportOptions control how graph nodes become stages.
type ImportOptions struct {
	// MaxWords is the mix built-in's max_words argument: each stage hashes at
	// most this many 4-byte words per written tensor, so a node stands for its
	// tensors' dependencies and its duration, not for their full traffic.
	// 0 means 64.
	MaxWords int
}

// ReadGraphFile reads an operator graph JSON file. Errors name the file,
// and for bad JSON or a value of the wrong type the line and column. A
// file that is not a regular file, or is larger than MaxSpecBytes, is
// refused before it is read (*safefile.RefusedError); one that cannot be
// read gives "cannot read graph file", wrapping the os error.
func ReadGraphFile(path string) (*Graph, error) {
	data, err := safefile.ReadFile(path, MaxSpecBytes, "graph file")
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return nil, fmt.Errorf("%s: cannot read graph file: %w (check the path; python3 -m dagrun_torch export writes one)", safefile.Quote(path), pe.Err)
	}
	if err != nil {
		return nil, err
	}
	return readGraph(data, path)
}

// ReadGraph decodes an operator graph. Fields it does not know are ignored,
// so that exporters may add their own. Errors give the line and column of
// bad JSON or of a value of the wrong type.
func ReadGraph(r io.Reader) (*Graph, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return readGraph(data, "")
}

func readGraph(data []byte, file string) (*Graph, error) {
	src := &graphSource{file: file}
	root, err := yamlscan.Scan(string(data), yamlscan.Options{JSON: true})
	if err != nil {
		var je *yamlscan.JSONError
		if errors.As(err, &je) {
			return nil, src.errorf(Pos{Line: je.Line, Col: je.Col}, "not an operator graph: JSON syntax error: %s", je.Msg)
		}
		return nil, src.errorf(Pos{}, "not an operator graph: %v", err)
	}
	src.root = root
	var g Graph
	if err := json.Unmarshal(data, &g); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			pos, path := src.valueBefore(data, te.Offset)
			return nil, src.errorf(pos, "not an operator graph: %s: want %s, got a JSON %s", cmp.Or(path, te.Field, "the graph"), jsonKind(te.Type), te.Value)
		}
		return nil, src.errorf(Pos{}, "not an operator graph: %v", err)
	}
	g.src = src
	return &g, nil
}

// jsonKind names the JSON value a Go type takes, for messages.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

// errorf is an error at pos in the graph (file:line:col where known).
func (src *graphSource) errorf(pos Pos, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if src == nil {
		return errors.New(msg)
	}
	pos.File = cmpOrStr(src.file, "<graph>")
	if pos.Line == 0 && src.file == "" {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %s", pos, msg)
}

// valueBefore is the position of the JSON value that ends at byte off of
// data (encoding/json's offset of a type error), the last node of the
// tree that starts before it, and its path (nodes[3].reads[0]).
func (src *graphSource) valueBefore(data []byte, off int64) (Pos, string) {
	off = min(max(off, 0), int64(len(data)))
	head := string(data[:off])
	line := 1 + strings.Count(head, "\n")
	col := 1 + utf8.RuneCountInString(head[strings.LastIndexByte(head, '\n')+1:])
	var best *yaml.Node
	var bestPath string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if n.Line < line || n.Line == line && n.Column < col {
			if best == nil || n.Line > best.Line || n.Line == best.Line && n.Column > best.Column {
				best, bestPath = n, path
			}
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if path != "" {
					k = path + "." + k
				}
				walk(n.Content[i+1], k)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	if src.root != nil {
		walk(src.root, "")
	}
	if best == nil {
		return Pos{Line: line, Col: col}, ""
	}
	return Pos{Line: best.Line, Col: best.Column}, bestPath
}

// at is the position in the graph's file of the value at path (object
// keys and list indexes: "nodes", 3, "duration_us"), or of the nearest
// value on the path that the file has; Pos{} without a source.
func (g *Graph) at(path ...any) Pos {
	if g.src == nil || g.src.root == nil {
		return Pos{}
	}
	n := g.src.root
	for _, k := range path {
		var next *yaml.Node
		switch k := k.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						next = n.Content[i+1]
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && k >= 0 && k < len(n.Content) {
				next = n.Content[k]
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return Pos{Line: n.Line, Col: n.Column}
}

// errorf is an error at the value at path in g's file.
func (g *Graph) errorf(path []any, format string, args ...any) error {
	if g.src == nil {
		return fmt.Errorf(format, args...)
	}
	return g.src.errorf(g.at(path...), format, args...)
}

// goSpecPath matches the path in an error of Validate for a spec built in
// Go: the list, the item's index, and the rest ("stages[1].args").
var goSpecPath = regexp.MustCompile(`^(stages|buffers)\[(\d+)\](?:\.(\w+))?`)

// Locate turns errors of Validate for ImportGraph(g)'s spec s, which name
// the spec's items (stages[1].args), into errors at the graph's nodes and
// tensors they came from (file:line:col of nodes[1].duration_us); other
// errors and graphs without a source are returned as they are.
func (g *Graph) Locate(s *Spec, err error) error {
	var list ErrorList
	if g.src == nil || !errors.As(err, &list) {
		return err
	}
	out := make(ErrorList, len(list))
	for i, e := range list {
		c := *e
		out[i] = &c
		m := goSpecPath.FindStringSubmatch(e.Pos.File)
		if m == nil {
			continue
		}
		k, _ := strconv.Atoi(m[2])
		var path []any
		switch m[1] {
		case "stages":
			field := map[string]string{"name": "id", "args": "duration_us", "duration_us": "duration_us", "reads": "reads", "writes": "writes", "stream": "stream", "kernel": "op"}[m[3]]
			path = []any{"nodes", k}
			if field != "" {
				path = append(path, field)
			}
		case "buffers":
			t := -1
			if k < len(s.Buffers) {
				for j := range g.Tensors {
					if g.Tensors[j].ID == s.Buffers[k].Name {
						t = j
					}
				}
			}
			if t < 0 {
				continue
			}
			path = []any{"tensors", t}
			if field := map[string]string{"name": "id", "bytes": "bytes"}[m[3]]; field != "" {
				path = append(path, field)
			}
		}
		c.Pos = g.at(path...)
		c.Pos.File = cmpOrStr(g.src.file, "<graph>")
	}
	return out
}

// ImportGraph converts an operator graph into a spec. Each node becomes a
// stage running the mix built-in with spin_us = its duration (so it takes
// the node's measured time and its output depends on everything it read),
// one thread block, reading and writing whole tensors. Tensors become
// buffers: "input" tensors are role input with seeded random contents,
// "param" tensors (weights) role input with zeros, tensors written and never read again are role output, the rest
// are temp. A temp whose tensor has alloc "producer" gets `alloc: producer`:
// the planner leaves it out of the arena. An output drops the mark (the
// caller's buffer; YAML refuses producer on outputs), and an input or
// param with it is an error. A node that writes nothing becomes a spin
// stage.
//
// Errors, at file:line:col of the graph's value where it was read from a
// file: duplicate or unknown ids, non-positive sizes, sizes that are not a
// multiple of 4 bytes, tensor kinds other than input, activation and param,
// a tensor alloc other than "" and "producer", alloc "producer" on an input
// or param, a read of a producer-allocated temp at or before the node that
// first writes it (or of one no node writes), negative durations and durations over 60 s
// (contract.MaxSpinUS), writes to input or param tensors.
func ImportGraph(g *Graph, o ImportOptions) (*Spec, error) {
	if o.MaxWords <= 0 {
		o.MaxWords = 64
	}
	if len(g.Nodes) == 0 {
		return nil, g.errorf([]any{"nodes"}, "graph %q has no nodes", g.Model)
	}
	tensors := make(map[string]*GraphTensor, len(g.Tensors))
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if _, dup := tensors[t.ID]; dup {
			return nil, g.errorf([]any{"tensors", i, "id"}, "tensor %q is listed twice", t.ID)
		}
		switch t.Kind {
		case "", "input", "activation", "param": // none: an activation
		default:
			return nil, g.errorf([]any{"tensors", i, "kind"}, "tensor %q has kind %q: want input, activation or param", t.ID, t.Kind)
		}
		if t.Alloc != "" && t.Alloc != AllocProducer {
			return nil, g.errorf([]any{"tensors", i, "alloc"}, "tensor %q has alloc %q: want %q (the operator writing it allocates it) or none", t.ID, t.Alloc, AllocProducer)
		}
		if t.Alloc == AllocProducer && (t.Kind == "input" || t.Kind == "param") {
			a := map[string]string{"input": "an input", "param": "a param"}[t.Kind]
			return nil, g.errorf([]any{"tensors", i, "alloc"}, "tensor %q is %s with alloc %q: %s's bytes are the caller's, no operator allocates them; drop alloc", t.ID, a, t.Alloc, a)
		}
		if t.Bytes <= 0 || t.Bytes%4 != 0 {
			return nil, g.errorf([]any{"tensors", i, "bytes"}, "tensor %q has %d bytes: want a positive multiple of 4", t.ID, t.Bytes)
		}
		tensors[t.ID] = t
	}
	// Last reader and last writer of each tensor, to find the outputs.
	lastRead := map[string]int{}
	lastWrite := map[string]int{}
	firstWrite := map[string]int{}
	used := map[string]bool{}
	names := map[string]bool{}
	for i, n := range g.Nodes {
		if names[n.ID] {
			return nil, g.errorf([]any{"nodes", i, "id"}, "node %q is listed twice", n.ID)
		}
		names[n.ID] = true
		if n.DurationUS < 0 {
			return nil, g.errorf([]any{"nodes", i, "duration_us"}, "node %q has a negative duration %g µs", n.ID, n.DurationUS)
		}
		if n.DurationUS > contract.MaxSpinUS || math.IsNaN(n.DurationUS) {
			return nil, g.errorf([]any{"nodes", i, "duration_us"}, "node %q has duration_us %g: more than %g µs (60 s), the most one launch may spin", n.ID, n.DurationUS, float64(contract.MaxSpinUS))
		}
		for r, id := range n.Reads {
			if tensors[id] == nil {
				return nil, g.errorf([]any{"nodes", i, "reads", r}, "node %q reads unknown tensor %q", n.ID, id)
			}
			lastRead[id] = i
			used[id] = true
		}
		for w, id := range n.Writes {
			t := tensors[id]
			if t == nil {
				return nil, g.errorf([]any{"nodes", i, "writes", w}, "node %q writes unknown tensor %q", n.ID, id)
			}
			if t.Kind == "input" || t.Kind == "param" {
				return nil, g.errorf([]any{"nodes", i, "writes", w}, "node %q writes %s tensor %q", n.ID, t.Kind, id)
			}
			if _, ok := lastWrite[id]; !ok {
				firstWrite[id] = i
			}
			lastWrite[id] = i
			used[id] = true
		}
	}
	// A producer-allocated temp's contents before its first write are
	// undefined: a node that reads it at or before that write is an error
	// at the read (an output drops the mark, so its reads are not checked).
	producerTemp := func(t *GraphTensor) bool {
		return t.Alloc == AllocProducer && !(isWritten(lastWrite, t.ID) && lastRead[t.ID] <= lastWrite[t.ID])
	}
	for i, n := range g.Nodes {
		for r, id := range n.Reads {
			t := tensors[id]
			if !producerTemp(t) {
				continue
			}
			if w, ok := firstWrite[id]; !ok {
				return nil, g.errorf([]any{"nodes", i, "reads", r}, "node %q reads tensor %q, which has alloc %q and no node writes: its contents are undefined; drop alloc, or add the node that returns it", n.ID, id, t.Alloc)
			} else if i <= w {
				return nil, g.errorf([]any{"nodes", i, "reads", r}, "node %q reads tensor %q before node %q writes it, and it has alloc %q: its contents before that write are undefined; list the writer first, or drop alloc", n.ID, id, g.Nodes[w].ID, t.Alloc)
			}
		}
	}
	s := &Spec{Version: 1, Name: g.Model, Sync: SyncAuto}
	for i, t := range g.Tensors {
		if !used[t.ID] {
			continue
		}
		b := BufferSpec{Name: t.ID, Bytes: t.Bytes, Where: WhereDevice, Role: RoleTemp}
		switch {
		case t.Kind == "input":
			b.Role = RoleInput
			b.Init = Init{Kind: InitRandom, Seed: int64(i + 1)}
		case t.Kind == "param":
			// Weights: read-only inputs. Zeros keep large models cheap to
			// set up; the mix hash still differs per stage.
			b.Role = RoleInput
		case isWritten(lastWrite, t.ID) && lastRead[t.ID] <= lastWrite[t.ID]:
			// Written, and no node after its last writer reads it.
			b.Role = RoleOutput
		case t.Alloc == AllocProducer:
			b.Alloc = AllocProducer
		}
		s.Buffers = append(s.Buffers, b)
	}
	for _, n := range g.Nodes {
		st := StageSpec{
			Name:       n.ID,
			Kernel:     BuiltinMix,
			Args:       map[string]any{"spin_us": n.DurationUS, "max_words": o.MaxWords},
			Launch:     Launch{Grid: [3]int{1, 1, 1}},
			DurationUS: n.DurationUS,
			Stream:     n.Stream,
		}
		for _, id := range n.Reads {
			st.Reads = append(st.Reads, Access{Buffer: id, Bytes: tensors[id].Bytes})
		}
		for _, id := range n.Writes {
			st.Writes = append(st.Writes, Access{Buffer: id, Bytes: tensors[id].Bytes})
		}
		if len(st.Writes) == 0 {
			st.Kernel = BuiltinSpin
			st.Args = map[string]any{"us": n.DurationUS}
		}
		s.Stages = append(s.Stages, st)
	}
	return s, nil
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func isWritten(lastWrite map[string]int, id string) bool {
	_, ok := lastWrite[id]
	return ok
}

// GraphSummary is a one-line description of a graph, for import headers:
// its model, source and tracer where given, its node and tensor counts and
// its five most used ops (control characters and line breaks of the
// graph's text become spaces).
func GraphSummary(g *Graph) string {
	ops := map[string]int{}
	for _, n := range g.Nodes {
		if n.Op != "" {
			ops[n.Op]++
		}
	}
	keys := make([]string, 0, len(ops))
	for k := range ops {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return ops[keys[i]] > ops[keys[j]] || ops[keys[i]] == ops[keys[j]] && keys[i] < keys[j]
	})
	if len(keys) > 5 {
		keys = keys[:5]
	}
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s×%d", k, ops[k]))
	}
	line := g.Model
	if line == "" {
		line = "unnamed graph"
	}
	var from []string
	for _, f := range []string{g.Source, g.Tracer} {
		if f != "" {
			from = append(from, f)
		}
	}
	if len(from) > 0 {
		line += " (" + strings.Join(from, ", ") + ")"
	}
	line += fmt.Sprintf(": %d node%s, %d tensor%s", len(g.Nodes), plural(len(g.Nodes)), len(g.Tensors), plural(len(g.Tensors)))
	if len(parts) > 0 {
		line += "; top ops " + strings.Join(parts, " ")
	}
	// One line: it goes into a comment.
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 {
			return ' '
		}
		return r
	}, line)
}
