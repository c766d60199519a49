package planner

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dagrun/dagrun/dag"
)

// Test builders: spec(stage("a", writes("x")), stage("b", reads("x"))).
// Buffers are declared implicitly (1 KiB each) on first mention.

type stageOpt func(*dag.StageSpec)

func spec(stages ...dag.StageSpec) *dag.Spec {
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

func manual(s *dag.Spec) *dag.Spec { s.Sync = dag.SyncManual; return s }

func stage(name string, opts ...stageOpt) dag.StageSpec {
	st := dag.StageSpec{Name: name, Kernel: dag.BuiltinSpin}
	for _, o := range opts {
		o(&st)
	}
	return st
}

func whole(buf string) dag.Access { return dag.Access{Buffer: buf, Bytes: 1024} }

func reads(bufs ...string) stageOpt {
	return func(s *dag.StageSpec) {
		for _, b := range bufs {
			s.Reads = append(s.Reads, whole(b))
		}
	}
}

func writes(bufs ...string) stageOpt {
	return func(s *dag.StageSpec) {
		for _, b := range bufs {
			s.Writes = append(s.Writes, whole(b))
		}
	}
}

// readsAt and writesAt access bytes [off, off+n) of buf.
func readsAt(buf string, off, n int64) stageOpt {
	return func(s *dag.StageSpec) { s.Reads = append(s.Reads, dag.Access{Buffer: buf, Offset: off, Bytes: n}) }
}

func writesAt(buf string, off, n int64) stageOpt {
	return func(s *dag.StageSpec) { s.Writes = append(s.Writes, dag.Access{Buffer: buf, Offset: off, Bytes: n}) }
}

func after(names ...string) stageOpt {
	return func(s *dag.StageSpec) { s.After = append(s.After, names...) }
}

func on(stream string) stageOpt { return func(s *dag.StageSpec) { s.Stream = stream } }

func waits(names ...string) stageOpt {
	return func(s *dag.StageSpec) { s.Waits = append(s.Waits, names...) }
}

func dur(us float64) stageOpt { return func(s *dag.StageSpec) { s.DurationUS = us } }

// build plans s in check mode and fails the test on any error.
func build(t testing.TB, s *dag.Spec, o Options) *Plan {
	t.Helper()
	o.Check = true
	p, err := Build(s, o)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := Verify(p); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return p
}

// streamOf returns the name of the stream stage name runs on.
func streamOf(p *Plan, name string) string {
	for _, s := range p.Stages {
		if s.Name == name {
			return p.Streams[s.Stream].Name
		}
	}
	panic("no stage " + name)
}

const graphsDir = "../specs/models/graphs"

// loadGraph imports one of specs/models/graphs (skipping the test if absent).
func loadGraph(t testing.TB, model string) *dag.Spec {
	t.Helper()
	path := filepath.Join(graphsDir, model+".json")
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
