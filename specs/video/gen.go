//go:build ignore

// gen writes the demo's generated files: the weights (weights/*.bin, from
// GenerateWeights), the committed frames (frames/*.rgba, from Go's image test
// data through Frame) and cameras.yaml (Spec(2, 2)). Run it with
// `go generate` in specs/video; TestGenerated checks that the committed
// files are its output.
package main

import (
	"bytes"
	"log"
	"os"
	"path/filepath"

	"github.com/dagrun/dagrun/specs/video"
)

func main() {
	files, err := video.Generated()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range files {
		if old, err := os.ReadFile(f.Path); err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(f.Path, f.Data, 0o644); err != nil {
			log.Fatal(err)
		}
		log.Printf("wrote %s (%d bytes)", f.Path, len(f.Data))
	}
}
