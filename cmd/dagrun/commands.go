package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// compactPlanStages is the size above which `dagrun plan --json` writes a
// compact plan file unless --indent is given: indenting costs time and
// about a third more bytes, and nobody reads 10,000 stages by eye.
const compactPlanStages = 10_000
