package dagrun_test

import (
	"context"
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
