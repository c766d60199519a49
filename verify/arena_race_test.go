package verify_test

import (
	"errors"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// An arena race names the bytes the two buffers share, in the first
// stage's buffer: the intersection of their arena ranges.
func TestArenaRaceBytes(t *testing.T) {
	s := spec(stage("a", writes("x"), on("p")), stage("b", writes("y"), on("q")))
	for _, c := range []struct {
		x, y      int64 // arena offsets
		off, size int64 // the race's bytes of x
	}{
		{0, 512, 512, 512}, // buffers of 1,024 bytes
		{512, 0, 0, 512},
		{0, 768, 768, 256},
		{0, 0, 0, 1024},
		{0, 1024, 0, 0}, // adjacent: no race
	} {
		p := build(t, s, planner.Options{Arena: dag.ArenaOff})
		for i := range p.Buffers {
			off := map[string]int64{"x": c.x, "y": c.y}[p.Buffers[i].Name]
			p.Buffers[i].ArenaOffset = &off
			p.Stats.ArenaBytes = max(p.Stats.ArenaBytes, off+p.Buffers[i].Bytes)
		}
		var re *verify.RaceError
		err := verify.Verify(p)
		if c.size == 0 {
			if err != nil {
				t.Errorf("x at %d, y at %d: %v, want no race", c.x, c.y, err)
			}
			continue
		}
		if !errors.As(err, &re) || len(re.Races) != 1 {
			t.Fatalf("x at %d, y at %d: %v, want one arena race", c.x, c.y, err)
		}
		if r := re.Races[0]; r.Buffer != "x" || r.Shared != "y" || r.Offset != c.off || r.Bytes != c.size {
			t.Errorf("x at %d, y at %d: race on %s[%d:%d] shared with %s, want x[%d:%d] shared with y", c.x, c.y, r.Buffer, r.Offset, r.Offset+r.Bytes, r.Shared, c.off, c.off+c.size)
		}
	}
}
