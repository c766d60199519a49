package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/trace"
	"github.com/dagrun/dagrun/planner"
)

// run is the whole command line: main only maps its error to an exit code.
// Output to stdout is buffered and written only when the command succeeds
// (or, for check, when the report is the result), so bad input leaves no
// partial output behind.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	_, err := root.ExecuteContextC(ctx)
	if err != nil && !isTyped(err) {
		// cobra's own flag and argument errors are usage errors.
		err = usageError{err}
	}
	return err
}

// failure marks an error that is a failure (exit 1), not bad input.
type failure struct{ err error }

func (e failure) Error() string { return e.err.Error() }
func (e failure) Unwrap() error { return e.err }

func isTyped(err error) bool {
	var ue usageError
	var f failure
	return errors.As(err, &ue) || errors.As(err, &f)
}

type planFlags struct {
	strategy   string
	maxStreams int
	checkPass  bool
	dumpAfter  string
	streamSets int         // iterations: planner.Options.StreamSets (docs/iterations.md)
	mem        memoryFlags // --arena, --memory-budget: memory.go
}

func (f *planFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.strategy, "strategy", "", "stream assignment: default (minimum path cover), single, round-robin, naive, hazard-dag (the whole hazard DAG, for graph mode) (default: the spec's options, else default)")
	cmd.Flags().IntVar(&f.maxStreams, "max-streams", -1, "cap on streams; 0 = uncapped (default: the spec's max_streams)")
	cmd.Flags().BoolVar(&f.checkPass, "check-passes", false, "run the verifier after every planner pass")
	cmd.Flags().IntVar(&f.streamSets, "stream-sets", 0, "iterations rotate over this many copies of the streams (0: the largest copies of any buffer; 1: all iterations on the same streams)")
	cmd.Flags().StringVar(&f.dumpAfter, "dump-after", "", "print the plan to stderr after the named pass ("+strings.Join(planner.Passes(), ", ")+")")
	f.mem.add(cmd)
}

func (f *planFlags) options(stderr io.Writer) (planner.Options, error) {
	o := planner.Options{Strategy: f.strategy, Check: f.checkPass, DumpAfter: f.dumpAfter, StreamSets: f.streamSets}
	if f.streamSets < 0 {
		return o, usagef("--stream-sets %d: want ≥ 0", f.streamSets)
	}
	switch {
	case f.maxStreams > 0:
		o.MaxStreams = f.maxStreams
	case f.maxStreams == 0:
		o.MaxStreams = -1 // uncapped, whatever the spec says
	}
	switch f.strategy {
	case "", planner.StrategyDefault, planner.StrategySingle, planner.StrategyRoundRobin, planner.StrategyNaive, planner.StrategyHazardDAG:
	default:
		return o, usagef("--strategy %q: want default, single, round-robin, naive or hazard-dag", f.strategy)
	}
	if f.maxStreams < -1 {
		return o, usagef("--max-streams %d: want 0 (uncapped) or a positive cap", f.maxStreams)
	}
	if f.dumpAfter != "" {
		o.Dump = stderr
	}
	if err := f.mem.apply(&o); err != nil {
		return o, err
	}
	return o, nil
}

// loadSpec loads a spec; every loader error is bad input (exit 2).
func loadSpec(path string) (*dag.Spec, error) {
	s, err := dag.LoadFile(path)
	if err != nil {
		return nil, usageError{err}
	}
	return s, nil
}

// buildPlan loads and plans a spec. Planning errors are bad input (exit 2).
func buildPlan(path string, f *planFlags, stderr io.Writer) (*planner.Plan, error) {
	o, err := f.options(stderr)
	if err != nil {
		return nil, err
	}
	s, err := loadSpec(path)
	if err != nil {
		return nil, err
	}
	p, err := planner.Build(s, o)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", path, err)}
	}
	// Plan files record where relative paths (init files, PTX) resolve; an
	// absolute directory keeps `run --plan FILE` working from anywhere.
	if abs, err := filepath.Abs(p.Dir); err == nil {
		p.Dir = abs
	}
	warnPins(stderr, s, o, p)
	return p, nil
}

// warnPins says when the spec's stream pins override the strategy or the cap.
func warnPins(w io.Writer, s *dag.Spec, o planner.Options, p *planner.Plan) {
	if s.Sync == dag.SyncManual {
		if o.Strategy != "" || o.MaxStreams != 0 {
			fmt.Fprintf(w, "dagrun: note: %s uses sync: manual, so --strategy and --max-streams do not apply\n", s.File)
		}
		return
	}
	streams := p.Stats.Streams
	if p.Strategy == planner.StrategySingle && streams > 1 {
		fmt.Fprintf(w, "dagrun: note: strategy single, but the spec pins stages to %d streams; pins win\n", streams)
	}
	if o.MaxStreams > 0 && streams > o.MaxStreams {
		fmt.Fprintf(w, "dagrun: note: --max-streams %d, but the spec pins stages to %d streams; pins win\n", o.MaxStreams, streams)
	}
}

// idleWaits lists the waits of one iteration that wait for nothing: no
// record of their event is issued before them in the same iteration (CUDA's
// wait-before-record trap). Cross-iteration waits (Lag > 0) wait for an
// earlier iteration's record and are not listed.
func idleWaits(p *planner.Plan) []string {
	recorded := make([]bool, p.Events)
	lastLaunch := func(stream, op int) string {
		for j := op - 1; j >= 0; j-- {
			if o := p.Streams[stream].Ops[j]; o.Kind == planner.OpLaunch {
				return p.Stages[o.Stage].Name
			}
		}
		return "the stream's start"
	}
	nextLaunch := func(stream, op int) string {
		for _, o := range p.Streams[stream].Ops[op+1:] {
			if o.Kind == planner.OpLaunch {
				return p.Stages[o.Stage].Name
			}
		}
		return "the stream's end"
	}
	var out []string
	for _, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		switch o.Kind {
		case planner.OpRecord:
			recorded[o.Event] = true
		case planner.OpWait:
			if recorded[o.Event] || o.Lag > 0 {
				continue // a cross-iteration wait's record is an earlier iteration's
			}
			where := "is never recorded"
			for si, st := range p.Streams {
				for j, r := range st.Ops {
					if r.Kind == planner.OpRecord && r.Event == o.Event {
						where = fmt.Sprintf("is recorded after %s on stream %s, but only later in the issue order", lastLaunch(si, j), st.Name)
					}
				}
			}
			out = append(out, fmt.Sprintf("the wait on e%d before %s (stream %s) waits for nothing: e%d %s (wait-before-record)",
				o.Event, nextLaunch(so[0], so[1]), p.Streams[so[0]].Name, o.Event, where))
		}
	}
	return out
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "dagrun",
		Short: "Declarative DAG scheduler for CUDA streams",
		Long: `dagrun turns a YAML list of stages and the buffers each reads and writes into
a race-free multi-stream plan: streams from a minimum path cover, only the
event record/wait pairs that are needed, and buffer lifetimes. It verifies
the plan and runs it on the GPU or on a CPU simulator.

Exit codes: 0 ok, 1 race found or run failed, 2 bad input or usage.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newPlanCmd(stdout, stderr), newCheckCmd(stdout, stderr), newRunCmd(stdout, stderr), newImportCmd(stdout, stderr), newBenchCmd(stdout, stderr), newVideoBenchCmd(stdout, stderr))
	return root
}

func newPlanCmd(stdout, stderr io.Writer) *cobra.Command {
	var pf planFlags
	var asJSON, noVerify bool
	var format string
	cmd := &cobra.Command{
		Use:   "plan SPEC",
		Short: "Print the stream plan of a spec (table, JSON or DOT)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				if cmd.Flags().Changed("format") && format != "json" {
					return usagef("--json conflicts with --format %s", format)
				}
				format = "json"
			}
			switch format {
			case "table", "json", "dot":
			default:
				return usagef("--format %q: want table, json or dot", format)
			}
			p, err := buildPlan(args[0], &pf, stderr)
			if err != nil {
				return err
			}
			if !noVerify {
				if err := planner.Verify(p); err != nil {
					return failure{fmt.Errorf("%s: the plan has races (use `dagrun check` for the report, --no-verify to print it anyway):\n%w", args[0], err)}
				}
			}
			var out bytes.Buffer
			if format != "table" { // the table prints them itself
				for _, n := range p.Notes {
					fmt.Fprintf(stderr, "dagrun: note: %s\n", n)
				}
			}
			switch format {
			case "table":
				p.WriteTable(&out)
			case "json":
				b, err := json.MarshalIndent(p, "", "  ")
				if err != nil {
					return failure{err}
				}
				out.Write(b)
				out.WriteByte('\n')
			case "dot":
				if err := p.WriteDOT(&out); err != nil {
					return failure{err}
				}
			}
			_, err = stdout.Write(out.Bytes())
			return err
		},
	}
	pf.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan file (JSON); same as --format json")
	cmd.Flags().StringVar(&format, "format", "table", "output: table, json or dot (Graphviz; stages clustered by stream)")
	cmd.Flags().BoolVar(&noVerify, "no-verify", false, "print the plan even if the verifier finds a race")
	return cmd
}

func newCheckCmd(stdout, stderr io.Writer) *cobra.Command {
	var pf planFlags
	var planFile string
	cmd := &cobra.Command{
		Use:   "check SPEC | --plan FILE",
		Short: "Verify that a spec's plan (planned or hand-synchronized) has no race",
		Long: `check builds the plan of SPEC (for sync: manual specs, the spec's own streams
and waits) and proves from the plan alone (stream order plus event record/wait
in host issue order) that every conflicting pair of accesses is ordered as in
declaration order. On a race it prints both stages, their streams, the buffer
and bytes, and the wait that would fix it, and exits 1.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (planFile == "") == (len(args) == 0) {
				return usagef("check takes a SPEC or --plan FILE (exactly one)")
			}
			p, src, err := planOrSpec(planFile, args, &pf, stderr)
			if err != nil {
				return err
			}
			idle := idleWaits(p)
			if err := planner.Verify(p); err != nil {
				fmt.Fprintf(stdout, "%s: RACE\n%v\n", src, err)
				for _, w := range idle {
					fmt.Fprintf(stdout, "note: %s\n", w)
				}
				return failure{fmt.Errorf("%s: race found", src)}
			}
			for _, w := range idle {
				fmt.Fprintf(stdout, "note: %s\n", w)
			}
			for _, n := range p.Notes {
				fmt.Fprintf(stdout, "note: %s\n", n)
			}
			st := p.Stats
			fmt.Fprintf(stdout, "%s: ok: no race (%d stages on %d streams, %d waits, %d events)\n",
				src, st.Stages, st.Streams, st.Waits, st.Events)
			return nil
		},
	}
	pf.add(cmd)
	cmd.Flags().StringVar(&planFile, "plan", "", "check this plan file (from 'dagrun plan --json') instead of a spec")
	return cmd
}

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	var pf planFlags
	var ro dagrun.RunOptions
	var planFile, mode, traceFile, timelineFile string
	var allowRace, asJSON bool
	var sf streamFlags  // --frames and friends: stream.go
	var alloc allocFlag // --alloc: memory.go
	cmd := &cobra.Command{
		Use:   "run [SPEC]",
		Short: "Run a spec (or a plan file) on the GPU or the simulator and print output checksums",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (planFile == "") == (len(args) == 0) {
				return usagef("run takes a SPEC or --plan FILE (exactly one)")
			}
			if ro.Iterations < 1 {
				return usagef("--iterations %d: want ≥ 1", ro.Iterations)
			}
			switch ro.Backend {
			case dagrun.BackendAuto, dagrun.BackendSim, dagrun.BackendCUDA:
			default:
				return usagef("--backend %q: want auto, sim or cuda", ro.Backend)
			}
			switch executor.Mode(mode) {
			case executor.ModeStreams, executor.ModeGraph:
				ro.Mode = executor.Mode(mode)
			default:
				return usagef("--mode %q: want streams or graph", mode)
			}
			if ro.Mode == executor.ModeGraph && ro.SyncEach {
				return usagef("--mode graph conflicts with --sync-each (a graph capture cannot synchronize)")
			}
			ro.Timestamps = traceFile != "" || timelineFile != ""
			if err := alloc.check(ro.Mode); err != nil {
				return err
			}
			if err := sf.validate(cmd, ro.Mode); err != nil {
				return err
			}
			p, src, err := planOrSpec(planFile, args, &pf, stderr)
			if err != nil {
				return err
			}
			if verr := planner.Verify(p); verr != nil {
				if !allowRace {
					how := "dagrun check " + src
					if planFile != "" {
						how = "dagrun check --plan " + src
					}
					return failure{fmt.Errorf("%s: refusing to run a plan with races (see `%s`; --allow-race runs it anyway, to reproduce the bug):\n%w", src, how, verr)}
				}
				fmt.Fprintf(stderr, "dagrun: warning: running a plan with races (--allow-race)\n")
			}
			if ro.Iterations > 1 || sf.frames != "" {
				for _, n := range p.Notes {
					fmt.Fprintf(stderr, "dagrun: note: %s\n", n)
				}
			}
			ro.PTXDir = p.Dir
			b, reason, err := dagrun.NewBackend(ro.Backend, ro)
			if err != nil {
				return failure{err}
			}
			fmt.Fprintf(stderr, "backend: %s\n", reason)
			if sf.frames != "" {
				return runStream(cmd.Context(), strings.Join(args, ""), p, b, ro, &sf, cmd.Flags().Changed("iterations"), stdout, stderr)
			}
			start := time.Now()
			res, err := executor.Run(cmd.Context(), p, b, executor.Options{Iterations: ro.Iterations, SyncEach: ro.SyncEach, Mode: ro.Mode, Alloc: string(alloc)})
			total := time.Since(start)
			var tl *trace.Timeline
			if err == nil && (traceFile != "" || timelineFile != "") {
				tl = timeline(p, b)
			}
			if cerr := b.Close(); err == nil && cerr != nil {
				err = cerr
			}
			if err != nil {
				return failure{fmt.Errorf("%s: %w", src, err)}
			}
			if tl != nil {
				if err := writeTimeline(tl, traceFile, timelineFile); err != nil {
					return failure{err}
				}
			}
			var out bytes.Buffer
			if asJSON {
				writeRunJSON(&out, b.Name(), ro.Iterations, res, total)
			} else {
				for _, o := range res.Outputs {
					fmt.Fprintf(&out, "output %-16s %10d bytes  checksum %s\n", o.Name, o.Bytes, o.Checksum)
				}
				fmt.Fprintf(&out, "backend %s, %d iteration(s), wall %s (issue to sync; %s with setup and read-back)\n",
					b.Name(), ro.Iterations, res.Wall.Round(time.Microsecond), total.Round(time.Microsecond))
			}
			_, err = stdout.Write(out.Bytes())
			return err
		},
	}
	pf.add(cmd)
	sf.add(cmd)
	cmd.Flags().StringVar(&ro.Backend, "backend", dagrun.BackendAuto, "auto (cuda if built with it and a device answers, else sim), sim or cuda")
	cmd.Flags().IntVar(&ro.Iterations, "iterations", 1, "times the plan is issued")
	cmd.Flags().Int64Var(&ro.Seed, "seed", 1, "simulator: seed of the random per-op delays")
	cmd.Flags().BoolVar(&ro.SyncEach, "sync-each", false, "cuda: synchronize after every op, so a fault names its stage")
	cmd.Flags().StringVar(&planFile, "plan", "", "run this plan file (from 'dagrun plan --json') instead of a spec")
	cmd.Flags().BoolVar(&allowRace, "allow-race", false, "run even if the verifier finds a race (to reproduce a bug)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().StringVar(&mode, "mode", string(executor.ModeStreams), "streams (launch every op) or graph (capture one iteration as a CUDA graph and replay it)")
	cmd.Flags().StringVar(&traceFile, "trace", "", "write a Chrome trace-event JSON of the last iteration (Perfetto, chrome://tracing): one lane per stream, waits as flows")
	cmd.Flags().StringVar(&timelineFile, "timeline", "", "draw the same timeline as a PNG (lanes per stream, stage bars, wait arrows)")
	alloc.add(cmd)
	return cmd
}

// timeline builds the run's timeline: measured stage spans when the backend
// profiles (cuda: GPU timestamps of the last iteration), else the plan's
// ideal schedule from its durations (the simulator's time is not the GPU's).
func timeline(p *planner.Plan, b executor.Backend) *trace.Timeline {
	var spans []trace.Span
	if pb, ok := b.(executor.Profiler); ok {
		last := map[int]trace.Span{}
		for _, s := range pb.StageSpans() {
			last[s.Stage] = trace.Span{Name: s.Name, Stage: s.Stage, Stream: p.Stages[s.Stage].Stream, StartUS: s.StartUS, EndUS: s.EndUS}
		}
		for i := range p.Stages {
			if s, ok := last[i]; ok {
				spans = append(spans, s)
			}
		}
	}
	tl := trace.FromPlan(p, spans)
	if len(spans) == 0 {
		tl = trace.FromPlan(p, trace.Ideal(p))
		tl.Title += " — ideal schedule from duration_us (no GPU timestamps)"
	}
	return tl
}

// writeTimeline writes the Chrome trace and/or the PNG, each atomically.
func writeTimeline(tl *trace.Timeline, traceFile, pngFile string) error {
	if traceFile != "" {
		var buf bytes.Buffer
		if err := tl.WriteChromeTrace(&buf); err != nil {
			return err
		}
		if err := writeFileAtomic(traceFile, buf.Bytes()); err != nil {
			return err
		}
	}
	if pngFile != "" {
		return tl.WritePNG(pngFile, 1600, 0)
	}
	return nil
}

func writeRunJSON(w io.Writer, backend string, iterations int, res *executor.Result, total time.Duration) {
	type out struct {
		Name     string `json:"name"`
		Bytes    int64  `json:"bytes"`
		Checksum string `json:"checksum"`
	}
	v := struct {
		Backend    string  `json:"backend"`
		Iterations int     `json:"iterations"`
		WallUS     float64 `json:"wall_us"`  // first issued op to the final synchronize
		TotalUS    float64 `json:"total_us"` // with allocation, initial contents and read-back
		Outputs    []out   `json:"outputs"`
	}{Backend: backend, Iterations: iterations, WallUS: float64(res.Wall.Nanoseconds()) / 1e3, TotalUS: float64(total.Nanoseconds()) / 1e3}
	for _, o := range res.Outputs {
		v.Outputs = append(v.Outputs, out{o.Name, o.Bytes, o.Checksum})
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	w.Write(append(b, '\n'))
}

// planOrSpec reads the plan file planFile, or plans the spec args[0];
// src names the one used, for messages.
func planOrSpec(planFile string, args []string, pf *planFlags, stderr io.Writer) (p *planner.Plan, src string, err error) {
	if planFile != "" {
		p, err = readPlan(planFile)
		return p, planFile, err
	}
	p, err = buildPlan(args[0], pf, stderr)
	return p, args[0], err
}

// readPlan reads a plan file written by `dagrun plan --json`.
func readPlan(path string) (*planner.Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{err}
	}
	var p planner.Plan
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(b, se.Offset)
			return nil, usagef("%s:%d:%d: not a plan file: %v (write one with `dagrun plan --json SPEC > FILE`)", path, line, col, err)
		}
		return nil, usagef("%s: not a plan file: %v (write one with `dagrun plan --json SPEC > FILE`)", path, err)
	}
	if p.Version != planner.PlanVersion {
		return nil, usagef("%s: plan version %d, this dagrun reads version %d (re-plan the spec)", path, p.Version, planner.PlanVersion)
	}
	if err := p.Validate(); err != nil {
		return nil, usagef("%s: %v (re-plan the spec with `dagrun plan --json`)", path, err)
	}
	if err := executor.CheckPlan(&p); err != nil {
		return nil, usagef("%s: %v", path, err)
	}
	return &p, nil
}

// lineCol turns a byte offset into a 1-based line and column.
func lineCol(b []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < off && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}
