package main

// `dagrun bench scale`: the planner and verifier on synthetic specs and
// model chains of any size.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/bench"
)

func newBenchScaleCmd(stdout, stderr io.Writer) *cobra.Command {
	var f scaleFlags
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Planning and verifying time and memory on synthetic specs and model chains of 10k to 1M stages",
		Long: `bench scale makes specs of each --shapes at each --stages size (layered: 64
wide with skip edges; wavefront: a square grid; shared-read: one buffer read by
every stage, then one reducer; chain: copies of each --graphs model run one
after the other), plus chains of --copies copies of each --graphs model, plans
and verifies each, and prints one Markdown table: the plan's size, its arena
against the live-bytes bound, the time of each phase (ms) and the bytes
allocated per stage. With --write DIR it writes the specs there instead
(DIR/NAME.yaml), for timing the whole command (dagrun plan).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var o dagrun.PlanOptions
			if err := f.mem.apply(&o); err != nil {
				return err
			}
			jobs, err := f.jobs()
			if err != nil {
				return err
			}
			if f.write != "" {
				return writeScaleSpecs(cmd.Context(), stdout, f.write, jobs)
			}
			return runScale(cmd.Context(), stdout, stderr, jobs, o)
		},
	}
	cmd.Flags().StringVar(&f.shapes, "shapes", "layered,wavefront,shared-read", "synthetic shapes ("+strings.Join(bench.Shapes, ", ")+", or chain: copies of each --graphs model up to --stages)")
	cmd.Flags().StringVar(&f.sizes, "stages", "10k,100k", "sizes in stages (suffixes k, M)")
	cmd.Flags().StringVar(&f.graphs, "graphs", "", "model graph files (comma-separated), for chain and --copies")
	cmd.Flags().StringVar(&f.copies, "copies", "", "chains of this many copies of each --graphs model (comma-separated, e.g. 1,2,8,80)")
	cmd.Flags().StringVar(&f.write, "write", "", "write the specs to this directory instead of planning them")
	f.mem.add(cmd)
	return cmd
}

// scaleFlags are bench scale's flags.
type scaleFlags struct {
	shapes, sizes, graphs, copies, write string
	mem                                  memoryFlags
}

// scaleJob is one spec bench scale makes: its name and how to make it.
type scaleJob struct {
	name string
	make func() (*dagrun.Spec, error)
}

// jobs checks the flags and returns the specs they name, in table order:
// each shape at each size, then each graph's chains of each --copies.
// Every graph file is read and imported first, so that a bad one prints
// nothing.
func (f *scaleFlags) jobs() ([]scaleJob, error) {
	ns, err := parseCounts(f.sizes, "--stages")
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		if n > dagrun.MaxStages {
			return nil, usagef("--stages %s: %d stages; a spec has at most %d (dag.MaxStages)", f.sizes, n, dagrun.MaxStages)
		}
	}
	ks, err := parseCounts(f.copies, "--copies")
	if err != nil {
		return nil, err
	}
	var gs []string
	if f.graphs != "" {
		gs = strings.Split(f.graphs, ",")
	}
	if len(ks) > 0 && len(gs) == 0 {
		return nil, usagef("--copies needs --graphs (the model graph files to chain, e.g. specs/models/graphs/nasnetalarge.json)")
	}
	if f.write != "" && (f.mem.arena != "" || f.mem.budget != "") {
		return nil, usagef("--write writes the specs and plans nothing, so --arena and --memory-budget would not apply: drop them, and give them to dagrun plan with the written specs")
	}
	for _, g := range gs {
		fh, err := os.Open(g)
		if err != nil {
			return nil, usagef("--graphs: %v", err)
		}
		fh.Close()
		if _, err := bench.ChainSpec(g, 1, 0); err != nil {
			return nil, usageError{err}
		}
	}
	var jobs []scaleJob
	for _, sh := range strings.Split(f.shapes, ",") {
		sh = strings.TrimSpace(sh)
		if sh == "" {
			continue
		}
		if sh != "chain" && !slices.Contains(bench.Shapes, sh) {
			return nil, usagef("--shapes: unknown shape %q, want chain or one of %s", sh, strings.Join(bench.Shapes, ", "))
		}
		if sh == "chain" && len(gs) == 0 {
			return nil, usagef("--shapes chain needs --graphs (model graph files, e.g. specs/models/graphs/nasnetalarge.json)")
		}
		for _, n := range ns {
			if sh != "chain" {
				jobs = append(jobs, scaleJob{fmt.Sprintf("%s-%s", sh, countLabel(n)), func() (*dagrun.Spec, error) { return bench.ScaleSpec(sh, n) }})
				continue
			}
			for _, g := range gs {
				jobs = append(jobs, scaleJob{fmt.Sprintf("%s-chain-%s", graphName(g), countLabel(n)), func() (*dagrun.Spec, error) { return bench.ChainSpec(g, 0, n) }})
			}
		}
	}
	for _, g := range gs {
		for _, k := range ks {
			jobs = append(jobs, scaleJob{fmt.Sprintf("%s-x%d", graphName(g), k), func() (*dagrun.Spec, error) { return bench.ChainSpec(g, k, 0) }})
		}
	}
	if len(jobs) == 0 {
		return nil, usagef("nothing to make: --shapes %q and --stages %q name no spec, and no --graphs with --copies", f.shapes, f.sizes)
	}
	return jobs, nil
}

// writeScaleSpecs writes each job's spec to dir/NAME.yaml and lists them
// on stdout. Like --out: the folder is made if its parent exists, and the
// specs appear together once all are written.
func writeScaleSpecs(ctx context.Context, stdout io.Writer, dir string, jobs []scaleJob) error {
	files := &outFiles{}
	defer files.discard()
	if err := files.claim("--write", dir, claimFolder); err != nil {
		return err
	}
	for _, j := range jobs {
		if err := files.claim("--write: spec", filepath.Join(dir, j.name+".yaml"), claimFile); err != nil {
			return err
		}
	}
	var done strings.Builder
	for _, j := range jobs {
		if err := stopped(ctx); err != nil {
			return err
		}
		s, err := j.make()
		if err != nil {
			return usageError{err}
		}
		var b bytes.Buffer
		if err := dagrun.WriteSpec(&b, s); err != nil {
			return failure{err}
		}
		path := filepath.Join(dir, j.name+".yaml")
		if err := files.write(path, b.Bytes()); err != nil {
			return failure{err}
		}
		fmt.Fprintf(&done, "%s: %d stages\n", path, len(s.Stages))
	}
	if err := beginOutput(ctx); err != nil {
		return err
	}
	if err := files.commit(); err != nil {
		return failure{err}
	}
	_, err := io.WriteString(stdout, done.String())
	return err
}

// runScale plans and verifies each job's spec with options o and prints a
// row of the table for each, and the plan's notes on stderr.
func runScale(ctx context.Context, stdout, stderr io.Writer, jobs []scaleJob, o dagrun.PlanOptions) error {
	for i, j := range jobs {
		if err := stopped(ctx); err != nil {
			return err
		}
		s, err := j.make()
		if err != nil && i > 0 {
			return failure{fmt.Errorf("%w (the table above stops before %s)", err, j.name)}
		}
		if err != nil {
			return usageError{err}
		}
		if i == 0 { // after the first spec is made: a spec that cannot be is bad input, and prints nothing
			fmt.Fprintln(stdout, "| spec | stages | streams | waits | lower bound | arena MiB | live bound MiB | planning ms | verify ms | slowest phases (ms) | alloc B/stage |")
			fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|---|---|---|---|")
		}
		b, err := bench.Scale(s, o)
		if err != nil {
			return failure{fmt.Errorf("%s: %w", j.name, err)}
		}
		fmt.Fprintf(stdout, "| %s |\n", strings.Join(scaleRow(j.name, b), " | "))
		for _, n := range b.Notes {
			fmt.Fprintf(stderr, "dagrun: %s: note: %s\n", j.name, n)
		}
	}
	return nil
}

// scaleRow is one row of the scale table.
func scaleRow(name string, b *bench.ScaleResult) []string {
	mib := func(x int64) string { return fmt.Sprintf("%.1f", float64(x)/(1<<20)) }
	var plan, verify float64
	top := make([]string, 0, 3)
	ts := append([]bench.PassTime(nil), b.Timings...)
	for _, t := range ts {
		if t.Pass == "verify" {
			verify += t.MS
		} else {
			plan += t.MS
		}
	}
	for range 3 {
		k := -1
		for i, t := range ts {
			if t.Pass != "verify" && t.MS > 0 && (k < 0 || t.MS > ts[k].MS) {
				k = i
			}
		}
		if k < 0 {
			break
		}
		top = append(top, fmt.Sprintf("%s %.0f", ts[k].Pass, ts[k].MS))
		ts[k].MS = 0
	}
	return []string{name, fmt.Sprint(b.Stages), fmt.Sprint(b.Streams), fmt.Sprint(b.Waits), fmt.Sprint(b.LowerBoundWaits),
		mib(b.ArenaBytes), mib(b.LiveBoundBytes), fmt.Sprintf("%.0f", plan), fmt.Sprintf("%.0f", verify), strings.Join(top, ", "),
		fmt.Sprintf("%.0f", float64(b.AllocBytes)/float64(max(b.Stages, 1)))}
}

// parseCounts reads a comma-separated list of counts with optional
// suffixes k (1000) and M (10⁶).
func parseCounts(list, flag string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		mul := 1
		switch {
		case strings.HasSuffix(f, "k"):
			mul, f = 1000, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "M"):
			mul, f = 1000000, strings.TrimSuffix(f, "M")
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 100_000_000/mul {
			return nil, usagef("%s %q: want positive counts such as 10k, 100k, 1M", flag, list)
		}
		out = append(out, n*mul)
	}
	return out, nil
}

func countLabel(n int) string {
	switch {
	case n%1000000 == 0:
		return fmt.Sprintf("%dM", n/1000000)
	case n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

func graphName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}
