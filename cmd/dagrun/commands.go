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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dagrun/dagrun"
)

// run is the whole command line: main only maps its error to an exit code.
// Output to stdout is buffered and written only when the command succeeds
// (or, for check, when the report is the result), so bad input leaves no
// partial output behind.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	stdout = stdoutWriter{stdout}
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	c, err := root.ExecuteContextC(ctx)
	if err != nil && !isTyped(err) {
		// cobra's own argument errors (a missing or an extra argument, an
		// unknown command) are usage errors, with the command's usage line.
		err = usageError{fmt.Errorf("%w\n%s", err, usageLine(c))}
	}
	return err
}

// usageLine is the usage of c for an argument error, with where to read
// more: "usage: dagrun plan SPEC [flags] (`dagrun plan --help`: flags and
// examples)".
func usageLine(c *cobra.Command) string {
	if !c.Runnable() {
		return fmt.Sprintf("usage: %s COMMAND [flags] (`%s --help` lists the commands)", c.CommandPath(), c.CommandPath())
	}
	return fmt.Sprintf("usage: %s (`%s --help`: flags and examples)", c.UseLine(), c.CommandPath())
}

// stdoutWriter reports a failed write to standard output (a full disk,
// `> /dev/full`, a closed pipe) as a failure, exit 1: the output is lost.
type stdoutWriter struct{ w io.Writer }

func (s stdoutWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		err = failure{fmt.Errorf("writing the output: %w", err)}
	}
	return n, err
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
	streamSets int         // iterations: PlanOptions.StreamSets (docs/iterations.md)
	mem        memoryFlags // --arena, --memory-budget: memory.go
	outside    bool        // --allow-outside-paths
	flags      *pflag.FlagSet
}

func (f *planFlags) add(cmd *cobra.Command) {
	f.flags = cmd.Flags()
	cmd.Flags().BoolVar(&f.outside, "allow-outside-paths", false, "let the init and PTX files of a spec or plan file lie outside its folder (absolute paths, .., links that lead out); without it a spec or plan file from someone else cannot read your other files")
	cmd.Flags().StringVar(&f.strategy, "strategy", "", "stream assignment: default (minimum path cover), single, round-robin, naive, hazard-dag (the whole hazard DAG, for graph mode) (default: the spec's options, else default)")
	cmd.Flags().IntVar(&f.maxStreams, "max-streams", -1, "cap on streams; 0 = uncapped (default: the spec's max_streams, else 8 for the default strategy: dagrun.DefaultMaxStreams)")
	cmd.Flags().BoolVar(&f.checkPass, "check-passes", false, "run the verifier after every planner pass: a race is reported for the plan of the first pass that made it, named; plan --no-verify still prints the finished plan")
	cmd.Flags().IntVar(&f.streamSets, "stream-sets", 0, "iterations rotate over this many copies of the streams (0: the largest copies of any buffer; 1: all iterations on the same streams)")
	cmd.Flags().StringVar(&f.dumpAfter, "dump-after", "", "print the plan to stderr after the named pass ("+strings.Join(dagrun.Passes(), ", ")+")")
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
		o.MaxStreams = -1 // uncapped, whatever the spec says
	}
	switch f.strategy {
	case "", dagrun.StrategyDefault, dagrun.StrategySingle, dagrun.StrategyRoundRobin, dagrun.StrategyNaive, dagrun.StrategyHazardDAG:
	default:
		return o, usagef("--strategy %q: want default, single, round-robin, naive or hazard-dag", f.strategy)
	}
	if f.maxStreams < 0 && (f.maxStreams < -1 || f.flags != nil && f.flags.Changed("max-streams")) {
		return o, usagef("--max-streams %d: want 0 (uncapped) or a positive cap", f.maxStreams)
	}
	if f.dumpAfter != "" {
		if !slices.Contains(dagrun.Passes(), f.dumpAfter) {
			return o, usagef("--dump-after %q: no such pass (passes: %s)", f.dumpAfter, strings.Join(dagrun.Passes(), ", "))
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
		if isPlanFile(path) {
			return nil, usagef("%s is a plan file (dagrun plan --json writes them), not a spec: pass it as --plan %s", path, path)
		}
		return nil, usageError{err}
	}
	return s, nil
}

// isPlanFile reports whether the file at path looks like a plan file: a
// JSON object with the fields only plans have ("spec", which plans write
// second, and "strategy"). It reads at most the first 64 KiB. It is asked
// only after a file failed to load as a spec.
func isPlanFile(path string) bool {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return false // a fifo or device is not read
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 64<<10)
	n, _ := io.ReadFull(f, head)
	head = bytes.TrimLeft(head[:n], " \t\r\n")
	return len(head) > 0 && head[0] == '{' && bytes.Contains(head, []byte(`"spec"`)) && bytes.Contains(head, []byte(`"strategy"`))
}

// planned is a plan, where it came from, and the verifier's verdict.
type planned struct {
	p    *dagrun.StreamPlan
	spec *dagrun.Spec // nil for a plan file
	src  string       // the spec or plan file, for messages
	// races is the verifier's report (a *planner.RaceError), nil when the
	// plan is race-free.
	races  error
	loadMS float64 // the spec's load time, ms
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
			return nil, usageError{fmt.Errorf("%s: %w", dagrun.QuotePath(planFile), races)}
		}
		return &planned{p: p, src: dagrun.QuotePath(planFile), races: races}, nil
	}
	o, err := f.options(stderr)
	if err != nil {
		return nil, err
	}
	head, kept, p, loadMS, err := loadAndPlan(args[0], o, f.outside, keepSpec, during)
	if head == nil {
		return nil, err
	}
	if p == nil {
		// A race a pass's plan has (--check-passes) is a race, exit 1,
		// not bad input.
		var race *dagrun.VerifyReport
		if errors.As(err, &race) {
			return nil, failure{fmt.Errorf("%s: %w", dagrun.QuotePath(args[0]), err)}
		}
		if errors.As(err, new(dagrun.SpecErrors)) {
			return nil, usageError{err} // names the file at each line:column
		}
		return nil, usageError{fmt.Errorf("%s: %w", dagrun.QuotePath(args[0]), err)}
	}
	for _, n := range dagrun.PinNotes(head, o, p) {
		fmt.Fprintf(stderr, "dagrun: note: %s\n", n)
	}
	return &planned{p: p, spec: kept, src: dagrun.QuotePath(args[0]), races: err, loadMS: loadMS}, nil
}

// loadAndPlan loads the spec at path and plans it (dagrun.Plan, which
// verifies the plan). It returns the spec's header fields (head, nil when
// loading failed), the spec itself only with keepSpec, the plan and the
// load time (ms). Only run --frames needs the spec after planning;
// otherwise nothing holds it past Build, so that the verifier of a big
// plan runs without it in memory (PinNotes reads the header only): the
// spec lives in this frame alone, which is gone before the plan is
// written.
func loadAndPlan(path string, o dagrun.PlanOptions, allowOutside, keepSpec bool, during func(*dagrun.StreamPlan)) (head, kept *dagrun.Spec, p *dagrun.StreamPlan, loadMS float64, err error) {
	t0 := time.Now()
	s, err := loadSpec(path, allowOutside)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	loadMS = msSince(t0)
	// Copies: head holds none of the spec's memory once the spec is let go.
	head = &dagrun.Spec{Name: strings.Clone(s.Name), File: strings.Clone(s.File), Sync: strings.Clone(s.Sync)}
	if keepSpec {
		kept = s
	}
	p, err = dagrun.PlanWhile(s, o, during)
	return head, kept, p, loadMS, err
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "dagrun",
		Short: "Declarative DAG scheduler for CUDA streams",
		Long: `dagrun turns a YAML list of stages and the buffers each reads and writes into
a race-free multi-stream plan: streams from a minimum path cover, only the
event record/wait pairs that are needed, and buffer lifetimes. It verifies
the plan and runs it on the GPU or on a CPU simulator.

Exit codes: 0 ok, 1 race found or run failed, 2 bad input or usage,
3 internal error, 130 stopped by Ctrl-C (128+N for signal N).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate("dagrun {{.Version}}\n")
	root.AddCommand(newVersionCmd(stdout), newInitCmd(stdout), newSchemaCmd(stdout), newPlanCmd(stdout, stderr), newCheckCmd(stdout, stderr), newRunCmd(stdout, stderr), newImportCmd(stdout, stderr), newBenchCmd(stdout, stderr))
	addCompletions(root) // complete.go
	root.SetOut(stdout)  // the completion scripts are written to the writer set when they are made
	root.SetErr(stderr)
	refuseUnknownShell(root)
	refuseEmptyPaths(root)
	root.SetFlagErrorFunc(flagError)
	ownDefaults(root)
	addExamples(root)
	debugFlagGroup(root)
	return root
}

// examples are the Examples of each command's help, by command path.
var examples = map[string]string{
	"dagrun": `  dagrun check specs/seed/two-writers-racy.yaml   # a race: exit 1, names the missing wait
  dagrun plan specs/seed/three-stage.yaml         # streams, records, waits, lifetimes
  dagrun run specs/models/inception_v3.yaml       # run it (GPU, else the simulator)`,
	"dagrun plan": `  dagrun plan specs/seed/three-stage.yaml
  dagrun plan --json specs/shared-io/shared-io.yaml > /tmp/plan.json
  dagrun plan --format dot specs/examples/fan-out-fan-in.yaml | dot -Tpng -o /tmp/plan.png
  dagrun plan --max-streams 4 specs/models/googlenet.yaml`,
	"dagrun check": `  dagrun check specs/seed/two-writers-racy.yaml
  dagrun check --json specs/shared-io/shared-io-racy.yaml
  dagrun check --plan /tmp/plan.json
  dagrun check --mode graph specs/models/inception_v3.yaml`,
	"dagrun run": `  dagrun run specs/seed/three-stage.yaml
  dagrun run --backend sim --iterations 10 --plan /tmp/plan.json
  dagrun run --mode graph --timeline /tmp/tl.png specs/models/inception_v3.yaml
  dagrun run specs/video/cameras.yaml --frames "$(go env GOROOT)/src/image/testdata"`,
	"dagrun import": `  dagrun import specs/models/graphs/resnet50.json -o /tmp/resnet50.yaml
  python3 -m dagrun_torch export --model resnet50 --out /tmp/g.json && dagrun import /tmp/g.json`,
	"dagrun init":    `  dagrun init first.yaml && dagrun plan first.yaml`,
	"dagrun schema":  `  dagrun schema > /tmp/spec.schema.json`,
	"dagrun version": `  dagrun version`,
	"dagrun bench": `  dagrun bench plan specs/models/*.yaml
  dagrun bench memory specs/models/*.yaml
  dagrun bench scale --stages 10k,100k`,
	"dagrun bench plan":   `  dagrun bench plan specs/models/*.yaml`,
	"dagrun bench memory": `  dagrun bench memory --plot /tmp/budget.png specs/models/*.yaml`,
	"dagrun bench scale": `  dagrun bench scale --stages 10k,100k
  dagrun bench scale --shapes layered --stages 10k --write /tmp/specs`,
	"dagrun completion": `  source <(dagrun completion bash)
  dagrun completion zsh > "${fpath[1]}/_dagrun"`,
}

// addExamples sets each command's Example from examples.
func addExamples(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if ex, ok := examples[c.CommandPath()]; ok {
			c.Example = ex
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// debugFlags are the flags for looking inside the planner; help lists
// them apart, under "Debug flags", after the flags for use.
var debugFlags = []string{"dump-after", "check-passes", "timings"}

const debugAnnotation = "dagrun_debug"

var templateFuncs sync.Once

// debugFlagGroup marks the debug flags of every command and makes help
// list them in a group of their own.
func debugFlagGroup(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, name := range debugFlags {
			if f := c.Flags().Lookup(name); f != nil {
				c.Flags().SetAnnotation(name, debugAnnotation, []string{"true"})
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	templateFuncs.Do(func() { // cobra's template functions are global
		cobra.AddTemplateFunc("userFlagUsages", func(c *cobra.Command) string { return flagUsages(c, false) })
		cobra.AddTemplateFunc("debugFlagUsages", func(c *cobra.Command) string { return flagUsages(c, true) })
	})
	t := root.UsageTemplate()
	const flags = "{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}"
	if !strings.Contains(t, flags) {
		panic("dagrun: cobra's usage template has no local flags section")
	}
	t = strings.Replace(t, flags, "{{userFlagUsages . | trimTrailingWhitespaces}}{{with debugFlagUsages .}}\n\nDebug flags (the planner's inside):\n{{. | trimTrailingWhitespaces}}{{end}}", 1)
	root.SetUsageTemplate(t)
}

// flagUsages is the usage text of c's local flags, the debug ones or the
// others.
func flagUsages(c *cobra.Command, debug bool) string {
	fs := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		_, isDebug := f.Annotations[debugAnnotation]
		if isDebug == debug {
			fs.AddFlag(f)
		}
	})
	return fs.FlagUsages()
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
						ind = len(p.Stages) <= dagrun.CompactPlanStages
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
	cmd.Flags().BoolVar(&indent, "indent", false, fmt.Sprintf("with --json: indent the plan file for people (default: for plans of up to %d stages; larger ones are compact unless --indent)", dagrun.CompactPlanStages))
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

func newCheckCmd(stdout, stderr io.Writer) *cobra.Command {
	var pf planFlags
	var planFile, mode string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check SPEC | --plan FILE",
		Short: "Verify that a spec's plan (planned or hand-synchronized) has no race",
		Long: `check builds the plan of SPEC (for sync: manual specs, the spec's own streams
and waits) and proves from the plan alone (stream order plus event record/wait
in host issue order) that every conflicting pair of accesses is ordered as in
declaration order. On a race it prints the fewest waits that fix every race,
each as the edit to make at the stage's file:line:col with the races it
orders (kind, buffer, bytes, stages and streams), and exits 1. It also
checks that every lifetime record outlasts its stream's last use, and warns
about waits that wait for nothing, for a later record, or that are
redundant. --json prints the same report for tools.

With --mode graph it also asks whether run --mode graph can run the plan:
a race-free plan that graph mode cannot run (host stages, capture regions
under way at once) is refused with the reason, exit 2; a plan with races
gets the reason, then the verdict, exit 1. A plan of several devices runs
in graph mode as one graph of the whole iteration.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (planFile == "") == (len(args) == 0) {
				return usagef("check takes a SPEC or --plan FILE (exactly one)\n%s", usageLine(cmd))
			}
			switch dagrun.Mode(mode) {
			case dagrun.ModeStreams, dagrun.ModeGraph:
			default:
				return usagef("--mode %q: want streams or graph", mode)
			}
			if err := checkConflicts(cmd, planFileConflicts); err != nil {
				return err
			}
			pl, err := planOrSpec(planFile, args, &pf, false, nil, stderr)
			var bad usageError
			if asJSON && errors.As(err, &bad) {
				// Tools read the input's mistakes as JSON too (exit 2).
				src := planFile
				if src == "" {
					src = args[0]
				}
				if berr := beginOutput(cmd.Context()); berr != nil {
					return berr
				}
				var out bytes.Buffer
				if werr := dagrun.CheckReportOfError(dagrun.QuotePath(src), err).WriteJSON(&out); werr != nil {
					return failure{werr}
				}
				if _, werr := stdout.Write(out.Bytes()); werr != nil {
					return werr
				}
				return err
			}
			if err != nil {
				return err
			}
			if err := beginOutput(cmd.Context()); err != nil {
				return err
			}
			refused := modeRefusal(pl, dagrun.Mode(mode))
			if refused != nil && pl.races == nil {
				return usagef("%s: %v", pl.src, refused)
			}
			var out bytes.Buffer
			if asJSON {
				r, err := dagrun.CheckReportOf(pl.src, pl.p, pl.races)
				if err != nil {
					return failure{err}
				}
				if refused != nil {
					r.Refused = refused.Error()
				}
				if err := r.WriteJSON(&out); err != nil {
					return failure{err}
				}
				if _, err := stdout.Write(out.Bytes()); err != nil {
					return err
				}
				if pl.races != nil {
					return failure{fmt.Errorf("%s: %s found", pl.src, verdict(pl.races))}
				}
				return nil
			}
			if refused != nil {
				fmt.Fprintf(&out, "%s: %v\n", pl.src, refused)
			}
			if pl.races != nil {
				fmt.Fprintf(&out, "%s: %s\n%v\n", pl.src, strings.ToUpper(verdict(pl.races)), pl.races)
			}
			for _, w := range dagrun.Warnings(pl.p) {
				fmt.Fprintf(&out, "warning: %s\n", w)
			}
			for _, n := range pl.p.Notes {
				fmt.Fprintf(&out, "note: %s\n", n)
			}
			if pl.races == nil {
				st := pl.p.Stats
				waits := counted(st.Waits, "wait")
				if it := pl.p.Iteration; it != nil && it.CrossWaits > 0 {
					waits += fmt.Sprintf(" and %d across iterations", it.CrossWaits)
				}
				fmt.Fprintf(&out, "%s: ok: no race (%s on %s, %s, %s)\n",
					pl.src, counted(st.Stages, "stage"), counted(st.Streams, "stream"), waits, counted(st.Events, "event"))
			}
			if _, err := stdout.Write(out.Bytes()); err != nil {
				return err
			}
			if pl.races != nil {
				return failure{fmt.Errorf("%s: %s found", pl.src, verdict(pl.races))}
			}
			return nil
		},
	}
	pf.add(cmd)
	cmd.Flags().StringVar(&planFile, "plan", "", "check this plan file (from 'dagrun plan --json') instead of a spec")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON (races, fixes, lifetimes, warnings, notes) for tools; a spec or plan file with mistakes gets its errors there too (\"errors\": file, line, column, message, hint; exit 2)")
	cmd.Flags().StringVar(&mode, "mode", string(dagrun.ModeStreams), "the run mode to check for: streams, or graph (also whether run --mode graph can run the plan, and if not why)")
	return cmd
}

// modeRefusal is why run --mode mode would refuse pl's plan before any
// work (dagrun.CheckRun), nil when it would run it. In stream mode, which
// check's verdict is about, only a plan across iterations whose period is
// too long for run (dagrun.PeriodError) is refused: check and run agree.
func modeRefusal(pl *planned, mode dagrun.Mode) error {
	var ro dagrun.RunOptions
	ro.Mode, ro.Iterations, ro.Alloc = mode, 1, dagrun.AllocStatic
	if pl.p.Iteration != nil {
		ro.Iterations = 2 // the period matters from the second iteration on
	}
	if mode == dagrun.ModeGraph {
		return dagrun.CheckRun(pl.p, ro)
	}
	if pl.p.Iteration == nil {
		return nil
	}
	if err := dagrun.CheckRun(pl.p, ro); errors.As(err, new(*dagrun.PeriodError)) {
		return err
	}
	return nil
}

// runFlags are run's flags other than the planner's and the stream's.
type runFlags struct {
	files                                   *outFiles // --out, --trace, --timeline: staged until the run succeeds
	planFile, mode, traceFile, timelineFile string
	allowRace, asJSON                       bool
}

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	var pf planFlags
	var sf streamFlags // --frames and friends: stream.go
	var rf runFlags
	var ro dagrun.RunOptions
	cmd := &cobra.Command{
		Use:   "run [SPEC]",
		Short: "Run a spec (or a plan file) on the GPU or the simulator and print output checksums",
		Long: `run plans SPEC (or reads --plan FILE), verifies the plan and runs it on the
backend, then prints each output buffer's checksum and the run's figures.
With --frames DIR it streams the frames in DIR through the plan's
host_pinned input buffers, one iteration per frame per input.

Flags that contradict each other (e.g. --mode graph with --sync-each,
--alloc dynamic or --frames; planner flags with --plan) are rejected before
anything is loaded, with exit 2.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (rf.planFile == "") == (len(args) == 0) {
				return usagef("run takes a SPEC or --plan FILE (exactly one)\n%s", usageLine(cmd))
			}
			if ro.Iterations < 1 || ro.Iterations > dagrun.MaxIterations {
				return usagef("--iterations %d: want 1 to %d", ro.Iterations, dagrun.MaxIterations)
			}
			switch ro.Backend {
			case dagrun.BackendAuto, dagrun.BackendSim, dagrun.BackendCUDA:
			default:
				return usagef("--backend %q: want auto, sim or cuda", ro.Backend)
			}
			switch ro.Mode = dagrun.Mode(rf.mode); ro.Mode {
			case dagrun.ModeStreams, dagrun.ModeGraph:
			default:
				return usagef("--mode %q: want streams or graph", rf.mode)
			}
			switch ro.Alloc {
			case dagrun.AllocStatic, dagrun.AllocDynamic:
			default:
				return usagef("--alloc %q: want static or dynamic", ro.Alloc)
			}
			if err := checkConflicts(cmd, runConflicts); err != nil {
				return err
			}
			// A valid choice that this build cannot serve: before any work.
			if ro.Backend == dagrun.BackendCUDA && !dagrun.CUDABuilt() {
				return usagef("cannot run on cuda: this dagrun was built without the CUDA backend (the cuda build tag); build one with scripts/build-gpu.sh, or run on the simulator (backend sim)")
			}
			if err := sf.validate(cmd); err != nil {
				return err
			}
			if _, err := pf.options(stderr); err != nil {
				return err
			}
			rf.files = &outFiles{}
			defer rf.files.discard()
			for _, c := range []struct {
				flag, path string
				kind       claimKind
			}{{"--out", sf.outDir, claimFolder}, {"--trace", rf.traceFile, claimFile}, {"--timeline", rf.timelineFile, claimFile}} {
				if err := rf.files.claim(c.flag, c.path, c.kind); err != nil {
					return err
				}
			}
			input := rf.planFile
			if input == "" {
				input = args[0]
			}
			if err := checkOutClash(input, rf.traceFile, rf.timelineFile); err != nil {
				return err
			}
			// The two timeline files swapped: a PNG named .json, JSON named .png.
			if strings.EqualFold(filepath.Ext(rf.traceFile), ".png") {
				return usagef("--trace %s: the trace is JSON (Chrome trace events, for Perfetto); name it .json, or draw the PNG with --timeline %s", rf.traceFile, rf.traceFile)
			}
			if strings.EqualFold(filepath.Ext(rf.timelineFile), ".json") {
				return usagef("--timeline %s: the timeline is a PNG picture; name it .png, or write the JSON trace with --trace %s", rf.timelineFile, rf.timelineFile)
			}
			ro.Timeline = rf.traceFile != "" || rf.timelineFile != ""
			pl, err := planOrSpec(rf.planFile, args, &pf, true, nil, stderr)
			if err != nil {
				return err
			}
			if pl.races != nil {
				if !rf.allowRace {
					how := "dagrun check " + pl.src
					if rf.planFile != "" {
						how = "dagrun check --plan " + pl.src
					}
					return failure{fmt.Errorf("%s: refusing to run a plan with races (see `%s`; --allow-race runs it anyway, to reproduce the bug):\n%w", pl.src, how, pl.races)}
				}
				fmt.Fprintf(stderr, "dagrun: warning: running a plan with races (--allow-race)\n")
			}
			if err := dagrun.CheckRun(pl.p, ro); err != nil {
				if pl.races != nil {
					// A racy plan (--allow-race) the mode cannot run: why,
					// then check's verdict, which is the result (exit 1).
					return failure{fmt.Errorf("%s: %v\n%s: %s (dagrun check's verdict):\n%w", pl.src, err, pl.src, strings.ToUpper(verdict(pl.races)), pl.races)}
				}
				return usagef("%s: %v", pl.src, err)
			}
			if sf.outDir != "" {
				if err := claimOutputs(rf.files, pl.p, sf.outDir, sf.frames != ""); err != nil {
					return err
				}
			}
			if ro.Iterations > 1 || sf.frames != "" {
				for _, n := range pl.p.Notes {
					fmt.Fprintf(stderr, "dagrun: note: %s\n", n)
				}
			}
			if ro.Backend == dagrun.BackendAuto {
				name, why := dagrun.AutoBackend()
				fmt.Fprintf(stderr, "backend: auto: picked %s (%s)\n", name, why)
			} else {
				fmt.Fprintf(stderr, "backend: %s\n", ro.Backend)
			}
			var out bytes.Buffer
			if sf.frames != "" {
				err = runStream(cmd.Context(), pl, ro, &rf, &sf, cmd.Flags().Changed("iterations"), &out, stderr)
			} else {
				err = runPlain(cmd.Context(), pl, ro, &rf, sf.outDir, &out, stderr)
			}
			// Output files only from a run that succeeded; figures only from
			// a finished run (a streamed run whose frames are wrong still
			// prints its report).
			if berr := beginOutput(cmd.Context()); berr != nil && err == nil {
				return berr
			}
			if err == nil {
				if cerr := rf.files.commit(); cerr != nil {
					return failure{fmt.Errorf("writing the output files: %w", cerr)}
				}
			}
			if _, werr := stdout.Write(out.Bytes()); err == nil {
				err = werr
			}
			return err
		},
	}
	pf.add(cmd)
	sf.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&ro.Backend, "backend", dagrun.BackendAuto, "auto (cuda if built with it and a device answers, else sim), sim or cuda")
	fl.IntVar(&ro.Iterations, "iterations", 1, fmt.Sprintf("times the plan is issued: 1 to 2^40; on the simulator at most %d ops in all (iterations × the plan's ops: about half an hour there), a run of more is refused with the most iterations that fit; Ctrl-C stops a run", dagrun.MaxSimOps))
	fl.Int64Var(&ro.Seed, "seed", 1, "simulator: seed of the random per-op delays")
	fl.BoolVar(&ro.SyncEach, "sync-each", false, "synchronize after every op, so a fault names its stage (serializes the run)")
	fl.IntSliceVar(&ro.Devices, "devices", nil, "cuda: the GPU ordinal of each plan device, in device order, 0,1,… when not given; --devices 0,0 runs a plan of two devices on one GPU (its collectives need distinct GPUs)")
	fl.StringVar(&ro.Alloc, "alloc", dagrun.AllocStatic, "static (every buffer before the run; the plan's arena as one allocation) or dynamic (temps allocated at their first use and freed after their lifetime's events, stream-ordered)")
	fl.StringVar(&rf.planFile, "plan", "", "run this plan file (from 'dagrun plan --json') instead of a spec")
	fl.BoolVar(&rf.allowRace, "allow-race", false, "run even if the verifier finds a race (to reproduce a bug)")
	fl.BoolVar(&rf.asJSON, "json", false, "print the result as JSON")
	fl.StringVar(&rf.mode, "mode", string(dagrun.ModeStreams), "streams (launch every op) or graph (capture one iteration as a CUDA graph and replay it)")
	fl.StringVar(&rf.traceFile, "trace", "", "write a Chrome trace-event JSON of the run (Perfetto, chrome://tracing): its last 4 iterations, one lane per stream, waits as flows; GPU timestamps on cuda, the simulator's own spans (host time) on sim")
	fl.StringVar(&rf.timelineFile, "timeline", "", "draw the same timeline as a PNG (lanes per stream, stage bars, wait arrows, a key in the title)")
	return cmd
}

// execute runs pl with ro and writes the timeline files of rf. A race the
// detector saw (RunResult.Races) is a failure whose message lists them.
func execute(ctx context.Context, pl *planned, ro dagrun.RunOptions, rf *runFlags) (*dagrun.RunResult, error) {
	done := watching()
	res, err := dagrun.Run(ctx, pl.p, ro)
	done()
	if res != nil && len(res.Races) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: the %s backend's race detector saw conflicting accesses with no happens-before path", pl.src, res.Backend)
		if res.RaceReport != nil {
			b.WriteString("; the plan's ")
			b.WriteString(res.RaceReport.Error())
		} else {
			for _, r := range res.Races {
				b.WriteString("\n\t")
				b.WriteString(r.String())
			}
		}
		return nil, failure{errors.New(b.String())}
	}
	if err != nil {
		return nil, failure{fmt.Errorf("%s: %w", pl.src, err)}
	}
	if res.Timeline != nil {
		if err := writeTimeline(rf.files, res.Timeline, rf.traceFile, rf.timelineFile); err != nil {
			return nil, failure{err}
		}
	}
	return res, nil
}

// runPlain runs pl once for ro.Iterations iterations and writes the
// outputs' checksums and the figures to out, and the outputs to outDir
// (when not "").
func runPlain(ctx context.Context, pl *planned, ro dagrun.RunOptions, rf *runFlags, outDir string, out, stderr io.Writer) error {
	res, err := execute(ctx, pl, ro, rf)
	if err != nil {
		return err
	}
	if outDir != "" {
		if err := writeOutputs(rf.files, outDir, res, nil, 0, stderr); err != nil {
			return err
		}
	}
	if rf.asJSON {
		return writeRunJSON(out, ro, res)
	}
	for _, o := range res.Outputs {
		fmt.Fprintf(out, "output %-16s %10d bytes  checksum %s\n", o.Name, o.Bytes, o.Checksum)
	}
	fmt.Fprintf(out, "backend %s, %d iteration(s), wall %s (issue to sync; %s with setup and read-back)\n",
		res.Backend, ro.Iterations, res.Wall.Round(time.Microsecond), res.Total.Round(time.Microsecond))
	writeIssued(out, ro, res)
	writeSimNote(out, res)
	return nil
}

// writeSimNote says, after figures from the simulator, that they are no
// GPU prediction.
func writeSimNote(w io.Writer, res *dagrun.RunResult) {
	if res.Backend == dagrun.BackendSim {
		fmt.Fprintln(w, "note: "+dagrun.SimTimingNote)
	}
}

// writeOutputs stages each output buffer's contents after the run (the
// last iteration's) for dir/NAME.bin (NAME: outName), except the buffers
// in skip (streamed per iteration already: streamed files of them). With
// no file written at all it warns on stderr.
func writeOutputs(files *outFiles, dir string, res *dagrun.RunResult, skip map[string]bool, streamed int, stderr io.Writer) error {
	n := 0
	for _, o := range res.Outputs {
		if skip[o.Name] {
			continue
		}
		path := filepath.Join(dir, outName(o.Name)+".bin")
		if err := files.write(path, o.Data); err != nil {
			return failure{fmt.Errorf("--out: writing %s: %w", path, err)}
		}
		n++
	}
	switch {
	case n+streamed == 0:
		fmt.Fprintf(stderr, "dagrun: warning: --out %s: the plan has no output buffer, so nothing was written (give the buffers to keep role: output)\n", quotePath(dir))
	default:
		fmt.Fprintf(stderr, "dagrun: wrote %d output file(s) to %s\n", n+streamed, quotePath(dir))
	}
	return nil
}

// writeIssued prints the ops the executor issued and the allocation mode.
func writeIssued(w io.Writer, ro dagrun.RunOptions, res *dagrun.RunResult) {
	fmt.Fprintf(w, "issued %s, %s, %s (alloc %s)\n", counted(res.Launches, "launch"), counted(res.Waits, "wait"), counted(res.Records, "record"), ro.Alloc)
}

// writeTimeline stages the Chrome trace and/or the PNG.
func writeTimeline(files *outFiles, tl *dagrun.Timeline, traceFile, pngFile string) error {
	if traceFile != "" {
		var buf bytes.Buffer
		if err := tl.WriteChromeTrace(&buf); err != nil {
			return err
		}
		if err := files.write(traceFile, buf.Bytes()); err != nil {
			return err
		}
	}
	if pngFile != "" {
		tmp, err := files.path(pngFile)
		if err != nil {
			return err
		}
		return tl.WritePNG(tmp, 1600, 0)
	}
	return nil
}

func writeRunJSON(w io.Writer, ro dagrun.RunOptions, res *dagrun.RunResult) error {
	type out struct {
		Name     string `json:"name"`
		Bytes    int64  `json:"bytes"`
		Checksum string `json:"checksum"`
	}
	v := struct {
		Backend    string  `json:"backend"`
		Iterations int     `json:"iterations"`
		Alloc      string  `json:"alloc"`
		WallUS     float64 `json:"wall_us"`  // first issued op to the final synchronize
		TotalUS    float64 `json:"total_us"` // with allocation, initial contents and read-back
		Launches   int     `json:"launches"` // ops issued over all iterations
		Waits      int     `json:"waits"`
		Records    int     `json:"records"`
		Outputs    []out   `json:"outputs"`
		Note       string  `json:"note,omitempty"` // the simulator's: its timings are no GPU prediction
	}{Backend: res.Backend, Iterations: ro.Iterations, Alloc: ro.Alloc,
		WallUS: float64(res.Wall.Nanoseconds()) / 1e3, TotalUS: float64(res.Total.Nanoseconds()) / 1e3,
		Launches: res.Launches, Waits: res.Waits, Records: res.Records}
	for _, o := range res.Outputs {
		v.Outputs = append(v.Outputs, out{o.Name, o.Bytes, o.Checksum})
	}
	if res.Backend == dagrun.BackendSim {
		v.Note = dagrun.SimTimingNote
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// counted writes n with its noun, plural unless n is 1 ("1 wait", "3 launches").
func counted(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "ch"):
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// verdict names what the verifier found: "deadlock" when a plan's only
// fault is a collective whose ranks cannot all start, else "race".
func verdict(err error) string {
	var re *dagrun.VerifyReport
	if errors.As(err, &re) && len(re.Races) == 0 && len(re.Deadlocks) > 0 {
		return "deadlock"
	}
	return "race"
}

// flagError is the error of a command line cobra's flag parsing refused
// (an unknown flag, a missing or malformed value): bad usage, exit 2, with
// where to look. `plan -o FILE` gets how to write the plan to a file.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if cmd.Name() == "plan" && (strings.Contains(msg, "'o' in -o") || strings.HasSuffix(msg, "flag: --out") || strings.HasSuffix(msg, "flag: --output")) {
		return usagef("%s: dagrun plan prints the plan to stdout; redirect it to a file: dagrun plan --json SPEC > FILE", msg)
	}
	return usagef("%s (`%s --help` lists its flags)\nusage: %s", msg, cmd.CommandPath(), cmd.UseLine())
}
