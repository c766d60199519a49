package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// release is the version of dagrun and of the Python package dagrun_torch,
// whose wheels carry this binary: the one place it is set.
// python/dagrun_torch/_version.py reads it from here in a checkout, and
// python/_build/dagrun_build.py (scripts/build-wheel.sh, scripts/release.sh)
// stamps it into wheels and release archives.
const release = "0.1.0"

// version is dagrun's version: the release, the VCS revision and time when
// the build recorded them (a build in a git checkout), and the Go
// toolchain, from the binary's build info.
func version() string {
	v := release
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
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
