package main

// Memory (issue 5): the planner's arena and memory_budget flags, run's
// --alloc, and `dagrun bench memory`.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/planner"
)

// memoryFlags are the planner's memory flags, on every command that plans.
type memoryFlags struct {
	arena  string
	budget string
}

func (f *memoryFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.arena, "arena", "", "temps in one device arena: planned (bytes shared only along happens-before), off, or stream-order (the record_stream bug: racy, for demos) (default: the spec's, else planned)")
	cmd.Flags().StringVar(&f.budget, "memory-budget", "", "cap the arena: bytes (suffixes K, M, G, KiB, MiB, GiB), auto (within 10% of the schedule's live bound, no makespan cost) or none (default: the spec's memory_budget)")
}

// apply sets the planner options of f.
func (f *memoryFlags) apply(o *planner.Options) error {
	switch f.arena {
	case "", dag.ArenaPlanned, dag.ArenaOff, dag.ArenaStreamOrder:
		o.Arena = f.arena
	default:
		return usagef("--arena %q: want planned, off or stream-order", f.arena)
	}
	switch f.budget {
	case "":
	case "auto":
		o.MemoryBudget = planner.BudgetAuto
	case "none":
		o.MemoryBudget = planner.BudgetNone
	default:
		n, err := parseBytes(f.budget)
		if err != nil || n <= 0 {
			return usagef("--memory-budget %q: want a positive size in bytes (e.g. 64MiB), auto or none", f.budget)
		}
		o.MemoryBudget = n
	}
	return nil
}

// parseBytes reads a size: an integer with an optional suffix K, M, G
// (powers of 1000) or KiB, MiB, GiB (powers of 1024), B optional.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mul    int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"B", 1}}
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mul = strings.TrimSuffix(s, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, err
	}
	if n > (1<<62)/mul {
		return 0, errors.New("too large")
	}
	return n * mul, nil
}

// allocFlag is run's --alloc.
type allocFlag string

func (a *allocFlag) add(cmd *cobra.Command) {
	*a = executor.AllocStatic
	cmd.Flags().Var(a, "alloc", "static (every buffer before the run; the plan's arena as one allocation) or dynamic (temps allocated at their first use and freed after their lifetime's events, stream-ordered)")
}

func (a *allocFlag) String() string { return string(*a) }
func (a *allocFlag) Type() string   { return "mode" }
func (a *allocFlag) Set(s string) error {
	switch s {
	case executor.AllocStatic, executor.AllocDynamic:
		*a = allocFlag(s)
		return nil
	}
	return fmt.Errorf("want static or dynamic")
}

// check rejects --alloc dynamic with graph mode (a captured graph has no
// allocation points).
func (a allocFlag) check(mode executor.Mode) error {
	if a == executor.AllocDynamic && mode == executor.ModeGraph {
		return usagef("--alloc dynamic conflicts with --mode graph: a graph is captured once; use --mode streams")
	}
	return nil
}

func newBenchMemoryCmd(stdout, stderr io.Writer) *cobra.Command {
	var plotFile string
	var noSim bool
	cmd := &cobra.Command{
		Use:   "memory SPEC...",
		Short: "Arena table: default plan, no reuse, one stream, the schedule's live bound, memory_budget auto; budget curve plot",
		Long: `bench memory plans every SPEC with the default options and prints one
Markdown table of its arena (MiB = 2^20 bytes): the default plan's arena; the
bytes without reuse; the one-stream plan's arena; the lower bound of the
default plan's own schedule (the most bytes live at any instant of its ideal
schedule); their ratio; the arena with memory_budget auto (orders of no
makespan cost, and the waits they add); the verifier's races; and, on the
simulator, the detector's races with the arena on and whether the outputs
equal those of the plan without the arena. A second table lists the budget
steps toward the one-stream arena (memory_budget set to it), and --plot
draws them: arena against ideal makespan, both relative to the default plan.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out bytes.Buffer
			fmt.Fprintln(&out, "| spec | stages | streams | arena MiB | no reuse MiB | one stream MiB | live bound MiB | arena / bound | auto: arena MiB (/ bound), waits | verifier races | sim: detector races, outputs = arena off |")
			fmt.Fprintln(&out, "|---|---|---|---|---|---|---|---|---|---|---|")
			var curves []memCurve
			for _, path := range args {
				s, err := loadSpec(path)
				if err != nil {
					return err
				}
				name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
				row, c, err := memoryRow(cmd.Context(), s, !noSim)
				if err != nil {
					return failure{fmt.Errorf("%s: %w", path, err)}
				}
				c.name = name
				curves = append(curves, c)
				fmt.Fprintf(&out, "| %s | %s |\n", name, strings.Join(row, " | "))
			}
			fmt.Fprintln(&out)
			fmt.Fprintln(&out, "| spec | budget (one-stream arena) MiB | steps (reuse/serialize) | arena MiB after | ideal makespan µs before → after | met |")
			fmt.Fprintln(&out, "|---|---|---|---|---|---|")
			for _, c := range curves {
				reuse, ser := 0, 0
				for _, st := range c.steps {
					if st.Kind == planner.BudgetReuse {
						reuse++
					} else {
						ser++
					}
				}
				last := c.arena0
				m := c.makespan0
				if len(c.steps) > 0 {
					last, m = c.steps[len(c.steps)-1].ArenaBytes, c.steps[len(c.steps)-1].MakespanUS
					for _, st := range c.steps {
						last = min(last, st.ArenaBytes)
					}
				}
				met := "yes"
				if c.err != nil {
					met = fmt.Sprintf("no: %d bytes over", last-c.budget)
				}
				fmt.Fprintf(&out, "| %s | %s | %d (%d/%d) | %s | %.1f → %.1f | %s |\n", c.name, mib(c.budget), len(c.steps), reuse, ser, mib(last), c.makespan0, m, met)
			}
			if plotFile != "" {
				if err := plotCurves(curves, plotFile); err != nil {
					return failure{err}
				}
				fmt.Fprintf(stderr, "wrote %s\n", plotFile)
			}
			_, err := stdout.Write(out.Bytes())
			return err
		},
	}
	cmd.Flags().StringVar(&plotFile, "plot", "", "write the budget curves (arena vs ideal makespan) as a PNG")
	cmd.Flags().BoolVar(&noSim, "no-sim", false, "skip the simulator runs")
	return cmd
}

// memCurve is one spec's budget steps toward its one-stream arena.
type memCurve struct {
	name           string
	arena0, budget int64
	makespan0      float64
	steps          []planner.BudgetStep
	err            error
}

func mib(n int64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }

// memoryRow plans s every way the table needs, verifies each plan, and
// (withSim) runs the default plan on the simulator with and without the arena.
func memoryRow(ctx context.Context, s *dag.Spec, withSim bool) ([]string, memCurve, error) {
	var c memCurve
	build := func(o planner.Options) (*planner.Plan, error) {
		p, err := planner.Build(s, o)
		if err != nil {
			return nil, err
		}
		return p, planner.Verify(p)
	}
	races := 0
	count := func(err error) error {
		var re *planner.RaceError
		if errors.As(err, &re) {
			races += len(re.Races)
			return nil
		}
		return err
	}
	def, err := build(planner.Options{MemoryBudget: planner.BudgetNone})
	if err = count(err); err != nil {
		return nil, c, err
	}
	single, err := build(planner.Options{Strategy: planner.StrategySingle, MemoryBudget: planner.BudgetNone})
	if err = count(err); err != nil {
		return nil, c, err
	}
	auto, err := build(planner.Options{MemoryBudget: planner.BudgetAuto})
	if err = count(err); err != nil {
		return nil, c, err
	}
	bound := planner.LiveBound(def)
	a := def.Stats.ArenaBytes
	row := []string{
		fmt.Sprint(def.Stats.Stages), fmt.Sprint(def.Stats.Streams),
		mib(a), mib(planner.NoReuseBytes(def)), mib(single.Stats.ArenaBytes), mib(bound),
		fmt.Sprintf("%.3f", float64(a)/float64(max(bound, 1))),
		fmt.Sprintf("%s (%.3f), %+d", mib(auto.Stats.ArenaBytes), float64(auto.Stats.ArenaBytes)/float64(max(bound, 1)), auto.Stats.Waits-def.Stats.Waits),
		fmt.Sprint(races),
	}
	if withSim {
		off, err := planner.Build(s, planner.Options{Arena: dag.ArenaOff, MemoryBudget: planner.BudgetNone})
		if err != nil {
			return nil, c, err
		}
		detected := 0
		run := func(p *planner.Plan) (map[string]string, error) {
			b := sim.New(sim.Options{Seed: 1})
			res, err := executor.Run(ctx, p, b, executor.Options{})
			b.Close()
			var re *executor.RaceError
			if errors.As(err, &re) {
				detected += len(re.Races) + re.Dropped
				err = nil
			}
			if err != nil {
				return nil, err
			}
			m := map[string]string{}
			for _, o := range res.Outputs {
				m[o.Name] = o.Checksum
			}
			return m, nil
		}
		with, err := run(def)
		if err != nil {
			return nil, c, err
		}
		without, err := run(off)
		if err != nil {
			return nil, c, err
		}
		same := len(with) == len(without)
		for k, v := range with {
			same = same && without[k] == v
		}
		row = append(row, fmt.Sprintf("%d, %v", detected, same))
	} else {
		row = append(row, "-")
	}
	c.arena0, c.makespan0, c.budget = a, def.Stats.IdealMakespanUS, single.Stats.ArenaBytes
	if c.budget < a {
		p, err := planner.Build(s, planner.Options{MemoryBudget: c.budget})
		var be *planner.BudgetError
		switch {
		case errors.As(err, &be):
			c.steps, c.err = be.Steps, be
		case err != nil:
			return nil, c, err
		default:
			c.steps = p.Budget
			if err := count(planner.Verify(p)); err != nil {
				return nil, c, err
			}
		}
	}
	return row, c, nil
}

// plotCurves draws each spec's budget steps: arena against ideal makespan,
// both relative to the spec's default plan (the point (100, 0)).
func plotCurves(curves []memCurve, path string) error {
	p := plot.New()
	p.Title.Text = "memory_budget: arena vs ideal makespan, step by step toward the one-stream arena"
	p.X.Label.Text = "arena, % of the default plan's"
	p.Y.Label.Text = "ideal makespan, % above the default plan's"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	i := 0
	for _, c := range curves {
		pts := plotter.XYs{{X: 100, Y: 0}}
		for _, st := range c.steps {
			pts = append(pts, plotter.XY{X: 100 * float64(st.ArenaBytes) / float64(c.arena0), Y: 100 * (st.MakespanUS/c.makespan0 - 1)})
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		s.Color = plotutil.Color(i)
		s.Shape = plotutil.Shape(i)
		l.Width = vg.Points(1.2)
		p.Add(l, s)
		label := fmt.Sprintf("%s (%d steps)", c.name, len(c.steps))
		p.Legend.Add(label, l, s)
		i++
	}
	p.X.Max = 102
	p.Y.Min = -0.2
	return p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}
