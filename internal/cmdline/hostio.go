// Package cmdline holds what the dagrun command needs from the packages below
// the root package and no embedding program does: the planner's pass
// names, a plan's host I/O buffers and their frames, whether the binary
// has the CUDA backend, operator-graph import, the simulator's timing note
// and the names of types the command line spells out (cmd/dagrun imports
// only the root package and internal/...).
package cmdline

import (
	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/cudart"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/trace"
	"github.com/dagrun/dagrun/executor/trace/tracepng"
	"github.com/dagrun/dagrun/frames"
	"github.com/dagrun/dagrun/planner"
)

// MaxPeriod is the most iterations after which a run of several
// iterations must repeat its stream sets, event slots and ring copies
// (executor.MaxPeriod).
const MaxPeriod = executor.MaxPeriod

// SimTimingNote is what the simulator backend's timings are and are not;
// the command line prints it after every figure the simulator measured.
const SimTimingNote = "simulator timings are the CPU time of a simulation (random per-op delays, one goroutine per stream), not predictions of GPU time; --backend cuda measures the GPU"

// Passes returns the names of the planner's passes in pipeline order
// (--dump-after).
func Passes() []string { return planner.Passes() }

// CUDABuilt reports whether this binary has the CUDA backend (built with
// the cuda tag: scripts/build-gpu.sh); without it dagrun.BackendCUDA fails
// with an error wrapping cudart.ErrNotSupported.
func CUDABuilt() bool { return cudart.Available }

// HostIO returns the indices into p.Buffers of p's host_pinned role=input
// and role=output buffers, in plan order: the buffers that
// dagrun.RunOptions' Inputs and Outputs can stream, by name.
func HostIO(p *dagrun.StreamPlan) (inputs, outputs []int) {
	for i, b := range p.Buffers {
		if b.Where != dag.WhereHostPinned {
			continue
		}
		switch b.Role {
		case dag.RoleInput:
			inputs = append(inputs, i)
		case dag.RoleOutput:
			outputs = append(outputs, i)
		}
	}
	return inputs, outputs
}

// ReadFrames reads the frames in dir, in name order, for an input buffer of
// n bytes and shape (nil when unknown): raw files (.raw, .bin, .rgba) of
// exactly n bytes, or images (.png, .jpg, .jpeg, .gif) for a buffer of
// shape [H, W, 4] (RGBA8), centred on a W×H black canvas (see
// frames.ReadFrames). Errors name the file that is the wrong size or does
// not decode; images for another shape and a dir without frames are errors.
func ReadFrames(dir string, n int64, shape []int64) ([][]byte, error) {
	return frames.ReadFrames(dir, n, shape)
}

// WriteTimelinePNG draws tl as a PNG of widthPx × heightPx pixels (0 picks
// a size) and writes it to path atomically (tracepng.Write, which states
// the picture and its errors). The drawing lives in package tracepng, so
// that only the command line, not the root package, links gonum/plot.
func WriteTimelinePNG(tl *Timeline, path string, widthPx, heightPx int) error {
	return tracepng.Write(tl, path, widthPx, heightPx)
}

// Types the command line names that an embedding program reaches through
// the root package's fields and errors without naming them.
type (
	// Timeline is dagrun.RunResult.Timeline's type (trace.Timeline).
	Timeline = trace.Timeline
	// PeriodError is dagrun.CheckRun's refusal of several iterations of a
	// plan whose iterations repeat only after more than 1024
	// (executor.PeriodError).
	PeriodError = executor.PeriodError
	// ImportOptions control ImportGraph (dag.ImportOptions).
	ImportOptions = dag.ImportOptions
)
