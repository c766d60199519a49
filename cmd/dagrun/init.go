package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
)

// starterSpec is what dagrun init writes: the spec of docs/quickstart.md
// ("A first spec") with a comment per part. NAME is the spec's name.
const starterSpec = `# A dagrun spec: the buffers, then the stages (kernel launches) with the
# bytes each reads and writes, in the order one stream would run them.
# dagrun derives the order between stages from these accesses, puts
# independent stages on streams of their own and places only the waits
# needed. Next: dagrun check FILE, dagrun plan FILE, dagrun run FILE
# (docs/quickstart.md; every field: docs/spec.md).
version: 1
name: NAME
buffers:
  # bytes, or dtype and shape; role: input (written by the host before the
  # run, only read by stages), output (read back after it) or temp (default)
  - {name: frame,   bytes: 65536, role: input, init: {random: 1}}
  - {name: feat,    dtype: f32, shape: [16384]}
  - {name: weights, bytes: 4096, role: input, init: {random: 2}}
  - {name: left,    bytes: 4096, role: output}
  - {name: right,   bytes: 4096, role: output}
stages:
  # built-in kernels: scale, mix, copy, fill, spin (docs/spec.md); byte
  # ranges [start:end]; duration_us: the planner's cost estimate, µs
  - {name: pre,   kernel: scale, args: {a: 0.5}, reads: [frame], writes: [feat], duration_us: 20}
  - {name: headL, kernel: mix, reads: ["feat[0:32768]", weights], writes: [left],  duration_us: 100}
  - {name: headR, kernel: mix, reads: ["feat[32768:65536]", weights], writes: [right], duration_us: 100}
`

// specName is a spec name from a file name: its base without the
// extension where that is a name (docs/spec.md, "Names"), else "first".
func specName(path string) string {
	n := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if regexp.MustCompile(`^[\pL\pN_.\-/:]+$`).MatchString(n) {
		return n
	}
	return "first"
}

func newInitCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "init [FILE]",
		Short: "Write a starter spec (the quickstart's first spec) to FILE, or to stdout",
		Long: `init writes a starter spec: three stages on two streams, with a comment
per part (docs/quickstart.md, "A first spec"), named after FILE. It writes
new files only: an existing FILE is refused (exit 2). Without FILE it
prints the spec.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				_, err := io.WriteString(stdout, strings.Replace(starterSpec, "NAME", "first", 1))
				return err
			}
			path := args[0]
			if _, err := os.Lstat(path); err == nil {
				return usagef("%s exists: init writes new files only (remove it, or name another file)", path)
			}
			var files outFiles
			defer files.discard()
			if err := files.claim("init", path, claimFile); err != nil {
				return err
			}
			if err := files.write(path, []byte(strings.Replace(starterSpec, "NAME", specName(path), 1))); err != nil {
				return failure{fmt.Errorf("writing %s: %w", path, err)}
			}
			if err := beginOutput(cmd.Context()); err != nil {
				return err
			}
			if err := files.commit(); err != nil {
				return failure{fmt.Errorf("writing %s: %w", path, err)}
			}
			q := quotePath(path)
			_, err := fmt.Fprintf(stdout, "wrote %s; next: dagrun check %s, dagrun plan %s, dagrun run %s\n", q, q, q, q)
			return err
		},
	}
}
