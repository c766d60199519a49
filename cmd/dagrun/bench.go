package main

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
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
				s, err := loadSpec(path)
				if err != nil {
					return err
				}
				row, err := benchRow(s)
				if err != nil {
					return failure{fmt.Errorf("%s: %w", path, err)}
				}
				fmt.Fprintf(&out, "| %s | %s |\n", strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), strings.Join(row, " | "))
			}
			_, err := stdout.Write(out.Bytes())
			return err
		},
	}
	bench.AddCommand(plan, newBenchMemoryCmd(stdout, stderr)) // memory.go
	return bench
}

// benchRow plans s under every strategy and cap, verifies each plan, and
// returns the table cells after the spec name.
func benchRow(s *dag.Spec) ([]string, error) {
	plans := map[string]*planner.Plan{}
	for _, c := range []struct {
		key string
		o   planner.Options
	}{
		{"default", planner.Options{Strategy: "default", MaxStreams: -1}},
		{"naive", planner.Options{Strategy: "naive", MaxStreams: -1}},
		{"round-robin", planner.Options{Strategy: "round-robin", MaxStreams: -1}},
		{"single", planner.Options{Strategy: "single", MaxStreams: -1}},
		{"max8", planner.Options{Strategy: "default", MaxStreams: 8}},
		{"max16", planner.Options{Strategy: "default", MaxStreams: 16}},
	} {
		p, err := planner.Build(s, c.o)
		if err != nil {
			return nil, fmt.Errorf("strategy %s: %w", c.key, err)
		}
		if err := planner.Verify(p); err != nil {
			return nil, fmt.Errorf("strategy %s: %w", c.key, err)
		}
		plans[c.key] = p
	}
	d := plans["default"].Stats
	sw := func(k string) string { st := plans[k].Stats; return fmt.Sprintf("%d/%d", st.Streams, st.Waits) }
	capped := func(k string) string {
		st := plans[k].Stats
		return fmt.Sprintf("%d/%d, %.1f (%.0f%%)", st.Streams, st.Waits, st.IdealMakespanUS, 100*d.CriticalPathUS/st.IdealMakespanUS)
	}
	return []string{
		fmt.Sprint(d.Stages), sw("default"), fmt.Sprint(d.LowerBoundWaits), sw("naive"), sw("round-robin"),
		fmt.Sprint(plans["single"].Stats.Waits), fmt.Sprint(d.Events),
		fmt.Sprintf("%.1f", d.CriticalPathUS), fmt.Sprintf("%.1f", d.IdealMakespanUS), fmt.Sprintf("%.1f", d.SumUS),
		capped("max8"), capped("max16"), fmt.Sprintf("%.2f", d.PlanningMS),
	}, nil
}
