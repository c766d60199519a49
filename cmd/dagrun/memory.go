package main

// Memory: the planner's arena and memory_budget flags and `dagrun bench
// memory`.

import (
	"bytes"
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

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/bench"
)

// memoryFlags are the planner's memory flags, on every command that plans.
type memoryFlags struct {
	arena  string
	budget string
	cmd    *cobra.Command // the command whose flags they are (add)
}

func (f *memoryFlags) add(cmd *cobra.Command) {
	f.cmd = cmd
	cmd.Flags().StringVar(&f.arena, "arena", "", "temps in one device arena: planned (bytes shared only along happens-before), off, or stream-order (the record_stream bug: racy, for demos) (default: the spec's, else planned)")
	cmd.Flags().StringVar(&f.budget, "memory-budget", "", "cap the arena: bytes (suffixes K, M, G, KiB, MiB, GiB), auto (within 10% of the schedule's live bound, no makespan cost) or none (default: the spec's memory_budget); with several devices it caps each device's arena")
}

// apply sets the planner options of f. A flag given an empty value is an
// error: leaving the flag out takes the spec's setting.
func (f *memoryFlags) apply(o *dagrun.PlanOptions) error {
	for _, fl := range []struct{ name, want string }{
		{"arena", "planned, off or stream-order"},
		{"memory-budget", "a size in bytes such as 64MiB, auto or none"},
	} {
		if v := f.cmd.Flags().Lookup(fl.name); v.Changed && v.Value.String() == "" {
			return usagef("--%s '': empty; give a value (%s), or leave the flag out for the spec's setting", fl.name, fl.want)
		}
	}
	if f.arena != "" {
		if err := oneOf("arena", f.arena); err != nil {
			return err
		}
	}
	o.Arena = f.arena
	switch f.budget {
	case "":
	case "auto":
		o.MemoryBudget = dagrun.BudgetAuto
	case "none":
		o.MemoryBudget = dagrun.BudgetNone
	default:
		n, err := parseBytes(f.budget)
		if errors.Is(err, errTooLarge) || errors.Is(err, strconv.ErrRange) {
			return usagef("--memory-budget %q: too large: at most %d bytes (4 EiB); none for no budget", f.budget, int64(1<<62))
		}
		if err != nil || n <= 0 {
			return usagef("--memory-budget %q: want a positive size in bytes (an integer, with no suffix or one of the suffixes K, M, G (powers of 1000) or KiB, MiB, GiB: 64MiB), auto or none", f.budget)
		}
		o.MemoryBudget = n
	}
	if (f.arena == dagrun.ArenaOff || f.arena == dagrun.ArenaStreamOrder) && f.budget != "" && f.budget != "none" {
		return usagef("--memory-budget %s conflicts with --arena %s: a budget caps the planned arena; drop the budget, or use --arena planned", f.budget, f.arena)
	}
	return nil
}

// parseBytes reads a size: an integer with an optional suffix K, M, G
// (powers of 1000) or KiB, MiB, GiB (powers of 1024), B optional.
// errTooLarge is parseBytes's error for a size past 2^62 bytes.
var errTooLarge = errors.New("too large")

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
		return 0, errTooLarge
	}
	return n * mul, nil
}

func newBenchMemoryCmd(stdout, stderr io.Writer) *cobra.Command {
	var plotFile string
	var noSim bool
	cmd := &cobra.Command{
		Use:   "memory SPEC...",
		Short: "Arena table: default plan, no reuse, one stream, the schedule's live bound, memory_budget auto; budget curve plot",
		Long: `bench memory plans every SPEC with the default options (those of dagrun
plan with no flags, the default stream cap of 8 streams per device included,
but memory_budget none where a column does not name one) and prints one Markdown table of its arena
(MiB = 2^20 bytes): the default plan's arena; the
bytes without reuse; the one-stream plan's arena; the lower bound of the
default plan's own schedule (the most bytes live at any instant of its ideal
schedule); their ratio; the arena with memory_budget auto (orders of no
makespan cost, and the waits they add); the verifier's races; and, on the
simulator, the detector's races with the arena on and whether the outputs
equal those of the plan without the arena. A second table lists the budget
steps toward the one-stream arena (memory_budget set to it), and --plot
draws them: arena against ideal makespan, both relative to the default plan.
With several devices each has its own arena: the first table sums the
devices' arenas and live bounds, the second (memory_budget caps each
device's arena) gives the largest device's, and a line under the tables
names those specs.
A spec that fails (a planning error, a plan that deadlocks, a simulator
error) has a row that says so in each table, its error goes to stderr, and
the command exits 1 after the tables.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var plotFiles outFiles
			defer plotFiles.discard()
			if plotFile != "" {
				switch strings.ToLower(filepath.Ext(plotFile)) {
				case ".png", ".svg", ".pdf", ".eps", ".jpg", ".jpeg", ".tif", ".tiff":
				default:
					return usagef("--plot %s: the plot is a picture; name it .png (or .svg, .pdf, .eps, .jpg, .tif)", plotFile)
				}
				if err := plotFiles.claim("--plot", plotFile, claimFile); err != nil {
					return err
				}
				for _, a := range args {
					if sameFile(plotFile, a) {
						return usagef("--plot %s: the same file as the spec %s, which bench memory reads: name another file", plotFile, a)
					}
				}
			}
			specs, err := loadSpecs(args) // bench.go
			if err != nil {
				return err
			}
			var out bytes.Buffer
			fmt.Fprintln(&out, "| spec | stages | streams | arena MiB | no reuse MiB | one stream MiB | live bound MiB | arena / bound | auto: arena MiB (/ bound), waits | verifier races | sim: detector races, outputs = arena off |")
			fmt.Fprintln(&out, "|---|---|---|---|---|---|---|---|---|---|---|")
			var curves []memCurve
			var failed benchFailures
			for i, path := range args {
				name := benchName(path)
				m, err := bench.Memory(cmd.Context(), specs[i], !noSim)
				if err != nil {
					cell := failed.add(path, err)
					curves = append(curves, memCurve{name: name, failed: cell})
					fmt.Fprintf(&out, "| %s | %s |\n", name, cell)
					continue
				}
				curves = append(curves, memCurve{name: name, m: m})
				fmt.Fprintf(&out, "| %s | %s |\n", name, strings.Join(memoryRow(m), " | "))
			}
			fmt.Fprintln(&out)
			fmt.Fprintln(&out, "| spec | budget (one-stream arena) MiB | steps (reuse/serialize) | arena MiB after | ideal makespan µs before → after | met |")
			fmt.Fprintln(&out, "|---|---|---|---|---|---|")
			var drawn []memCurve
			for _, c := range curves {
				if c.m == nil {
					fmt.Fprintf(&out, "| %s | %s |\n", c.name, c.failed)
					continue
				}
				drawn = append(drawn, c)
				m := c.m
				reuse, ser := 0, 0
				last, ms := m.BudgetStartBytes, m.MakespanUS // the smallest arena reached, the last makespan
				for i, st := range m.BudgetSteps {
					if st.Kind == dagrun.BudgetReuse {
						reuse++
					} else {
						ser++
					}
					if i == 0 || st.ArenaBytes < last {
						last = st.ArenaBytes
					}
					ms = st.MakespanUS
				}
				met := "yes"
				if m.BudgetErr != nil {
					met = fmt.Sprintf("no: %d bytes over", last-m.BudgetBytes)
				}
				fmt.Fprintf(&out, "| %s | %s | %d (%d/%d) | %s | %.1f → %.1f | %s |\n", c.name, mib(m.BudgetBytes), len(m.BudgetSteps), reuse, ser, mib(last), m.MakespanUS, ms, met)
			}
			var multi []string
			for _, c := range drawn {
				if c.m.Devices > 1 {
					multi = append(multi, fmt.Sprintf("%s (%d)", c.name, c.m.Devices))
				}
			}
			if len(multi) > 0 {
				fmt.Fprintf(&out, "\nseveral devices: %s. Each device has an arena of its own: the first table's arenas and live bound are the sums of the devices'; memory_budget caps each device's arena, so the budget table's figures are the largest device's.\n", strings.Join(multi, ", "))
			}
			if plotFile != "" && len(drawn) > 0 {
				tmp, err := plotFiles.path(plotFile)
				if err == nil {
					err = plotCurves(drawn, tmp)
				}
				if err == nil {
					err = beginOutput(cmd.Context())
				}
				if err == nil {
					err = plotFiles.commit()
				}
				if err != nil {
					return failure{fmt.Errorf("--plot %s: %w", plotFile, err)}
				}
				fmt.Fprintf(stderr, "wrote %s\n", quotePath(plotFile))
			}
			if _, err := stdout.Write(out.Bytes()); err != nil {
				return err
			}
			return failed.err(stderr, len(args))
		},
	}
	cmd.Flags().StringVar(&plotFile, "plot", "", "write the budget curves (arena vs ideal makespan) as a PNG")
	cmd.Flags().BoolVar(&noSim, "no-sim", false, "skip the simulator runs")
	return cmd
}

// memCurve is one spec's figures, by name, for the budget curve plot.
type memCurve struct {
	name   string
	m      *bench.MemoryResult // nil when the spec failed
	failed string              // then: its table cell
}

func mib(n int64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }

// memoryRow is the arena table's cells after the spec name.
func memoryRow(m *bench.MemoryResult) []string {
	bound := float64(max(m.LiveBoundBytes, 1))
	row := []string{
		fmt.Sprint(m.Stages), fmt.Sprint(m.Streams),
		mib(m.ArenaBytes), mib(m.NoReuseBytes), mib(m.SingleArenaBytes), mib(m.LiveBoundBytes),
		fmt.Sprintf("%.3f", float64(m.ArenaBytes)/bound),
		fmt.Sprintf("%s (%.3f), %+d", mib(m.AutoArenaBytes), float64(m.AutoArenaBytes)/bound, m.AutoExtraWaits),
		fmt.Sprint(m.VerifierRaces),
	}
	if m.Sim == nil {
		return append(row, "-")
	}
	return append(row, fmt.Sprintf("%d, %v", m.Sim.DetectorRaces, m.Sim.SameOutputs))
}

// curvesToDraw splits curves into those with budget steps (a line each, a
// legend entry each) and the names of those with none (one point at
// (100, 0) that every curve starts from: no line to see).
func curvesToDraw(curves []memCurve) (drawn []memCurve, none []string) {
	for _, c := range curves {
		if len(c.m.BudgetSteps) == 0 {
			none = append(none, c.name)
		} else {
			drawn = append(drawn, c)
		}
	}
	return drawn, none
}

// plotCurves draws each spec's budget steps: arena against ideal makespan,
// both relative to the spec's default plan (the point (100, 0)). Specs
// that needed no step (their default plan is at the one-stream arena
// already) have no curve: the subtitle names them, so that every legend
// entry has a line to see.
func plotCurves(curves []memCurve, path string) error {
	p := plot.New()
	p.Title.Text = "memory_budget: arena vs ideal makespan, step by step toward the one-stream arena"
	drawn, none := curvesToDraw(curves)
	if len(none) > 0 {
		p.Title.Text += "\nno step needed, the default plan is at the one-stream arena already:"
		for k := 0; k < len(none); k += 5 {
			p.Title.Text += "\n" + strings.Join(none[k:min(k+5, len(none))], ", ")
		}
	}
	p.X.Label.Text = "arena, % of the default plan's"
	p.Y.Label.Text = "ideal makespan, % above the default plan's"
	p.Legend.Left = true // bottom left: the curves run from the bottom right up to the top left
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(24)
	p.Add(plotter.NewGrid())
	for i, c := range drawn {
		pts := plotter.XYs{{X: 100, Y: 0}}
		for _, st := range c.m.BudgetSteps {
			pts = append(pts, plotter.XY{X: 100 * float64(st.ArenaBytes) / float64(c.m.BudgetStartBytes), Y: 100 * (st.MakespanUS/c.m.MakespanUS - 1)})
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		s.Color = plotutil.Color(i)
		s.Shape = plotutil.Shape(i)
		s.Radius = vg.Points(3.5 + 1.5*float64(i%3)) // curves that share points stay apart
		l.Width = vg.Points(1.5)
		if i > 0 { // dashed, so that a curve drawn over another's still shows it
			l.Dashes = []vg.Length{vg.Points(float64(4 + 3*i)), vg.Points(4)}
		}
		p.Add(l, s)
		end := pts[len(pts)-1]
		label := fmt.Sprintf("%s: %d step(s), arena %.0f%%, makespan +%.1f%%", c.name, len(c.m.BudgetSteps), end.X, end.Y)
		p.Legend.Add(label, l, s)
	}
	p.X.Max = 102
	p.Y.Min = -0.2
	return p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}
