// Package spectest builds small specs for tests:
// Spec(Stage("a", Writes("x")), Stage("b", Reads("x"))). Buffers are
// declared implicitly (1 KiB device temps) on first mention.
package spectest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// StageOpt sets a field of a stage.
type StageOpt func(*dag.StageSpec)

// Spec is an automatically synchronized spec of stages, declaring each
// buffer they name (1 KiB, device, temp) in order of first mention.
func Spec(stages ...dag.StageSpec) *dag.Spec {
	s := &dag.Spec{Version: 1, Name: "test", Sync: dag.SyncAuto}
	seen := map[string]bool{}
	for _, st := range stages {
		for _, l := range [][]dag.Access{st.Reads, st.Writes} {
			for _, a := range l {
				if !seen[a.Buffer] {
					seen[a.Buffer] = true
					s.Buffers = append(s.Buffers, dag.BufferSpec{Name: a.Buffer, Bytes: 1024, Where: dag.WhereDevice, Role: dag.RoleTemp})
				}
			}
		}
	}
	s.Stages = stages
	return s
}

// Manual makes s manually synchronized.
func Manual(s *dag.Spec) *dag.Spec { s.Sync = dag.SyncManual; return s }

// Stage is a spin stage with opts applied.
func Stage(name string, opts ...StageOpt) dag.StageSpec {
	st := dag.StageSpec{Name: name, Kernel: dag.BuiltinSpin}
	for _, o := range opts {
		o(&st)
	}
	return st
}

// Whole is an access of all 1024 bytes of buf.
func Whole(buf string) dag.Access { return dag.Access{Buffer: buf, Bytes: 1024} }

// Reads adds whole reads of bufs.
func Reads(bufs ...string) StageOpt {
	return func(s *dag.StageSpec) {
		for _, b := range bufs {
			s.Reads = append(s.Reads, Whole(b))
		}
	}
}

// Writes adds whole writes of bufs.
func Writes(bufs ...string) StageOpt {
	return func(s *dag.StageSpec) {
		for _, b := range bufs {
			s.Writes = append(s.Writes, Whole(b))
		}
	}
}

// ReadsAt adds a read of bytes [off, off+n) of buf.
func ReadsAt(buf string, off, n int64) StageOpt {
	return func(s *dag.StageSpec) { s.Reads = append(s.Reads, dag.Access{Buffer: buf, Offset: off, Bytes: n}) }
}

// WritesAt adds a write of bytes [off, off+n) of buf.
func WritesAt(buf string, off, n int64) StageOpt {
	return func(s *dag.StageSpec) { s.Writes = append(s.Writes, dag.Access{Buffer: buf, Offset: off, Bytes: n}) }
}

// After adds after: edges to the named stages.
func After(names ...string) StageOpt {
	return func(s *dag.StageSpec) { s.After = append(s.After, names...) }
}

// On pins the stage to stream.
func On(stream string) StageOpt { return func(s *dag.StageSpec) { s.Stream = stream } }

// Waits adds waits: on the named stages (manual specs).
func Waits(names ...string) StageOpt {
	return func(s *dag.StageSpec) { s.Waits = append(s.Waits, names...) }
}

// Kernel sets the stage's kernel.
func Kernel(k string) StageOpt { return func(s *dag.StageSpec) { s.Kernel = k } }

// Dur sets the stage's duration, µs.
func Dur(us float64) StageOpt { return func(s *dag.StageSpec) { s.DurationUS = us } }

// Outputs makes the named buffers of s outputs.
func Outputs(s *dag.Spec, bufs ...string) *dag.Spec {
	for _, b := range bufs {
		s.Buffer(b).Role = dag.RoleOutput
	}
	return s
}

// WithCopies sets copies of the named buffers.
func WithCopies(s *dag.Spec, k int, bufs ...string) *dag.Spec {
	for _, b := range bufs {
		s.Buffer(b).Copies = k
	}
	return s
}

// IOPipe is the video service's shape: a copy stream uploads the frame, a
// compute stream reads it, a copy stream downloads the result.
func IOPipe() *dag.Spec {
	return Spec(
		Stage("up", Writes("frame"), On("h2d")),
		Stage("pre", Reads("frame"), Writes("x"), On("comp")),
		Stage("net", Reads("x"), Writes("out"), On("comp")),
		Stage("down", Reads("out"), Writes("res"), On("d2h")),
	)
}

// Load parses an inline spec the way the CLI reads a file.
func Load(t testing.TB, src string) *dag.Spec {
	t.Helper()
	s, err := dag.Load([]byte(src), "test.yaml", ".")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// GraphsDir is specs/models/graphs from a package directory of the module.
const GraphsDir = "../specs/models/graphs"

// LoadGraph imports one of specs/models/graphs (skipping the test if absent).
func LoadGraph(t testing.TB, model string) *dag.Spec {
	t.Helper()
	path := filepath.Join(GraphsDir, model+".json")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s: %v", path, err)
	}
	g, err := dag.ReadGraphFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dag.ImportGraph(g, dag.ImportOptions{})
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", path, err))
	}
	return s
}

// DropOp returns a copy of p without op j of stream s.
func DropOp(p *plan.Plan, s, j int) *plan.Plan {
	return p.WithoutOps(func(s2, k int, _ plan.Op) bool { return s2 == s && k == j })
}
