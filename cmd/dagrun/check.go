package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/cmdline"
	"github.com/dagrun/dagrun/internal/report"
	"github.com/dagrun/dagrun/internal/safefile"
)

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
			if err := oneOf("mode", mode); err != nil {
				return err
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
				if werr := report.OfError(safefile.Quote(src), err).WriteJSON(&out); werr != nil {
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
				if asJSON {
					// bad input, as a spec's mistakes: in errors, at its position (exit 2)
					var out bytes.Buffer
					r := &report.CheckReport{Source: pl.src, Errors: []report.CheckError{pl.refusalError(refused)}, Warnings: []string{}, Notes: []string{}}
					if err := r.WriteJSON(&out); err != nil {
						return failure{err}
					}
					if _, err := stdout.Write(out.Bytes()); err != nil {
						return err
					}
				}
				return usagef("%s: %v", pl.refusalAt(refused), refused)
			}
			var out bytes.Buffer
			if asJSON {
				r, err := report.Of(pl.src, pl.p, pl.races)
				if err != nil {
					return failure{err}
				}
				if refused != nil {
					e := pl.refusalError(refused)
					r.Refused, r.RefusedAt = refused.Error(), &e
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
				fmt.Fprintf(&out, "%s: %v\n", pl.refusalAt(refused), refused)
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
// too long for run (cmdline.PeriodError) is refused: check and run agree.
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
	if err := dagrun.CheckRun(pl.p, ro); errors.As(err, new(*cmdline.PeriodError)) {
		return err
	}
	return nil
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
