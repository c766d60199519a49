package dagrun_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun"
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
		o := dagrun.RunOptions{Backend: dagrun.BackendSim, Devices: c.devices}
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
