package dag

// Second phase of loading: resolve names and check everything that depends
// on them (see load.go for the first phase).

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/internal/safefile"
)

// checker is the state of the check phase.
type checker struct {
	*loader
	s       *Spec
	bufs    map[string]int  // buffer name → index of its first declaration
	kerns   map[string]int  // kernel name → index
	stages  map[string]int  // stage name → index of its first declaration
	forward []afterEdge     // after entries naming a later-declared stage
	events  map[string]bool // the events stages record (built on first use)
	// checkBuiltin's ranges of one stage, reused
	rangeR, rangeW []contract.Range
	guess          *bufferGuess          // bufferIndex's guesses
	ptx            map[string]*ptxModule // PTX files read, by path as the spec names it
}

// ptxModule is what checkKernel read of one PTX file: its entries, or why
// it could not be read.
type ptxModule struct {
	err     error
	entries []string        // in file order
	has     map[string]bool // entries as a set
}

// ptxReads counts the PTX files the loader read (for tests).
var ptxReads atomic.Int64

// ptxHintEntries is how many entries the hint of a missing entry names:
// the nearest by edit distance, and a count of the rest.
const ptxHintEntries = 5

// bufferIndex returns the index of the first declaration of buffer name,
// accessed in position j of a stage's reads or writes: a guess
// (bufferGuess) where one is right, else the look-up in bufs.
func (c *checker) bufferIndex(name string, write bool, j int) (int, bool) {
	bi, ok := c.guess.find(name, write, j)
	if !ok {
		if bi, ok = c.bufs[name]; !ok {
			return 0, false
		}
	}
	c.guess.found(c.s.Buffers, write, j, bi, c.firstBuffer)
	return bi, true
}

// firstBuffer reports whether buffer i is the first declaration of its name.
func (c *checker) firstBuffer(i int) bool { return c.bufSrc[i].first == 0 }

// accessBuffer returns the buffer of an access that resolveAccesses
// resolved.
func (c *checker) accessBuffer(as *accessSrc) *BufferSpec { return &c.s.Buffers[as.buf-1] }

// afterEdge is an after entry: stage to lists from (from must run first).
type afterEdge struct {
	from, to int
	n        at
}

func (l *loader) check(s *Spec) {
	c := &checker{loader: l, s: s, bufs: make(map[string]int, len(s.Buffers)), kerns: map[string]int{}, stages: make(map[string]int, len(s.Stages)), guess: new(bufferGuess)}
	c.bufs = firstIndex(c.bufs, len(s.Buffers), func(i int) string { return s.Buffers[i].Name }, func(i, j int) { c.bufSrc[i].first = int32(j) + 1 })
	// The stages' names are indexed beside the buffers' and kernels'
	// checks, which do not read them; a name given twice is reported after
	// those checks, as it was found.
	var dups [][2]int
	var indexed sync.WaitGroup
	indexed.Go(func() {
		c.stages = firstIndex(c.stages, len(s.Stages), func(i int) string { return s.Stages[i].Name }, func(i, j int) { dups = append(dups, [2]int{i, j}) })
	})
	var total int64 // bytes of every buffer times its copies
	for i := range s.Buffers {
		c.checkBuffer(i)
		b := &s.Buffers[i]
		if c.bufSrc[i].sizeOK && total <= MaxBufferBytes {
			copies := int64(max(b.Copies, 1))
			if total += b.Bytes * copies; total > MaxBufferBytes || b.Bytes > MaxBufferBytes/copies {
				c.errorAt(c.bufSrc[i].at, "use fewer or smaller buffers, or fewer copies", "buffer %s: the buffers (bytes times copies) add up to more than the %d (1 TiB) a spec may have (dag.MaxBufferBytes)", b.Name, int64(MaxBufferBytes))
				total = MaxBufferBytes + 1
			}
		}
	}
	for i := range s.Kernels {
		c.checkKernel(i)
	}
	indexed.Wait()
	for _, d := range dups {
		i, j := d[0], d[1]
		c.errorAt(c.stageSrc.at(i).name, "give each stage its own name", "stage %q declared twice (first at %s)", s.Stages[i].Name, s.Stages[j].Pos)
	}
	for i := range s.Stages {
		c.checkStage(i)
	}
	c.checkProducerReads()
	c.checkStreams()  // load_rules.go
	c.checkCaptures() // load_rules.go
	c.checkDevices()  // load_devices.go
	c.checkAfterCycles()
	if len(c.errs) == 0 && l.text != "" {
		c.detach(l.text) // load_detach.go
	}
	l.text = ""
}

// firstIndex fills m, an empty map, with the index of the first of n
// items to give each name (name(i); "" is no name), and calls dup(i, j)
// for each item i that gives the name of an earlier item j. Names given
// once, the usual case, cost one map operation each: a second pass with
// a look-up per item runs only when the first finds a name given twice.
func firstIndex(m map[string]int, n int, name func(i int) string, dup func(i, j int)) map[string]int {
	named := 0
	for i := range n {
		if k := name(i); k != "" {
			m[k] = i
			named++
		}
	}
	if len(m) == named {
		return m
	}
	clear(m)
	for i := range n {
		k := name(i)
		if k == "" {
			continue
		}
		if j, ok := m[k]; ok {
			dup(i, j)
		} else {
			m[k] = i
		}
	}
	return m
}

func (c *checker) checkBuffer(i int) {
	b := &c.s.Buffers[i]
	src := &c.bufSrc[i]
	if src.first > 0 {
		c.errorAt(src.name, "give each buffer its own name", "buffer %q declared twice (first at %s)", b.Name, c.s.Buffers[src.first-1].Pos)
	}
	switch {
	case b.Alloc == AllocProducer && b.Role != RoleTemp:
		c.errorAt(src.alloc, "drop alloc: producer, or make the buffer a temp (role: temp)", "buffer %s: alloc producer is for temps; an %s's bytes are the caller's", b.Name, b.Role)
	case b.Alloc == AllocProducer && cmp.Or(b.Where, WhereDevice) != WhereDevice:
		c.errorAt(src.alloc, "drop alloc: producer (a host buffer is allocated before the run), or drop where: to make it a device temp", "buffer %s: alloc producer on a %s buffer: only device temps are allocated by their producer", b.Name, b.Where)
	}
	if b.Alloc == AllocProducer && b.Init.Kind != "" && b.Init.Kind != InitZeros {
		c.errorAt(src.init, "drop init, or drop alloc: producer to keep the contents", "buffer %s: init %s with alloc producer: its first writer allocates it, so nothing is in it before that write", b.Name, b.Init.Kind)
	}
	if !src.sizeOK {
		return
	}
	switch b.Init.Kind {
	case InitFill:
		if b.Bytes%4 != 0 {
			c.errorAt(src.init, "fill writes float32 elements: make the size a multiple of 4 bytes, or use init: zeros or {file: ...}", "buffer %s: init fill needs a size that is a multiple of 4 bytes, got %d", b.Name, b.Bytes)
		}
	case InitFile:
		if src.initFile == (at{}) {
			return
		}
		f, size, err := c.openInput(b.Init.Path, MaxBufferBytes, "init file")
		if f != nil {
			f.Close()
		}
		var refused *safefile.RefusedError
		switch {
		case errors.Is(err, safefile.ErrOutside):
			c.errorAt(src.initFile, outsideHint, "buffer %s: init file %s is outside the spec's folder", b.Name, safefile.Quote(b.Init.Path))
		case errors.As(err, &refused) && refused.Irregular:
			c.errorAt(src.initFile, "name a regular file holding the raw bytes", "buffer %s: init file %s is not a regular file", b.Name, safefile.Quote(b.Init.Path))
		case errors.As(err, &refused):
			size = refused.Size
			fallthrough
		case err == nil && size != b.Bytes:
			c.errorAt(src.initFile, fmt.Sprintf("the file must hold exactly the buffer's %d bytes", b.Bytes), "buffer %s: init file %s is %d bytes, the buffer %d", b.Name, safefile.Quote(b.Init.Path), size, b.Bytes)
		case err != nil:
			c.errorAt(src.initFile, "paths are relative to the spec's directory ("+safefile.Quote(c.dirName())+")", "buffer %s: init file %s: %s", b.Name, safefile.Quote(b.Init.Path), unwrapPathError(err))
		}
	}
}

// outsideHint is the hint of a file named outside the spec's folder.
const outsideHint = "keep init and PTX files in the spec's folder or below it (a spec from someone else must not read your other files); to allow others, pass --allow-outside-paths (dag.LoadOptions.AllowOutside)"

// openInput opens the file a spec names (an init or PTX file), a regular
// file of at most limit bytes: inside the spec's folder (safefile.OpenIn)
// unless AllowOutside.
func (c *checker) openInput(p string, limit int64, what string) (*os.File, int64, error) {
	if c.allowOutside {
		return safefile.Open(c.resolvePath(p), limit, what)
	}
	return safefile.OpenIn(c.dirName(), p, limit, what)
}

func (c *checker) resolvePath(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.dir, p)
}

func (c *checker) dirName() string {
	if c.dir == "" {
		return "."
	}
	return c.dir
}

// maxPTXBytes bounds the PTX files the loader reads to look for entries.
const maxPTXBytes = 256 << 20

var ptxEntry = regexp.MustCompile(`\.entry\s+([A-Za-z_$%][A-Za-z0-9_$]*)`)

func (c *checker) checkKernel(i int) {
	k := &c.s.Kernels[i]
	src := &c.kernSrc[i]
	if k.Name != "" {
		switch j, dup := c.kerns[k.Name]; {
		case IsBuiltin(k.Name):
			c.errorAt(src.name, "rename the kernel; built-ins are "+strings.Join(Builtins, ", "), "kernel %q has the name of a built-in", k.Name)
		case dup:
			c.errorAt(src.name, "give each kernel its own name", "kernel %q declared twice (first at %s)", k.Name, c.s.Kernels[j].Pos)
		default:
			c.kerns[k.Name] = i
		}
	}
	if !src.ok || k.PTX == "" || k.Entry == "" {
		return
	}
	// Each file is read and scanned once, however many kernels name it.
	m := c.ptx[k.PTX]
	if m == nil {
		m = &ptxModule{}
		ptxReads.Add(1)
		f, _, err := c.openInput(k.PTX, maxPTXBytes, "PTX file")
		var data []byte
		if err == nil {
			data, err = io.ReadAll(io.LimitReader(f, maxPTXBytes))
			f.Close()
		}
		m.err = err
		if err == nil {
			m.has = map[string]bool{}
			for _, e := range ptxEntry.FindAllSubmatch(data, -1) {
				if name := string(e[1]); !m.has[name] {
					m.has[name] = true
					m.entries = append(m.entries, name)
				}
			}
		}
		if c.ptx == nil {
			c.ptx = map[string]*ptxModule{}
		}
		c.ptx[k.PTX] = m
	}
	err := m.err
	var refused *safefile.RefusedError
	switch {
	case errors.Is(err, safefile.ErrOutside):
		c.errorAt(src.ptx, outsideHint, "kernel %s: PTX file %s is outside the spec's folder", k.Name, safefile.Quote(k.PTX))
		return
	case errors.As(err, &refused) && refused.Irregular:
		c.errorAt(src.ptx, "name the .ptx file written by nvcc -ptx", "kernel %s: PTX file %s is not a regular file", k.Name, safefile.Quote(k.PTX))
		return
	case errors.As(err, &refused):
		c.errorAt(src.ptx, "name the .ptx file written by nvcc -ptx", "kernel %s: PTX file %s is %d bytes, more than the %d a PTX module may have here", k.Name, safefile.Quote(k.PTX), refused.Size, maxPTXBytes)
		return
	case err != nil:
		c.errorAt(src.ptx, "paths are relative to the spec's directory ("+safefile.Quote(c.dirName())+"); build the PTX with nvcc -ptx", "kernel %s: PTX file %s: %s", k.Name, safefile.Quote(k.PTX), unwrapPathError(err))
		return
	}
	if m.has[k.Entry] {
		return
	}
	hint := "the PTX defines no .entry; compile the kernel with extern \"C\" __global__ and nvcc -ptx"
	switch {
	case len(m.entries) > 0 && len(c.errs) >= MaxErrors: // not shown: no search
		hint = fmt.Sprintf("the file has %d entries", len(m.entries))
	case len(m.entries) > 0:
		hint = "entries in the file: " + nearestNames(k.Entry, m.entries, ptxHintEntries)
		if s := c.suggest(k.Entry, func() []string { return m.entries }); s != "" {
			hint = fmt.Sprintf("did you mean %q? (%s)", s, hint)
		}
	}
	c.errorAt(src.entry, hint, "kernel %s: entry %q not found in %s", k.Name, k.Entry, safefile.Quote(k.PTX))
}

// nearestNames lists at most n of names, the nearest to s by edit
// distance (ties in the order of names), and how many others there are:
// "a, b, c (and 997 more)".
func nearestNames(s string, names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	type near struct {
		d, i int
	}
	ds := make([]near, len(names))
	for i, name := range names {
		ds[i] = near{editDistance(s[:min(len(s), 64)], name[:min(len(name), 64)]), i}
	}
	slices.SortStableFunc(ds, func(a, b near) int { return a.d - b.d })
	ds = ds[:n]
	slices.SortFunc(ds, func(a, b near) int { return a.i - b.i })
	out := make([]string, n)
	for k, d := range ds {
		out[k] = names[d.i]
	}
	return fmt.Sprintf("%s (and %d more)", strings.Join(out, ", "), len(names)-n)
}

func (c *checker) checkStage(i int) {
	st := &c.s.Stages[i]
	src := c.stageSrc.at(i)
	if !src.decoded {
		return // not a mapping; reported
	}
	what := "stage"
	if st.Name != "" {
		what = c.join(what, st.Name)
	}
	resolved := c.resolveAccesses(st, src, what, "reads", st.Reads, src.reads)
	resolved = c.resolveAccesses(st, src, what, "writes", st.Writes, src.writes) && resolved
	if resolved && c.checkWriteOverlap(st, what) {
		resolved = false // the built-in's rules on ranges would say it again
	}
	if st.Kernel != "" && !st.Go {
		switch k, user := c.kerns[st.Kernel]; {
		case IsBuiltin(st.Kernel):
			b := contract.Lookup(st.Kernel)
			c.checkBuiltinArgs(st, src, what, b)
			if resolved {
				c.checkBuiltin(st, src, what, b)
			}
		case user:
			c.checkUserKernel(st, src, what, &c.s.Kernels[k], resolved)
		default:
			names := func() []string {
				names := append([]string(nil), Builtins...)
				for _, k := range c.s.Kernels {
					names = append(names, k.Name)
				}
				return names
			}
			hint := "use a built-in (" + strings.Join(Builtins, ", ") + "), declare it under kernels:, or name a Go function bound at run time: {go: name}"
			if s := c.suggest(st.Kernel, names); s != "" {
				hint = fmt.Sprintf("did you mean %q? (%s)", s, hint)
			}
			c.errorAt(src.kernel, hint, "%s: unknown kernel %q", what, st.Kernel)
		}
	}
	if len(st.After) > 0 && c.s.Sync == SyncManual {
		// A manual spec's order is its streams and waits; an after entry
		// would be neither placed nor checked.
		c.errorAt(src.fieldPos("after"), fmt.Sprintf("order the stages with a wait: waits: [%s] (an event recorded after it, waited for on this stage's stream); after: is for sync: auto, where the planner places the waits", st.After[0]),
			"%s: after is only allowed with sync: auto", what)
	} else {
		c.checkRefs(i, st.After, src.afterAt(), what, "after")
	}
	if (len(src.waitsAt()) > 0 || len(src.waitForAt()) > 0) && c.s.Sync != SyncManual {
		c.errorAt(src.fieldPos("waits"), "set sync: manual at the top of the spec and pin every stage to a stream, or drop waits: in sync: auto the planner inserts the waits", "%s: waits is only allowed with sync: manual", what)
	} else {
		c.checkRefs(i, st.Waits, src.waitsAt(), what, "waits")
		c.checkWaitFor(i, st, src, what)
	}
	if st.Event != "" && c.s.Sync != SyncManual {
		c.errorAt(src.fieldPos("event"), "set sync: manual, or drop event: (in sync: auto the planner places the events)", "%s: event is only allowed with sync: manual", what)
	}
	if st.Stream == HostStream {
		c.checkHostStage(st, src, what, resolved)
	}
	c.checkStageRules(st, src, what, resolved) // load_rules.go
	if c.s.Sync == SyncManual && st.Stream == "" {
		c.errorAt(src.at, "pin the stage to a named stream, e.g. stream: s0", "%s: sync: manual needs a stream for every stage", what)
	}
}

// resolveAccesses checks the accesses of one list against the buffers and
// fills in Bytes. It reports whether all of them resolved.
func (c *checker) resolveAccesses(st *StageSpec, src *stageSrc, what, field string, accs []Access, srcs []accessSrc) bool {
	all := true
	for j := range accs {
		a, as := &accs[j], &srcs[j]
		if !as.ok {
			all = false
			continue
		}
		bi, ok := c.bufferIndex(a.Buffer, field == "writes", j)
		if !ok {
			all = false
			names := func() []string {
				names := make([]string, 0, len(c.s.Buffers))
				for _, b := range c.s.Buffers {
					names = append(names, b.Name)
				}
				return names
			}
			hint := "declare it under buffers: or fix the name"
			if s := c.suggest(a.Buffer, names); s != "" {
				hint = fmt.Sprintf("did you mean %q?", s)
			}
			c.errAt(a.Pos, hint, "%s: %s unknown buffer %q", what, field, a.Buffer)
			continue
		}
		as.buf = int32(bi) + 1
		b := &c.s.Buffers[bi]
		// The declared name's string: the same bytes, so that the name
		// maps of the planner's passes find it without reading a second
		// copy of it (string equality first compares the pointers).
		a.Buffer = b.Name
		if !c.bufSrc[bi].sizeOK {
			all = false // the buffer's size is wrong; reported there
			continue
		}
		rangeHint := func() string {
			return fmt.Sprintf("buffer %s is %d bytes; use a range within [0:%d]", b.Name, b.Bytes, b.Bytes)
		}
		if !as.hasBytes {
			if a.Offset >= b.Bytes {
				c.errAt(a.Pos, rangeHint(), "%s: %s offset %d is past the end of buffer %s (%d bytes)", what, field, a.Offset, b.Name, b.Bytes)
				all = false
				continue
			}
			a.Bytes = b.Bytes - a.Offset
		} else if a.Offset > b.Bytes || a.Bytes > b.Bytes-a.Offset {
			rng := fmt.Sprintf("[%d:+%d]", a.Offset, a.Bytes)
			if a.Offset <= math.MaxInt64-a.Bytes {
				rng = fmt.Sprintf("[%d:%d]", a.Offset, a.End())
			}
			c.errAt(a.Pos, rangeHint(), "%s: %s range %s%s is out of range of buffer %s (%d bytes)", what, field, a.Buffer, rng, b.Name, b.Bytes)
			all = false
			continue
		}
		if field == "writes" && b.Role == RoleInput {
			c.errAt(a.Pos, "stages may only read input buffers (the host writes them before the run); write to a temp or output buffer, or change the role", "%s writes to input buffer %s", what, b.Name)
		}
	}
	return all
}

// checkWriteOverlap reports two writes of one stage that share bytes, at
// the later-listed one, and says whether there were any. The writes are
// swept in order of buffer and offset (O(n log n) for n writes), each
// compared with the one reaching furthest among those before it.
func (c *checker) checkWriteOverlap(st *StageSpec, what string) bool {
	ws := st.Writes
	if len(ws) < 2 {
		return false
	}
	order := make([]int, len(ws))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := strings.Compare(ws[a].Buffer, ws[b].Buffer); c != 0 {
			return c
		}
		return cmp.Compare(ws[a].Offset, ws[b].Offset)
	})
	reported := map[int]bool{}
	far := order[0] // the write reaching furthest so far in this buffer
	for _, i := range order[1:] {
		if ws[i].Buffer != ws[far].Buffer {
			far = i
			continue
		}
		if ws[i].Offset < ws[far].End() {
			first, later := min(i, far), max(i, far)
			if !reported[later] {
				reported[later] = true
				c.errAt(ws[later].Pos, "a stage writes each byte once: list the range once, or split it into disjoint ranges", "%s: writes %s and %s overlap", what, ws[first], ws[later])
			}
		}
		if ws[i].End() > ws[far].End() {
			far = i
		}
	}
	return len(reported) > 0
}

// checkBuiltin checks a built-in stage's resolved accesses against the
// built-in contract (contract.Builtin.CheckAccesses), reporting each rule
// broken at the access it is about (the reads or writes field for counts).
func (c *checker) checkBuiltin(st *StageSpec, src *stageSrc, what string, b *contract.Builtin) {
	c.rangeR, c.rangeW = ranges(c.rangeR[:0], st.Reads), ranges(c.rangeW[:0], st.Writes)
	for _, v := range b.CheckAccesses(c.rangeR, c.rangeW) {
		list := st.Reads
		if v.Field == contract.FieldWrites {
			list = st.Writes
		}
		if v.Index >= 0 && v.Index < len(list) {
			c.errAt(list[v.Index].Pos, v.Hint, "%s: %s", what, v.Msg)
		} else {
			c.errorAt(src.fieldPos(string(v.Field)), v.Hint, "%s: %s", what, v.Msg)
		}
	}
}

// ranges appends accesses to out as contract ranges.
func ranges(out []contract.Range, accs []Access) []contract.Range {
	for _, a := range accs {
		out = append(out, contract.Range{Buffer: a.Buffer, Offset: a.Offset, Bytes: a.Bytes})
	}
	return out
}

// checkBuiltinArgs checks a built-in stage's arguments against the
// built-in contract (contract.Builtin.CheckArgs): known names, values,
// required ones. An argument whose value failed to decode (reported then)
// counts as given and is not checked again. As everywhere in the format,
// an integer is written as one: a float literal (64.0) for an integer
// argument is an error here, though a plan built in Go may pass 64.0.
func (c *checker) checkBuiltinArgs(st *StageSpec, src *stageSrc, what string, b *contract.Builtin) {
	if src.args != nil && src.args.checked == b {
		return // the same args (shared), checked against b already and right
	}
	before := len(c.errs)
	args := st.Args
	var undecoded map[string]bool
	for _, a := range src.argList() {
		if !a.given {
			continue
		}
		if _, ok := st.Args[a.name]; !ok {
			if undecoded == nil {
				args, undecoded = maps.Clone(st.Args), map[string]bool{}
				if args == nil {
					args = map[string]any{}
				}
			}
			args[a.name] = nil
			undecoded[a.name] = true
		}
	}
	for name, v := range st.Args {
		if s := b.Arg(name); s != nil && s.Integer() {
			if _, isInt := v.(int); !isInt {
				if i := src.arg(name); i >= 0 && src.args.list[i].tag == "!!float" {
					if a := src.args.list[i]; a.tagged && integerText.MatchString(a.text) {
						c.errorAt(src.argValAt(i), fmt.Sprintf("drop the tag: write %s: %s", name, a.text), "%s: argument %s: %s is tagged !!float, but %s is wanted", what, name, a.text, s.Want())
					} else {
						c.errorAt(src.argValAt(i), "write a whole number such as 64 (not 64.0)", "%s: argument %s must be %s, got %s", what, name, s.Want(), a.text)
					}
					if undecoded == nil {
						undecoded = map[string]bool{}
					}
					undecoded[name] = true
				}
			}
		}
	}
	for _, v := range b.CheckArgs(args) {
		n := src.fieldPos("args")
		switch v.Rule {
		case contract.RuleArgUnknown:
			if i := src.arg(v.Arg); i >= 0 {
				n = src.argKeyAt(i)
			}
		case contract.RuleArgValue:
			if undecoded[v.Arg] {
				continue
			}
			if i := src.arg(v.Arg); i >= 0 {
				n = src.argValAt(i)
			}
		}
		c.errorAt(n, v.Hint, "%s: %s", what, v.Msg)
	}
	if src.args != nil && undecoded == nil && len(c.errs) == before {
		src.args.checked = b
	}
}

// argNumber returns an argument's value if it is a number.
func (c *checker) argNumber(a *argSrc, val at, v any, what, name string) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	}
	c.errorAt(val, "write a number", "%s: argument %s must be a number, got %s", what, name, scalarKindName(a.tag, a.text))
	return 0, false
}

// intRanges are the value ranges of integer parameter types.
var intRanges = map[string][2]int64{
	"u32": {0, math.MaxUint32},
	"i32": {math.MinInt32, math.MaxInt32},
	"u64": {0, math.MaxInt64}, // YAML integers above 2^63-1 are not accepted anyway
	"i64": {math.MinInt64, math.MaxInt64},
}

func (c *checker) checkUserKernel(st *StageSpec, src *stageSrc, what string, k *KernelSpec, resolved bool) {
	params := map[string]ParamSpec{}
	for _, p := range k.Params {
		params[p.Name] = p
	}
	for i, a := range src.argList() {
		if !a.given {
			continue
		}
		if _, ok := params[a.name]; !ok {
			var names []string
			for _, p := range k.Params {
				names = append(names, p.Name+" ("+p.Type+")")
			}
			hint := "kernel " + k.Name + " has no parameters"
			if len(names) > 0 {
				hint = "kernel " + k.Name + " takes: " + strings.Join(names, ", ")
			}
			c.errorAt(src.argKeyAt(i), hint, "%s: kernel %s has no parameter %q", what, k.Name, a.name)
		}
	}
	for _, p := range k.Params {
		if p.Name == "" || p.Type == "" {
			continue
		}
		ai := src.arg(p.Name)
		if ai < 0 {
			c.errorAt(src.fieldPos("args"), fmt.Sprintf("add it to args: {%s: ...}", p.Name), "%s: missing argument %s (%s) of kernel %s", what, p.Name, p.Type, k.Name)
			continue
		}
		v, ok := st.Args[p.Name]
		if !ok {
			continue // bad value; reported
		}
		a, n := &src.args.list[ai], src.argValAt(ai)
		switch p.Type {
		case "ptr":
			name, ok := v.(string)
			if !ok {
				c.errorAt(n, "a ptr argument names a buffer", "%s: argument %s (ptr) must be a buffer name, got %s", what, p.Name, scalarKindName(a.tag, a.text))
				continue
			}
			if _, ok := c.bufs[name]; !ok {
				c.errorAt(n, "declare it under buffers: or fix the name", "%s: argument %s names unknown buffer %q", what, p.Name, name)
				continue
			}
			if resolved && !touches(st, name) {
				c.errorAt(n, fmt.Sprintf("list %s under reads: or writes: so that the planner orders the accesses", name), "%s: argument %s passes buffer %s, which the stage neither reads nor writes", what, p.Name, name)
			}
		case "f32", "f64":
			x, ok := c.argNumber(a, n, v, what, p.Name)
			if ok && p.Type == "f32" && math.Abs(x) > math.MaxFloat32 {
				c.errorAt(n, "use a value within float32 range (±3.4e38)", "%s: argument %s = %v overflows f32", what, p.Name, x)
			}
		default:
			x, ok := v.(int)
			r := intRanges[p.Type]
			if !ok {
				c.errorAt(n, "write a whole number", "%s: argument %s (%s) must be an integer, got %s", what, p.Name, p.Type, scalarKindName(a.tag, a.text))
			} else if int64(x) < r[0] || int64(x) > r[1] {
				c.errorAt(n, fmt.Sprintf("use a value in [%d, %d]", r[0], r[1]), "%s: argument %s = %d is out of range for %s", what, p.Name, x, p.Type)
			}
		}
	}
}

// touches reports whether the stage reads or writes buffer name.
func touches(st *StageSpec, name string) bool {
	for _, a := range st.Reads {
		if a.Buffer == name {
			return true
		}
	}
	for _, a := range st.Writes {
		if a.Buffer == name {
			return true
		}
	}
	return false
}

// checkRefs checks the after or waits list of stage i: each name must be
// another stage, listed once; after must name a stage declared before i.
func (c *checker) checkRefs(i int, names []string, nodes []at, what, field string) {
	self := c.s.Stages[i].Name
	seen := map[string]bool{}
	for j, name := range names {
		n := nodes[j]
		k, ok := c.stages[name]
		switch {
		case !ok:
			stageNames := func() []string {
				names := make([]string, 0, len(c.s.Stages))
				for _, st := range c.s.Stages {
					names = append(names, st.Name)
				}
				return names
			}
			hint := "name a stage declared before this one"
			if s := c.suggest(name, stageNames); s != "" {
				hint = fmt.Sprintf("did you mean %q?", s)
			}
			c.errorAt(n, hint, "%s: %s names unknown stage %q", what, field, name)
		case name == self:
			c.errorAt(n, "remove it", "%s: %s names the stage itself", what, field)
		case seen[name]:
			c.errorAt(n, "list each stage once", "%s: %s lists %s twice", what, field, name)
		case k > i && field == "after":
			// Reported in checkAfterCycles, as a cycle or on its own.
			c.forward = append(c.forward, afterEdge{from: k, to: i, n: n})
		}
		// A wait on a later-declared stage is allowed: it is issued before
		// the record it names and so waits for nothing (CUDA's
		// wait-before-record mistake). That is a synchronization bug in a
		// hand-written schedule, which `dagrun check` reports as a race.
		seen[name] = true
	}
}

// checkWaitFor checks the mapping entries of a stage's waits: the stage or
// the event they name exists (an event is named by some stage's event:).
func (c *checker) checkWaitFor(i int, st *StageSpec, src *stageSrc, what string) {
	// The same wait given twice, in either form ({stage: X} is X), is
	// listed twice, as X twice is.
	type waitKey struct {
		stage, event string
		lag          int
	}
	seen := map[waitKey]bool{}
	for _, w := range st.Waits {
		seen[waitKey{stage: w}] = true
	}
	for j, w := range st.WaitFor {
		n := src.waitForAt()[j]
		if k := (waitKey{w.Stage, w.Event, w.Lag}); seen[k] {
			name, hint := w.Stage, "list each stage once"
			if w.Stage == "" {
				name, hint = "event "+w.Event, "list each event once"
			}
			if w.Lag > 0 {
				name += fmt.Sprintf(" with lag %d", w.Lag)
			}
			c.errorAt(n, hint, "%s: waits lists %s twice", what, name)
			continue
		} else {
			seen[k] = true
		}
		switch {
		case w.Stage != "":
			c.checkRefs(i, []string{w.Stage}, []at{n}, what, "waits")
		case w.Event != "":
			if c.events == nil {
				c.events = map[string]bool{}
				for _, other := range c.s.Stages {
					if other.Event != "" {
						c.events[other.Event] = true
					}
				}
			}
			if !c.events[w.Event] {
				events := slices.Sorted(maps.Keys(c.events))
				hint := "name an event that a stage records with event: NAME"
				if s := c.suggest(w.Event, func() []string { return events }); s != "" {
					hint = fmt.Sprintf("did you mean %q?", s)
				}
				c.errorAt(n, hint, "%s: waits names event %q, which no stage records", what, w.Event)
			}
		}
	}
}

// checkAfterCycles reports after entries that name a later-declared stage.
// Stages run in declaration order, so such an entry either contradicts that
// order or closes a cycle; cycles are reported by stage names, found as the
// strongly connected components of the after graph (Tarjan, via gonum topo).
func (c *checker) checkAfterCycles() {
	if len(c.forward) == 0 {
		return // every after edge points backwards: no cycle is possible
	}
	g := simple.NewDirectedGraph()
	for i := range c.s.Stages {
		g.AddNode(simple.Node(i))
	}
	for i, st := range c.s.Stages {
		for _, name := range st.After {
			if k, ok := c.stages[name]; ok && k != i && !g.HasEdgeFromTo(int64(k), int64(i)) {
				g.SetEdge(g.NewEdge(simple.Node(k), simple.Node(i)))
			}
		}
	}
	inCycle := map[int]int{} // stage → component id
	_, err := topo.Sort(g)
	if un, ok := err.(topo.Unorderable); ok {
		for ci, comp := range un {
			if len(comp) < 2 {
				continue
			}
			for _, n := range comp {
				inCycle[int(n.ID())] = ci
			}
			c.reportCycle(g, comp)
		}
	}
	for _, e := range c.forward {
		cf, ok1 := inCycle[e.from]
		ct, ok2 := inCycle[e.to]
		if ok1 && ok2 && cf == ct {
			continue
		}
		from, to := c.s.Stages[e.from].Name, c.s.Stages[e.to].Name
		c.errorAt(e.n, fmt.Sprintf("after names earlier stages only (stages run in declaration order); declare %s before %s", from, to), "stage %s: after names %s, which is declared later", to, from)
	}
}

// reportCycle reports one cycle through the component comp, as a path of
// stage names, at the after entry of its first-declared stage.
func (c *checker) reportCycle(g graph.Directed, comp []graph.Node) {
	in := map[int64]bool{}
	start := int64(math.MaxInt64)
	for _, n := range comp {
		in[n.ID()] = true
		start = min(start, n.ID())
	}
	// Shortest path start → ... → start inside the component (BFS).
	prev := map[int64]int64{}
	queue := []int64{start}
	var last int64 = -1
	for len(queue) > 0 && last < 0 {
		u := queue[0]
		queue = queue[1:]
		succ := graph.NodesOf(g.From(u))
		sort.Slice(succ, func(a, b int) bool { return succ[a].ID() < succ[b].ID() })
		for _, v := range succ {
			id := v.ID()
			if !in[id] {
				continue
			}
			if id == start {
				last = u
				break
			}
			if _, seen := prev[id]; !seen {
				prev[id] = u
				queue = append(queue, id)
			}
		}
	}
	// path in edge order: start → ... → last → start ("runs before").
	var path []int64
	for u := last; u != start; u = prev[u] {
		path = append(path, u)
	}
	path = append(path, start)
	var names []string
	for i := len(path) - 1; i >= 0; i-- {
		names = append(names, c.s.Stages[path[i]].Name)
	}
	names = append(names, c.s.Stages[start].Name)
	// The entry that closes the cycle: stage start lists last in after.
	st := c.s.Stages[start]
	pos := st.Pos
	for j, name := range st.After {
		if name == c.s.Stages[last].Name {
			pos = c.posAt(c.stageSrc.at(int(start)).afterAt()[j])
		}
	}
	c.errAt(pos, "after names earlier stages only; remove one after entry of the cycle", "after forms a cycle: %s (each must run before the next)", strings.Join(names, " → "))
}

// buffer returns the first buffer named name, or nil: Spec.Buffer through
// the checker's index (Spec.Buffer is a linear scan).
func (c *checker) buffer(name string) *BufferSpec {
	if i, ok := c.bufs[name]; ok {
		return &c.s.Buffers[i]
	}
	return nil
}
