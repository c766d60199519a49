package dagrun_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/cmdline"
)

// goSpec is a valid spec built in Go; each case of TestPlanValidatesGoSpecs
// breaks it one way.
func goSpec() *dag.Spec {
	return &dag.Spec{Version: 1, Name: "go", Buffers: []dag.BufferSpec{
		{Name: "x", Bytes: 4096, Role: dag.RoleOutput},
	}, Stages: []dag.StageSpec{
		{Name: "a", Kernel: dag.BuiltinFill, Args: map[string]any{"value": 1.0}, Writes: []dag.Access{{Buffer: "x", Bytes: 4096}}},
		{Name: "b", Kernel: dag.BuiltinScale, Args: map[string]any{"a": 2.0}, Reads: []dag.Access{{Buffer: "x"}}, Writes: []dag.Access{{Buffer: "x"}}},
	}}
}

// Plan checks a spec built in Go as Load checks a file: a nil plan and an
// ErrorList naming the stage or buffer and field, never a position in a
// file the user has not seen, nor the planner's internal names (a@0).
func TestPlanValidatesGoSpecs(t *testing.T) {
	if _, err := dagrun.Plan(goSpec(), dagrun.PlanOptions{}); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	cases := []struct {
		name  string
		edit  func(s *dag.Spec)
		wants []string
	}{
		{"unknown buffer", func(s *dag.Spec) { s.Stages[1].Reads[0].Buffer = "nope" }, []string{`stages[1].reads: stage b: reads unknown buffer "nope"`}},
		{"out of range", func(s *dag.Spec) { s.Stages[1].Writes[0].Offset = 8192 }, []string{"stages[1].writes: stage b: writes offset 8192 is past the end of buffer x (4096 bytes)"}},
		{"unknown kernel", func(s *dag.Spec) { s.Stages[0].Kernel = "nokernel" }, []string{`stages[0].kernel: stage a: unknown kernel "nokernel"`}},
		{"fill without value", func(s *dag.Spec) { s.Stages[0].Args = nil }, []string{"stages[0]: stage a: built-in fill needs exactly one of the arguments value, bits"}},
		{"zero buffer", func(s *dag.Spec) { s.Buffers[0].Bytes = 0 }, []string{"buffers[0].bytes: buffer x: bytes must be ≥ 1, got 0"}},
		{"dtype and bytes disagree", func(s *dag.Spec) { s.Buffers[0].DType, s.Buffers[0].Shape = "f32", []int64{2} }, []string{"buffers[0].bytes: buffer x: bytes 4096 disagrees with dtype f32 × shape [2] = 8 bytes"}},
		{"duplicate stage", func(s *dag.Spec) { s.Stages[1].Name = "a" }, []string{`stages[1].name: stage "a" declared twice (first at stages[0])`}},
		{"after unknown", func(s *dag.Spec) { s.Stages[1].After = []string{"zzz"} }, []string{`stages[1].after: stage b: after names unknown stage "zzz"`}},
		{"manual without streams", func(s *dag.Spec) { s.Sync = dag.SyncManual }, []string{"stages[0]: stage a: sync: manual needs a stream", "stages[1]: stage b: sync: manual needs a stream"}},
		{"negative lag", func(s *dag.Spec) {
			s.Sync = dag.SyncManual
			s.Stages[0].Stream, s.Stages[1].Stream = "s0", "s1"
			s.Stages[1].WaitFor = []dag.WaitSpec{{Stage: "a", Lag: -1}}
		}, []string{"stages[1].waits: stage b: waits: lag must be in [0, 65536], got -1"}},
		{"unknown event", func(s *dag.Spec) {
			s.Sync = dag.SyncManual
			s.Stages[0].Stream, s.Stages[1].Stream = "s0", "s1"
			s.Stages[1].WaitFor = []dag.WaitSpec{{Event: "nope"}}
		}, []string{`stages[1].waits: stage b: waits names event "nope", which no stage records`}},
		{"bad sync", func(s *dag.Spec) { s.Sync = "bogus" }, []string{`sync: sync: unknown value "bogus"`}},
		{"version 7", func(s *dag.Spec) { s.Version = 7 }, []string{"version: version 7 is not supported"}},
		{"no stages", func(s *dag.Spec) { s.Stages = nil }, []string{"stages: stages is empty"}},
		{"bad argument type", func(s *dag.Spec) { s.Stages[0].Args = map[string]any{"value": []int{1}} }, []string{"stages[0].args: stage a: argument value: value [1] of type []int"}},
		{"all at once", func(s *dag.Spec) {
			s.Buffers = append(s.Buffers, dag.BufferSpec{Name: "y", Bytes: 64})
			s.Stages[1].Reads[0].Buffer = "nope"
			s.Stages = append(s.Stages, dag.StageSpec{Name: "c", Kernel: dag.BuiltinMix, Writes: []dag.Access{{Buffer: "y", Offset: 2, Bytes: 8}}},
				dag.StageSpec{Name: "d", Kernel: dag.BuiltinScale, Reads: []dag.Access{{Buffer: "y"}}, Writes: []dag.Access{{Buffer: "y"}}})
		}, []string{`stage b: reads unknown buffer "nope"`, "stage c: built-in mix needs 4-byte aligned accesses", "stage d: built-in scale needs the argument a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := goSpec()
			c.edit(s)
			p, err := dagrun.Plan(s, dagrun.PlanOptions{})
			if p != nil {
				t.Errorf("a plan came back with error %v", err)
			}
			var list dag.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("got %T %v, want a dag.ErrorList", err, err)
			}
			if len(list) != len(c.wants) {
				t.Errorf("got %d errors, want %d:\n%v", len(list), len(c.wants), err)
			}
			text := err.Error()
			for _, w := range c.wants {
				if !strings.Contains(text, w) {
					t.Errorf("error does not contain %q:\n%s", w, text)
				}
			}
			if strings.Contains(text, "@0") || strings.Contains(text, "\x00") || strings.Contains(text, ".yaml") {
				t.Errorf("error leaks internal names or positions:\n%q", text)
			}
		})
	}
}

// Validation leaves the caller's spec alone and fills in the defaults of
// the copy it plans: a whole-buffer access has the buffer's size.
func TestPlanGoSpecDefaults(t *testing.T) {
	s := goSpec()
	p, err := dagrun.Plan(s, dagrun.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Stages[1].Reads[0].Bytes != 0 || s.Buffers[0].Where != "" {
		t.Errorf("Plan modified the caller's spec: %+v", s.Stages[1])
	}
	if r := p.Stages[1].Reads[0]; r.Bytes != 4096 || r.Offset != 0 {
		t.Errorf("whole-buffer read planned as %+v", r)
	}
	// A Go-function stage named in Go (Go: true) plans and runs with its binding.
	s.Stages = append(s.Stages, dag.StageSpec{Name: "f", Kernel: "myfunc", Go: true, Reads: []dag.Access{{Buffer: "x"}}})
	p, err = dagrun.Plan(s, dagrun.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	called := false
	_, err = dagrun.Run(context.Background(), p, dagrun.RunOptions{Backend: dagrun.BackendSim,
		Funcs: map[string]func(*dagrun.FuncCall) error{"myfunc": func(*dagrun.FuncCall) error { called = true; return nil }}})
	if err != nil || !called {
		t.Fatalf("run: %v, called %v", err, called)
	}
	if _, err := dagrun.Run(context.Background(), p, dagrun.RunOptions{Backend: dagrun.BackendSim}); !errors.Is(err, executor.ErrUnboundFunc) || !strings.Contains(err.Error(), `stage f runs the Go function "myfunc"`) {
		t.Errorf("run without the binding: %v", err)
	}
	// Without Go: true the name is an unknown kernel, with a hint in Go's
	// terms (the spec was built in Go).
	s.Stages[2].Go = false
	if _, err := dagrun.Plan(s, dagrun.PlanOptions{}); err == nil || !strings.Contains(err.Error(), `unknown kernel "myfunc"`) || !strings.Contains(err.Error(), "StageSpec.Go") || strings.Contains(err.Error(), "{go: name}") {
		t.Errorf("unknown kernel: %v", err)
	}
}

// TestImportGraphErrorsAtNodes: a graph that does not make a valid spec
// (a node id that is no name) is reported at the node's id in the graph
// file (file:line:col), not at the written spec's stages[i].
func TestImportGraphErrorsAtNodes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.json")
	src := "{\"model\": \"m\",\n \"tensors\": [{\"id\": \"x\", \"bytes\": 16, \"kind\": \"input\"},\n  {\"id\": \"a\", \"bytes\": 16, \"kind\": \"activation\"}],\n" +
		" \"nodes\": [{\"id\": \"n\", \"reads\": [\"x\"], \"writes\": [\"a\"]},\n  {\"id\": \"bad name\", \"reads\": [\"a\"], \"writes\": [\"a\"]}]}"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := cmdline.ImportGraph(path, dag.ImportOptions{})
	if want := path + `:5:10: stage name "bad name" contains a space`; err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "stages[1]") {
		t.Errorf("ImportGraph: %v; want %s", err, want)
	}
}
