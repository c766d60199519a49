package dag

// The field tables of the spec format: for every mapping, its fields in
// the order WriteYAML writes them, each with how Load decodes it, how
// WriteYAML writes it and what Format tells schema generators. Adding a
// field to the format is adding one entry here (and the struct field it
// fills); a field that names other parts of the spec (a buffer, a stage)
// also gets its check in load_check.go.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dagrun/dagrun/internal/yamlscan"
	"gopkg.in/yaml.v3"

	"github.com/dagrun/dagrun/contract"
)

// FormatMapping describes one mapping of the spec format (docs/spec.md):
// its fields in the order WriteYAML writes them. Format returns them all,
// for tools that generate a schema of specs or editor completion.
type FormatMapping struct {
	Name   string // "spec", "options", "buffer", "kernel", "param", "stage", "stream", "capture", "access", "wait", "init"
	Fields []FormatField
	// OneOf: exactly one of the fields is given (init); otherwise any subset
	// with the Required ones.
	OneOf bool
}

// FormatField describes one field of a mapping.
type FormatField struct {
	Key      string
	Required bool
	// Type is one of: "integer", "number" (finite), "string", "name" (a
	// name: no spaces, brackets, commas or control characters), "enum"
	// (one of Enum), "boolean" (true or false), "list" (of Items), "mapping" (the mapping named
	// Items), "args" (a mapping of names to numbers or strings), or an
	// either-form: "name|mapping" (a name or the mapping named Items),
	// "access" (a buffer name, "name[a:b]", or the access mapping),
	// "integer|auto", "integer|auto|none", "zeros|mapping" (the string zeros or the init mapping).
	Type  string
	Items string   // for list: the items' Type, or a mapping's name; for mapping forms: the mapping's name
	Enum  []string // for enum, and list of enum
	// Min and Max bound integers and numbers (inclusive) when HasMin/HasMax.
	Min, Max       float64
	HasMin, HasMax bool
	Doc            string // one line, in the terms of docs/spec.md
}

// Format returns the mappings of the spec format as the loader's tables
// declare them (the same tables Load decodes with), in a fixed order:
// spec, options, buffer, init, kernel, param, stage, go-kernel, stream,
// capture, access, wait.
func Format() []FormatMapping {
	return []FormatMapping{
		{Name: "spec", Fields: schemaOf(specTable)},
		{Name: "options", Fields: schemaOf(optionsTable)},
		{Name: "buffer", Fields: schemaOf(bufferTable)},
		{Name: "init", OneOf: true, Fields: []FormatField{
			{Key: InitFill, Type: "number", Doc: "every float32 element has this value"},
			{Key: InitFile, Type: "string", Doc: "raw bytes of this file (relative to the spec's folder), exactly the buffer's size"},
			{Key: InitRandom, Type: "integer", Doc: "bytes from a PRNG with this seed"},
		}},
		{Name: "kernel", Fields: schemaOf(kernelTable)},
		{Name: "param", Fields: []FormatField{
			{Key: "name", Required: true, Type: "name"},
			{Key: "type", Required: true, Type: "enum", Enum: paramTypes},
		}},
		{Name: "stage", Fields: schemaOf(stageTable)},
		{Name: "go-kernel", Fields: []FormatField{
			{Key: "go", Required: true, Type: "name", Doc: "the Go function's name in RunOptions.Funcs"},
		}},
		{Name: "stream", Fields: schemaOf(streamTable)},
		{Name: "capture", Fields: schemaOf(captureTable)},
		{Name: "access", Fields: []FormatField{
			{Key: "buffer", Required: true, Type: "name", Doc: "the buffer"},
			{Key: "offset", Type: "integer", Min: 0, HasMin: true, Doc: "first byte"},
			{Key: "bytes", Type: "integer", Min: 1, HasMin: true, Doc: "length in bytes; absent: to the end of the buffer"},
		}},
		{Name: "wait", Fields: []FormatField{
			{Key: "stage", Type: "name", Doc: "wait for this stage's record (exactly one of stage and event)"},
			{Key: "event", Type: "name", Doc: "wait for the latest record of this event"},
			{Key: "lag", Type: "integer", Min: 0, Max: maxLag, HasMin: true, HasMax: true, Doc: "the record of this many iterations back"},
		}},
	}
}

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

func keysOf[T, S any](table []field[T, S]) []string {
	keys := make([]string, len(table))
	for i, f := range table {
		keys[i] = f.key
	}
	return keys
}

func schemaOf[T, S any](table []field[T, S]) []FormatField {
	out := make([]FormatField, len(table))
	for i, f := range table {
		out[i] = f.schema
		out[i].Key, out[i].Required = f.key, f.need != ""
	}
	return out
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

// --- spec ---

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
			write:  func(s *Spec, _ *writing) (string, error) { return strconv.Itoa(cmpOr(s.Version, SpecVersion)), nil },
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
				if s.Devices <= 1 {
					return "", nil
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

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// strIf is s as YAML text, or "" when s is empty or the default def.
func strIf(s, def string) string {
	if s == "" || s == def {
		return ""
	}
	return str(s)
}

// --- options ---

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

// intIf is v as text, or "" when v is 0.
func intIf(v int64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

// --- buffers ---

// bufferSrc keeps the positions of a buffer for check.
type bufferSrc struct {
	at       at
	name     at
	init     at // the init value, if any
	initFile at // the file: value
	device   at // the device: value, if any
	sizeOK   bool
	first    int32 // a name declared before: 1 + the index of its first declaration (set by check)
	// bytes, dtype and shape nodes, only while the buffer is decoded.
	bytesN, dtypeN, shapeN *yaml.Node
}

var (
	bufferTable = []field[BufferSpec, bufferSrc]{
		{key: "name", need: "give the buffer a name: {name: x, bytes: 4096}",
			decode: func(d *decoding[BufferSpec, bufferSrc], v *yaml.Node) {
				d.src.name = atOf(v)
				if s, ok := d.name(v, "buffer name"); ok {
					d.x.Name = s
					d.named("buffer", s)
				}
			},
			write:  func(b *BufferSpec, _ *writing) (string, error) { return str(b.Name), nil },
			schema: FormatField{Type: "name"}},
		{key: "bytes",
			decode: func(d *decoding[BufferSpec, bufferSrc], v *yaml.Node) { d.src.bytesN = v },
			write: func(b *BufferSpec, _ *writing) (string, error) {
				if b.DType != "" {
					// dtype and shape determine it; a size that disagrees
					// with them is written, for Load to report.
					if total, ok := mulChecked(dtypeSizes[b.DType], b.Shape); b.Bytes == 0 || ok && total == b.Bytes {
						return "", nil
					}
				}
				return strconv.FormatInt(b.Bytes, 10), nil
			},
			schema: FormatField{Type: "integer", Min: 1, HasMin: true, Doc: "size in bytes (or give dtype and shape)"}},
		{key: "dtype",
			decode: func(d *decoding[BufferSpec, bufferSrc], v *yaml.Node) { d.src.dtypeN = v },
			write:  func(b *BufferSpec, _ *writing) (string, error) { return strIf(b.DType, ""), nil },
			schema: FormatField{Type: "enum", Enum: dtypeNames, Doc: "element type; with shape it determines the size"}},
		{key: "shape",
			decode: func(d *decoding[BufferSpec, bufferSrc], v *yaml.Node) { d.src.shapeN = v },
			write: func(b *BufferSpec, _ *writing) (string, error) {
				if b.DType == "" {
					return "", nil
				}
				dims := make([]string, len(b.Shape))
				for i, n := range b.Shape {
					dims[i] = strconv.FormatInt(n, 10)
				}
				return flowList(dims), nil
			},
			schema: FormatField{Type: "list", Items: "integer", Min: 1, HasMin: true, Doc: "dimensions in elements"}},
		{key: "where",
			decode: func(d *decoding[BufferSpec, bufferSrc], v *yaml.Node) {
				if w, ok := d.oneOfOf(v, d.what, ": where", wheres); ok {
					d.x.Where = w
				}
			},
			write:  func(b *BufferSpec, _ *writing) (string, error) { return strIf(b.Where, WhereDevice), nil },
			schema: FormatField{Type: "enum", Enum: wheres, Doc: "where the buffer lives (default device)"}},
		{key: "role",
			decode: func(d *decoding[BufferSpec, bufferSrc], v *yaml.Node) {
				if r, ok := d.oneOfOf(v, d.what, ": role", roles); ok {
					d.x.Role = r
				}
			},
			write:  func(b *BufferSpec, _ *writing) (string, error) { return strIf(b.Role, RoleTemp), nil },
			schema: FormatField{Type: "enum", Enum: roles, Doc: "input, output or temp (default temp)"}},
		{key: "init",
			decode: func(d *decoding[BufferSpec, bufferSrc], v *yaml.Node) {
				d.src.init = atOf(v)
				d.decodeInit(v, d.what, &d.x.Init, d.src)
			},
			write: func(b *BufferSpec, _ *writing) (string, error) {
				switch b.Init.Kind {
				case InitFill:
					return "{fill: " + yamlFloat(b.Init.Value) + "}", nil
				case InitFile:
					return "{file: " + str(b.Init.Path) + "}", nil
				case InitRandom:
					return "{random: " + strconv.FormatInt(b.Init.Seed, 10) + "}", nil
				}
				return "", nil
			},
			schema: FormatField{Type: "zeros|mapping", Items: "init", Doc: "initial contents (default zeros)"}},
		{key: "copies",
			decode: func(d *decoding[BufferSpec, bufferSrc], v *yaml.Node) {
				if c, ok := d.intIn(v, d.what+": copies", 1, maxCopies); ok {
					d.x.Copies = int(c)
				}
			},
			write:  func(b *BufferSpec, _ *writing) (string, error) { return intIf(int64(b.Copies)), nil },
			schema: FormatField{Type: "integer", Min: 1, Max: maxCopies, HasMin: true, HasMax: true, Doc: "ring size across iterations"}},
		{key: "alloc",
			decode: func(d *decoding[BufferSpec, bufferSrc], v *yaml.Node) {
				if a, ok := d.oneOf(v, d.what+": alloc", allocModes); ok {
					d.x.Alloc = a
				}
			},
			write:  func(b *BufferSpec, _ *writing) (string, error) { return strIf(b.Alloc, ""), nil },
			schema: FormatField{Type: "enum", Enum: allocModes, Doc: "lazy: each stream allocates it (cuMemAlloc) at its first use, like a library's workspace"}},
		{key: "device",
			decode: func(d *decoding[BufferSpec, bufferSrc], v *yaml.Node) {
				if n, ok := d.intIn(v, d.what+": device", 0, MaxDevices-1); ok {
					d.x.Device = int(n)
					d.src.device = atOf(v)
				}
			},
			write: func(b *BufferSpec, w *writing) (string, error) {
				if b.Where != "" && b.Where != WhereDevice {
					return "", nil
				}
				return w.deviceIf(b.Device), nil
			},
			schema: FormatField{Type: "integer", Min: 0, Max: MaxDevices - 1, HasMin: true, HasMax: true, Doc: "the GPU a device buffer lives on (default 0)"}},
	}
	bufferKeys = keysOf(bufferTable)
)

const (
	maxCopies = 1 << 20
	maxLag    = 1 << 20
)

func (l *loader) decodeBuffer(s *Spec, n *yaml.Node) {
	if l.tooMany(n, len(s.Buffers), limits.buffers, "buffers", "MaxBuffers") {
		return
	}
	// Decoded in place: no copy of each buffer as the lists grow.
	s.Buffers = append(s.Buffers, BufferSpec{Pos: l.pos(n), Where: WhereDevice, Role: RoleTemp, Init: Init{Kind: InitZeros}, Device: AnyDevice})
	l.bufSrc = append(l.bufSrc, bufferSrc{at: atOf(n)})
	b, src := &s.Buffers[len(s.Buffers)-1], &l.bufSrc[len(l.bufSrc)-1]
	if f := decodeObject(l, n, "buffer", bufferTable, bufferKeys, b, src); f != nil {
		what := f.what
		if b.Name == "" {
			what = "buffer"
		} else if !isNamed(what, "buffer", b.Name) {
			what = "buffer " + b.Name
		}
		l.bufferSize(f, b, src, what)
		l.release(f)
	}
	src.bytesN, src.dtypeN, src.shapeN = nil, nil, nil
}

// bufferSize sets b.Bytes from bytes, or dtype and shape, checking they agree.
func (l *loader) bufferSize(f *fields, b *BufferSpec, src *bufferSrc, what string) {
	bytesN, dtypeN, shapeN := src.bytesN, src.dtypeN, src.shapeN
	sizeOK := true
	var given int64
	if bytesN != nil {
		var ok bool
		given, ok = l.intInOf(bytesN, what, ": bytes", 1, math.MaxInt64)
		sizeOK = sizeOK && ok
	}
	var computed int64
	switch {
	case dtypeN == nil && shapeN == nil:
		if bytesN == nil {
			l.errorf(f.n, "give bytes: N, or dtype: and shape: (e.g. dtype: f32, shape: [3, 64, 64])", "%s: missing size", what)
			sizeOK = false
		}
	case dtypeN == nil:
		l.errorf(shapeN, "add dtype: (one of "+strings.Join(dtypeNames, ", ")+")", "%s: shape needs a dtype", what)
		sizeOK = false
	case shapeN == nil:
		l.errorf(dtypeN, "add shape: [d0, d1, ...] in elements", "%s: dtype needs a shape", what)
		sizeOK = false
	default:
		dt, ok1 := l.oneOf(dtypeN, what+": dtype", dtypeNames)
		shape, ok2 := l.decodeShape(shapeN, what+": shape")
		if ok1 && ok2 {
			b.DType, b.Shape = dt, shape
			total, ok := mulChecked(dtypeSizes[dt], shape)
			switch {
			case !ok:
				l.errorf(shapeN, "use smaller dimensions", "%s: size %s × %v overflows int64", what, dt, shape)
				sizeOK = false
			case bytesN != nil && sizeOK && total != given:
				l.errorf(bytesN, "drop bytes: (dtype and shape determine it) or fix it", "%s: bytes %d disagrees with dtype %s × shape %v = %d bytes", what, given, dt, shape, total)
				sizeOK = false
			default:
				computed = total
			}
		} else {
			sizeOK = false
		}
	}
	if sizeOK {
		if computed != 0 {
			b.Bytes = computed
		} else {
			b.Bytes = given
		}
		if b.Bytes > MaxBufferBytes {
			at := bytesN
			if at == nil {
				at = shapeN
			}
			l.errorf(at, "split the buffer", "%s: %d bytes, more than the %d (1 TiB) a buffer may have (dag.MaxBufferBytes)", what, b.Bytes, int64(MaxBufferBytes))
			sizeOK = false
		}
	}
	src.sizeOK = sizeOK
}

// decodeShape reads a list of positive dimensions (may be empty: a scalar).
func (l *loader) decodeShape(n *yaml.Node, what string) ([]int64, bool) {
	items, ok := l.list(n, what, "write the shape as a list of element counts: [3, 64, 64]")
	if !ok {
		return nil, false
	}
	shape := make([]int64, 0, len(items))
	good := true
	for _, it := range items {
		d, ok := l.int64Val(it, what)
		if !ok {
			good = false
			continue
		}
		if d <= 0 {
			l.errorf(it, "every dimension must be ≥ 1", "%s: dimension %d is not positive", what, d)
			good = false
			continue
		}
		shape = append(shape, d)
	}
	return shape, good
}

// mulChecked returns size × the product of shape, reporting int64 overflow.
func mulChecked(size int64, shape []int64) (int64, bool) {
	total := size
	for _, d := range shape {
		if d != 0 && total > math.MaxInt64/d {
			return 0, false
		}
		total *= d
	}
	return total, true
}

const initHint = "write init: zeros, init: {fill: 1.5}, init: {file: data.bin} or init: {random: 7}"

func (l *loader) decodeInit(n *yaml.Node, what string, in *Init, src *bufferSrc) {
	what += ": init"
	if n.Kind == yaml.ScalarNode {
		if tagOf(n) == "!!str" && n.Value == InitZeros {
			in.Kind = InitZeros
			return
		}
		l.errorf(n, initHint, "%s: unknown initial contents %s", what, kindName(n))
		return
	}
	f, ok := l.mapping(n, what, initFields)
	if !ok {
		return
	}
	if f.given() != 1 {
		if f.given() > 1 {
			l.errorf(f.n, initHint, "%s: give exactly one of fill, file, random", what)
		} else if len(f.n.Content) == 0 {
			l.errorf(f.n, initHint, "%s: empty mapping", what)
		}
		return
	}
	switch {
	case f.get(InitFill) != nil:
		v := f.get(InitFill)
		x, ok := l.num(v, what+": fill")
		if !ok {
			return
		}
		if math.Abs(x) > math.MaxFloat32 {
			l.errorf(v, "use a value within float32 range (±3.4e38)", "%s: fill value %s overflows float32", what, v.Value)
			return
		}
		*in = Init{Kind: InitFill, Value: x}
	case f.get(InitFile) != nil:
		v := f.get(InitFile)
		p, ok := l.str(v, what+": file")
		if !ok {
			return
		}
		if p == "" {
			l.errorf(v, "give the path of a raw file, relative to the spec", "%s: file path is empty", what)
			return
		}
		*in = Init{Kind: InitFile, Path: p}
		src.initFile = atOf(v)
	case f.get(InitRandom) != nil:
		v := f.get(InitRandom)
		seed, ok := l.int64Val(v, what+": random seed")
		if !ok {
			return
		}
		*in = Init{Kind: InitRandom, Seed: seed}
	}
}

// --- kernels ---

// kernelSrc keeps the positions of a kernel for check.
type kernelSrc struct {
	at, name, ptx, entry at
	ok                   bool // decoded without errors (worth checking the PTX)
}

var (
	kernelTable = []field[KernelSpec, kernelSrc]{
		{key: "name", need: "give the kernel a name: {name: k, ptx: k.ptx, entry: k}",
			decode: func(d *decoding[KernelSpec, kernelSrc], v *yaml.Node) {
				d.src.name = atOf(v)
				if s, ok := d.name(v, "kernel name"); ok {
					d.x.Name = s
					d.what = "kernel " + s
				}
			},
			write:  func(k *KernelSpec, _ *writing) (string, error) { return str(k.Name), nil },
			schema: FormatField{Type: "name"}},
		{key: "ptx", need: "give the PTX file, relative to the spec: ptx: kernels/my.ptx",
			decode: func(d *decoding[KernelSpec, kernelSrc], v *yaml.Node) {
				d.src.ptx = atOf(v)
				if s, ok := d.str(v, d.what+": ptx"); ok {
					if s == "" {
						d.errorf(v, "give the PTX file, relative to the spec", "%s: ptx path is empty", d.what)
					}
					d.x.PTX = s
				}
			},
			write:  func(k *KernelSpec, _ *writing) (string, error) { return str(k.PTX), nil },
			schema: FormatField{Type: "string", Doc: "the PTX file, relative to the spec's folder"}},
		{key: "entry", need: "give the .entry name of the kernel in the PTX file: entry: my_kernel",
			decode: func(d *decoding[KernelSpec, kernelSrc], v *yaml.Node) {
				d.src.entry = atOf(v)
				if s, ok := d.str(v, d.what+": entry"); ok {
					if s == "" {
						d.errorf(v, "give the .entry name of the kernel in the PTX file", "%s: entry is empty", d.what)
					}
					d.x.Entry = s
				}
			},
			write:  func(k *KernelSpec, _ *writing) (string, error) { return str(k.Entry), nil },
			schema: FormatField{Type: "string", Doc: "the .entry name in the PTX file"}},
		{key: "params", null: true,
			decode: func(d *decoding[KernelSpec, kernelSrc], v *yaml.Node) { d.decodeParams(v, d.what, d.x) },
			write: func(k *KernelSpec, _ *writing) (string, error) {
				if len(k.Params) == 0 {
					return "", nil
				}
				params := make([]string, len(k.Params))
				for i, p := range k.Params {
					var pf flowMap
					pf.add("name", str(p.Name))
					pf.add("type", str(p.Type))
					params[i] = pf.String()
				}
				return flowList(params), nil
			},
			schema: FormatField{Type: "list", Items: "param", Doc: "the kernel's parameters, in order"}},
	}
	kernelKeys = keysOf(kernelTable)
)

func (l *loader) decodeKernel(s *Spec, n *yaml.Node) {
	if l.tooMany(n, len(s.Kernels), limits.kernels, "kernels", "MaxKernels") {
		return
	}
	k := KernelSpec{Pos: l.pos(n)}
	src := kernelSrc{at: atOf(n)}
	before := len(l.errs)
	if f := decodeObject(l, n, "kernel", kernelTable, kernelKeys, &k, &src); f != nil {
		src.ok = len(l.errs) == before
	}
	s.Kernels = append(s.Kernels, k)
	l.kernSrc = append(l.kernSrc, src)
}

func (l *loader) decodeParams(v *yaml.Node, what string, k *KernelSpec) {
	items, ok := l.list(v, what+": params", "write params as a list: [{name: x, type: ptr}, {name: n, type: u32}]")
	if !ok {
		return
	}
	seen := map[string]int{}
	for _, it := range items {
		pf, ok := l.mapping(it, what+": param", paramFields)
		if !ok {
			continue
		}
		var p ParamSpec
		if pv := l.require(pf, "name", "give the parameter a name: {name: x, type: ptr}"); pv != nil {
			if s, ok := l.name(pv, what+": param name"); ok {
				if line, dup := seen[s]; dup {
					l.errorf(pv, "give each parameter its own name", "%s: parameter %q declared twice (first at line %d)", what, s, line)
				}
				seen[s] = pv.Line
				p.Name = s
			}
		}
		if tv := l.require(pf, "type", "give the parameter a type: one of "+strings.Join(paramTypes, ", ")); tv != nil {
			if s, ok := l.oneOf(tv, what+": param type", paramTypes); ok {
				p.Type = s
			}
		}
		k.Params = append(k.Params, p)
	}
}

// --- stages ---

// stageSrc keeps the positions of a stage for check.
type stageSrc struct {
	at      at
	name    at          // the name value
	kernel  at          // the kernel value
	decoded bool        // the stage is a mapping (else reported, and not checked)
	args    *argSet     // shared between stages whose args are written alike
	keys    []keyAt     // position of each given field's key
	argAt   []at        // positions of the args' keys and values, in order
	reads   []accessSrc // parallel to StageSpec.Reads
	writes  []accessSrc // parallel to StageSpec.Writes
	refs    *stageRefs  // nil: the stage has no after or waits
}

// stageRefs are the positions of a stage's after and waits entries (kept
// apart: most stages of big specs have none).
type stageRefs struct {
	after   []at // parallel to StageSpec.After
	waits   []at // parallel to StageSpec.Waits
	waitFor []at // parallel to StageSpec.WaitFor
}

// refsOf returns src's stageRefs, made on first use.
func (src *stageSrc) refsOf() *stageRefs {
	if src.refs == nil {
		src.refs = new(stageRefs)
	}
	return src.refs
}

// afterAt, waitsAt and waitForAt are the positions of the stage's after
// and waits entries.
func (src *stageSrc) afterAt() []at {
	if src.refs == nil {
		return nil
	}
	return src.refs.after
}

func (src *stageSrc) waitsAt() []at {
	if src.refs == nil {
		return nil
	}
	return src.refs.waits
}

func (src *stageSrc) waitForAt() []at {
	if src.refs == nil {
		return nil
	}
	return src.refs.waitFor
}

// argSet is a stage's args as decoded: the map and each argument as
// written, in order. Stages whose args are written alike share one
// (decodeArgs); it is read only once decoded.
type argSet struct {
	m    map[string]any // StageSpec.Args
	list []argSrc       // the mapping's pairs, in order (stageSrc.argAt)
	// checked is the built-in these args were checked against without
	// finding anything wrong (checkBuiltinArgs), or nil.
	checked *contract.Builtin
}

// argSrc is one argument as written.
type argSrc struct {
	name   string
	given  bool   // false: a pair whose key is not a name (reported)
	tag    string // the value's YAML tag (!!int, !!float, !!str, ...)
	tagged bool   // the tag is written out (!!float 64), not read from the value
	text   string // the value as written
}

// arg returns the index of the argument named name, or -1.
func (set *argSet) arg(name string) int {
	for i := range set.list {
		if set.list[i].given && set.list[i].name == name {
			return i
		}
	}
	return -1
}

// arg returns the index of the stage's argument named name (in args.list
// and, times 2, in argAt), or -1.
func (src *stageSrc) arg(name string) int {
	if src.args == nil {
		return -1
	}
	return src.args.arg(name)
}

// argKeyAt and argValAt are the positions of argument i's key and value.
func (src *stageSrc) argKeyAt(i int) at { return src.argAt[2*i] }
func (src *stageSrc) argValAt(i int) at { return src.argAt[2*i+1] }

// argList is the stage's arguments as written (nil: no args).
func (src *stageSrc) argList() []argSrc {
	if src.args == nil {
		return nil
	}
	return src.args.list
}

// accessSrc is an access before its buffer is resolved.
type accessSrc struct {
	ok       bool  // decoded without errors
	hasBytes bool  // false: to the end of the buffer
	buf      int32 // 1 + the index of the buffer, once check resolved it (0: not)
}

var (
	stageTable = []field[StageSpec, stageSrc]{
		{key: "name", need: "give the stage a name: {name: prep, kernel: mix}",
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				d.src.name = atOf(v)
				if s, ok := d.name(v, "stage name"); ok {
					d.x.Name = s
					d.named("stage", s)
				}
			},
			write:  func(st *StageSpec, _ *writing) (string, error) { return str(st.Name), nil },
			schema: FormatField{Type: "name"}},
		{key: "kernel", need: "name a built-in (" + strings.Join(Builtins, ", ") + "), a kernel from kernels:, or a Go function: {go: name}",
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				d.src.kernel = atOf(v)
				if v.Kind == yaml.MappingNode {
					// {go: name}: a Go function bound at run time.
					f, ok := d.mapping(v, d.what+": kernel", goKernelFields)
					if !ok {
						return
					}
					if g := d.require(f, "go", "name the Go function: kernel: {go: my_func}"); g != nil {
						d.src.kernel = atOf(g)
						if s, ok := d.name(g, d.what+": kernel: go"); ok {
							d.x.Kernel, d.x.Go = s, true
						}
					}
					return
				}
				if s, ok := d.nameOf(v, d.what, ": kernel"); ok {
					d.x.Kernel = s
				}
			},
			write: func(st *StageSpec, _ *writing) (string, error) {
				if st.Go {
					return "{go: " + str(st.Kernel) + "}", nil
				}
				return str(st.Kernel), nil
			},
			schema: FormatField{Type: "name|mapping", Items: "go-kernel", Doc: "a built-in, a kernel from kernels:, or {go: name}: a Go function bound at run time"}},
		{key: "args", null: true,
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) { d.x.Args = d.decodeArgs(v, d.what, d.src) },
			write: func(st *StageSpec, _ *writing) (string, error) {
				if len(st.Args) == 0 {
					return "", nil
				}
				keys := make([]string, 0, len(st.Args))
				for k := range st.Args {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				var f flowMap
				for _, k := range keys {
					v, err := argText(st.Args[k])
					if err != nil {
						return "", fmt.Errorf("dag: writing stage %s: argument %s: %w", st.Name, k, err)
					}
					f.add(str(k), v)
				}
				return f.String(), nil
			},
			schema: FormatField{Type: "args", Doc: "kernel arguments: numbers, or buffer names for ptr parameters"}},
		{key: "grid",
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				d.x.Launch.Grid = d.decodeDim3(v, d.what, ": grid")
			},
			write:  func(st *StageSpec, _ *writing) (string, error) { return dim3If(st.Launch.Grid), nil },
			schema: FormatField{Type: "list", Items: "integer", Min: 1, Max: math.MaxInt32, HasMin: true, HasMax: true, Doc: "thread blocks: 1 to 3 dimensions"}},
		{key: "block",
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				d.x.Launch.Block = d.decodeDim3(v, d.what, ": block")
			},
			write:  func(st *StageSpec, _ *writing) (string, error) { return dim3If(st.Launch.Block), nil },
			schema: FormatField{Type: "list", Items: "integer", Min: 1, Max: math.MaxInt32, HasMin: true, HasMax: true, Doc: "threads per block: 1 to 3 dimensions"}},
		{key: "reads", null: true,
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				d.x.Reads, d.src.reads = d.decodeAccesses(v, d.what, ": reads")
			},
			write: func(st *StageSpec, w *writing) (string, error) {
				return accessesIf(st.Reads, w.sizes), nil
			},
			schema: FormatField{Type: "list", Items: "access", Doc: "what the stage reads"}},
		{key: "writes", null: true,
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				d.x.Writes, d.src.writes = d.decodeAccesses(v, d.what, ": writes")
			},
			write: func(st *StageSpec, w *writing) (string, error) {
				return accessesIf(st.Writes, w.sizes), nil
			},
			schema: FormatField{Type: "list", Items: "access", Doc: "what the stage writes"}},
		{key: "after", null: true,
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				var after []at
				d.x.After, after = d.decodeNames(v, d.what, ": after", "write after as a list of earlier stage names: after: [prep]")
				if len(after) > 0 {
					d.src.refsOf().after = after
				}
			},
			write: func(st *StageSpec, _ *writing) (string, error) {
				if len(st.After) == 0 {
					return "", nil
				}
				return namesText(st.After), nil
			},
			schema: FormatField{Type: "list", Items: "name", Doc: "earlier stages that must happen-before this one"}},
		{key: "stream",
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				if s, ok := d.nameOf(v, d.what, ": stream"); ok {
					d.x.Stream = s
				}
			},
			write:  func(st *StageSpec, _ *writing) (string, error) { return strIf(st.Stream, ""), nil },
			schema: FormatField{Type: "name", Doc: "pin to a named stream (host: the host thread)"}},
		{key: "duration_us",
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				if x, ok := d.nonNegNumOf(v, d.what, ": duration_us"); ok {
					if x > contract.MaxSpinUS {
						d.errorf(v, fmt.Sprintf("give at most %g µs (60 s), the most one launch may spin", float64(contract.MaxSpinUS)),
							"%s: duration_us %g µs is more than a stage may take", d.what, x)
						return
					}
					d.x.DurationUS = x
				}
			},
			write: func(st *StageSpec, _ *writing) (string, error) {
				if st.DurationUS == 0 {
					return "", nil
				}
				return yamlFloat(st.DurationUS), nil
			},
			schema: FormatField{Type: "number", Min: 0, Max: contract.MaxSpinUS, HasMin: true, HasMax: true, Doc: "cost estimate in µs (at most 60 s)"}},
		{key: "waits", null: true,
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				var waits, waitFor []at
				d.x.Waits, waits, d.x.WaitFor, waitFor = d.decodeWaits(v, d.what+": waits")
				if len(waits) > 0 || len(waitFor) > 0 {
					r := d.src.refsOf()
					r.waits, r.waitFor = waits, waitFor
				}
			},
			write:  func(st *StageSpec, _ *writing) (string, error) { return waitsText(st), nil },
			schema: FormatField{Type: "list", Items: "name|mapping", Enum: nil, Doc: "sync: manual: stages (or {stage, lag} / {event}) to wait for; mapping: wait"}},
		{key: "event",
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				if s, ok := d.nameOf(v, d.what, ": event"); ok {
					d.x.Event = s
				}
			},
			write:  func(st *StageSpec, _ *writing) (string, error) { return strIf(st.Event, ""), nil },
			schema: FormatField{Type: "name", Doc: "sync: manual: an event recorded right after the stage"}},
		{key: "copy",
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				if m, ok := d.oneOfOf(v, d.what, ": copy", copyModes); ok {
					d.x.Copy = m
				}
			},
			write:  func(st *StageSpec, _ *writing) (string, error) { return strIf(st.Copy, CopyAsync), nil },
			schema: FormatField{Type: "enum", Enum: copyModes, Doc: "a copy stage's mode: async (cuMemcpyAsync, the default) or sync (cuMemcpy, on a default stream)"}},
		{key: "host_func",
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				if b, ok := d.boolVal(v, d.what+": host_func"); ok {
					d.x.HostFunc = b
				}
			},
			write: func(st *StageSpec, _ *writing) (string, error) {
				if st.HostFunc {
					return "true", nil
				}
				return "", nil
			},
			schema: FormatField{Type: "boolean", Doc: "run the built-in on the host in the stream's order (cuLaunchHostFunc)"}},
		{key: "device",
			decode: func(d *decoding[StageSpec, stageSrc], v *yaml.Node) {
				if n, ok := d.intIn(v, d.what+": device", 0, MaxDevices-1); ok {
					d.x.Device = int(n)
				}
			},
			write: func(st *StageSpec, w *writing) (string, error) {
				if st.Stream == HostStream || w.hosts[st.Stream] {
					return "", nil
				}
				return w.deviceIf(st.Device), nil
			},
			schema: FormatField{Type: "integer", Min: 0, Max: MaxDevices - 1, HasMin: true, HasMax: true, Doc: "the GPU the stage runs on (default: its stream's, else its buffers')"}},
	}
	stageKeys = keysOf(stageTable)
	// stageFields are the stage's keys (for messages and tests).
	stageFields = stageKeys
)

func (l *loader) decodeStage(s *Spec, n *yaml.Node) {
	if l.tooMany(n, len(s.Stages), limits.stages, "stages", "MaxStages") {
		return
	}
	// Decoded in place: no copy of each stage as the lists grow.
	s.Stages = append(s.Stages, StageSpec{Pos: l.pos(n), Device: AnyDevice})
	l.stageSrc.add(stageSrc{at: atOf(n)})
	st, src := &s.Stages[len(s.Stages)-1], l.stageSrc.at(len(s.Stages)-1)
	if f := decodeObject(l, n, "stage", stageTable, stageKeys, st, src); f != nil {
		src.decoded = true
		n := 0
		for _, k := range f.key {
			if k != nil {
				n++
			}
		}
		src.keys = carve(&l.keySlab, n)
		n = 0
		for i, k := range f.key {
			if k != nil {
				src.keys[n] = keyAt{atOf(k), uint8(i)}
				n++
			}
		}
		l.release(f)
	}
}

// fieldPos returns the position of field name's key in a stage, or the
// stage's position.
func (src *stageSrc) fieldPos(name string) at {
	if i := slices.Index(stageKeys, name); i >= 0 {
		for _, k := range src.keys {
			if int(k.field) == i && k.at != (at{}) {
				return k.at
			}
		}
	}
	return src.at
}

// keyAt is the position of a given field's key: field is its index in
// stageTable.
type keyAt struct {
	at    at
	field uint8
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

const waitsHint = "write waits as a list of earlier stage names, {stage: NAME, lag: N} or {event: NAME}: waits: [prep, {stage: d2h, lag: 1}]"

// decodeWaits reads a waits list: stage names, and mappings with a stage
// or an event and an optional lag.
func (l *loader) decodeWaits(n *yaml.Node, what string) ([]string, []at, []WaitSpec, []at) {
	items, ok := l.list(n, what, waitsHint)
	if !ok {
		return nil, nil, nil, nil
	}
	var names []string
	var nodes, wnodes []at
	var ws []WaitSpec
	for _, it := range items {
		if it.Kind != yaml.MappingNode {
			if s, ok := l.name(it, what); ok {
				names = append(names, s)
				nodes = append(nodes, atOf(it))
			}
			continue
		}
		f, ok := l.mapping(it, what+" entry", waitFields)
		if !ok {
			continue
		}
		w := WaitSpec{Pos: l.pos(it)}
		if v := f.get("stage"); v != nil {
			w.Stage, _ = l.name(v, what+": stage")
		}
		if v := f.get("event"); v != nil {
			w.Event, _ = l.name(v, what+": event")
		}
		if (w.Stage == "") == (w.Event == "") && (f.get("stage") == nil) == (f.get("event") == nil) {
			l.errorf(it, waitsHint, "%s: a wait names a stage or an event (exactly one)", what)
			continue
		}
		if v := f.get("lag"); v != nil {
			if lag, ok := l.intIn(v, what+": lag", 0, maxLag); ok {
				w.Lag = int(lag)
			}
		}
		ws = append(ws, w)
		wnodes = append(wnodes, atOf(it))
	}
	return names, nodes, ws, wnodes
}

// argKey returns the copy of args key k (loader.argKeys).
func (l *loader) argKey(k string) string {
	if c, ok := l.argKeys[k]; ok {
		return c
	}
	c := strings.Clone(k)
	if len(l.argKeys) < 4096 {
		if l.argKeys == nil {
			l.argKeys = map[string]string{}
		}
		l.argKeys[c] = c
	}
	return c
}

// maxArgSets bounds the loader's cache of decoded args (loader.argSets).
const maxArgSets = 4096

// decodeArgs reads a mapping of scalar arguments: integers become int,
// other numbers float64, strings string. Keys and strings are copies, not
// substrings of the file's text (a plan keeps the maps). Stages whose args
// are written alike (the same keys, tags and values in the same order)
// share one decoded map and argSet (loader.argSets), so that a spec of a
// million stages with a handful of distinct args holds a handful of maps;
// each stage keeps only the positions of its own keys and values.
func (l *loader) decodeArgs(n *yaml.Node, obj string, src *stageSrc) map[string]any {
	// The field's name, obj + ": args", is built for messages only.
	if n.Kind != yaml.MappingNode {
		l.errorf(n, "write args as a mapping: args: {a: 2.0}", "%s must be a mapping, got %s", obj+": args", kindName(n))
		return nil
	}
	key, shareable := l.argsText(n)
	if shareable {
		if set, ok := l.argSets[string(key)]; ok {
			src.args, src.argAt = set, l.argPositions(n)
			return set.m
		}
	}
	before := len(l.errs)
	src.argAt = carve(&l.atSlab, len(n.Content)&^1)
	set := l.decodeArgSet(n, obj, src.argAt)
	src.args = set
	if shareable && len(l.errs) == before && len(l.argSets) < maxArgSets {
		if l.argSets == nil {
			l.argSets = map[string]*argSet{}
		}
		l.argSets[string(key)] = set
	}
	return set.m
}

// argsText returns what decodeArgSet's result depends on for the args
// mapping n, as one key (in l.argBuf, valid until the next call): each
// key's and value's tag, style and text. shareable is false when n holds
// aliases or collections, whose decoding also counts toward the alias
// budget or reports errors.
func (l *loader) argsText(n *yaml.Node) ([]byte, bool) {
	b := l.argBuf[:0]
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			return nil, false
		}
		b = strconv.AppendInt(b, int64(len(c.Tag)), 10)
		b = append(b, ':')
		b = append(b, c.Tag...)
		b = strconv.AppendInt(b, int64(c.Style), 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(len(c.Value)), 10)
		b = append(b, ':')
		b = append(b, c.Value...)
	}
	l.argBuf = b
	return b, true
}

// argPositions returns the positions of the keys and values of the args
// mapping n, in order (argAt), carved from a shared slab.
func (l *loader) argPositions(n *yaml.Node) []at {
	ats := carve(&l.atSlab, len(n.Content)&^1)
	for i := range ats {
		ats[i] = atOf(n.Content[i])
	}
	return ats
}

// decodeArgSet decodes the args mapping n (see decodeArgs), reporting
// what is wrong, and fills ats with the positions of its keys and values.
func (l *loader) decodeArgSet(n *yaml.Node, obj string, ats []at) *argSet {
	args := make(map[string]any, len(n.Content)/2)
	set := &argSet{list: make([]argSrc, 0, len(n.Content)/2)}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := l.deref(n.Content[i]), l.deref(n.Content[i+1])
		ats[i], ats[i+1] = atOf(k), atOf(v)
		if k.Kind != yaml.ScalarNode || tagOf(k) == "!!merge" {
			l.errorf(k, "argument names are plain words", "%s: argument name must be a string, got %s", obj+": args", kindName(k))
			set.list = append(set.list, argSrc{})
			continue
		}
		if prev := set.arg(k.Value); prev >= 0 {
			first := ats[2*prev]
			l.errorf(k, "remove one of them", "%s: argument %q given twice (first at %s)", obj+": args", k.Value, firstAt(k.Line, int(first.line), int(first.col)))
			set.list = append(set.list, argSrc{})
			continue
		}
		a := argSrc{name: k.Value, given: true}
		if v.Kind == yaml.ScalarNode {
			a.tag, a.text, a.tagged = tagOf(v), v.Value, v.Style&yaml.TaggedStyle != 0
		}
		set.list = append(set.list, a)
		if v.Kind != yaml.ScalarNode {
			l.errorf(v, "argument values are numbers or buffer names", "%s: %s must be a number or a string, got %s", obj+": args", k.Value, kindName(v))
			continue
		}
		switch a.tag {
		case "!!int":
			if x, ok := yamlscan.Decimal(v.Value); ok {
				args[l.argKey(k.Value)] = int(x)
				continue
			}
			var x int
			if err := v.Decode(&x); err != nil {
				l.errorf(v, "use a value below 2^63", "%s: %s: %s does not fit in a 64-bit integer", obj+": args", k.Value, yamlscan.Clip(v.Value))
				continue
			}
			args[l.argKey(k.Value)] = x
		case "!!float":
			if x, ok := yamlscan.SimpleFloat(v.Value); ok && v.Tag == "!!float" && !math.IsInf(x, 0) {
				args[l.argKey(k.Value)] = x
				continue
			}
			x, ok := l.num(v, obj+": args: "+k.Value)
			if !ok {
				continue
			}
			args[l.argKey(k.Value)] = x
		case "!!str":
			args[l.argKey(k.Value)] = strings.Clone(v.Value)
		default:
			l.errorf(v, "argument values are numbers or buffer names; quote a string", "%s: %s must be a number or a string, got %s", obj+": args", k.Value, kindName(v))
		}
	}
	if len(args) > 0 {
		set.m = args
	}
	return set
}

// decodeDim3 reads a launch dimension: a list of 1 to 3 positive integers;
// missing trailing dimensions are 1.
func (l *loader) decodeDim3(n *yaml.Node, obj, field string) [3]int {
	var d [3]int
	if n.Kind == yaml.SequenceNode && len(n.Content) >= 1 && len(n.Content) <= 3 {
		// The common case without building the field's name for messages.
		d = [3]int{1, 1, 1}
		for i, it := range n.Content {
			v, ok := fastInt(it)
			if !ok || v < 1 || v > math.MaxInt32 {
				d = [3]int{}
				break
			}
			d[i] = int(v)
		}
		if d != ([3]int{}) {
			return d
		}
	}
	what := obj + field
	items, ok := l.list(n, what, "write a list of 1 to 3 positive integers: [256, 1, 1]")
	if !ok {
		return d
	}
	if len(items) < 1 || len(items) > 3 {
		l.errorf(n, "write a list of 1 to 3 positive integers: [256, 1, 1]", "%s has %d dimensions", what, len(items))
		return d
	}
	d = [3]int{1, 1, 1}
	for i, it := range items {
		v, ok := l.intIn(it, what, 1, math.MaxInt32)
		if !ok {
			return [3]int{}
		}
		d[i] = int(v)
	}
	return d
}

// decodeNames reads a list of stage names.
func (l *loader) decodeNames(n *yaml.Node, obj, field, hint string) ([]string, []at) {
	items, ok := l.listOf(n, obj, field, hint)
	if !ok {
		return nil, nil
	}
	names := make([]string, 0, len(items))
	nodes := make([]at, 0, len(items))
	for _, it := range items {
		s, ok := l.nameOf(it, obj, field)
		if !ok {
			continue
		}
		names = append(names, s)
		nodes = append(nodes, atOf(it))
	}
	return names, nodes
}

const accessHint = "write a buffer name (x), a byte range (x[0:512]) or {buffer: x, offset: 0, bytes: 512}"

// decodeAccesses reads a list of accesses. Offsets and Bytes are resolved
// against the buffer sizes in check.
func (l *loader) decodeAccesses(n *yaml.Node, obj, field string) ([]Access, []accessSrc) {
	items, ok := l.listOf(n, obj, field, "write a list: [x, y[0:512]]")
	if !ok {
		return nil, nil
	}
	// Past a limit, one unresolved access stands for the list (so that
	// the stage's other checks do not count it as empty).
	if len(items) > MaxStageAccesses {
		l.errorf(n, "split the stage, or list fewer, larger ranges", "%s: %d accesses, more than the %d a stage may have in one list (dag.MaxStageAccesses)", obj+field, len(items), MaxStageAccesses)
		return []Access{{Pos: l.pos(n)}}, []accessSrc{{}}
	}
	if l.accesses += len(items); l.accesses > limits.accesses {
		if l.accesses-len(items) <= limits.accesses {
			l.errorf(n, "split the pipeline into several specs", "%s: more than %d reads and writes in the spec (dag.MaxAccesses)", obj+field, limits.accesses)
		}
		return []Access{{Pos: l.pos(n)}}, []accessSrc{{}}
	}
	accs := carve(&l.accSlab, len(items))
	srcs := carve(&l.accSrcSlab, len(items))
	for i, it := range items {
		if it.Kind == yaml.ScalarNode {
			accs[i], srcs[i] = l.decodeShortAccess(it, obj, field)
			continue
		}
		accs[i], srcs[i] = l.decodeAccess(it, obj+field)
	}
	return accs, srcs
}

// carve returns n zero values carved from a shared slab (which keeps the
// values of many small lists in few allocations).
func carve[T any](slab *[]T, n int) []T {
	if len(*slab) < n {
		*slab = make([]T, max(n, 2*chunkLen))
		prefault(*slab)
	}
	x := (*slab)[:n:n]
	*slab = (*slab)[n:]
	return x
}

// decodeShortAccess reads an access written as a scalar: "x", "x[a:b]",
// "x[a:]" or "x[:b]" (decodeAccess, naming the field only for messages).
func (l *loader) decodeShortAccess(n *yaml.Node, obj, field string) (Access, accessSrc) {
	if n.Tag == "!!str" {
		buf, off, nbytes, hasBytes, msg := parseShortAccess(n.Value)
		if msg == "" && nameOK(buf) {
			return Access{Buffer: buf, Offset: off, Bytes: nbytes, Pos: l.pos(n)}, accessSrc{hasBytes: hasBytes, ok: true}
		}
	}
	return l.decodeAccess(n, obj+field)
}

// decodeAccess reads one access: "x", "x[a:b]", "x[a:]", "x[:b]", or
// {buffer: x, offset: a, bytes: n}.
func (l *loader) decodeAccess(n *yaml.Node, what string) (Access, accessSrc) {
	a := Access{Pos: l.pos(n)}
	var src accessSrc
	switch n.Kind {
	case yaml.ScalarNode:
		if tagOf(n) != "!!str" {
			l.errorf(n, accessHint, "%s: access must be a buffer name, got %s", what, kindName(n))
			return a, src
		}
		buf, off, nbytes, hasBytes, msg := parseShortAccess(n.Value)
		if msg != "" {
			l.errorf(n, accessHint, "%s: bad access %q: %s", what, yamlscan.Clip(n.Value), msg)
			return a, src
		}
		if !l.validName(n, what+": buffer", buf) {
			return a, src
		}
		a.Buffer, a.Offset, a.Bytes, src.hasBytes = buf, off, nbytes, hasBytes
		src.ok = true
	case yaml.MappingNode:
		f, ok := l.mapping(n, what+": access", accessFields)
		if !ok {
			return a, src
		}
		defer l.release(f)
		good := true
		if v := l.require(f, "buffer", accessHint); v != nil {
			if s, ok := l.name(v, what+": buffer"); ok {
				a.Buffer = s
			} else {
				good = false
			}
		} else {
			good = false
		}
		if v := f.get("offset"); v != nil {
			if o, ok := l.int64Val(v, what+": offset"); ok {
				if o < 0 {
					l.errorf(v, "offsets are ≥ 0 bytes from the start of the buffer", "%s: offset %d is negative", what, o)
					good = false
				}
				a.Offset = o
			} else {
				good = false
			}
		}
		if v := f.get("bytes"); v != nil {
			if b, ok := l.int64Val(v, what+": bytes"); ok {
				if b <= 0 {
					l.errorf(v, "an access covers at least one byte; leave bytes out to mean 'to the end of the buffer'", "%s: bytes %d is not positive", what, b)
					good = false
				}
				a.Bytes = b
				src.hasBytes = true
			} else {
				good = false
			}
		}
		src.ok = good
	default:
		l.errorf(n, accessHint, "%s: access must be a buffer name or a mapping, got %s", what, kindName(n))
	}
	return a, src
}

// --- streams and captures ---

var (
	streamTable = []field[StreamSpec, struct{}]{
		{key: "name", need: "give the stream a name: {name: s, kind: blocking}",
			decode: func(d *decoding[StreamSpec, struct{}], v *yaml.Node) {
				if n, ok := d.name(v, "stream name"); ok {
					d.x.Name = n
					d.what = "stream " + n
				}
			},
			write:  func(x *StreamSpec, _ *writing) (string, error) { return str(x.Name), nil },
			schema: FormatField{Type: "name", Doc: "a stream that stages name in stream:"}},
		{key: "kind",
			decode: func(d *decoding[StreamSpec, struct{}], v *yaml.Node) {
				if k, ok := d.oneOf(v, d.what+": kind", streamKinds); ok {
					d.x.Kind = k
				}
			},
			write:  func(x *StreamSpec, _ *writing) (string, error) { return strIf(x.Kind, KindNonBlocking), nil },
			schema: FormatField{Type: "enum", Enum: streamKinds, Doc: "how the stream orders with the legacy default stream, or host: a host thread's host stream"}},
		{key: "thread",
			decode: func(d *decoding[StreamSpec, struct{}], v *yaml.Node) {
				if t, ok := d.name(v, d.what+": thread"); ok {
					d.x.Thread = t
				}
			},
			write:  func(x *StreamSpec, _ *writing) (string, error) { return strIf(x.Thread, MainThread), nil },
			schema: FormatField{Type: "name", Doc: "the host thread that issues the stream's ops (default main)"}},
		{key: "device",
			decode: func(d *decoding[StreamSpec, struct{}], v *yaml.Node) {
				if n, ok := d.intIn(v, d.what+": device", 0, MaxDevices-1); ok {
					d.x.Device = int(n)
				}
			},
			write: func(x *StreamSpec, w *writing) (string, error) {
				if x.Kind == KindHost {
					return "", nil
				}
				return w.deviceIf(x.Device), nil
			},
			schema: FormatField{Type: "integer", Min: 0, Max: MaxDevices - 1, HasMin: true, HasMax: true, Doc: "the GPU whose context creates the stream (default: its stages')"}},
	}
	streamDeclKeys = keysOf(streamTable)

	captureTable = []field[CaptureSpec, struct{}]{
		{key: "stream", need: "name the capture's stream: {stream: s, first: a, last: z}",
			decode: func(d *decoding[CaptureSpec, struct{}], v *yaml.Node) {
				if n, ok := d.name(v, "capture: stream"); ok {
					d.x.Stream = n
				}
			},
			write:  func(x *CaptureSpec, _ *writing) (string, error) { return str(x.Stream), nil },
			schema: FormatField{Type: "name", Doc: "the stream the capture begins and ends on"}},
		{key: "first", need: "name the first captured stage: first: a",
			decode: func(d *decoding[CaptureSpec, struct{}], v *yaml.Node) {
				if n, ok := d.name(v, "capture: first"); ok {
					d.x.First = n
				}
			},
			write:  func(x *CaptureSpec, _ *writing) (string, error) { return str(x.First), nil },
			schema: FormatField{Type: "name", Doc: "the stage the capture begins before (on the capture's stream)"}},
		{key: "last", need: "name the last captured stage: last: z",
			decode: func(d *decoding[CaptureSpec, struct{}], v *yaml.Node) {
				if n, ok := d.name(v, "capture: last"); ok {
					d.x.Last = n
				}
			},
			write:  func(x *CaptureSpec, _ *writing) (string, error) { return str(x.Last), nil },
			schema: FormatField{Type: "name", Doc: "the stage the capture ends after (on the capture's stream)"}},
		{key: "mode",
			decode: func(d *decoding[CaptureSpec, struct{}], v *yaml.Node) {
				if m, ok := d.oneOf(v, "capture: mode", captureModes); ok {
					d.x.Mode = m
				}
			},
			write:  func(x *CaptureSpec, _ *writing) (string, error) { return strIf(x.Mode, CaptureGlobal), nil },
			schema: FormatField{Type: "enum", Enum: captureModes, Doc: "cuStreamBeginCapture's mode (default global)"}},
	}
	captureKeys = keysOf(captureTable)

	streamKinds  = []string{KindNonBlocking, KindBlocking, KindLegacy, KindPerThread, KindHost}
	captureModes = []string{CaptureGlobal, CaptureThreadLocal, CaptureRelaxed}
	copyModes    = []string{CopyAsync, CopySync}
	allocModes   = []string{AllocLazy}
	placements   = []string{PlacementSpec, PlacementBalance}
)

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

// boolVal reads a YAML boolean (true or false).
func (l *loader) boolVal(n *yaml.Node, what string) (bool, bool) {
	if n.Kind == yaml.ScalarNode && tagOf(n) == "!!bool" {
		switch n.Value {
		case "true", "True", "TRUE":
			return true, true
		case "false", "False", "FALSE":
			return false, true
		}
	}
	l.errorf(n, "write true or false", "%s must be true or false, got %s", what, kindName(n))
	return false, false
}

// --- fast paths: the common, valid value, decoded without building the
// field's name for messages (obj+field); anything else goes to the full
// decoder with that name. ---

// named sets d.what to "KIND NAME" unless mapping named the object so.
func (d *decoding[T, S]) named(kind, name string) {
	if !isNamed(d.what, kind, name) {
		d.what = kind + " " + name
	}
}

// isNamed reports whether what is kind + " " + name.
func isNamed(what, kind, name string) bool {
	return len(what) == len(kind)+1+len(name) && what[len(kind)] == ' ' && what[:len(kind)] == kind && what[len(kind)+1:] == name
}

// nameOK reports whether nameProblem(v) == "".
func nameOK(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c >= utf8.RuneSelf || nameBad[c] {
			return nameProblem(v) == ""
		}
	}
	return true
}

// nameBad marks the ASCII bytes nameProblem refuses.
var nameBad = func() (t [utf8.RuneSelf]bool) {
	for c := range utf8.RuneSelf {
		t[c] = c <= ' ' || c == 0x7f || strings.ContainsRune("[],{}#&*!|>'\"%@`", rune(c))
	}
	return t
}()

// nameOf is name(n, obj+field).
func (l *loader) nameOf(n *yaml.Node, obj, field string) (string, bool) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!str" || n.Tag == "!!int") && nameOK(n.Value) {
		return n.Value, true
	}
	return l.name(n, obj+field)
}

// oneOfOf is oneOf(n, obj+field, allowed).
func (l *loader) oneOfOf(n *yaml.Node, obj, field string, allowed []string) (string, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && contains(allowed, n.Value) {
		return n.Value, true
	}
	return l.oneOf(n, obj+field, allowed)
}

// fastInt is n's value if it is a decimal integer scalar (int64Val's
// common case).
func fastInt(n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, false
	}
	return yamlscan.Decimal(n.Value)
}

// intInOf is intIn(n, obj+field, lo, hi).
func (l *loader) intInOf(n *yaml.Node, obj, field string, lo, hi int64) (int64, bool) {
	if v, ok := fastInt(n); ok && v >= lo && v <= hi {
		return v, true
	}
	return l.intIn(n, obj+field, lo, hi)
}

// nonNegNumOf is nonNegNum(n, obj+field).
func (l *loader) nonNegNumOf(n *yaml.Node, obj, field string) (float64, bool) {
	if n.Kind == yaml.ScalarNode {
		switch n.Tag {
		case "!!int":
			if i, ok := yamlscan.Decimal(n.Value); ok && i >= 0 {
				return float64(i), true
			}
		case "!!float":
			if f, ok := yamlscan.SimpleFloat(n.Value); ok && f >= 0 && !math.IsInf(f, 0) {
				return f, true
			}
		}
	}
	return l.nonNegNum(n, obj+field)
}

// listOf is list(n, obj+field, hint).
func (l *loader) listOf(n *yaml.Node, obj, field, hint string) ([]*yaml.Node, bool) {
	if n.Kind == yaml.SequenceNode {
		return l.list(n, "", hint)
	}
	return l.list(n, obj+field, hint)
}
