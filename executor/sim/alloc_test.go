package sim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
)

// TestStreamAllocDetector: a use on another stream not ordered after the
// allocation, and a use not ordered before the free, are races with
// "alloc(NAME)" and "free(NAME)"; ordered uses are not.
func TestStreamAllocDetector(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ordered bool
		want    string
	}{{"use after alloc, ordered", true, ""}, {"unordered use after alloc", false, "alloc(tmp)"}, {"unordered free", false, "free(tmp)"}} {
		t.Run(tc.name, func(t *testing.T) {
			b := sim.New(sim.Options{Seed: 1})
			s0, _ := b.NewStream()
			s1, _ := b.NewStream()
			e, _ := b.NewEvent()
			h, err := b.AllocAsync(executor.BufferDesc{Name: "tmp", Bytes: 64, Where: "device"}, s0)
			if err != nil {
				t.Fatal(err)
			}
			fill := &executor.LaunchDesc{Name: "w", Kernel: "fill", Args: map[string]any{"value": 1.0}, Writes: []executor.Arg{{Buffer: h, Name: "tmp", Bytes: 64}}}
			switch {
			case tc.want == "alloc(tmp)":
				b.Launch(s1, fill) // not ordered after the allocation on s0
				b.Record(e, s1)
				b.Wait(s0, e)
				b.FreeAsync(h, s0)
			case tc.want == "free(tmp)":
				b.Record(e, s0)
				b.Wait(s1, e)
				b.Launch(s1, fill)
				b.FreeAsync(h, s0) // not ordered after the use on s1
			default:
				b.Record(e, s0)
				b.Wait(s1, e)
				b.Launch(s1, fill)
				e2, _ := b.NewEvent()
				b.Record(e2, s1)
				b.Wait(s0, e2)
				b.FreeAsync(h, s0)
				defer func() { b.DestroyEvent(e2); b.DestroyStream(s0); b.DestroyStream(s1) }()
			}
			err = b.Synchronize()
			var re *executor.RaceError
			if tc.want == "" {
				if err != nil {
					t.Fatalf("ordered: %v", err)
				}
			} else if !errors.As(err, &re) || !strings.Contains(re.Error(), tc.want) {
				t.Fatalf("Synchronize: %v, want a race with %s", err, tc.want)
			}
			b.DestroyEvent(e)
			if tc.want != "" {
				b.DestroyStream(s0)
				b.DestroyStream(s1)
				if err := b.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
		})
	}
}
