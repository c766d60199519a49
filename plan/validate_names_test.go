package plan_test

import (
	"strings"
	"testing"

	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
)

// Validate refuses a plan naming a buffer or a stage twice, or giving a
// buffer two lifetimes, whatever else is wrong with the second.
func TestValidateNamesTwice(t *testing.T) {
	base := func() *plan.Plan {
		p := build(t, spec(stage("a", writes("x")), stage("b", reads("x"), writes("y"))), planner.Options{})
		p.Iteration = nil
		return p
	}
	if err := base().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(p *plan.Plan)
		want string
	}{
		{"buffer", func(p *plan.Plan) { p.Buffers[1].Name = p.Buffers[0].Name }, "buffers[1].name: buffer x is declared twice"},
		{"buffer, and its bytes", func(p *plan.Plan) { p.Buffers[1].Name, p.Buffers[1].Bytes = p.Buffers[0].Name, 0 }, "buffers[1].name: buffer x is declared twice"},
		{"stage", func(p *plan.Plan) { p.Stages[1].Name = "a" }, "stages[1].name: stage a is declared twice"},
		{"lifetime", func(p *plan.Plan) { p.Lifetimes = append(p.Lifetimes, p.Lifetimes[0]) }, "a second lifetime of buffer"},
	} {
		p := base()
		tc.edit(p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
