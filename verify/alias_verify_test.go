package verify

import (
	"errors"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// TestVerifyLaunchAliases: a launch whose accesses to different buffers
// share arena bytes, one of them written, is refused by Verify whatever
// the order of the plan; reads sharing bytes, and disjoint offsets, pass.
func TestVerifyLaunchAliases(t *testing.T) {
	mkPlan := func(offs map[string]int64, io ...verifyIO) *plan.Plan {
		b := newVerifyB(1).stage("cp", 0, io...)
		for _, name := range []string{"t1", "t2", "t3"} {
			buf := plan.Buffer{Name: name, Bytes: 4096, Where: dag.WhereDevice, Role: dag.RoleTemp}
			if off, ok := offs[name]; ok {
				buf.ArenaOffset = &off
				b.p.Stats.ArenaBytes = max(b.p.Stats.ArenaBytes, off+buf.Bytes)
			}
			b.p.Buffers = append(b.p.Buffers, buf)
		}
		return b.p
	}
	for _, c := range []struct {
		name string
		offs map[string]int64
		io   []verifyIO
		want string // "" passes
	}{
		{"copy into its own source", map[string]int64{"t1": 0, "t2": 256}, []verifyIO{rd("t1"), wr("t2")}, "stages[0].writes[0]: stage cp writes t2[0:4096] and reads t1[0:4096], which share arena bytes [256:4096]"},
		{"read after the write in declaration", map[string]int64{"t1": 3840, "t2": 0}, []verifyIO{rd("t1"), wr("t2")}, "stages[0].reads[0]: stage cp reads t1[0:4096] and writes t2[0:4096], which share arena bytes [3840:4096]"},
		{"two writes", map[string]int64{"t1": 0, "t2": 0}, []verifyIO{wr("t1[0:256]"), wr("t2[128:512]")}, "share arena bytes [128:256]"},
		{"third buffer", map[string]int64{"t1": 0, "t2": 0, "t3": 3840}, []verifyIO{rd("t1"), rd("t2"), wr("t3[0:512]")}, "stage cp writes t3[0:512]"},
		{"disjoint", map[string]int64{"t1": 0, "t2": 4096}, []verifyIO{rd("t1"), wr("t2")}, ""},
		{"reads share bytes", map[string]int64{"t1": 0, "t2": 0}, []verifyIO{rd("t1"), rd("t2"), wr("t3")}, ""},
		{"in place", map[string]int64{"t1": 0}, []verifyIO{rd("t1"), wr("t1")}, ""},
		{"not in the arena", nil, []verifyIO{rd("t1"), wr("t2")}, ""},
	} {
		err := Verify(mkPlan(c.offs, c.io...))
		var pe *plan.PlanError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: Verify = %v, want nil", c.name, err)
		case c.want != "" && (!errors.As(err, &pe) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: Verify = %v, want a *PlanError saying %q", c.name, err, c.want)
		}
	}
}
