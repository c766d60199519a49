package dagrun

import (
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/frames"
)

// HostIO returns the indices into p.Buffers of p's host_pinned role=input
// and role=output buffers, in plan order: the buffers that
// RunOptions.Inputs and RunOptions.Outputs can stream, by name.
func HostIO(p *StreamPlan) (inputs, outputs []int) {
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
