package dagrun

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fuzzBases are valid plan files the plan-file fuzz target mutates: the
// CLI's testdata plan and plans of specs with lags, ring copies, host
// stages, host_pinned buffers and an arena.
var fuzzBases = sync.OnceValues(func() ([][]byte, error) {
	var out [][]byte
	b, err := os.ReadFile(filepath.Join("cmd", "dagrun", "testdata", "plans", "fan-out-fan-in.json"))
	if err != nil {
		return nil, err
	}
	out = append(out, b)
	for _, spec := range []string{
		"specs/examples/ring-handsync.yaml",
		"specs/shared-io/shared-io.yaml",
		"specs/memory/c-pinned-refill.yaml",
		"specs/memory/b-bucket-reuse.yaml",
	} {
		s, err := Load(spec)
		if err != nil {
			return nil, err
		}
		p, err := Plan(s, PlanOptions{})
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := WritePlanJSON(&buf, p, true); err != nil {
			return nil, err
		}
		out = append(out, buf.Bytes())
	}
	return out, nil
})

// FuzzPlanFile mutates valid plan files structurally — numbers set to
// edge values (0, −1, ±1, 2^31, 2^62, 2^63−1, the complement that makes
// offset+bytes wrap), names swapped for other names of the plan (stages,
// buffers, kernels), list elements dropped or doubled, fields deleted —
// and reads each as `dagrun check --plan` and `run --plan` do. A plan that
// ReadPlan accepts must verify, print and run on the simulator (durations
// clamped) without a panic; a rejected one must be rejected with an error.
// Either must stay within the memory its bytes declare (the fuzzer's
// worker dies otherwise).
func FuzzPlanFile(f *testing.F) {
	bases, err := fuzzBases()
	if err != nil {
		f.Fatal(err)
	}
	for i := range bases {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte{1, 0, 7, 3, 2, 0, 40, 12})
		f.Add(uint8(i), []byte{5, 1, 200, 11, 0, 2, 9, 13, 4, 0, 3, 6})
	}
	f.Fuzz(func(t *testing.T, base uint8, ops []byte) {
		b := bases[int(base)%len(bases)]
		mutated, ok := mutatePlan(b, ops)
		if !ok {
			return
		}
		checkPlanBytes(t, mutated)
	})
}

// checkPlanBytes reads b as a plan file and, if it is accepted, uses the
// plan as the CLI would.
func checkPlanBytes(t *testing.T, b []byte) {
	p, err := decodePlan("fuzz.json", b)
	if err != nil {
		if p != nil {
			t.Fatalf("ReadPlan returned a plan with its error %v", err)
		}
		return
	}
	races := Verify(p)
	Warnings(p)
	p.WriteTable(io.Discard)
	if err := p.WriteDOT(io.Discard); err != nil {
		t.Fatalf("WriteDOT of an accepted plan: %v", err)
	}
	var out bytes.Buffer
	if err := WritePlanJSON(&out, p, false); err != nil {
		t.Fatalf("WritePlanJSON of an accepted plan: %v", err)
	}
	if _, err := decodePlan("again.json", out.Bytes()); err != nil {
		t.Fatalf("an accepted plan written again is refused: %v\n%s", err, out.Bytes())
	}
	if _, ok := races.(*PlanError); ok {
		return // the CLI stops here: bad input
	}
	var total int64
	for _, buf := range p.Buffers {
		total += buf.Bytes * int64(max(buf.Copies, 1))
	}
	if total > 1<<22 || len(p.Stages) > 500 {
		return
	}
	for i := range p.Stages { // the simulator sleeps for spins: keep runs short
		st := &p.Stages[i]
		st.DurationUS = min(st.DurationUS, 5)
		delete(st.Args, "us")
		delete(st.Args, "spin_us")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, o := range []RunOptions{{Backend: BackendSim}, {Backend: BackendSim, Iterations: 3}} {
		if CheckRun(p, o) != nil {
			continue
		}
		_, err := Run(ctx, p, o)
		if err != nil && strings.Contains(err.Error(), "panic") {
			t.Fatalf("run of an accepted plan panicked: %v", err)
		}
	}
}

// mutatePlan applies the edits ops encodes to the plan file b: each edit
// is 4 bytes (what, which value: 2 bytes, how), and 8 more bytes of raw
// value for "how" 15. ok is false when b does not decode (never for the
// bases).
func mutatePlan(b []byte, ops []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, false
	}
	for len(ops) >= 4 {
		what, which, how := ops[0], int(binary.LittleEndian.Uint16(ops[1:3])), ops[3]
		ops = ops[4:]
		var raw int64
		if how%16 == 15 && len(ops) >= 8 {
			raw = int64(binary.LittleEndian.Uint64(ops))
			ops = ops[8:]
		}
		leaves, names := planLeaves(root)
		if len(leaves) == 0 {
			break
		}
		l := leaves[which%len(leaves)]
		switch what % 4 {
		case 0, 1: // a value
			switch v := l.get().(type) {
			case json.Number:
				l.set(json.Number(edgeNumber(v, how, raw)))
			case string:
				if len(names) > 0 {
					l.set(names[int(how)%len(names)])
				}
			case bool:
				l.set(!v)
			}
		case 2: // drop the element or field
			l.drop()
		case 3: // double a list element, or put an element of another list there
			l.dup()
		}
	}
	out, err := json.Marshal(root)
	return out, err == nil
}

// edgeNumber is v changed as "how" says.
func edgeNumber(v json.Number, how uint8, raw int64) string {
	n, err := v.Int64()
	if err != nil {
		f, _ := v.Float64()
		n = int64(f)
	}
	vals := []int64{0, -1, 1, n + 1, n - 1, 2 * n, n + 4096, 1 << 31, 1 << 32, 1 << 40, 1 << 62, math.MaxInt64, math.MinInt64, math.MaxInt64 - n + 1, 1 << 20}
	if i := int(how % 16); i < len(vals) {
		return itoa(vals[i])
	}
	return itoa(raw)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// leaf is one value of a decoded JSON tree, with ways to change it.
type leaf struct {
	get  func() any
	set  func(any)
	drop func()
	dup  func()
}

// planLeaves lists every scalar of the tree (and, for drop and dup, its
// place) and the distinct strings it holds (names to swap).
func planLeaves(root any) ([]leaf, []string) {
	var leaves []leaf
	seen := map[string]bool{}
	var names []string
	var walk func(v any, set func(any), drop, dup func())
	walk = func(v any, set func(any), drop, dup func()) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x[k], func(nv any) { x[k] = nv }, func() { delete(x, k) }, func() {})
			}
		case []any:
			for i := range x {
				walk(x[i], func(nv any) { x[i] = nv }, func() {
					y := append(x[:i:i], x[i+1:]...)
					set(y)
				}, func() {
					y := append(slices.Clone(x[:i+1]), x[i:]...)
					set(y)
				})
			}
		default:
			if s, ok := v.(string); ok && !seen[s] {
				seen[s] = true
				names = append(names, s)
			}
			cur := v
			leaves = append(leaves, leaf{get: func() any { return cur }, set: set, drop: drop, dup: dup})
		}
	}
	walk(root, func(any) {}, func() {}, func() {})
	return leaves, names
}
