package planner

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// newPlan fills the spec-derived parts of a plan (stages without streams, buffers, kernels).
// The plan's strings are its own copies (strings.Clone, or interned), so that the
// plan holds none of the spec's memory once the spec is let go.
func (st *state) newPlan() *plan.Plan {
	s := st.spec
	var src sourceText
	p := &plan.Plan{Version: plan.PlanVersion, Spec: strings.Clone(s.Name), Dir: s.Dir, Strategy: src.intern(string(st.strategy))}
	if s.Devices > 1 {
		p.Devices = s.Devices
	}
	p.Buffers = make([]plan.Buffer, len(s.Buffers))
	for i, b := range s.Buffers {
		p.Buffers[i] = plan.Buffer{Where: src.intern(cmp.Or(b.Where, dag.WhereDevice)), Role: src.intern(cmp.Or(b.Role, dag.RoleTemp)),
			Bytes: b.Bytes, Init: src.intern(b.Init.Kind), InitValue: b.Init.Value, InitPath: strings.Clone(b.Init.Path), InitSeed: b.Init.Seed, Copies: b.Copies, Device: max(b.Device, 0)}
		src.addString(&p.Buffers[i].Name, b.Name)
	}
	src.flush()
	p.Stages = make([]plan.Stage, len(s.Stages))
	na := 0
	used := map[string]bool{} // kernels
	for i := range s.Stages {
		sg := &s.Stages[i]
		na += len(sg.Reads) + len(sg.Writes)
		if i == 0 || sg.Kernel != s.Stages[i-1].Kernel {
			used[sg.Kernel] = true
		}
	}
	// The hazard analysis looked every access's buffer up already; the
	// plan's stages and buffers are the spec's, in its order.
	acc := &planAccesses{off: make([]int32, len(p.Stages)+1)}
	acc.buf = make([]int32, 0, na)
	flat := make([]plan.Access, 0, na) // one allocation for every stage's accesses
	conv := func(as []dag.Access) []plan.Access {
		start := len(flat)
		for _, a := range as {
			b := acc.buf[len(flat)]
			name := a.Buffer
			if b >= 0 {
				name = p.Buffers[b].Name
			} else {
				name = src.intern(name)
			}
			flat = append(flat, plan.Access{Buffer: name, Offset: a.Offset, Bytes: a.Bytes})
		}
		return flat[start:len(flat):len(flat)]
	}
	for i := range s.Stages {
		sg := &s.Stages[i]
		for _, b := range st.g.AccessBuffers(i) {
			if int(b) >= len(p.Buffers) {
				b = -1 // not declared: Validate reports it
			}
			acc.buf = append(acc.buf, b)
		}
		acc.off[i+1] = int32(len(acc.buf))
		p.Stages[i] = plan.Stage{DurationUS: sg.DurationUS, Kernel: src.intern(sg.Kernel), Go: sg.Go, Args: sg.Args,
			Grid: sg.Launch.Grid, Block: sg.Launch.Block, Reads: conv(sg.Reads), Writes: conv(sg.Writes), Pinned: src.intern(sg.Stream)}
		src.addString(&p.Stages[i].Name, sg.Name)
		if st.coll != nil {
			p.Stages[i].Collective = st.coll[i]
		}
		if i < len(st.origin) && st.origin[i] >= 0 && st.origin[i] != i {
			p.Stages[i].Seed = &st.origin[i]
		}
		if sg.Pos.Line > 0 {
			src.add(&p.Stages[i].Source, sg.Pos)
		}
	}
	src.flush()
	for _, k := range s.Kernels {
		if !used[k.Name] {
			continue
		}
		params := make([]string, len(k.Params))
		for i, pr := range k.Params {
			params[i] = pr.Name + ":" + pr.Type
		}
		p.Kernels = append(p.Kernels, plan.Kernel{Name: src.intern(k.Name), PTX: strings.Clone(k.PTX), Entry: strings.Clone(k.Entry), Params: params})
	}
	st.acc, st.accPlan = acc, p
	return p
}

// sourceText writes positions as Pos.String() does ("file:line:col"),
// and copies of names (addString), into shared chunks of text, one string
// per chunk, so that a plan of a million stages does not hold a million
// small strings; intern copies the few distinct strings of a field (kernel
// names, stream names, enums) once each.
type sourceText struct {
	buf  []byte
	dsts []*string
	ends []int
	seen map[string]string
	// last is intern's latest answer: a field's strings repeat from
	// stage to stage, which the map need not be asked.
	lastIn, lastOut string
}

func (t *sourceText) add(dst *string, p dag.Pos) {
	t.grow()
	t.buf = append(t.buf, p.File...)
	t.buf = append(t.buf, ':')
	t.buf = strconv.AppendInt(t.buf, int64(p.Line), 10)
	t.buf = append(t.buf, ':')
	t.buf = strconv.AppendInt(t.buf, int64(p.Col), 10)
	t.dsts = append(t.dsts, dst)
	t.ends = append(t.ends, len(t.buf))
}

// addString sets *dst, at the next flush, to a copy of s.
func (t *sourceText) addString(dst *string, s string) {
	if len(s) > 4<<10 {
		*dst = strings.Clone(s)
		return
	}
	t.grow()
	t.buf = append(t.buf, s...)
	t.dsts = append(t.dsts, dst)
	t.ends = append(t.ends, len(t.buf))
}

func (t *sourceText) grow() {
	if len(t.buf) > 60<<10 {
		t.flush()
	}
	if t.buf == nil {
		t.buf = make([]byte, 0, 64<<10)
	}
}

// internMax bounds the strings intern keeps: past it, each is copied on its own.
const internMax = 4096

// intern returns a copy of s, the same copy for equal strings (the first
// internMax distinct ones).
func (t *sourceText) intern(s string) string {
	if s == "" {
		return ""
	}
	if s == t.lastIn {
		return t.lastOut
	}
	if c, ok := t.seen[s]; ok {
		t.lastIn, t.lastOut = s, c
		return c
	}
	if t.seen == nil {
		t.seen = map[string]string{}
	}
	c := strings.Clone(s)
	if len(t.seen) < internMax {
		t.seen[c] = c
	}
	return c
}

// flush sets the strings added since the last flush.
func (t *sourceText) flush() {
	text := string(t.buf)
	start := 0
	for k, dst := range t.dsts {
		*dst = text[start:t.ends[k]]
		start = t.ends[k]
	}
	t.buf, t.dsts, t.ends = t.buf[:0], t.dsts[:0], t.ends[:0]
}
