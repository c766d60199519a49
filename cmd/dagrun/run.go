package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/cmdline"
)

// runFlags are run's flags other than the planner's and the stream's.
type runFlags struct {
	files                                   *outFiles // --out, --trace, --timeline: staged until the run succeeds
	wrote                                   string    // --out's "wrote" line, printed once files.commit has put the files in place
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
			ro.Mode = dagrun.Mode(rf.mode)
			for _, err := range []error{oneOf("backend", ro.Backend), oneOf("mode", ro.Mode), oneOf("alloc", ro.Alloc)} {
				if err != nil {
					return err
				}
			}
			if err := checkConflicts(cmd, runConflicts); err != nil {
				return err
			}
			// A valid choice that this build cannot serve: before any work.
			if ro.Backend == dagrun.BackendCUDA && !cmdline.CUDABuilt() {
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
			if ro.Iterations > 1 {
				pf.loaded = func(s *dagrun.Spec) error { return periodAtLoad(s, ro.Mode == dagrun.ModeGraph) }
			}
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
					return failure{fmt.Errorf("%s: %v\n%s: %s (dagrun check's verdict):\n%w", pl.refusalAt(err), err, pl.src, strings.ToUpper(verdict(pl.races)), pl.races)}
				}
				return usagef("%s: %v", pl.refusalAt(err), err)
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
				fmt.Fprint(stderr, rf.wrote)
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
	fl.StringVar((*string)(&ro.Backend), "backend", string(dagrun.BackendAuto), "auto (cuda if built with it and a device answers, else sim), sim or cuda")
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
		if err := writeOutputs(rf, outDir, res, nil, 0, stderr); err != nil {
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
		fmt.Fprintln(w, "note: "+cmdline.SimTimingNote)
	}
}

// writeOutputs stages in rf.files each output buffer's contents after the
// run (the last iteration's) for dir/NAME.bin (NAME: outName), except the
// buffers in skip (streamed per iteration already: streamed files of
// them), and leaves in rf.wrote the line that says how many files --out
// gets, for the caller to print once the files are committed. With no
// file written at all it warns on stderr.
func writeOutputs(rf *runFlags, dir string, res *dagrun.RunResult, skip map[string]bool, streamed int, stderr io.Writer) error {
	n := 0
	for _, o := range res.Outputs {
		if skip[o.Name] {
			continue
		}
		path := filepath.Join(dir, outName(o.Name)+".bin")
		if err := rf.files.write(path, o.Data); err != nil {
			return failure{fmt.Errorf("--out: writing %s: %w", path, err)}
		}
		n++
	}
	switch {
	case n+streamed == 0:
		fmt.Fprintf(stderr, "dagrun: warning: --out %s: the plan has no output buffer, so nothing was written (give the buffers to keep role: output)\n", quotePath(dir))
	default:
		rf.wrote = fmt.Sprintf("dagrun: wrote %d output file(s) to %s\n", n+streamed, quotePath(dir))
	}
	return nil
}

// writeIssued prints the ops the executor issued and the allocation mode.
func writeIssued(w io.Writer, ro dagrun.RunOptions, res *dagrun.RunResult) {
	fmt.Fprintf(w, "issued %s, %s, %s (alloc %s)\n", counted(res.Launches, "launch"), counted(res.Waits, "wait"), counted(res.Records, "record"), ro.Alloc)
}

// writeTimeline stages the Chrome trace and/or the PNG.
func writeTimeline(files *outFiles, tl *cmdline.Timeline, traceFile, pngFile string) error {
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
		return cmdline.WriteTimelinePNG(tl, tmp, 1600, 0)
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
	}{Backend: string(res.Backend), Iterations: ro.Iterations, Alloc: ro.Alloc,
		WallUS: float64(res.Wall.Nanoseconds()) / 1e3, TotalUS: float64(res.Total.Nanoseconds()) / 1e3,
		Launches: res.Launches, Waits: res.Waits, Records: res.Records}
	for _, o := range res.Outputs {
		v.Outputs = append(v.Outputs, out{o.Name, o.Bytes, o.Checksum})
	}
	if res.Backend == dagrun.BackendSim {
		v.Note = cmdline.SimTimingNote
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

// periodAtLoad refuses, before planning, a run of several iterations of s
// whose ring sizes (copies) and, outside graph mode, the event slots its
// waits keep (lag + 1 for an event's longest lag) repeat only after more
// than cmdline.MaxPeriod iterations: the bound of the executor, which
// refuses such a plan (dagrun.CheckRun) whatever the planner adds. It
// walks the rings in declaration order, then the events in the order of
// their first lagged wait, and reports the buffer or the wait at which
// their least common multiple passes the bound, at its file:line:column.
// Check reports the same bound after its verdict (a race comes first).
func periodAtLoad(s *dagrun.Spec, graph bool) error {
	l := 1
	// passes takes k into l and says whether l passed the bound, and
	// what l was before when k alone is within it (1: k alone passes).
	passes := func(k int) (bool, int) {
		before := l
		l = l / gcd(l, k) * k
		if k > cmdline.MaxPeriod {
			before = 1
		}
		return l > cmdline.MaxPeriod, before
	}
	kinds := "event slots and ring sizes"
	if graph {
		kinds = "ring sizes (graph mode replays one iteration at a time)"
	}
	// refused is the message and hint of what, which passes the bound.
	refused := func(what string, before int) (string, string) {
		with := ""
		if before > 1 {
			with = fmt.Sprintf(" together with those before it (which repeat every %d iterations)", before)
		}
		return fmt.Sprintf("the spec's %s repeat only after more than %d iterations (the most a run of several iterations takes), by %s%s", kinds, cmdline.MaxPeriod, what, with),
			"use fewer distinct ring sizes (copies) or shorter lags (each event keeps lag + 1 slots), or run one iteration (--iterations 1); dagrun plan plans it as it is"
	}
	for _, b := range s.Buffers {
		if ok, before := passes(max(b.Copies, 1)); ok {
			msg, hint := refused(fmt.Sprintf("buffer %s's %d ring copies", b.Name, b.Copies), before)
			return dagrun.SpecErrors{{Pos: b.Pos, Msg: msg, Hint: hint}}
		}
	}
	if graph {
		return nil
	}
	// Per event (a stage's own, or a named one): its longest lag's wait.
	type longest struct {
		stage string // the waiting stage
		i     int    // its index in the stage's WaitFor
		v     int    // the stage's index
		lag   int
	}
	var order []string
	most := map[string]longest{}
	for v, st := range s.Stages {
		for i, w := range st.WaitFor {
			if w.Lag <= 0 {
				continue
			}
			ev := "stage " + w.Stage
			if w.Event != "" {
				ev = "event " + w.Event
			}
			m, seen := most[ev]
			if !seen {
				order = append(order, ev)
			}
			if w.Lag > m.lag {
				most[ev] = longest{stage: st.Name, i: i, v: v, lag: w.Lag}
			}
		}
	}
	for _, ev := range order {
		m := most[ev]
		if ok, before := passes(m.lag + 1); ok {
			w := s.Stages[m.v].WaitFor[m.i]
			msg, hint := refused(fmt.Sprintf("stage %s's wait on the record of %s with lag %d (%d event slots)", m.stage, ev, m.lag, m.lag+1), before)
			return dagrun.SpecErrors{{Pos: w.Pos, Msg: msg, Hint: hint}}
		}
	}
	return nil
}

// gcd is the greatest common divisor of a and b (Euclid).
func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
