package memory_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/specs/memory"
	"github.com/dagrun/dagrun/verify"
)

const words = 1 << 20 // 4 MiB of float32

func fill(v float32) []byte {
	b := make([]byte, 4*words)
	for i := 0; i < len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
	}
	return b
}

// checksumOf is the checksum built-in's two words over data.
func checksumOf(data []byte) []byte {
	var sum, x uint32
	for i := 0; i+4 <= len(data); i += 4 {
		w := binary.LittleEndian.Uint32(data[i:])
		sum += w
		x ^= dag.Mix32(w ^ (uint32(i/4) * 0x9E3779B9))
	}
	out := make([]byte, 8)
	binary.LittleEndian.PutUint32(out, sum)
	binary.LittleEndian.PutUint32(out[4:], x)
	return out
}

func scaled(seed int64, a float32) []byte {
	in := executor.RandomBytes(seed, 4*words)
	out := make([]byte, len(in))
	for i := 0; i < len(in); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(in[i:]))
		binary.LittleEndian.PutUint32(out[i:], math.Float32bits(float32(a*v)))
	}
	return out
}

// Want is each pattern's right output, by buffer.
func want() []map[string]string {
	c := executor.Checksum
	return []map[string]string{
		{"dst": c(fill(1)), "fresh_sum": c(checksumOf(fill(0)))},
		{"out0": c(scaled(1, 2)), "out1": c(scaled(2, 2))},
		{"in0": c(fill(1)), "in1": c(fill(2))},
		{"result": c(checksumOf(fill(3)))},
	}
}

func planFile(t *testing.T, file string) *plan.Plan {
	t.Helper()
	s, err := dag.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Build(s, planner.Options{Check: s.Sync != dag.SyncManual && s.Options.Arena != dag.ArenaStreamOrder})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func outputs(res *executor.Result) map[string]string {
	m := map[string]string{}
	if res != nil {
		for _, o := range res.Outputs {
			m[o.Name] = o.Checksum
		}
	}
	return m
}

// TestPlanned: each planned spec verifies and gives its right output on the
// simulator under several seeds, with no race, with the arena and with
// dynamic allocation.
func TestPlanned(t *testing.T) {
	wants := want()
	for i, pat := range memory.Patterns {
		p := planFile(t, pat[0])
		if err := verify.Verify(p); err != nil {
			t.Fatalf("%s: %v", pat[0], err)
		}
		for _, alloc := range []string{executor.AllocStatic, executor.AllocDynamic} {
			for seed := int64(1); seed <= 3; seed++ {
				res, err := executor.Run(context.Background(), p, sim.New(sim.Options{Seed: seed}), executor.Options{Alloc: alloc})
				if err != nil {
					t.Fatalf("%s (%s, seed %d): %v", pat[0], alloc, seed, err)
				}
				got := outputs(res)
				for name, w := range wants[i] {
					if got[name] != w {
						t.Errorf("%s (%s, seed %d): %s = %s, want %s", pat[0], alloc, seed, name, got[name], w)
					}
				}
			}
		}
	}
}

// TestRacy: each racy spec fails Verify and the simulator's detector.
func TestRacy(t *testing.T) {
	for _, pat := range memory.Patterns {
		p := planFile(t, pat[1])
		var re *verify.RaceError
		if err := verify.Verify(p); !errors.As(err, &re) {
			t.Errorf("%s: Verify %v, want races", pat[1], err)
		} else {
			t.Logf("%s: Verify: %v", pat[1], re.Races[0])
		}
		for seed := int64(1); seed <= 3; seed++ {
			_, err := executor.Run(context.Background(), p, sim.New(sim.Options{Seed: seed}), executor.Options{})
			var de *executor.RaceError
			if !errors.As(err, &de) {
				t.Errorf("%s (seed %d): Run %v, want the detector's race report", pat[1], seed, err)
			} else if seed == 1 {
				t.Logf("%s: detector: %v", pat[1], de.Races[0])
			}
		}
	}
}

// TestPlannedVariantsDiffer: the planned and racy variants of a and b
// differ only in the arena rule, which in the racy one shares bytes.
func TestArenaRuleIsTheDifference(t *testing.T) {
	for _, pat := range memory.Patterns[:2] {
		good, bad := planFile(t, pat[0]), planFile(t, pat[1])
		for _, p := range []*plan.Plan{good, bad} {
			for i := range p.Stages {
				p.Stages[i].Source = "" // the files differ in their comments
			}
		}
		if fmt.Sprint(good.Stages) != fmt.Sprint(bad.Stages) {
			t.Errorf("%s and %s: different stages", pat[0], pat[1])
		}
		if bad.Stats.ArenaBytes >= good.Stats.ArenaBytes {
			t.Errorf("%s: racy arena %d bytes, planned %d: the racy one should share", pat[0], bad.Stats.ArenaBytes, good.Stats.ArenaBytes)
		}
	}
}
