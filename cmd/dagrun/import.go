package main

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/cmdline"
)

func newImportCmd(stdout, stderr io.Writer) *cobra.Command {
	var outPath string
	var o cmdline.ImportOptions
	cmd := &cobra.Command{
		Use:   "import GRAPH.json",
		Short: "Convert an operator graph (torch.fx / torch.export JSON) into a spec",
		Long: `import converts an operator graph in the JSON format
that python3 -m dagrun_torch export writes (dag/import_graph.go documents it) into a dagrun spec: each node becomes a mix stage
that reads and writes its tensors and spins for the node's duration_us;
in-place nodes read and write one buffer. The spec is written to -o FILE
(atomically: nothing is left behind on error) or to stdout.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.MaxWords <= 0 {
				return usagef("--max-words %d: want a positive number of 4-byte words", o.MaxWords)
			}
			var files outFiles
			defer files.discard()
			if err := files.claim("-o", outPath, claimFile); err != nil {
				return err
			}
			if sameFile(outPath, args[0]) {
				return usagef("-o %s: the same file as the graph it reads: name another file (a spec, .yaml)", outPath)
			}
			s, summary, err := cmdline.ImportGraph(args[0], o)
			if err != nil {
				return usageError{err}
			}
			var out bytes.Buffer
			fmt.Fprintf(&out, "# Imported by `dagrun import %s`.\n# %s\n", quotePath(filepath.Base(args[0])), summary)
			if err := dagrun.WriteSpec(&out, s); err != nil {
				return failure{err}
			}
			if err := beginOutput(cmd.Context()); err != nil {
				return err
			}
			if outPath == "" {
				_, err = stdout.Write(out.Bytes())
				return err
			}
			if err := files.write(outPath, out.Bytes()); err != nil {
				return failure{fmt.Errorf("writing %s: %w", outPath, err)}
			}
			if err := files.commit(); err != nil {
				return failure{fmt.Errorf("writing %s: %w", outPath, err)}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write the spec to this file instead of stdout")
	cmd.Flags().IntVar(&o.MaxWords, "max-words", 64, "mix max_words per written tensor")
	return cmd
}
