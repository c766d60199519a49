package dag

// The buffer and kernel tables of the spec format, and their decoders.

import (
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// bufferSrc keeps the positions of a buffer for check.
type bufferSrc struct {
	at       at
	name     at
	init     at // the init value, if any
	initFile at // the file: value
	device   at // the device: value, if any
	alloc    at // the alloc: value, if any
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
					d.src.alloc = atOf(v)
				}
			},
			write:  func(b *BufferSpec, _ *writing) (string, error) { return strIf(b.Alloc, ""), nil },
			schema: FormatField{Type: "enum", Enum: allocModes, Doc: "lazy: each stream allocates it (cuMemAlloc) at its first use, like a library's workspace; producer: a device temp that its first writer allocates for itself (a library call that returns a new tensor, as PyTorch's operators do), read only after a stage declared earlier writes it; neither is placed in the arena: the executors give it bytes of its own"}},
		{key: "device",
			decode: func(d *decoding[BufferSpec, bufferSrc], v *yaml.Node) {
				if n, ok := d.intIn(v, d.what+": device", 0, MaxDevices-1); ok {
					d.x.Device = int(n)
					d.src.device = atOf(v)
				}
			},
			write: func(b *BufferSpec, w *writing) (string, error) {
				if b.Where != "" && b.Where != WhereDevice {
					// On no device: a loaded spec's 0 is the default; a
					// device a spec built in Go gives is written, for Load
					// (and Validate) to refuse.
					return intIf(int64(max(b.Device, 0))), nil
				}
				return w.deviceIf(b.Device), nil
			},
			schema: FormatField{Type: "integer", Min: 0, Max: MaxDevices - 1, HasMin: true, HasMax: true, Doc: "the GPU a device buffer lives on (default 0)"}},
	}
	bufferKeys = keysOf(bufferTable)
)

// maxCopies and maxLag bound a buffer's copies and a wait's lag (2^16):
// the most a plan holds, whose ring copies, and event slots (a lag of N
// keeps N + 1), beyond one each number at most 2^16 in all
// (plan.MaxExtraSlots). A value the loader takes plans on its own; the
// planner refuses several whose sum is past that bound, at the buffer or
// wait that passes it.
const (
	maxCopies = 1 << 16
	maxLag    = 1 << 16
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
