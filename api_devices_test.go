package dagrun_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/report"
)

// TestRunDevicesOnePerPlanDevice: RunOptions.Devices gives one GPU ordinal
// per plan device; a list of another length, or a negative ordinal, is
// rejected by CheckRun and Run before a backend is opened.
func TestRunDevicesOnePerPlanDevice(t *testing.T) {
	p := mustPlan(t, "specs/seed/three-stage.yaml", dagrun.PlanOptions{})
	for _, c := range []struct {
		devices []int
		want    string
	}{
		{[]int{0}, ""},
		{[]int{3}, ""},
		{[]int{0, 0}, "name 2 GPU ordinal(s), but the plan runs on 1 device(s)"},
		{[]int{-1}, "plan device 0 on ordinal -1"},
	} {
		o := dagrun.RunOptions{Backend: dagrun.BackendCUDA, Devices: c.devices}
		err := dagrun.CheckRun(p, o)
		if c.want == "" {
			if err != nil {
				t.Errorf("Devices %v: %v", c.devices, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckRun, Devices %v: error %v, want %q", c.devices, err, c.want)
		}
		if _, err := dagrun.Run(context.Background(), p, o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run, Devices %v: error %v, want %q", c.devices, err, c.want)
		}
	}
}

// TestRunTimelineOneDevice: a timeline on cuda is refused up front for a
// plan of several devices (its GPU timestamps are one device's); on the
// simulator it is allowed.
func TestRunTimelineOneDevice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "peer.yaml")
	if err := os.WriteFile(path, []byte(`version: 1
devices: 2
buffers:
  - {name: a, bytes: 4096, device: 0}
  - {name: b, bytes: 4096, device: 1}
  - {name: out, bytes: 8, role: output, device: 1}
stages:
  - {name: produce, kernel: fill, args: {value: 1.0}, writes: [a]}
  - {name: send, kernel: copy, reads: [a], writes: [b]}
  - {name: use, kernel: checksum, reads: [b], writes: [out]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := mustPlan(t, path, dagrun.PlanOptions{})
	err := dagrun.CheckRun(p, dagrun.RunOptions{Backend: dagrun.BackendCUDA, Timeline: true})
	if err == nil || !strings.Contains(err.Error(), "the plan runs on 2 devices") {
		t.Errorf("cuda with a timeline: %v, want refused", err)
	}
	if err := dagrun.CheckRun(p, dagrun.RunOptions{Backend: dagrun.BackendSim, Timeline: true}); err != nil {
		t.Errorf("sim with a timeline: %v", err)
	}
	if err := dagrun.CheckRun(p, dagrun.RunOptions{Backend: dagrun.BackendCUDA}); err != nil {
		t.Errorf("cuda without a timeline: %v", err)
	}
}

// TestRunDevicesNotOnSim: RunOptions.Devices on the simulator (asked for,
// or picked by auto where cuda is not there) is refused before the run,
// saying why, rather than dropped.
func TestRunDevicesNotOnSim(t *testing.T) {
	p := mustPlan(t, "specs/multigpu/data-parallel.yaml", dagrun.PlanOptions{})
	backends := []dagrun.Backend{dagrun.BackendSim}
	if name, _ := dagrun.AutoBackend(); name == dagrun.BackendSim {
		backends = append(backends, dagrun.BackendAuto, "")
	}
	for _, be := range backends {
		o := dagrun.RunOptions{Backend: be, Devices: []int{0, 0}}
		if err := dagrun.CheckRun(p, o); err == nil || !strings.Contains(err.Error(), "the run is on the simulator") {
			t.Errorf("backend %q with devices: CheckRun %v, want refused", be, err)
		}
		if _, err := dagrun.Run(context.Background(), p, o); err == nil || !strings.Contains(err.Error(), "the run is on the simulator") {
			t.Errorf("backend %q with devices: Run %v, want refused", be, err)
		}
	}
}

// TestRunTimelineCollective: the simulator's timeline of a plan with a
// collective has a span for every launch, the ranks included, and its
// lanes name their devices.
func TestRunTimelineCollective(t *testing.T) {
	p := mustPlan(t, "specs/multigpu/data-parallel.yaml", dagrun.PlanOptions{})
	res, err := dagrun.Run(context.Background(), p, dagrun.RunOptions{Backend: dagrun.BackendSim, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range res.Timeline.Spans {
		seen[s.Name] = true
	}
	for _, st := range p.Stages {
		if !seen[st.Name] {
			t.Errorf("stage %s has no span in the timeline (%d spans)", st.Name, len(res.Timeline.Spans))
		}
	}
	for i, name := range res.Timeline.Streams {
		if want := fmt.Sprintf("· device %d", p.Streams[i].Device); !strings.Contains(name, want) {
			t.Errorf("lane %d is %q, want it to say %q", i, name, want)
		}
	}
}

// TestPinNotesPerDevice: the single strategy and max_streams apply per
// device, so a plan of one stream per device has no "pins win" note; a
// device whose pinned streams exceed the cap has one, naming it.
func TestPinNotesPerDevice(t *testing.T) {
	s, err := dagrun.Load("specs/multigpu/data-parallel-4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []dagrun.PlanOptions{{Strategy: dagrun.StrategySingle}, {MaxStreams: 1}} {
		p := mustPlan(t, "specs/multigpu/data-parallel-4.yaml", o)
		if n := report.PinNotes(s, o, p); len(n) != 0 {
			t.Errorf("%+v on %d streams of 4 devices: notes %q, want none", o, p.Stats.Streams, n)
		}
	}
	path := filepath.Join(t.TempDir(), "pinned.yaml")
	if err := os.WriteFile(path, []byte(`version: 1
devices: 2
streams:
  - {name: a, device: 1}
  - {name: b, device: 1}
  - {name: c, device: 1}
stages:
  - {name: x, kernel: spin, duration_us: 5, stream: a}
  - {name: y, kernel: spin, duration_us: 5, stream: b}
  - {name: z, kernel: spin, duration_us: 5, stream: c}
  - {name: w, kernel: spin, duration_us: 5, device: 0}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	pinned, err := dagrun.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	o := dagrun.PlanOptions{MaxStreams: 2}
	p := mustPlan(t, path, o)
	if n := report.PinNotes(pinned, o, p); len(n) != 1 || !strings.Contains(n[0], "--max-streams 2, but the spec pins stages to 3 streams on device 1") {
		t.Errorf("3 pinned streams on device 1, max 2: notes %q", n)
	}
}
