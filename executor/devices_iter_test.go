package executor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
	"pgregory.net/rapid"
)

// genDevicesSpec draws a spec of 2 or 3 devices: a few float32 buffers per
// device (rings of 1 or 2 copies, and temps the arena may share), kernels
// on one device, peer copies between two, all-reduces over every device,
// and a checksum of one buffer per device as the outputs.
func genDevicesSpec(t *rapid.T) string {
	nd := rapid.IntRange(2, 3).Draw(t, "devices")
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\ndevices: %d\nbuffers:\n", nd)
	nb := make([]int, nd)
	for d := range nd {
		nb[d] = rapid.IntRange(1, 3).Draw(t, "buffers")
		for j := range nb[d] {
			init := ""
			if rapid.Bool().Draw(t, "init") {
				init = fmt.Sprintf(", init: {fill: %d.5}", rapid.IntRange(0, 9).Draw(t, "fill"))
			}
			fmt.Fprintf(&b, "  - {name: b%d_%d, dtype: f32, shape: [64], device: %d, copies: %d%s}\n", d, j, d, rapid.IntRange(1, 2).Draw(t, "copies"), init)
		}
		fmt.Fprintf(&b, "  - {name: t%d, dtype: f32, shape: [64], device: %d}\n", d, d)
		fmt.Fprintf(&b, "  - {name: o%d, bytes: 8, role: output, device: %d}\n", d, d)
	}
	buf := func(d int, label string) string {
		if j := rapid.IntRange(0, nb[d]).Draw(t, label); j < nb[d] {
			return fmt.Sprintf("b%d_%d", d, j)
		}
		return fmt.Sprintf("t%d", d)
	}
	b.WriteString("stages:\n")
	n := rapid.IntRange(1, 12).Draw(t, "stages")
	colls := 0
	for i := range n {
		switch k := rapid.IntRange(0, 5).Draw(t, "kind"); {
		case k <= 1:
			d := rapid.IntRange(0, nd-1).Draw(t, "dev")
			x, y := buf(d, "x"), buf(d, "y")
			fmt.Fprintf(&b, "  - {name: s%d, kernel: axpy, args: {a: 0.5}, reads: [%s, %s], writes: [%s], duration_us: %d}\n",
				i, x, y, y, rapid.IntRange(1, 9).Draw(t, "dur"))
		case k == 2:
			d := rapid.IntRange(0, nd-1).Draw(t, "dev")
			fmt.Fprintf(&b, "  - {name: s%d, kernel: scale, args: {a: 2}, reads: [%s], writes: [%s], duration_us: %d}\n",
				i, buf(d, "x"), buf(d, "y"), rapid.IntRange(1, 9).Draw(t, "dur"))
		case k == 3:
			d := rapid.IntRange(0, nd-1).Draw(t, "from")
			e := (d + rapid.IntRange(1, nd-1).Draw(t, "to")) % nd
			fmt.Fprintf(&b, "  - {name: s%d, kernel: copy, reads: [%s], writes: [%s]}\n", i, buf(d, "x"), buf(e, "y"))
		default:
			var rs []string
			for d := range nd {
				rs = append(rs, buf(d, "g"))
			}
			list := strings.Join(rs, ", ")
			fmt.Fprintf(&b, "  - {name: s%d, kernel: all_reduce, args: {op: sum}, reads: [%s], writes: [%s], duration_us: %d}\n",
				i, list, list, rapid.IntRange(1, 9).Draw(t, "dur"))
			colls++
		}
	}
	if colls == 0 {
		var rs []string
		for d := range nd {
			rs = append(rs, fmt.Sprintf("b%d_0", d))
		}
		list := strings.Join(rs, ", ")
		fmt.Fprintf(&b, "  - {name: reduce, kernel: all_reduce, args: {op: sum}, reads: [%s], writes: [%s]}\n", list, list)
	}
	for d := range nd {
		fmt.Fprintf(&b, "  - {name: sum%d, kernel: checksum, reads: [%s], writes: [o%d]}\n", d, buf(d, "out"), d)
	}
	return b.String()
}

// oneAtATime is p's iterations one after another: its one iteration (the
// waits across iterations dropped) behind the barrier of WithIteration.
func oneAtATime(p *plan.Plan) *plan.Plan {
	q := p.WithoutOps(func(s, j int, o plan.Op) bool { return o.Kind == plan.OpWait && o.Lag > 0 })
	q.Iteration = nil
	return planner.WithIteration(q)
}

// TestPropertyDevicesIterations: random specs of several devices with
// all-reduces, planned with every combination of stream sets, stream cap
// and memory budget, verify across iterations (no deadlock in a
// collective, no race), and on the simulator give over several
// iterations the outputs of the same iterations run one at a time.
func TestPropertyDevicesIterations(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		src := genDevicesSpec(t)
		s, err := dag.Load([]byte(src), "prop.yaml", "")
		if err != nil {
			t.Fatalf("load: %v\n%s", err, src)
		}
		o := planner.Options{
			Check:        true,
			StreamSets:   rapid.IntRange(0, 2).Draw(t, "sets"),
			MaxStreams:   rapid.IntRange(-1, 2).Draw(t, "max"),
			MemoryBudget: rapid.SampledFrom([]int64{0, planner.BudgetAuto, 256, 512}).Draw(t, "budget"),
			ShuffleSeed:  rapid.Int64Range(0, 2).Draw(t, "shuffle"),
		}
		p, err := planner.Build(s, o)
		var be *planner.BudgetError
		if errors.As(err, &be) {
			t.Skip("budget not met")
		}
		if err != nil {
			t.Fatalf("Build(%+v): %v\n%s", o, err, src)
		}
		if err := verify.Verify(p); err != nil {
			var tb strings.Builder
			p.WriteTable(&tb)
			t.Fatalf("Verify(%+v): %v\n%s\n%s", o, err, src, tb.String())
		}
		if o.MemoryBudget > 0 {
			for d, a := range p.Stats.ArenaBytesPerDevice {
				if a > o.MemoryBudget {
					t.Fatalf("device %d's arena is %d bytes, over the budget %d", d, a, o.MemoryBudget)
				}
			}
		}
		const iters = 4
		seed := rapid.Int64Range(1, 3).Draw(t, "seed")
		run := func(q *plan.Plan) map[string]string {
			res, err := executor.Run(context.Background(), q, sim.New(sim.Options{Seed: seed, MaxDelay: -1, SpinScale: 1e-6}), executor.Options{Iterations: iters})
			if err != nil {
				t.Fatalf("run (%+v): %v\n%s", o, err, src)
			}
			out := map[string]string{}
			for _, x := range res.Outputs {
				out[x.Name] = x.Checksum
			}
			return out
		}
		got, want := run(p), run(oneAtATime(p))
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("output %s: %s overlapped, %s one iteration at a time (%+v)\n%s", k, got[k], v, o, src)
			}
		}
	})
}
