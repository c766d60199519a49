package dagrun_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/bench"
)

// bench memory's simulator runs, of a planned spec, are refused as Run
// refuses them: before any stream is made, naming the vector clocks.
func TestBenchMemorySimClocksBounded(t *testing.T) {
	defer dagrun.SetMaxSimClockBytes(1)()
	if m, err := bench.Memory(context.Background(), dagrun.StreamsSpec(t, 40, false), true); m != nil || err == nil || !strings.Contains(err.Error(), "vector clocks") {
		t.Errorf("bench memory with the simulator: %v, %v", m, err)
	}
}
