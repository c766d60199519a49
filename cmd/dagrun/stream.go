package main

// dagrun run --frames DIR: a stream of inputs through a plan's iterations:
// frames from files into the host_pinned input buffers' staging copies,
// outputs to files, a progress bar, latency figures, and for the video demo
// a check of every frame against the CPU reference.

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/cmdline"
	"github.com/dagrun/dagrun/specs/video"
)

// streamFlags are run's options for a stream of inputs.
type streamFlags struct {
	frames   string
	outDir   string
	inFlight int
	progress string
	check    string
}

func (f *streamFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.frames, "frames", "", "stream the frames in this directory (PNG/JPEG/GIF images, or raw .raw/.bin/.rgba files) through the spec's host_pinned input buffers, one frame per buffer per iteration (default iterations: enough to use every frame once)")
	fl.StringVar(&f.outDir, "out", "", "write each role: output buffer's contents after the run to DIR/BUFFER.bin (the last iteration's); with --frames, each host_pinned output of every iteration to DIR/BUFFER/NNNNNN.bin; warns when the plan has no output buffer")
	fl.IntVar(&f.inFlight, "in-flight", 0, "with --frames: the host issues iteration i only after iteration i-N completed (0: the plan's bound + 1)")
	fl.StringVar(&f.progress, "progress", "auto", "with --frames: progress bar with frames/s on stderr: auto (runs of 500+ iterations, when stderr is a terminal), on or off")
	fl.StringVar(&f.check, "check", "auto", "with --frames: check every output frame: video (against specs/video's float64 reference, max relative error < 1e-4), none, or auto (video when the plan runs the video kernels)")
}

// validate rejects bad values and stream flags without --frames, before any
// work (conflicts with other flags: runConflicts).
func (f *streamFlags) validate(cmd *cobra.Command) error {
	if f.frames == "" {
		for _, name := range []string{"in-flight", "progress", "check"} {
			if cmd.Flags().Changed(name) {
				return usagef("--%s needs --frames DIR", name)
			}
		}
		return nil
	}
	if f.inFlight < 0 {
		return usagef("--in-flight %d: want ≥ 0", f.inFlight)
	}
	switch f.progress {
	case "auto", "on", "off":
	default:
		return usagef("--progress %q: want auto, on or off", f.progress)
	}
	switch f.check {
	case "auto", "video", "none":
	default:
		return usagef("--check %q: want auto, video or none", f.check)
	}
	if st, err := os.Stat(f.frames); err != nil || !st.IsDir() {
		return usagef("--frames %s: not a directory", f.frames)
	}
	return nil
}

// streamIO is the host side of a streamed run: the frames, where each
// input and output goes, and the checks.
type streamIO struct {
	p       *dagrun.StreamPlan
	inputs  []int // plan buffer indices of the host_pinned inputs, in plan order
	outputs []int
	frames  [][][]byte // per input: its frames
	outDir  string
	files   *outFiles // where outDir's files are staged
	check   *videoCheck

	mu    sync.Mutex
	wrong []int // iterations with a wrong output
}

// newStreamIO finds the streamed buffers of pl and reads the frames for
// them (shapes from pl's spec; a plan file streams raw frames only).
func newStreamIO(pl *planned, f *streamFlags, files *outFiles) (*streamIO, error) {
	p, spec := pl.p, pl.spec
	s := &streamIO{p: p, outDir: f.outDir, files: files}
	s.inputs, s.outputs = cmdline.HostIO(p)
	if len(s.inputs) == 0 {
		return nil, usagef("--frames: the plan has no host_pinned input buffer to stream frames into")
	}
	cache := map[string][][]byte{}
	for _, i := range s.inputs {
		b := p.Buffers[i]
		var shape []int64
		if spec != nil {
			if bs := spec.Buffer(b.Name); bs != nil {
				shape = bs.Shape
			}
		}
		key := fmt.Sprint(b.Bytes, shape)
		fr, ok := cache[key]
		if !ok {
			var err error
			if fr, err = cmdline.ReadFrames(f.frames, b.Bytes, shape); err != nil {
				return nil, usageError{fmt.Errorf("input %s: %w", b.Name, err)}
			}
			cache[key] = fr
		}
		s.frames = append(s.frames, fr)
	}
	isVideo := false
	for _, k := range p.Kernels {
		isVideo = isVideo || k.Entry == video.EntrySoftmax
	}
	switch {
	case f.check == "video" && !isVideo:
		return nil, usagef("--check video: the plan does not run the video demo's kernels")
	case f.check == "video" || (f.check == "auto" && isVideo):
		if len(s.outputs) != len(s.inputs) {
			return nil, usagef("--check video: %d host_pinned inputs but %d outputs (one per camera wanted)", len(s.inputs), len(s.outputs))
		}
		wt, err := video.LoadWeights(p.Dir)
		if err != nil {
			return nil, usageError{fmt.Errorf("--check video: %w", err)}
		}
		s.check = &videoCheck{wt: wt, ref: map[int]video.RefOutput{}}
	}
	return s, nil
}

// frameOf is the frame index input k gets in iteration it: the frames are
// dealt round-robin over the inputs (cameras), iteration after iteration.
func (s *streamIO) frameOf(k, it int) int {
	return (it*len(s.inputs) + k) % len(s.frames[k])
}

// options returns the run's host I/O.
func (s *streamIO) options() (map[string]func(it int, dst []byte) error, map[string]func(it int, data []byte) error) {
	in := map[string]func(it int, dst []byte) error{}
	for k, i := range s.inputs {
		in[s.p.Buffers[i].Name] = func(it int, dst []byte) error {
			copy(dst, s.frames[k][s.frameOf(k, it)])
			return nil
		}
	}
	out := map[string]func(it int, data []byte) error{}
	for k, i := range s.outputs {
		name := s.p.Buffers[i].Name
		out[name] = func(it int, data []byte) error {
			if s.outDir != "" {
				if err := s.files.write(filepath.Join(s.outDir, outName(name), fmt.Sprintf("%06d.bin", it)), data); err != nil {
					return err
				}
			}
			if s.check != nil {
				f := s.frameOf(k, it)
				if !s.check.ok(f, s.frames[k][f], data) {
					s.mu.Lock()
					s.wrong = append(s.wrong, it)
					s.mu.Unlock()
				}
			}
			return nil
		}
	}
	return in, out
}

// videoCheck holds each frame's float64 reference, computed once per frame.
type videoCheck struct {
	wt      *video.Weights
	ref     map[int]video.RefOutput
	checked int
	maxErr  float64
}

// ok reports whether out is frame f's right result: the argmax of the
// reference and every probability within 1e-4 relative.
func (c *videoCheck) ok(f int, frame, out []byte) bool {
	r, seen := c.ref[f]
	if !seen {
		r = video.Reference(frame, video.FrameW, video.FrameH, c.wt)
		c.ref[f] = r
	}
	c.checked++
	got, err := video.DecodeOutput(out)
	if err != nil || got.Argmax != r.Argmax {
		return false
	}
	var e float64
	for i, w := range r.Probs {
		e = max(e, math.Abs(float64(got.Probs[i])-w)/math.Abs(w))
	}
	c.maxErr = max(c.maxErr, e)
	return e < 1e-4
}

// runStream runs pl with ro for a stream of frames and writes the figures
// to stdout.
func runStream(ctx context.Context, pl *planned, ro dagrun.RunOptions, rf *runFlags, f *streamFlags, itersSet bool, stdout, stderr io.Writer) error {
	p := pl.p
	if p.Iteration == nil {
		return usagef("--frames needs a plan with iteration info (re-plan the spec: plan files written before it was always included have none)")
	}
	s, err := newStreamIO(pl, f, rf.files)
	if err != nil {
		return err
	}
	if !itersSet {
		ro.Iterations = (len(s.frames[0]) + len(s.inputs) - 1) / len(s.inputs)
	}
	iters := ro.Iterations
	ro.Inputs, ro.Outputs = s.options()
	ro.InFlight = f.inFlight
	frames := iters * len(s.inputs)
	var bar *progressbar.ProgressBar
	if f.progress == "on" || (f.progress == "auto" && iters >= 500 && isTerminal(stderr)) {
		bar = progressbar.NewOptions(frames, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("frames"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("frames"),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionOnCompletion(func() { fmt.Fprintln(stderr) }))
	}
	ro.Progress = func(int, time.Duration) {
		if bar != nil {
			bar.Add(len(s.inputs))
		}
	}
	res, err := execute(ctx, pl, ro, rf)
	if err != nil {
		return err
	}
	if bar != nil {
		bar.Finish()
	}
	lat := slices.Clone(res.Latencies)
	slices.Sort(lat)
	pct := func(q float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))]
	}
	fmt.Fprintf(stdout, "streamed %d frames (%d iterations × %d inputs, %d distinct frames) on %s in %s: %.0f frames/s; per-iteration latency p50 %s, p99 %s\n",
		frames, iters, len(s.inputs), len(s.frames[0]), res.Backend, res.Wall.Round(time.Microsecond), float64(frames)/res.Wall.Seconds(),
		pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond))
	if res.LatencyIterations > len(res.Latencies) {
		fmt.Fprintf(stdout, "note: latency percentiles from a uniform sample of %d of the %d iterations (the run keeps at most %d)\n", len(res.Latencies), res.LatencyIterations, dagrun.MaxLatencies)
	}
	fmt.Fprintf(stdout, "plan: %d streams × %d stream sets, %d cross-iteration waits, in flight ≤ %d; %s with setup and read-back\n",
		len(p.Streams), p.Iteration.StreamSets, p.Iteration.CrossWaits, p.Iteration.InFlight, res.Total.Round(time.Millisecond))
	writeIssued(stdout, ro, res)
	writeSimNote(stdout, res)
	for _, o := range res.Outputs {
		fmt.Fprintf(stdout, "output %-16s %10d bytes  checksum %s (last iteration)\n", o.Name, o.Bytes, o.Checksum)
	}
	if f.outDir != "" {
		streamed := map[string]bool{}
		for _, i := range s.outputs {
			streamed[p.Buffers[i].Name] = true
		}
		if err := writeOutputs(rf, f.outDir, res, streamed, frames, stderr); err != nil {
			return err
		}
	}
	if s.check != nil {
		fmt.Fprintf(stdout, "checked %d output frames against the float64 reference: %d wrong, max relative error %.3g\n",
			s.check.checked, len(s.wrong), s.check.maxErr)
		if len(s.wrong) > 0 {
			return failure{fmt.Errorf("%d of %d output frames are wrong (first in iteration %d)", len(s.wrong), s.check.checked, s.wrong[0])}
		}
	}
	return nil
}

// isTerminal reports whether w is a terminal: a progress bar redraws its
// line, which a file or a pipe would keep as clutter.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
