package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/cmdline"
	"github.com/dagrun/dagrun/internal/report"
	"github.com/dagrun/dagrun/internal/safefile"
)

type planFlags struct {
	strategy   dagrun.Strategy
	maxStreams int
	checkPass  bool
	dumpAfter  string
	streamSets int         // iterations: PlanOptions.StreamSets (docs/iterations.md)
	mem        memoryFlags // --arena, --memory-budget: memory.go
	outside    bool        // --allow-outside-paths
	flags      *pflag.FlagSet
	// loaded, if not nil, checks the loaded spec before it is planned
	// (run's periodAtLoad); its error is bad input.
	loaded func(*dagrun.Spec) error
}

func (f *planFlags) add(cmd *cobra.Command) {
	f.flags = cmd.Flags()
	cmd.Flags().BoolVar(&f.outside, "allow-outside-paths", false, "let the init and PTX files of a spec or plan file lie outside its folder (absolute paths, .., links that lead out); without it a spec or plan file from someone else cannot read your other files")
	cmd.Flags().StringVar((*string)(&f.strategy), "strategy", "", "stream assignment: default (minimum path cover), single, round-robin, naive, hazard-dag (the whole hazard DAG, for graph mode) (default: the spec's options, else default)")
	cmd.Flags().IntVar(&f.maxStreams, "max-streams", -1, "cap on streams; 0 = uncapped (default: the spec's max_streams, else 8 for the default strategy: dagrun.DefaultMaxStreams)")
	cmd.Flags().BoolVar(&f.checkPass, "check-passes", false, "run the verifier after every planner pass: a race is reported for the plan of the first pass that made it, named; plan --no-verify still prints the finished plan")
	cmd.Flags().IntVar(&f.streamSets, "stream-sets", 0, "iterations rotate over this many copies of the streams (0: the largest copies of any buffer; 1: all iterations on the same streams)")
	cmd.Flags().StringVar(&f.dumpAfter, "dump-after", "", "print the plan to stderr after the named pass ("+strings.Join(cmdline.Passes(), ", ")+")")
	f.mem.add(cmd)
}

// options returns the planner options of f, or a usage error for a bad
// value.
func (f *planFlags) options(stderr io.Writer) (dagrun.PlanOptions, error) {
	o := dagrun.PlanOptions{Strategy: f.strategy, Check: f.checkPass, DumpAfter: f.dumpAfter, StreamSets: f.streamSets}
	if f.streamSets < 0 {
		return o, usagef("--stream-sets %d: want ≥ 0", f.streamSets)
	}
	switch {
	case f.maxStreams > 0:
		o.MaxStreams = f.maxStreams
	case f.maxStreams == 0:
		o.MaxStreams = dagrun.Uncapped // --max-streams 0: no cap, whatever the spec says
	}
	if f.strategy != "" {
		if err := oneOf("strategy", f.strategy); err != nil {
			return o, err
		}
	}
	if f.maxStreams < 0 && (f.maxStreams < -1 || f.flags != nil && f.flags.Changed("max-streams")) {
		return o, usagef("--max-streams %d: want 0 (uncapped) or a positive cap", f.maxStreams)
	}
	if f.dumpAfter != "" {
		if !slices.Contains(cmdline.Passes(), f.dumpAfter) {
			return o, usagef("--dump-after %q: no such pass (passes: %s)", f.dumpAfter, strings.Join(cmdline.Passes(), ", "))
		}
		o.Dump = stderr
	}
	if err := f.mem.apply(&o); err != nil {
		return o, err
	}
	return o, nil
}

// loadSpec loads a spec; every loader error is bad input (exit 2).
// allowOutside is --allow-outside-paths.
func loadSpec(path string, allowOutside bool) (*dagrun.Spec, error) {
	s, err := dagrun.LoadWith(path, dagrun.LoadOptions{AllowOutside: allowOutside})
	if err != nil {
		return nil, usageError{err} // a plan file's error says to pass it as --plan
	}
	return s, nil
}

// planned is a plan, where it came from, and the verifier's verdict.
type planned struct {
	p    *dagrun.StreamPlan
	spec *dagrun.Spec // nil for a plan file
	src  string       // the spec or plan file, for messages
	// races is the verifier's report (a *verify.RaceError), nil when the
	// plan is race-free.
	races  error
	loadMS float64 // the spec's load time, ms
	// rings holds the spec's buffers of more than one copy, by name: their
	// positions, for a refusal that names one (refusalAt).
	rings map[string]specAt
}

// refusalPos is where a refusal err of pl's plan points: the spec position
// of the wait or ring buffer a period refusal (cmdline.PeriodError) names;
// ok is false when it names neither (the refusal is about pl's file).
func (pl *planned) refusalPos(err error) (pos specAt, ok bool) {
	var pe *cmdline.PeriodError
	if !errors.As(err, &pe) {
		return pos, false
	}
	if pe.Source != "" {
		// a plan's stage source is file:line:col (the file unquoted)
		rest, col, ok1 := cutLastNumber(pe.Source)
		file, line, ok2 := cutLastNumber(rest)
		if ok1 && ok2 && file != "" {
			return specAt{file, line, col}, true
		}
	}
	pos, ok = pl.rings[pe.Buffer]
	return pos, ok
}

// cutLastNumber splits s at its last ':' into what comes before and the
// positive number after it; ok is false when no number follows.
func cutLastNumber(s string) (before string, n int, ok bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(s[i+1:])
	return s[:i], n, err == nil && n > 0
}

// refusalAt is where a refusal err of pl's plan points, as text:
// file:line:col (refusalPos), or a period refusal's stage source as the
// plan gives it, else pl's file.
func (pl *planned) refusalAt(err error) string {
	if pos, ok := pl.refusalPos(err); ok {
		return pos.String()
	}
	var pe *cmdline.PeriodError
	if errors.As(err, &pe) && pe.Source != "" {
		return pe.Source
	}
	return pl.src
}

// refusalError is a refusal err of pl's plan as check --json's error
// entry: at its position (refusalPos), else about pl's file.
func (pl *planned) refusalError(err error) report.CheckError {
	if pos, ok := pl.refusalPos(err); ok {
		return report.CheckError{File: pos.file, Line: pos.line, Column: pos.col, Message: err.Error()}
	}
	return report.CheckError{File: pl.src, Message: err.Error()}
}

// specAt is a position in a spec: its file (unquoted), 1-based line and
// column.
type specAt struct {
	file      string
	line, col int
}

// String is file:line:col, the file quoted where it holds control
// characters or spaces (safefile.Quote), as the loader's positions.
func (a specAt) String() string {
	return fmt.Sprintf("%s:%d:%d", safefile.Quote(a.file), a.line, a.col)
}

// planOrSpec reads and verifies the plan file planFile, or loads, plans
// and verifies the spec args[0] (kept in planned.spec with keepSpec). Errors are bad input (exit 2); a race is
// not an error here but planned.races.
//
// during, if not nil, is called on the spec's finished plan while the
// verifier runs (dagrun.PlanWhile); it must only read the plan.
func planOrSpec(planFile string, args []string, f *planFlags, keepSpec bool, during func(*dagrun.StreamPlan), stderr io.Writer) (*planned, error) {
	if planFile != "" {
		p, err := dagrun.ReadPlanWith(planFile, dagrun.LoadOptions{AllowOutside: f.outside})
		if err != nil {
			return nil, usageError{err}
		}
		races := dagrun.Verify(p)
		var pe *dagrun.PlanError
		if errors.As(races, &pe) {
			// Not a race: a plan no wait can fix (a launch aliasing itself in the arena).
			return nil, usageError{fmt.Errorf("%s: %w", safefile.Quote(planFile), races)}
		}
		return &planned{p: p, src: safefile.Quote(planFile), races: races}, nil
	}
	o, err := f.options(stderr)
	if err != nil {
		return nil, err
	}
	head, kept, p, loadMS, err := loadAndPlan(args[0], o, f.outside, keepSpec, during, f.loaded)
	if head == nil {
		return nil, err
	}
	if p == nil {
		// A race a pass's plan has (--check-passes) is a race, exit 1,
		// not bad input.
		var race *dagrun.VerifyReport
		if errors.As(err, &race) {
			return nil, failure{fmt.Errorf("%s: %w", safefile.Quote(args[0]), err)}
		}
		if errors.As(err, new(dagrun.SpecErrors)) {
			return nil, usageError{err} // names the file at each line:column
		}
		return nil, usageError{fmt.Errorf("%s: %w", safefile.Quote(args[0]), err)}
	}
	for _, n := range report.PinNotes(head, o, p) {
		fmt.Fprintf(stderr, "dagrun: note: %s\n", n)
	}
	pl := &planned{p: p, spec: kept, src: safefile.Quote(args[0]), races: err, loadMS: loadMS}
	for _, b := range head.Buffers {
		if b.Pos.Line == 0 {
			continue // a buffer with no position in its file
		}
		if pl.rings == nil {
			pl.rings = map[string]specAt{}
		}
		pl.rings[b.Name] = specAt{b.Pos.File, b.Pos.Line, b.Pos.Col}
	}
	return pl, nil
}

// loadAndPlan loads the spec at path, checks it with loaded (if not nil)
// and plans it (dagrun.Plan, which verifies the plan). It returns the spec's header fields (head, nil when
// loading failed), the spec itself only with keepSpec, the plan and the
// load time (ms). Only run --frames needs the spec after planning;
// otherwise nothing holds it past Build, so that the verifier of a big
// plan runs without it in memory (PinNotes reads the header only): the
// spec lives in this frame alone, which is gone before the plan is
// written.
func loadAndPlan(path string, o dagrun.PlanOptions, allowOutside, keepSpec bool, during func(*dagrun.StreamPlan), loaded func(*dagrun.Spec) error) (head, kept *dagrun.Spec, p *dagrun.StreamPlan, loadMS float64, err error) {
	t0 := time.Now()
	s, err := loadSpec(path, allowOutside)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	if loaded != nil {
		if err := loaded(s); err != nil {
			return nil, nil, nil, 0, usageError{err}
		}
	}
	loadMS = msSince(t0)
	// Copies: head holds none of the spec's memory once the spec is let go.
	head = &dagrun.Spec{Name: strings.Clone(s.Name), File: strings.Clone(s.File), Sync: strings.Clone(s.Sync)}
	// and the rings, whose positions a refusal may name (planned.rings).
	for _, b := range s.Buffers {
		if b.Copies > 1 && b.Pos.Line > 0 {
			n := len(head.Buffers)
			head.Buffers = slices.Grow(head.Buffers, 1)[:n+1]
			c := &head.Buffers[n]
			c.Name, c.Copies, c.Pos.File, c.Pos.Line, c.Pos.Col = strings.Clone(b.Name), b.Copies, strings.Clone(b.Pos.File), b.Pos.Line, b.Pos.Col
		}
	}
	if keepSpec {
		kept = s
	}
	p, err = dagrun.PlanWhile(s, o, during)
	return head, kept, p, loadMS, err
}

func newPlanCmd(stdout, stderr io.Writer) *cobra.Command {
	var pf planFlags
	var asJSON, noVerify, timings, indent bool
	var format string
	cmd := &cobra.Command{
		Use:   "plan SPEC",
		Short: "Print the stream plan of a spec (table, JSON, DOT or Mermaid)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				if cmd.Flags().Changed("format") && format != "json" {
					return usagef("--json conflicts with --format %s", format)
				}
				format = "json"
			}
			switch format {
			case "table", "json", "dot", "mermaid":
			default:
				return usagef("--format %q: want table, json, dot or mermaid", format)
			}
			if cmd.Flags().Changed("indent") && format != "json" {
				return usagef("--indent applies to the plan file (--json), not --format %s", format)
			}
			// The plan is encoded while the verifier runs (both only
			// read it) and printed once the verifier has passed it.
			encode := func(w io.Writer, p *dagrun.StreamPlan) error {
				switch format {
				case "table":
					p.WriteTable(w)
					return nil
				case "json":
					ind := indent
					if !cmd.Flags().Changed("indent") {
						ind = len(p.Stages) <= compactPlanStages
					}
					return dagrun.WritePlanJSON(w, p, ind)
				case "dot":
					return p.WriteDOT(w)
				default:
					return p.WriteMermaid(w)
				}
			}
			var held heldOutput
			defer held.discard()
			pl, err := planOrSpec("", args, &pf, false, func(p *dagrun.StreamPlan) {
				held.hold(func(w io.Writer) error { return encode(w, p) })
			}, stderr)
			if err != nil {
				return err
			}
			if err := beginOutput(cmd.Context()); err != nil {
				return err
			}
			if timings {
				defer printTimings(stderr, pl, &held, time.Now())
			}
			if pl.races != nil && !noVerify {
				return failure{fmt.Errorf("%s: the plan has races (use `dagrun check` for the report, --no-verify to print it anyway):\n%w", args[0], pl.races)}
			}
			if pl.races != nil {
				after := ""
				var pr *dagrun.PassRaceError
				if errors.As(pl.races, &pr) {
					after = fmt.Sprintf(", first after pass %q", pr.Pass)
				}
				fmt.Fprintf(stderr, "dagrun: warning: %s: printing a plan with races%s (--no-verify; `dagrun check %s` for the report)\n", quotePath(args[0]), after, quotePath(args[0]))
			}
			if format != "table" { // the table prints them itself
				for _, n := range pl.p.Notes {
					fmt.Fprintf(stderr, "dagrun: note: %s\n", n)
				}
			}
			if held.err == nil {
				return held.writeTo(stdout)
			}
			// Encoding into the held output failed (a temporary file
			// that could not be written, or the encoder's own error):
			// encode again, as the plan was printed before it was held.
			held.discard()
			held.ms = 0
			if format == "json" { // streamed: a big plan is never all in memory as text
				return encode(stdout, pl.p)
			}
			var out bytes.Buffer
			if err := encode(&out, pl.p); err != nil {
				return failure{err}
			}
			_, err = stdout.Write(out.Bytes())
			return err
		},
	}
	pf.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan file (JSON); same as --format json")
	cmd.Flags().StringVar(&format, "format", "table", "output: table, json, dot (Graphviz's DOT; the picture needs Graphviz: dot -Tpng -o plan.png) or mermaid (renders on GitHub and in many editors); stages grouped by stream, waits with their reason")
	cmd.Flags().BoolVar(&noVerify, "no-verify", false, "print the plan even if the verifier finds a race")
	cmd.Flags().BoolVar(&indent, "indent", false, fmt.Sprintf("with --json: indent the plan file for people (default: for plans of up to %d stages; larger ones are compact unless --indent)", compactPlanStages))
	cmd.Flags().BoolVar(&timings, "timings", false, "print to stderr where the time went (ms): loading the spec, each planner pass, the verifier, writing the plan (encoded while the verifier runs, printed once it has passed the plan)")
	return cmd
}

// printTimings prints plan's --timings line: load, Build's phases, verify,
// and the write: encoding the plan into held, while the verifier ran, and
// printing it from there, which began at w. The total counts the
// encoding's time only where it outlasted the verifier.
func printTimings(stderr io.Writer, pl *planned, held *heldOutput, w time.Time) {
	var b strings.Builder
	total := pl.loadMS
	verify := 0.0
	fmt.Fprintf(&b, "dagrun: timings (ms): load %.1f", pl.loadMS)
	for _, t := range pl.p.Timings {
		fmt.Fprintf(&b, ", %s %.1f", t.Pass, t.MS)
		if t.Runs > 1 {
			fmt.Fprintf(&b, " (%d runs)", t.Runs)
		}
		total += t.MS
		if t.Pass == "verify" {
			verify = t.MS
		}
	}
	write := msSince(w)
	if held.ms > 0 {
		fmt.Fprintf(&b, ", write %.1f (%.1f of it while verifying)", held.ms+write, min(held.ms, verify))
		total += max(0, held.ms-verify)
	} else {
		fmt.Fprintf(&b, ", write %.1f", write)
	}
	fmt.Fprintf(&b, "; total %.1f\n", total+write)
	io.WriteString(stderr, b.String())
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1e6 }
