// Command video-bench prints the figures of specs/video's multi-camera
// pipeline (docs/performance.md, "Video pipeline"): frames/s and
// per-iteration latency of the planned pipeline against one stream, by
// cameras and ring copies; the cross-iteration race that the planned waits
// prevent; and device memory over a long run.
//
//	go run ./specs/video/cmd/video-bench [--backend auto|sim|cuda] [--frames DIR] [--cameras 1,2,4,8] [--copies 1,2,3] [--devices N] ...
//
// Run it from the repository root (--dir defaults to specs/video). Exit
// codes: 0 ok, 1 a wrong frame with the plan or a failed run, 2 bad input
// or usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/cmdline"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/specs/video"
	"github.com/dagrun/dagrun/verify"
)

type videoBench struct {
	backend                             dagrun.Backend
	dir, frames                         string
	cameras, copies                     []int
	iters, failIters, okIters, failCams int
	devices                             int // section 1: cameras spread over this many devices (video.SpecOn)
	seed                                int64
	out                                 io.Writer

	b      executor.Backend
	ref    map[int]video.RefOutput
	wt     *video.Weights
	frameB [][]byte
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError marks bad input (exit 2), failure a failed run (exit 1).
type (
	usageError struct{ err error }
	failure    struct{ err error }
)

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }
func (e failure) Error() string    { return e.err.Error() }
func (e failure) Unwrap() error    { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// exitCode prints err (if any) and maps it to the exit code: 0 ok, 1 a
// failure, 2 bad input (cobra's flag errors included).
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "video-bench:", err)
	var f failure
	if errors.As(err, &f) {
		return 1
	}
	return 2
}

// run is the whole command line: main only maps its error to an exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newVideoBenchCmd(stdout, stderr)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	return cmd.ExecuteContext(ctx)
}

func newVideoBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	vb := &videoBench{out: stdout}
	var cams, copies string
	cmd := &cobra.Command{
		Use:           "video-bench",
		SilenceUsage:  true,
		SilenceErrors: true,
		Short:         "Figures of the multi-camera video pipeline: frames/s and latency by copies and cameras against one stream, and the cross-iteration race",
		Long: `video-bench runs specs/video's pipeline (video.Spec) over a directory of
images, every output frame checked against the float64 reference, and prints:

 1. for each cameras × copies: frames/s and p50/p99 per-iteration latency of
    the default plan and of the same pipeline on one stream (strategy
    single), and their ratio;
 2. the cross-iteration failure: the pipeline with its copies pinned to copy streams
    (h2d, d2h) and a compute stream per camera, copies: 2; with the
    cross-iteration waits removed by hand (wrong frames of --fail-iterations),
    with the host's staging waits skipped, and with the plan (wrong frames
    of --ok-iterations);
 3. device memory in use, sampled over the long run (cuda only).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if vb.cameras, err = intList(cams); err != nil {
				return usagef("--cameras: %v", err)
			}
			if vb.copies, err = intList(copies); err != nil {
				return usagef("--copies: %v", err)
			}
			if vb.iters < 1 || vb.failIters < 1 || vb.okIters < 1 {
				return usagef("iteration counts must be ≥ 1")
			}
			if vb.devices < 1 || vb.devices > dag.MaxDevices {
				return usagef("--devices %d: want 1 to %d", vb.devices, dag.MaxDevices)
			}
			return vb.run(cmd.Context(), stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar((*string)(&vb.backend), "backend", string(dagrun.BackendAuto), "auto, sim or cuda")
	f.StringVar(&vb.dir, "dir", "specs/video", "the video spec's directory (PTX, weights)")
	f.StringVar(&vb.frames, "frames", video.TestImageDir(), "directory of images (default: Go's image test data)")
	f.StringVar(&cams, "cameras", "1,2,4,8", "camera counts")
	f.StringVar(&copies, "copies", "1,2,3", "ring sizes")
	f.IntVar(&vb.iters, "iterations", 2000, "iterations (frames per camera) of each throughput run")
	f.IntVar(&vb.failIters, "fail-iterations", 1000, "iterations of the runs without the cross-iteration waits")
	f.IntVar(&vb.okIters, "ok-iterations", 10000, "iterations of the planned run of the failure pipeline")
	f.IntVar(&vb.failCams, "fail-cameras", 1, "cameras of the failure pipeline")
	f.Int64Var(&vb.seed, "seed", 1, "simulator seed")
	f.IntVar(&vb.devices, "devices", 1, "table 1: camera c on device c mod this (each device its own weights); on cuda, GPUs 0 to devices−1")
	return cmd
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func (vb *videoBench) run(ctx context.Context, stderr io.Writer) error {
	frames, err := video.LoadFrames(vb.frames, video.FrameW, video.FrameH)
	if err != nil {
		return usageError{err}
	}
	if vb.wt, err = video.LoadWeights(vb.dir); err != nil {
		return usageError{err}
	}
	// Keep frames whose results differ (some test images are one picture
	// in several encodings): a frame mixed up with another shows.
	vb.ref = map[int]video.RefOutput{}
	var refs []video.RefOutput
	for _, f := range frames {
		r := video.Reference(f, video.FrameW, video.FrameH, vb.wt)
		if slices.ContainsFunc(refs, func(q video.RefOutput) bool { return relDiff(q.Probs, r.Probs) < 1e-3 }) {
			continue
		}
		vb.ref[len(vb.frameB)] = r
		refs = append(refs, r)
		vb.frameB = append(vb.frameB, f)
	}
	ro := dagrun.RunOptions{Seed: vb.seed, PTXDir: vb.dir}
	if name, _ := dagrun.AutoBackend(); vb.devices > 1 && (vb.backend == dagrun.BackendCUDA || vb.backend == dagrun.BackendAuto && name == dagrun.BackendCUDA) {
		for d := range vb.devices {
			ro.Devices = append(ro.Devices, d) // the simulator simulates every device; cuda maps device d to GPU d
		}
	}
	b, err := dagrun.NewBackend(vb.backend, ro)
	if err != nil {
		return failure{err}
	}
	vb.b = b
	defer b.Close()
	reason := b.Name()
	if vb.backend == dagrun.BackendAuto {
		name, why := dagrun.AutoBackend()
		reason = fmt.Sprintf("auto: picked %s (%s)", name, why)
	}
	w := vb.out
	fmt.Fprintf(w, "video-bench: backend %s; %d images, %d with distinct results; %d iterations per run\n", reason, len(frames), len(vb.frameB), vb.iters)
	if dagrun.Backend(b.Name()) == dagrun.BackendSim {
		fmt.Fprintf(w, "note: %s\n", cmdline.SimTimingNote)
	}
	on := ""
	if vb.devices > 1 {
		on = fmt.Sprintf(", camera c on device c mod %d", vb.devices)
	}
	fmt.Fprintf(w, "\n1. frames/s and per-iteration latency (host issue to completion seen), default plan vs one stream%s\n", on)
	fmt.Fprintf(w, "%-7s %-6s | %-28s | %-28s | %s\n", "cameras", "copies", "plan: frames/s  p50  p99", "one stream: frames/s p50 p99", "ratio (frames/s, p50)")
	for _, cams := range vb.cameras {
		for _, k := range vb.copies {
			plan, err := vb.plan(cams, k, planner.Options{MaxStreams: planner.Uncapped}, false)
			if err != nil {
				return err
			}
			one, err := vb.plan(cams, k, planner.Options{Strategy: planner.StrategySingle}, false)
			if err != nil {
				return err
			}
			a, err := vb.measure(ctx, plan, cams, vb.iters, 0, nil, nil)
			if err != nil {
				return err
			}
			s, err := vb.measure(ctx, one, cams, vb.iters, 0, nil, nil)
			if err != nil {
				return err
			}
			if a.wrong+s.wrong > 0 {
				return failure{fmt.Errorf("%d cameras, copies %d: %d and %d wrong frames with the plan and on one stream", cams, k, a.wrong, s.wrong)}
			}
			devs := ""
			if n := plan.DeviceCount(); n > 1 {
				devs = fmt.Sprintf(", %d devices", n)
			}
			fmt.Fprintf(w, "%-7d %-6d | %8.0f %8s %8s | %8.0f %8s %8s | %.2fx %.2fx  (%d streams × %d sets%s)\n", cams, k,
				a.fps, us(a.p50), us(a.p99), s.fps, us(s.p50), us(s.p99), a.fps/s.fps, float64(a.p50)/float64(s.p50),
				len(plan.Streams), plan.Iteration.StreamSets, devs)
		}
	}
	cams := vb.failCams
	fmt.Fprintf(w, "\n2. the cross-iteration failure: %d camera(s), copies: 2 (results: %d), upload on stream h2d, download on d2h, compute (after a %d µs spin) on its own stream, in flight ≤ %d\n", cams, failOutCopies, failSlowUS, failInFlight)
	planned, err := vb.plan(cams, 2, planner.Options{StreamSets: 1, MaxStreams: planner.Uncapped}, true)
	if err != nil {
		return err
	}
	bare := dropCrossWaits(planned)
	verr := verify.Verify(bare)
	fmt.Fprintf(w, "plan: %d cross-iteration waits; verifier on the plan without them: %s\n", planned.Iteration.CrossWaits, firstLine(verr))
	r, err := vb.measure(ctx, bare, cams, vb.failIters, failInFlight, nil, nil)
	if err != nil && r.races == 0 {
		return err
	}
	fmt.Fprintf(w, "cross-iteration waits removed by hand: %d wrong of %d frames%s\n", r.wrong, r.checked, raceNote(r.races))
	r, err = vb.measure(ctx, planned, cams, vb.failIters, failInFlight, skipHostWaits, nil)
	if err != nil && r.races == 0 {
		return err
	}
	fmt.Fprintf(w, "host staging waits skipped (the host refills a pinned copy without waiting for its upload): %d wrong of %d frames%s\n", r.wrong, r.checked, raceNote(r.races))
	var used []int64
	mem, hasMem := vb.b.(interface{ MemInfo() (int64, int64, error) })
	sample := func() {
		if hasMem {
			if free, total, err := mem.MemInfo(); err == nil {
				used = append(used, total-free)
			}
		}
	}
	sample()
	r, err = vb.measure(ctx, planned, cams, vb.okIters, failInFlight, nil, func(it int) {
		if it%max(vb.okIters/10, 1) == 0 {
			sample()
		}
	})
	if err != nil {
		return err
	}
	sample()
	fmt.Fprintf(w, "with the plan: %d wrong of %d frames (%.0f frames/s, p50 %s, p99 %s)\n", r.wrong, r.checked, r.fps, us(r.p50), us(r.p99))
	if len(used) > 0 {
		lo, hi := slices.Min(used), slices.Max(used)
		fmt.Fprintf(w, "\n3. device memory in use over the %d-iteration run (%d samples): min %.1f MiB, max %.1f MiB, spread %d bytes\n",
			vb.okIters, len(used), float64(lo)/(1<<20), float64(hi)/(1<<20), hi-lo)
	}
	if r.wrong > 0 {
		return failure{fmt.Errorf("%d wrong frames with the plan", r.wrong)}
	}
	return nil
}

// plan builds the video pipeline for cams cameras and k copies, on
// --devices devices; pin (one device) puts the copies on streams h2d and
// d2h and each camera's compute on its own.
func (vb *videoBench) plan(cams, k int, o planner.Options, pin bool) (*plan.Plan, error) {
	s := video.SpecOn(cams, k, vb.devices)
	if pin {
		s = video.Spec(cams, k)
	}
	s.Dir = vb.dir
	if pin {
		// The host reads each result failIn iterations late (a ring of
		// that many pinned result copies), so its read-back waits do not
		// order the device's iterations i and i+2: only the planned
		// cross-iteration waits do.
		for c := 0; c < cams; c++ {
			s.Buffer(video.OutputBuffer(c)).Copies = failOutCopies
		}
		// A slow kernel at the head of each camera's compute stream (where a
		// missing cross-iteration wait shows): the compute stream lags the copy streams, so
		// an upload can overtake the preprocess of two frames earlier.
		var stages []dag.StageSpec
		for _, st := range s.Stages {
			stages = append(stages, st)
			if cam, what, _ := strings.Cut(st.Name, "/"); what == "upload" {
				stages = append(stages, dag.StageSpec{Name: cam + "/slow", Kernel: dag.BuiltinSpin,
					Args: map[string]any{"us": failSlowUS}, DurationUS: failSlowUS})
			}
		}
		s.Stages = stages
		for i := range s.Stages {
			st := &s.Stages[i]
			cam, what, _ := strings.Cut(st.Name, "/")
			switch what {
			case "upload":
				st.Stream = "h2d"
			case "download":
				st.Stream = "d2h"
			default:
				st.Stream = cam + "/compute"
			}
		}
	}
	o.Check = true
	p, err := planner.Build(s, o)
	if err != nil {
		return nil, failure{err}
	}
	return p, nil
}

// failOutCopies and failInFlight: the failure pipeline's result ring and
// host run-ahead.
const (
	failOutCopies = 16
	failInFlight  = 8
	failSlowUS    = 1000
)

type benchResult struct {
	fps            float64
	p50, p99       time.Duration
	wrong, checked int
	races          int // races the simulator's detector listed (executor.Result.Races)
}

// measure runs p for iters iterations with every camera's frames and
// checks every output against the reference. A race the detector saw comes
// as r.races together with its error.
func (vb *videoBench) measure(ctx context.Context, p *plan.Plan, cams, iters, inflight int, wrap func(executor.Backend) executor.Backend, progress func(int)) (benchResult, error) {
	var r benchResult
	nf := len(vb.frameB)
	frameOf := func(c, it int) int { return (it*cams + c) % nf }
	o := executor.Options{Iterations: iters, InFlight: inflight, Inputs: map[string]executor.InputFunc{}, Outputs: map[string]executor.OutputFunc{}}
	for c := 0; c < cams; c++ {
		o.Inputs[video.InputBuffer(c)] = func(it int, dst []byte) error {
			copy(dst, vb.frameB[frameOf(c, it)])
			return nil
		}
		o.Outputs[video.OutputBuffer(c)] = func(it int, data []byte) error {
			r.checked++
			ref := vb.ref[frameOf(c, it)]
			got, err := video.DecodeOutput(data)
			var probs [video.Classes]float64
			for i, v := range got.Probs {
				probs[i] = float64(v)
			}
			if err != nil || got.Argmax != ref.Argmax || relDiff(ref.Probs, probs) >= 1e-4 {
				r.wrong++
			}
			return nil
		}
	}
	if progress != nil {
		o.Progress = func(it int, _ time.Duration) { progress(it) }
	}
	b := vb.b
	if wrap != nil {
		b = wrap(b)
	}
	res, err := executor.Run(ctx, p, b, o)
	if res == nil {
		return r, err
	}
	r.races = len(res.Races)
	r.fps = float64(iters*cams) / res.Wall.Seconds()
	lat := slices.Clone(res.Latencies)
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50, r.p99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return r, err
}

// dropCrossWaits returns p without its cross-iteration waits (Lag > 0):
// the cross-iteration race, by hand.
func dropCrossWaits(p *plan.Plan) *plan.Plan {
	q := p.WithoutOps(func(_, _ int, o plan.Op) bool { return o.Kind == plan.OpWait && o.Lag > 0 })
	it := *p.Iteration
	it.CrossWaits = 0
	q.Iteration = &it
	return q
}

// noWaitHost is a backend whose host waits return at once: the host's
// staging and read-back waits skipped.
type noWaitHost struct {
	executor.Backend
	hs executor.HostSyncer
}

func (n noWaitHost) SyncEvent(executor.Event) error          { return nil }
func (n noWaitHost) QueryEvent(executor.Event) (bool, error) { return true, nil }
func (n noWaitHost) HostWrite(b executor.Buffer, off int64, d []byte) error {
	return n.hs.HostWrite(b, off, d)
}
func (n noWaitHost) HostRead(b executor.Buffer, off int64, d []byte) error {
	return n.hs.HostRead(b, off, d)
}
func (n noWaitHost) LaunchFunc(s executor.Stream, l *executor.LaunchDesc, f executor.StageFunc) error {
	return n.Backend.(executor.FuncLauncher).LaunchFunc(s, l, f)
}

func skipHostWaits(b executor.Backend) executor.Backend {
	return noWaitHost{Backend: b, hs: b.(executor.HostSyncer)}
}

func relDiff(a, b [video.Classes]float64) float64 {
	var m float64
	for i := range a {
		m = max(m, math.Abs(a[i]-b[i])/math.Abs(a[i]))
	}
	return m
}

func us(d time.Duration) string { return d.Round(time.Microsecond).String() }

func raceNote(races int) string {
	if races == 0 {
		return ""
	}
	return fmt.Sprintf(" (the simulator's detector: %d race(s))", races)
}

func firstLine(err error) string {
	if err == nil {
		return "no race"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
