//go:build ignore

// gen writes nasnet-split.yaml: the nasnetalarge spec of specs/models
// (imported from specs/models/graphs/nasnetalarge.json) on two devices
// with options: {placement: balance}. Run it with `go generate` in
// specs/multigpu; TestGenerated checks that the committed file is its
// output.
package main

import (
	"log"
	"os"

	"github.com/dagrun/dagrun/specs/multigpu"
)

func main() {
	data, err := multigpu.NasnetSplit("../models/nasnetalarge.yaml")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(multigpu.NasnetSplitFile, data, 0o644); err != nil {
		log.Fatal(err)
	}
}
