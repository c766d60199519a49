package dag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"unicode/utf8"
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

	// Positions of each tensor and node object in the file it was read
	// from (ReadGraph, ReadGraphFile), for ImportGraph's errors.
	tensorPos, nodePos []Pos
	file               string // the file it was read from, or ""
}

// GraphTensor is one tensor: id, size in bytes, and kind (input, activation, param).
type GraphTensor struct {
	ID    string `json:"id"`
	Bytes int64  `json:"bytes"`
	Kind  string `json:"kind"`
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

// ReadGraphFile reads an operator graph JSON file. Its errors, and
// ImportGraph's errors about the graph, carry path:line:column.
func ReadGraphFile(path string) (*Graph, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return readGraph(data, path)
}

// ReadGraph decodes an operator graph. Fields it does not know are ignored,
// so that exporters may add their own.
func ReadGraph(r io.Reader) (*Graph, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return readGraph(data, "")
}

func readGraph(data []byte, file string) (*Graph, error) {
	at := func(off int64) Pos {
		p := Pos{File: file, Line: 1 + bytes.Count(data[:off], []byte("\n"))}
		p.Col = 1 + utf8.RuneCount(data[bytes.LastIndexByte(data[:off], '\n')+1:off])
		return p
	}
	g := Graph{file: file}
	if err := json.Unmarshal(data, &g); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se) && se.Offset <= int64(len(data)):
			return nil, fmt.Errorf("%s: not an operator graph: %w", at(max(se.Offset-1, 0)), err)
		case errors.As(err, &te) && te.Offset <= int64(len(data)):
			return nil, fmt.Errorf("%s: not an operator graph: %w", at(te.Offset), err)
		case file != "":
			return nil, fmt.Errorf("%s: not an operator graph: %w", file, err)
		}
		return nil, fmt.Errorf("not an operator graph: %w", err)
	}
	// The offset of each element of the top-level "tensors" and "nodes"
	// lists: a walk over the tokens of a document Unmarshal accepted.
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, key, expectKey := 0, "", false // key: the top-level field whose value is being read
	for {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if k, ok := tok.(string); ok && depth == 1 && expectKey {
			key, expectKey = k, false
			continue
		}
		d, isDelim := tok.(json.Delim)
		switch {
		case isDelim && (d == '{' || d == '['):
			depth++
			if depth == 3 && d == '{' && (key == "tensors" || key == "nodes") {
				for off < int64(len(data)) && data[off] != '{' {
					off++
				}
				if key == "tensors" {
					g.tensorPos = append(g.tensorPos, at(off))
				} else {
					g.nodePos = append(g.nodePos, at(off))
				}
			}
			expectKey = depth == 1
		case isDelim:
			depth--
			expectKey = depth == 1
		default:
			expectKey = depth == 1
		}
	}
	if len(g.tensorPos) != len(g.Tensors) || len(g.nodePos) != len(g.Nodes) {
		g.tensorPos, g.nodePos = nil, nil // positions only when every element has one
	}
	return &g, nil
}

// errAt is an ImportGraph error about element i of the graph's tensors or
// nodes (pos: their positions), prefixed with its file:line:column when the
// graph was read from a file (with the file alone when the element has no
// position; i < 0: the graph as a whole).
func (g *Graph) errAt(pos []Pos, i int, format string, a ...any) error {
	switch {
	case i >= 0 && i < len(pos):
		return fmt.Errorf("%s: "+format, append([]any{pos[i]}, a...)...)
	case g.file != "":
		return fmt.Errorf("%s: "+format, append([]any{g.file}, a...)...)
	}
	return fmt.Errorf(format, a...)
}

// ImportGraph converts an operator graph into a spec. Each node becomes a
// stage running the mix built-in with spin_us = its duration (so it takes
// the node's measured time and its output depends on everything it read),
// one thread block, reading and writing whole tensors. Tensors become
// buffers: "input" tensors are role input with seeded random contents,
// "param" tensors (weights) role input with zeros, tensors written and never read again are role output, the rest
// are temp. A node that writes nothing becomes a spin stage.
//
// Errors: duplicate or unknown ids, non-positive sizes, sizes that are not a
// multiple of 4 bytes, negative durations, writes to input or param tensors;
// for a graph read by ReadGraphFile each names the file and the line:column
// of the tensor or node.
func ImportGraph(g *Graph, o ImportOptions) (*Spec, error) {
	if o.MaxWords <= 0 {
		o.MaxWords = 64
	}
	if len(g.Nodes) == 0 {
		return nil, g.errAt(nil, -1, "graph %q has no nodes", g.Model)
	}
	tensors := make(map[string]*GraphTensor, len(g.Tensors))
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if _, dup := tensors[t.ID]; dup {
			return nil, g.errAt(g.tensorPos, i, "tensor %q is listed twice", t.ID)
		}
		if t.Bytes <= 0 || t.Bytes%4 != 0 {
			return nil, g.errAt(g.tensorPos, i, "tensor %q has %d bytes: want a positive multiple of 4", t.ID, t.Bytes)
		}
		tensors[t.ID] = t
	}
	// Last reader and last writer of each tensor, to find the outputs.
	lastRead := map[string]int{}
	lastWrite := map[string]int{}
	used := map[string]bool{}
	names := map[string]bool{}
	for i, n := range g.Nodes {
		if names[n.ID] {
			return nil, g.errAt(g.nodePos, i, "node %q is listed twice", n.ID)
		}
		names[n.ID] = true
		if n.DurationUS < 0 {
			return nil, g.errAt(g.nodePos, i, "node %q has a negative duration %g µs", n.ID, n.DurationUS)
		}
		for _, id := range n.Reads {
			if tensors[id] == nil {
				return nil, g.errAt(g.nodePos, i, "node %q reads unknown tensor %q", n.ID, id)
			}
			lastRead[id] = i
			used[id] = true
		}
		for _, id := range n.Writes {
			t := tensors[id]
			if t == nil {
				return nil, g.errAt(g.nodePos, i, "node %q writes unknown tensor %q", n.ID, id)
			}
			if t.Kind == "input" || t.Kind == "param" {
				return nil, g.errAt(g.nodePos, i, "node %q writes %s tensor %q", n.ID, t.Kind, id)
			}
			lastWrite[id] = i
			used[id] = true
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

func isWritten(lastWrite map[string]int, id string) bool {
	_, ok := lastWrite[id]
	return ok
}

// GraphSummary is a one-line description of a graph, for import headers
// (control characters and line breaks of the graph's text become spaces).
func GraphSummary(g *Graph) string {
	ops := map[string]int{}
	for _, n := range g.Nodes {
		ops[n.Op]++
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
	line := fmt.Sprintf("%s (%s, %s): %d nodes, %d tensors; top ops %s", g.Model, g.Source, g.Tracer, len(g.Nodes), len(g.Tensors), strings.Join(parts, " "))
	// One line: it goes into a comment.
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 {
			return ' '
		}
		return r
	}, line)
}
