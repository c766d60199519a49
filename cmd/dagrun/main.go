// Command dagrun plans, checks and runs declarative CUDA-stream pipelines.
//
//	dagrun plan   SPEC [--json | --format table|json|dot] [--strategy S] [--max-streams N]
//	dagrun check  SPEC | --plan FILE
//	dagrun run    SPEC | --plan FILE [--backend auto|sim|cuda] [--mode streams|graph] [--alloc static|dynamic] [--iterations N] [--frames DIR]
//	dagrun import GRAPH.json [-o SPEC]
//	dagrun bench  plan|memory SPEC...
//
// It does all its work through the root package dagrun (the embedded Go
// API). Flags that contradict each other are rejected before anything is
// loaded. Exit codes: 0 ok, 1 a race was found or a run failed, 2 bad input
// or usage; on exit 2 nothing is written to stdout.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"

	// The video demo's kernels have Go bodies for the simulator; registering
	// them lets `dagrun run --backend sim specs/video/cameras.yaml` compute
	// real outputs instead of opaque mix stages.
	_ "github.com/dagrun/dagrun/specs/video"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // a race, a failed run
	exitUsage   = 2 // bad input: usage, spec or plan errors
)

// usageError marks bad input: exit 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// exitCode prints err (if any) and maps it to the process exit code.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "dagrun:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailure
}
