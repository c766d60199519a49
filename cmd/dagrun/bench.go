package main

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/bench"
)

func newBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	benchCmd := &cobra.Command{
		Use:   "bench plan|memory|scale",
		Short: "Benchmarks of the planner",
		Args:  cobra.ArbitraryArgs,
		// Without a benchmark the help; an unknown one is a usage error.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usagef("bench: unknown benchmark %q: want plan, memory or scale\nusage: dagrun bench plan|memory|scale [flags] (`dagrun bench --help`)", args[0])
		},
	}
	plan := &cobra.Command{
		Use:   "plan SPEC...",
		Short: "Planner quality table: streams and waits per strategy, lower bound, critical path, ideal makespan",
		Long: `bench plan plans every SPEC with each strategy (default, naive, round-robin,
single) uncapped (--max-streams 0: the default strategy's columns show the
plan without the default stream cap of 8), and the default strategy with
max_streams 8 (the plan dagrun plan makes by default) and 16, verifies every
plan, and prints one Markdown table. "kept" is the share of the critical-path bound a cap keeps:
critical path / ideal makespan under the cap. A spec that fails (a
planning error, a race or a deadlock in one of its plans) has a row that
says so, its error goes to stderr, and the command exits 1 after the table.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			specs, err := loadSpecs(args)
			if err != nil {
				return err
			}
			var out bytes.Buffer
			fmt.Fprintln(&out, "| spec | stages | default streams/waits | lower bound waits | naive streams/waits | round-robin streams/waits | single waits | events | critical path µs | ideal makespan µs | sum µs | max 8: streams/waits, makespan µs (kept) | max 16: streams/waits, makespan µs (kept) | planning ms |")
			fmt.Fprintln(&out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
			var failed benchFailures
			for i, path := range args {
				b, err := bench.Plans(specs[i])
				if err != nil {
					fmt.Fprintf(&out, "| %s | %s |\n", benchName(path), failed.add(path, err))
					continue
				}
				fmt.Fprintf(&out, "| %s | %s |\n", benchName(path), strings.Join(benchRow(b), " | "))
			}
			if _, err := stdout.Write(out.Bytes()); err != nil {
				return err
			}
			return failed.err(stderr, len(args))
		},
	}
	benchCmd.AddCommand(plan, newBenchMemoryCmd(stdout, stderr), newBenchScaleCmd(stdout, stderr)) // memory.go, scale.go
	return benchCmd
}

// loadSpecs loads every spec of a bench command before any is measured:
// bad input fails the command (exit 2) with no table.
func loadSpecs(paths []string) ([]*dagrun.Spec, error) {
	specs := make([]*dagrun.Spec, len(paths))
	for i, path := range paths {
		s, err := loadSpec(path, false)
		if err != nil {
			return nil, err
		}
		if err := bench.Benchable(s); err != nil {
			return nil, usageError{err}
		}
		specs[i] = s
	}
	return specs, nil
}

// benchName is a spec's name in bench tables: its file's base name.
func benchName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// benchFailures are the specs a bench command could not measure.
type benchFailures []string

// add records path's error and returns the table cell that says so: the
// error's first line, with the table's separators escaped.
func (f *benchFailures) add(path string, err error) string {
	*f = append(*f, fmt.Sprintf("%s: %v", path, err))
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return "failed: " + strings.ReplaceAll(msg, "|", "\\|")
}

// err writes each failure to stderr and returns the command's failure
// (exit 1), or nil when every one of n specs was measured.
func (f benchFailures) err(stderr io.Writer, n int) error {
	if len(f) == 0 {
		return nil
	}
	for _, msg := range f {
		fmt.Fprintf(stderr, "dagrun: %s\n", msg)
	}
	return failure{fmt.Errorf("%d of %d spec(s) failed (their rows say so)", len(f), n)}
}

// benchRow is the quality table's cells after the spec name.
func benchRow(b *bench.PlanResult) []string {
	d := b.Default
	sw := func(st bench.Stats) string { return fmt.Sprintf("%d/%d", st.Streams, st.Waits) }
	capped := func(st bench.Stats) string {
		return fmt.Sprintf("%d/%d, %.1f (%.0f%%)", st.Streams, st.Waits, st.IdealMakespanUS, 100*d.CriticalPathUS/st.IdealMakespanUS)
	}
	return []string{
		fmt.Sprint(d.Stages), sw(d), fmt.Sprint(d.LowerBoundWaits), sw(b.Naive), sw(b.RoundRobin),
		fmt.Sprint(b.Single.Waits), fmt.Sprint(d.Events),
		fmt.Sprintf("%.1f", d.CriticalPathUS), fmt.Sprintf("%.1f", d.IdealMakespanUS), fmt.Sprintf("%.1f", d.SumUS),
		capped(b.Max8), capped(b.Max16), fmt.Sprintf("%.2f", d.PlanningMS),
	}
}
