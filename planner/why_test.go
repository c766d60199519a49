package planner

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// A wait's reason names the hazard kind and the overlapping bytes.
func TestWaitReasonsKinds(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b stageOpt // stage a on stream s0, stage b on s1
		want plan.Hazard
	}{
		{"RAW", writesAt("x", 0, 64), readsAt("x", 32, 64), plan.Hazard{Hazard: contract.Hazard{Kind: contract.RAW, Buffer: "x", Offset: 32, Bytes: 32}, Stage: "a"}},
		{"WAR", readsAt("x", 0, 64), writesAt("x", 16, 8), plan.Hazard{Hazard: contract.Hazard{Kind: contract.WAR, Buffer: "x", Offset: 16, Bytes: 8}, Stage: "a"}},
		{"WAW", writesAt("x", 8, 64), writesAt("x", 0, 16), plan.Hazard{Hazard: contract.Hazard{Kind: contract.WAW, Buffer: "x", Offset: 8, Bytes: 8}, Stage: "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec(stage("a", tc.a, on("s0")), stage("b", tc.b, on("s1")))
			s.Options.Arena = dag.ArenaOff
			p, err := Build(s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []*plan.WaitReason
			for si, ops := range p.WaitReasons() {
				for j, r := range ops {
					if r != nil && p.Streams[si].Ops[j].Lag == 0 {
						got = append(got, r)
					}
				}
			}
			if len(got) != 1 || got[0].From != "a" || got[0].To != "b" || !slices.Equal(got[0].Hazards, []plan.Hazard{tc.want}) {
				t.Fatalf("reasons %+v, want one a → b with %+v", got, tc.want)
			}
		})
	}
}

// Every planned wait of this iteration on the shipped specs names exactly
// the hazard kinds and buffers of the hazard edge it orders (the dag
// package's hazard analysis is the oracle), with ranges covering the
// edge's bytes.
func TestWaitReasonsMatchHazardEdges(t *testing.T) {
	files, _ := filepath.Glob("../specs/*/*.yaml")
	if len(files) < 10 {
		t.Fatalf("found %d specs", len(files))
	}
	checked := 0
	for _, f := range files {
		s, err := dag.LoadFile(f)
		if err != nil || s.Sync == dag.SyncManual {
			continue
		}
		s.Options.Arena = dag.ArenaOff     // arena sharing is a reason the hazard graph does not know
		lowered, _, err := lowerDevices(s) // the stages the plan has: placement's peer copies, collectives' ranks
		if err != nil {
			t.Fatal(err)
		}
		g, err := dag.AllHazards(lowered)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Build(s, Options{})
		if p == nil {
			t.Fatalf("%s: %v", f, err)
		}
		idx := map[string]int{}
		for i, st := range p.Stages {
			idx[st.Name] = i
		}
		for si, ops := range p.WaitReasons() {
			for j, r := range ops {
				if r == nil || p.Streams[si].Ops[j].Lag != 0 {
					continue
				}
				var want []plan.Hazard
				for _, h := range g.EdgeHazards(idx[r.From], idx[r.To]) {
					if h.Kind != dag.After {
						want = append(want, plan.Hazard{Hazard: h})
					}
				}
				if len(want) == 0 {
					continue // an after: edge, or a wait ordering an earlier stage
				}
				checked++
				for _, w := range want {
					if !slices.ContainsFunc(r.Hazards, func(h plan.Hazard) bool {
						return h.Kind == w.Kind && h.Buffer == w.Buffer && h.Offset <= w.Offset && w.Offset+w.Bytes <= h.Offset+h.Bytes
					}) {
						t.Errorf("%s: wait %s → %s: reason %q lacks the edge's %s", f, r.From, r.To, r.String(), w)
					}
				}
				for _, h := range r.Hazards {
					if !slices.ContainsFunc(want, func(w plan.Hazard) bool { return h.Kind == w.Kind && h.Buffer == w.Buffer }) {
						t.Errorf("%s: wait %s → %s: reason %q has %s, which the edge lacks", f, r.From, r.To, r.String(), h)
					}
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d waits, want ≥ 100", checked)
	}
}

// TestWaitReasonRingAndArena: a wait's reason lists a hazard on a ring
// buffer only when the lag is a multiple of its copies (else the two
// iterations use different copies), and a hazard between two buffers only
// when they share arena bytes (named in Shared).
func TestWaitReasonRingAndArena(t *testing.T) {
	off0, off64 := int64(0), int64(64)
	mk := func(copies, copiesY, lag int, arenaY *int64) *plan.Plan {
		return &plan.Plan{
			Version: plan.PlanVersion,
			Stages: []plan.Stage{
				{Name: "a", Writes: []plan.Access{{Buffer: "x", Offset: 0, Bytes: 128}}},
				{Name: "b", Stream: 1, Reads: []plan.Access{{Buffer: "x", Offset: 0, Bytes: 64}}, Writes: []plan.Access{{Buffer: "y", Offset: 0, Bytes: 32}}},
			},
			Buffers: []plan.Buffer{{Name: "x", Bytes: 128, Copies: copies, ArenaOffset: &off0}, {Name: "y", Bytes: 32, Copies: copiesY, ArenaOffset: arenaY}},
			Events:  1,
			Streams: []plan.Stream{
				{ID: 0, Name: "s0", Ops: []plan.Op{{Kind: plan.OpLaunch, Stage: 0}, {Kind: plan.OpRecord, Event: 0}}},
				{ID: 1, Name: "s1", Ops: []plan.Op{{Kind: plan.OpWait, Event: 0, Lag: lag}, {Kind: plan.OpLaunch, Stage: 1}}},
			},
		}
	}
	for _, c := range []struct {
		copies, copiesY, lag int
		arenaY               *int64
		want                 string
	}{
		{1, 0, 0, nil, "RAW x[0:64]"},
		{2, 0, 1, nil, "no shared bytes (ordering only)"},
		{2, 0, 2, nil, "RAW x[0:64]"},
		{1, 0, 0, &off64, "RAW x[0:64], WAW x[64:96] (arena bytes shared with y)"},
		{2, 0, 1, &off64, "no shared bytes (ordering only)"},
		{1, 2, 1, &off64, "RAW x[0:64]"},
		{1, 2, 2, &off64, "RAW x[0:64], WAW x[64:96] (arena bytes shared with y)"},
	} {
		r := mk(c.copies, c.copiesY, c.lag, c.arenaY).WaitReasons()[1][0]
		if r == nil || r.String() != c.want {
			t.Errorf("copies %d and %d, lag %d, y in arena %v: reason %v, want %s", c.copies, c.copiesY, c.lag, c.arenaY != nil, r, c.want)
		}
	}
}
