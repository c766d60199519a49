package cmdline

import (
	"fmt"
	"github.com/dagrun/dagrun"

	"github.com/dagrun/dagrun/dag"
)

// ImportGraph converts the operator graph in the JSON file at path (the
// format of scripts/export_graph.py: torch.fx / torch.export nodes with
// tensors, shapes and duration_us) into a spec: each node becomes a mix
// stage that reads and writes its tensors and spins for the node's
// duration_us (µs); in-place nodes read and write one buffer. summary is one
// line about the graph (node and op counts) for a header comment. Errors,
// each naming path: the file cannot be read or is not JSON of that form;
// duplicate or unknown ids, non-positive sizes or sizes that are not a
// multiple of 4 bytes, negative durations, writes to input or param
// tensors; and a graph that does not make a spec Load accepts (ids that
// are not valid names, a node writing a tensor twice), with the loader's
// errors (dag.Validate). summary is one line, whatever the graph's text.
func ImportGraph(path string, o dag.ImportOptions) (s *dagrun.Spec, summary string, err error) {
	g, err := dag.ReadGraphFile(path)
	if err != nil {
		return nil, "", err
	}
	s, err = dag.ImportGraph(g, o) // errors at the graph's path:line:col
	if err != nil {
		return nil, "", err
	}
	// What the caller writes must load: check the spec as Load would.
	if _, err := dag.Validate(s); err != nil {
		return nil, "", fmt.Errorf("%s: the graph does not make a valid spec (rename or fix the ids and tensors named below):\n%w", path, g.Locate(s, err))
	}
	return s, dag.GraphSummary(g), nil
}
