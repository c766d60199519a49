package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dagrun/dagrun"
)

func newBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	bench := &cobra.Command{Use: "bench", Short: "Benchmarks of the planner"}
	plan := &cobra.Command{
		Use:   "plan SPEC...",
		Short: "Planner quality table: streams and waits per strategy, lower bound, critical path, ideal makespan",
		Long: `bench plan plans every SPEC with each strategy (default, naive, round-robin,
single) and with max_streams 8 and 16, verifies every plan, and prints one
Markdown table. "kept" is the share of the critical-path bound a cap keeps:
critical path / ideal makespan under the cap.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out bytes.Buffer
			fmt.Fprintln(&out, "| spec | stages | default streams/waits | lower bound waits | naive streams/waits | round-robin streams/waits | single waits | events | critical path µs | ideal makespan µs | sum µs | max 8: streams/waits, makespan µs (kept) | max 16: streams/waits, makespan µs (kept) | planning ms |")
			fmt.Fprintln(&out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
			for _, path := range args {
				s, err := loadSpec(path, false)
				if err != nil {
					return err
				}
				b, err := dagrun.BenchPlan(s)
				if errors.Is(err, dagrun.ErrManualSpec) {
					return usageError{err}
				}
				if err != nil {
					return failure{fmt.Errorf("%s: %w", path, err)}
				}
				fmt.Fprintf(&out, "| %s | %s |\n", strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), strings.Join(benchRow(b), " | "))
			}
			_, err := stdout.Write(out.Bytes())
			return err
		},
	}
	bench.AddCommand(plan, newBenchMemoryCmd(stdout, stderr), newBenchScaleCmd(stdout, stderr)) // memory.go, scale.go
	return bench
}

// benchRow is the quality table's cells after the spec name.
func benchRow(b *dagrun.PlanBench) []string {
	d := b.Default
	sw := func(st dagrun.PlanStats) string { return fmt.Sprintf("%d/%d", st.Streams, st.Waits) }
	capped := func(st dagrun.PlanStats) string {
		return fmt.Sprintf("%d/%d, %.1f (%.0f%%)", st.Streams, st.Waits, st.IdealMakespanUS, 100*d.CriticalPathUS/st.IdealMakespanUS)
	}
	return []string{
		fmt.Sprint(d.Stages), sw(d), fmt.Sprint(d.LowerBoundWaits), sw(b.Naive), sw(b.RoundRobin),
		fmt.Sprint(b.Single.Waits), fmt.Sprint(d.Events),
		fmt.Sprintf("%.1f", d.CriticalPathUS), fmt.Sprintf("%.1f", d.IdealMakespanUS), fmt.Sprintf("%.1f", d.SumUS),
		capped(b.Max8), capped(b.Max16), fmt.Sprintf("%.2f", d.PlanningMS),
	}
}
