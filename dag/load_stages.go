package dag

// The stage table of the spec format, its decoder, and the source
// positions the loader keeps of a stage for check.

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/contract"
	"gopkg.in/yaml.v3"
)

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
					// On no device: as a host buffer's (bufferTable).
					return intIf(int64(max(st.Device, 0))), nil
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
