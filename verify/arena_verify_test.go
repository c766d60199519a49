package verify

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/internal/radix"
	"github.com/dagrun/dagrun/plan"
)

// arenaSegUse is what Verify keeps of one arena buffer's accesses to one
// elementary segment of the arena: per stream touching it, the first and
// last launch that touches the segment, and the first and last that writes
// it (-1: none).
type arenaSegUse struct {
	buf        int32 // index into p.Buffers
	firstIssue int32 // issue position of its first launch touching the segment
	writes     bool
	streams    []int32
	firstAny   []int32 // per entry of streams: stage
	lastAny    []int32
	firstWrite []int32
	lastWrite  []int32
}

// arenaLifetimesSegments is the reference for arenaLifetimes: the same
// rules checked per elementary segment of the arena (between the ends of
// every arena access), each segment's buffers sorted by their first launch
// there. Cost: O(accesses × segments each covers), too slow for big plans,
// simple enough to trust.
func (v *verifier) arenaLifetimesSegments() {
	p := v.p
	off := make([]int64, len(p.Buffers))
	inArena := make([]bool, len(p.Buffers))
	used := false
	for i, b := range p.Buffers {
		if b.ArenaOffset != nil {
			off[i], inArena[i], used = *b.ArenaOffset, true, true
		}
	}
	if !used {
		return
	}
	type access struct {
		k, s, stage, buf int32
		lo, hi           int64
		write            bool
	}
	accs := make([]access, 0, len(v.acc))
	bounds := make([]int64, 0, 2*len(v.acc))
	for k, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		if o.Kind != plan.OpLaunch {
			continue
		}
		// The stage's accesses (verifier.accesses: reads, then writes;
		// buffer indices below len(p.Buffers) are p.Buffers').
		for x := v.accStart[o.Stage]; x < v.accStart[o.Stage+1]; x++ {
			a := v.acc[x]
			if b := a.buf(); int(b) < len(p.Buffers) && inArena[b] {
				alo, ahi := v.planBytes(x) // from the plan, not the verifier's segments
				lo, hi := off[b]+alo, off[b]+ahi
				accs = append(accs, access{int32(k), int32(so[0]), a.stage, b, lo, hi, a.write()})
				bounds = append(bounds, lo, hi)
			}
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	segs := make([][]*arenaSegUse, max(len(bounds)-1, 0))
	// Per buffer, its uses by segment, over the segments its accesses span
	// (useOf[buf][g-segLo[buf]]), carved from one array.
	segLo, segHi := make([]int32, len(p.Buffers)), make([]int32, len(p.Buffers))
	for i := range segLo {
		segLo[i] = -1
	}
	for k := range accs {
		a := &accs[k]
		lo, _ := slices.BinarySearch(bounds, a.lo)
		hi, _ := slices.BinarySearch(bounds, a.hi)
		a.lo, a.hi = int64(lo), int64(hi) // segment indices from here on
		if segLo[a.buf] < 0 || int32(lo) < segLo[a.buf] {
			segLo[a.buf] = int32(lo)
		}
		segHi[a.buf] = max(segHi[a.buf], int32(hi))
	}
	n := 0
	for i := range segLo {
		if segLo[i] >= 0 {
			n += int(segHi[i] - segLo[i])
		}
	}
	useOf := make([][]*arenaSegUse, len(p.Buffers))
	all := make([]*arenaSegUse, n)
	for i := range segLo {
		if segLo[i] >= 0 {
			useOf[i], all = all[:segHi[i]-segLo[i]], all[segHi[i]-segLo[i]:]
		}
	}
	var slab []arenaSegUse
	for _, a := range accs {
		for g := a.lo; g < a.hi; g++ {
			u := useOf[a.buf][int32(g)-segLo[a.buf]]
			if u == nil {
				if len(slab) == 0 {
					slab = make([]arenaSegUse, 1024)
				}
				u, slab = &slab[0], slab[1:]
				*u = arenaSegUse{buf: a.buf, firstIssue: a.k}
				segs[g] = append(segs[g], u)
				useOf[a.buf][int32(g)-segLo[a.buf]] = u
			}
			j := slices.Index(u.streams, a.s)
			if j < 0 {
				j = len(u.streams)
				u.streams = append(u.streams, a.s)
				u.firstAny = append(u.firstAny, a.stage)
				u.lastAny = append(u.lastAny, -1)
				u.firstWrite = append(u.firstWrite, -1)
				u.lastWrite = append(u.lastWrite, -1)
			}
			u.lastAny[j] = a.stage
			if a.write {
				u.writes = true
				if u.firstWrite[j] < 0 {
					u.firstWrite[j] = a.stage
				}
				u.lastWrite[j] = a.stage
			}
		}
	}
	seen := map[[4]int32]bool{} // (buffer, buffer, stage, stage) reported
	for g, uses := range segs {
		if len(uses) < 2 {
			continue
		}
		slices.SortStableFunc(uses, func(a, b *arenaSegUse) int {
			if c := cmp.Compare(a.firstIssue, b.firstIssue); c != 0 {
				return c
			}
			if c := cmp.Compare(arenaWrites(a.writes), arenaWrites(b.writes)); c != 0 {
				return c
			}
			return cmp.Compare(a.buf, b.buf)
		})
		var prev *arenaSegUse // the last writer
		var readers []*arenaSegUse
		for _, u := range uses {
			if !u.writes {
				if prev != nil {
					v.arenaOrderSegments(prev, u, prev.lastWrite, u.firstAny, bounds[g], seen)
				}
				readers = append(readers, u)
				continue
			}
			if prev != nil {
				v.arenaOrderSegments(prev, u, prev.lastAny, u.firstWrite, bounds[g], seen)
				v.arenaOrderSegments(prev, u, prev.lastWrite, u.firstAny, bounds[g], seen)
			}
			for _, r := range readers {
				v.arenaOrderSegments(r, u, r.lastAny, u.firstWrite, bounds[g], seen)
			}
			prev, readers = u, readers[:0]
		}
	}
}

// arenaOrderSegments reports each pair of launches (a from x's list, b
// from y's) sharing arena bytes at byte at that are not ordered a-then-b
// (-1 entries are no launch), one race per pair of stages and buffers.
func (v *verifier) arenaOrderSegments(x, y *arenaSegUse, as, bs []int32, at int64, seen map[[4]int32]bool) {
	for _, u := range as {
		for _, w := range bs {
			if u < 0 || w < 0 || v.stageHB(u, w) {
				continue
			}
			key := [4]int32{x.buf, y.buf, u, w}
			if seen[key] {
				continue
			}
			seen[key] = true
			v.races = append(v.races, arenaRace{u: u, w: w, x: x.buf, y: y.buf, at: at}.race(v))
		}
	}
}

// randomArenaPlan returns a plan of a few arena buffers laid out on
// overlapping bytes (offsets and sizes in 16-byte steps, so that most
// pairs share some), stages that read and write byte ranges of them, and
// random records, waits and issue order. mode 0: random sync; 1: one
// stream; 2: every launch waits for every earlier one but, with drop, one.
func randomArenaPlan(rng *rand.Rand, mode int, drop bool) *plan.Plan {
	S := 1 + rng.IntN(4)
	if mode == 1 {
		S = 1
	}
	n := 2 + rng.IntN(12)
	p := &plan.Plan{Version: plan.PlanVersion}
	for s := range S {
		p.Streams = append(p.Streams, plan.Stream{ID: s, Name: fmt.Sprintf("s%d", s)})
	}
	nb := 2 + rng.IntN(5)
	for b := range nb {
		off := int64(16 * rng.IntN(6))
		p.Buffers = append(p.Buffers, plan.Buffer{Name: fmt.Sprintf("t%d", b), Bytes: int64(16 * (1 + rng.IntN(4))), Role: "temp", ArenaOffset: &off})
	}
	p.Buffers = append(p.Buffers, plan.Buffer{Name: "out", Bytes: 64}) // not in the arena
	acc := func() plan.Access {
		b := p.Buffers[rng.IntN(len(p.Buffers))]
		if rng.IntN(2) == 0 {
			return plan.Access{Buffer: b.Name, Bytes: b.Bytes}
		}
		off := int64(8 * rng.IntN(int(b.Bytes/8)))
		return plan.Access{Buffer: b.Name, Offset: off, Bytes: int64(8 * (1 + rng.IntN(int((b.Bytes-off)/8))))}
	}
	for i := range n {
		st := plan.Stage{Name: fmt.Sprintf("g%d", i), Stream: rng.IntN(S)}
		for range rng.IntN(3) {
			st.Reads = append(st.Reads, acc())
		}
		for range 1 + rng.IntN(2) {
			st.Writes = append(st.Writes, acc())
		}
		p.Stages = append(p.Stages, st)
	}
	issue := func(s int, o plan.Op) {
		p.IssueOrder = append(p.IssueOrder, [2]int{s, len(p.Streams[s].Ops)})
		p.Streams[s].Ops = append(p.Streams[s].Ops, o)
	}
	switch mode {
	case 2: // stage i records event i; stage j waits for every i < j
		p.Events = n
		skip := [2]int{-1, -1}
		if drop && n > 1 {
			j := 1 + rng.IntN(n-1)
			skip = [2]int{rng.IntN(j), j}
		}
		for j, st := range p.Stages {
			for i := range j {
				if p.Stages[i].Stream != st.Stream && [2]int{i, j} != skip {
					issue(st.Stream, plan.Op{Kind: plan.OpWait, Event: i})
				}
			}
			issue(st.Stream, plan.Op{Kind: plan.OpLaunch, Stage: j})
			issue(st.Stream, plan.Op{Kind: plan.OpRecord, Event: j})
		}
		return p
	}
	// Random: per stream its launches in declaration order with random
	// records and waits, then a random interleaving.
	p.Events = 1 + rng.IntN(4)
	ops := make([][]plan.Op, S)
	for i, st := range p.Stages {
		ops[st.Stream] = append(ops[st.Stream], plan.Op{Kind: plan.OpLaunch, Stage: i})
	}
	for range rng.IntN(3 * n) {
		s := rng.IntN(S)
		o := plan.Op{Kind: plan.OpRecord, Event: rng.IntN(p.Events)}
		if rng.IntN(2) == 0 {
			o.Kind = plan.OpWait
		}
		ops[s] = slices.Insert(ops[s], rng.IntN(len(ops[s])+1), o)
	}
	next := make([]int, S)
	for left := len(p.Stages) + 0; ; {
		var open []int
		for s := range S {
			if next[s] < len(ops[s]) {
				open = append(open, s)
			}
		}
		if len(open) == 0 {
			break
		}
		s := open[rng.IntN(len(open))]
		issue(s, ops[s][next[s]])
		next[s]++
		_ = left
	}
	return p
}

// arenaRacesOf runs one arena check (the sweep, or the reference) on p
// and returns its races, sorted with every field.
func arenaRacesOf(t *testing.T, p *plan.Plan, check func(*verifier)) []string {
	t.Helper()
	v := &verifier{p: p}
	if err := v.accesses(); err != nil {
		t.Fatal(err)
	}
	v.clocks()
	check(v)
	var out []string
	for _, r := range v.races {
		out = append(out, fmt.Sprintf("%+v", r))
	}
	slices.Sort(out)
	return out
}

// arenaBrute is the all-pairs reference of the arena rule, byte by byte:
// the pairs of stages (first, second, first's buffer, second's buffer) of
// different arena buffers touching a common arena byte, one writing it,
// whose launches are not ordered in the order of their buffers' first
// launches touching that byte (of buffers first touched by one launch,
// those not written there first).
func arenaBrute(p *plan.Plan) map[[4]string]bool {
	before, id := closure(p)
	launch := make([]int, len(p.Stages))
	issue := make([]int, len(p.Stages))
	for k, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpLaunch {
			launch[o.Stage], issue[o.Stage] = id(so[0], so[1]), k
		}
	}
	hb := func(i, j int) bool { return i == j || before[launch[j]][launch[i]] }
	type touch struct {
		stage int
		buf   string
		write bool
	}
	off := map[string]int64{}
	for _, b := range p.Buffers {
		if b.ArenaOffset != nil {
			off[b.Name] = *b.ArenaOffset
		}
	}
	bytes := map[int64][]touch{}
	for i, st := range p.Stages {
		for k, list := range [2][]plan.Access{st.Reads, st.Writes} {
			for _, a := range list {
				base, ok := off[a.Buffer]
				if !ok {
					continue
				}
				for x := base + a.Offset; x < base+a.Offset+a.Bytes; x++ {
					bytes[x] = append(bytes[x], touch{i, a.Buffer, k == 1})
				}
			}
		}
	}
	out := map[[4]string]bool{}
	for _, ts := range bytes {
		// Per buffer: its first launch touching the byte (in issue order),
		// and 1 if it writes the byte: buffers are ordered by both.
		first, writes := map[string]int{}, map[string]int{}
		for _, x := range ts {
			if f, ok := first[x.buf]; !ok || issue[x.stage] < f {
				first[x.buf] = issue[x.stage]
			}
			if x.write {
				writes[x.buf] = 1
			}
		}
		after := func(x, y string) bool {
			return first[x] > first[y] || first[x] == first[y] && writes[x] > writes[y]
		}
		for _, x := range ts {
			for _, y := range ts {
				if x.buf == y.buf || !(x.write || y.write) || after(x.buf, y.buf) || hb(x.stage, y.stage) {
					continue
				}
				i, j, bi, bj := x.stage, y.stage, x.buf, y.buf
				if j < i {
					i, j, bi, bj = j, i, bj, bi
				}
				out[[4]string{p.Stages[i].Name, p.Stages[j].Name, bi, bj}] = true
			}
		}
	}
	return out
}

// TestArenaSweepMatchesReference: on random arena layouts of overlapping
// buffers with partial accesses (racy, race-free, and race-free but for one
// dropped wait), the interval sweep reports exactly the races of the
// per-segment reference, fix text included; and it finds a race exactly
// when the all-pairs byte-by-byte check finds an unordered conflicting
// pair, every race it reports being one.
func TestArenaSweepMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 17))
	racy, clean := 0, 0
	for trial := range 3000 {
		p := randomArenaPlan(rng, trial%3, trial%2 == 0)
		if launchAliases(p) != nil {
			continue // a launch sharing arena bytes with itself: not the sweep's case
		}
		got := arenaRacesOf(t, p, func(v *verifier) { v.races = v.arenaLifetimes() })
		want := arenaRacesOf(t, p, (*verifier).arenaLifetimesSegments)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: sweep and per-segment reference disagree:\nsweep:\n\t%s\nreference:\n\t%s",
				trial, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
		brute := arenaBrute(p)
		v := &verifier{p: p}
		if err := v.accesses(); err != nil {
			t.Fatal(err)
		}
		v.clocks()
		v.races = v.arenaLifetimes()
		if (len(v.races) == 0) != (len(brute) == 0) {
			t.Fatalf("trial %d: sweep found %d races, the all-pairs check %d pairs: %v", trial, len(v.races), len(brute), brute)
		}
		for _, r := range v.races {
			if k := [4]string{r.FirstName, r.SecondName, r.Buffer, r.Shared}; !brute[k] {
				t.Fatalf("trial %d: sweep reports %v, not an unordered conflicting pair", trial, r)
			}
		}
		if len(brute) > 0 {
			racy++
		} else {
			clean++
		}
	}
	if racy < 100 || clean < 100 {
		t.Errorf("%d racy and %d race-free layouts: the generator does not cover both", racy, clean)
	}
}

// TestArenaRuns: the run starts' set answers next and prev as a scan of a
// plain bool slice does, under random sets and clears, at sizes across a
// level boundary.
func TestArenaRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 9))
	for _, n := range []int{1, 63, 64, 65, 4095, 4097, 70000} {
		r := newArenaRuns(n)
		ref := make([]bool, n)
		for range 4000 {
			i := rng.IntN(n)
			switch rng.IntN(3) {
			case 0:
				r.set(i)
				ref[i] = true
			case 1:
				r.clear(i)
				ref[i] = false
			}
			j := rng.IntN(n)
			next, prev := -1, -1
			for k := j; k < n; k++ {
				if ref[k] {
					next = k
					break
				}
			}
			for k := j; k >= 0; k-- {
				if ref[k] {
					prev = k
					break
				}
			}
			if got := r.next(j); got != next {
				t.Fatalf("n %d: next(%d) = %d, want %d", n, j, got, next)
			}
			if got := r.prev(j); got != prev {
				t.Fatalf("n %d: prev(%d) = %d, want %d", n, j, got, prev)
			}
			if r.has(j) != ref[j] {
				t.Fatalf("n %d: has(%d) = %v", n, j, !ref[j])
			}
		}
	}
}

func arenaWrites(w bool) int {
	if w {
		return 1
	}
	return 0
}

// TestRadixSort: the radix sort agrees with slices.Sort on values of
// every width, signed and unsigned, with repeats, above and below its
// short-slice cut.
func TestRadixSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	for _, n := range []int{0, 1, 100, 5000, 70000} {
		for _, width := range []uint{4, 16, 17, 33, 48, 62} {
			x := make([]int64, n)
			for i := range x {
				x[i] = rng.Int64N(1 << width)
				if i > 0 && rng.IntN(4) == 0 {
					x[i] = x[rng.IntN(i)]
				}
			}
			// Keyed by x, ties by position: sorted on the key's digits
			// alone, stably (how arenaPieces orders its pieces).
			keys := make([]int64, n)
			for i, v := range x {
				keys[i] = v>>(max(width, 31)-31)<<32 | int64(i)
			}
			wantKeys := slices.Clone(keys)
			slices.SortStableFunc(wantKeys, func(a, b int64) int { return cmp.Compare(a>>32, b>>32) })
			radix.Sort(keys, nil, 32)
			if !slices.Equal(keys, wantKeys) {
				t.Fatalf("n %d, width %d: keys from bit 32 not sorted stably", n, width)
			}
			// Unsigned keys with the top bit in use (the iterate pass's).
			u := make([]uint64, n)
			for i, v := range x {
				u[i] = uint64(v) | uint64(rng.IntN(2))<<63
			}
			wantU := slices.Clone(u)
			slices.Sort(wantU)
			radix.Sort(u, nil, 0)
			if !slices.Equal(u, wantU) {
				t.Fatalf("n %d, width %d: unsigned keys not sorted like slices.Sort", n, width)
			}
			want := slices.Clone(x)
			slices.Sort(want)
			radix.Sort(x, nil, 0)
			if !slices.Equal(x, want) {
				t.Fatalf("n %d, width %d: not sorted like slices.Sort", n, width)
			}
		}
	}
}
