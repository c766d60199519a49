package sim_test

import (
	"testing"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/backendtest"
	"github.com/dagrun/dagrun/executor/sim"
)

func TestConformance(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		backendtest.Run(t, func(t *testing.T) executor.Backend {
			return sim.New(sim.Options{Seed: seed})
		})
	}
}
