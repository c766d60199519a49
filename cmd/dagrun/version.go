package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is dagrun's version from the binary's build info: the module
// version `go install …@vX` stamps ("(devel)" for a build in a checkout),
// the VCS revision and time when the build recorded them, and the Go
// toolchain.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build info in this binary)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	var b strings.Builder
	b.WriteString(v)
	if rev != "" {
		fmt.Fprintf(&b, " (commit %.12s %s%s)", rev, at, dirty)
	}
	fmt.Fprintf(&b, ", %s", bi.GoVersion)
	return b.String()
}

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print dagrun's version (module version, commit, Go toolchain)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(stdout, "dagrun %s\n", version())
			return err
		},
	}
}
