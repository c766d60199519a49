package dag

// The field tables of the spec format: for every mapping, its fields in
// the order WriteYAML writes them, each with how Load decodes it, how
// WriteYAML writes it and what Format tells schema generators. Adding a
// field to the format is adding one entry in a table (this file, and
// load_buffers.go, load_stages.go, load_streams.go) and the struct field
// it fills; a field that names other parts of the spec (a buffer, a
// stage) also gets its check in load_check.go. This file has the tables'
// machinery and the spec and options tables.

import (
	"cmp"
	"math"
	"strconv"

	"gopkg.in/yaml.v3"
)

// field is one field of a mapping whose objects are T, with source
// positions S.
type field[T, S any] struct {
	key string
	// need is the hint when the field is missing; "" for an optional field.
	need string
	// null: a null value means the field is absent.
	null bool
	// decode decodes the field's value v (never nil) into d.x, reporting
	// what is wrong at v's position.
	decode func(d *decoding[T, S], v *yaml.Node)
	// write returns the field's value as YAML text, "" to leave it out.
	write  func(x *T, w *writing) (string, error)
	schema FormatField
}

// decoding is the state of decoding one object.
type decoding[T, S any] struct {
	*loader
	x    *T
	src  *S
	f    *fields
	what string // "stage prep", for messages
}

func keysOf[T, S any](table []field[T, S]) []string {
	keys := make([]string, len(table))
	for i, f := range table {
		keys[i] = f.key
	}
	return keys
}

// decodeObject decodes the mapping n into x with table (whose keys are
// keys), recording positions in src, and returns its fields (nil when n
// is not a mapping).
func decodeObject[T, S any](l *loader, n *yaml.Node, what string, table []field[T, S], keys []string, x *T, src *S) *fields {
	f, ok := l.mapping(n, what, keys)
	if !ok {
		return nil
	}
	d := takeDecoding[T, S](l)
	*d = decoding[T, S]{loader: l, x: x, src: src, f: f, what: f.what}
	for i := range table {
		fd := &table[i]
		v := f.val[i]
		if v == nil {
			if fd.need != "" {
				l.errorf(f.n, fd.need, "%s: missing required field %q", d.what, fd.key)
			}
			continue
		}
		if fd.null && isNull(v) {
			continue
		}
		fd.decode(d, v)
	}
	*d = decoding[T, S]{}
	l.decs = append(l.decs, d)
	return f
}

// takeDecoding returns a decoding state of type T, S given back by an
// earlier decodeObject (one per type of object, not one per object), or a
// new one.
func takeDecoding[T, S any](l *loader) *decoding[T, S] {
	for i := len(l.decs) - 1; i >= 0; i-- {
		if d, ok := l.decs[i].(*decoding[T, S]); ok {
			l.decs[i] = l.decs[len(l.decs)-1]
			l.decs = l.decs[:len(l.decs)-1]
			return d
		}
	}
	return new(decoding[T, S])
}

func (l *loader) decodeSpec(root *yaml.Node, s *Spec) {
	f := decodeObject(l, root, "spec", specTable, specKeys, s, &struct{}{})
	if f != nil && f.get("name") == nil {
		s.Name = defaultName(l.file)
	}
}

var (
	specTable = []field[Spec, struct{}]{
		{key: "version", need: "start the spec with: version: 1",
			decode: func(d *decoding[Spec, struct{}], v *yaml.Node) {
				if n, ok := d.int64Val(v, "version"); ok {
					if n != SpecVersion {
						d.errorf(v, "set version: 1", "version %d is not supported; this dagrun reads version %d", n, SpecVersion)
					} else {
						d.x.Version = int(n)
					}
				}
			},
			write:  func(s *Spec, _ *writing) (string, error) { return strconv.Itoa(cmp.Or(s.Version, SpecVersion)), nil },
			schema: FormatField{Type: "integer", Min: SpecVersion, Max: SpecVersion, HasMin: true, HasMax: true, Doc: "the format version"}},
		{key: "name",
			decode: func(d *decoding[Spec, struct{}], v *yaml.Node) {
				if n, ok := d.name(v, "spec name"); ok {
					d.x.Name = n
				}
			},
			write:  func(s *Spec, _ *writing) (string, error) { return strIf(s.Name, ""), nil },
			schema: FormatField{Type: "name", Doc: "the spec's name (default: the file's base name)"}},
		{key: "sync",
			decode: func(d *decoding[Spec, struct{}], v *yaml.Node) {
				if m, ok := d.oneOf(v, "sync", syncModes); ok {
					d.x.Sync = m
				}
			},
			write:  func(s *Spec, _ *writing) (string, error) { return strIf(s.Sync, SyncAuto), nil },
			schema: FormatField{Type: "enum", Enum: syncModes, Doc: "auto: the planner places streams, events and waits; manual: the spec does"}},
		{key: "devices",
			decode: func(d *decoding[Spec, struct{}], v *yaml.Node) {
				if n, ok := d.intIn(v, "devices", 1, MaxDevices); ok {
					d.x.Devices = int(n)
					d.loader.devicesAt = atOf(v)
				}
			},
			write: func(s *Spec, _ *writing) (string, error) {
				if s.Devices == 0 || s.Devices == 1 {
					return "", nil // the default; a negative count is written, for Load (and Validate) to refuse
				}
				return strconv.Itoa(s.Devices), nil
			},
			schema: FormatField{Type: "integer", Min: 1, Max: MaxDevices, HasMin: true, HasMax: true, Doc: "how many GPUs (default: 1 + the largest device: named)"}},
		{key: "options",
			decode: func(d *decoding[Spec, struct{}], v *yaml.Node) {
				decodeObject(d.loader, v, "options", optionsTable, optionsKeys, &d.x.Options, &struct{}{})
			},
			write: func(s *Spec, w *writing) (string, error) {
				if s.Options == (Options{}) {
					return "", nil
				}
				var f flowMap
				err := writeFields(optionsTable, &s.Options, w, f.add)
				return f.String(), err
			},
			schema: FormatField{Type: "mapping", Items: "options", Doc: "planner options (CLI flags override them)"}},
		{key: "buffers", null: true,
			decode: func(d *decoding[Spec, struct{}], v *yaml.Node) {
				d.items(v, "buffers", "write buffers as a list: buffers: [{name: x, bytes: 4096}]", func(it *yaml.Node) { d.decodeBuffer(d.x, it) })
			},
			write:  nil, // written as a block list by writeSpec
			schema: FormatField{Type: "list", Items: "buffer", Doc: "the buffers"}},
		{key: "kernels", null: true,
			decode: func(d *decoding[Spec, struct{}], v *yaml.Node) {
				d.items(v, "kernels", "write kernels as a list: kernels: [{name: k, ptx: k.ptx, entry: k}]", func(it *yaml.Node) { d.decodeKernel(d.x, it) })
			},
			schema: FormatField{Type: "list", Items: "kernel", Doc: "user kernels from PTX files"}},
		{key: "streams", null: true,
			decode: func(d *decoding[Spec, struct{}], v *yaml.Node) {
				d.items(v, "streams", "write streams as a list: streams: [{name: s, kind: blocking}]", func(it *yaml.Node) {
					sd := StreamSpec{Pos: d.pos(it), Kind: KindNonBlocking, Device: AnyDevice}
					if decodeObject(d.loader, it, "stream", streamTable, streamDeclKeys, &sd, &struct{}{}) != nil {
						d.x.Streams = append(d.x.Streams, sd)
					}
				})
			},
			write: func(s *Spec, w *writing) (string, error) {
				return flowItems(streamTable, s.Streams, w)
			},
			schema: FormatField{Type: "list", Items: "stream", Doc: "stream kinds and host threads (undeclared streams: non_blocking, main thread)"}},
		{key: "captures", null: true,
			decode: func(d *decoding[Spec, struct{}], v *yaml.Node) {
				d.items(v, "captures", "write captures as a list: captures: [{stream: s, first: a, last: z}]", func(it *yaml.Node) {
					cd := CaptureSpec{Pos: d.pos(it), Mode: CaptureGlobal}
					if decodeObject(d.loader, it, "capture", captureTable, captureKeys, &cd, &struct{}{}) != nil {
						d.x.Captures = append(d.x.Captures, cd)
					}
				})
			},
			write: func(s *Spec, w *writing) (string, error) {
				return flowItems(captureTable, s.Captures, w)
			},
			schema: FormatField{Type: "list", Items: "capture", Doc: "stream-capture regions, checked against CUDA's capture rules"}},
		{key: "stages", need: "add a list of stages: stages: [{name: a, kernel: spin}]",
			decode: func(d *decoding[Spec, struct{}], v *yaml.Node) {
				if n, ok := d.items(v, "stages", "write stages as a list of mappings", func(it *yaml.Node) { d.decodeStage(d.x, it) }); ok && n == 0 {
					d.errorf(v, "add at least one stage", "stages is empty")
				}
			},
			schema: FormatField{Type: "list", Items: "stage", Doc: "the stages, in the order one stream would run them"}},
	}
	specKeys = keysOf(specTable)
)

var (
	optionsTable = []field[Options, struct{}]{
		{key: "strategy",
			decode: func(d *decoding[Options, struct{}], v *yaml.Node) {
				if s, ok := d.oneOf(v, "options: strategy", strategies); ok {
					d.x.Strategy = s
				}
			},
			write:  func(o *Options, _ *writing) (string, error) { return strIf(o.Strategy, ""), nil },
			schema: FormatField{Type: "enum", Enum: strategies, Doc: "how stages are assigned to streams"}},
		{key: "max_streams",
			decode: func(d *decoding[Options, struct{}], v *yaml.Node) {
				if m, ok := d.intIn(v, "options: max_streams", 0, math.MaxInt32); ok {
					d.x.MaxStreams = int(m)
				}
			},
			write:  func(o *Options, _ *writing) (string, error) { return intIf(int64(o.MaxStreams)), nil },
			schema: FormatField{Type: "integer", Min: 0, Max: math.MaxInt32, HasMin: true, HasMax: true, Doc: "most streams (0: dagrun's default cap, 8 for the default strategy)"}},
		{key: "arena",
			decode: func(d *decoding[Options, struct{}], v *yaml.Node) {
				if s, ok := d.oneOf(v, "options: arena", arenaModes); ok {
					d.x.Arena = s
				}
			},
			write:  func(o *Options, _ *writing) (string, error) { return strIf(o.Arena, ""), nil },
			schema: FormatField{Type: "enum", Enum: arenaModes, Doc: "how temp buffers share one arena"}},
		{key: "memory_budget",
			decode: func(d *decoding[Options, struct{}], v *yaml.Node) {
				switch {
				case v.Kind == yaml.ScalarNode && v.Value == "auto":
					d.x.MemoryBudget = MemoryBudgetAuto
				case v.Kind == yaml.ScalarNode && v.Value == "none":
					d.x.MemoryBudget = 0
				case v.Kind == yaml.ScalarNode && v.Value == "0":
					// 0 bytes is a cap no arena meets, not "no budget".
					d.errorf(v, "write none, or leave memory_budget out, for no budget", "options: memory_budget 0 would cap the arena at 0 bytes, which no plan with a temp buffer meets")
				default:
					if m, ok := d.intIn(v, "options: memory_budget (bytes, auto or none)", 1, math.MaxInt64); ok {
						d.x.MemoryBudget = m
					}
				}
			},
			write: func(o *Options, _ *writing) (string, error) {
				if o.MemoryBudget == MemoryBudgetAuto {
					return "auto", nil
				}
				return intIf(o.MemoryBudget), nil
			},
			schema: FormatField{Type: "integer|auto|none", Min: 1, HasMin: true, Doc: "cap of the arena in bytes, auto, or none"}},
		{key: "placement",
			decode: func(d *decoding[Options, struct{}], v *yaml.Node) {
				if s, ok := d.oneOf(v, "options: placement", placements); ok {
					d.x.Placement = s
				}
			},
			write:  func(o *Options, _ *writing) (string, error) { return strIf(o.Placement, PlacementSpec), nil },
			schema: FormatField{Type: "enum", Enum: placements, Doc: "spec: devices as device: says; balance: the planner places stages and buffers without device:"}},
	}
	optionsKeys = keysOf(optionsTable)
)
