package yamlscan_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/yamlscan"
	"github.com/dagrun/dagrun/synth"
	"gopkg.in/yaml.v3"
)

// BenchmarkScan decodes the same machine-written spec (dag.WriteYAML of
// synth.Layered: n mix stages, n buffers) three ways: yaml.v3 into a
// yaml.Node tree; the scanner building the whole tree; the scanner
// streaming the buffers and stages to a callback, as dag.Load uses it
// (the callback here drops each item). B/op is every byte allocated, not
// the peak; the streaming scan holds a few batches of nodes at a time.
//
//	go test -bench . -benchtime 1x ./internal/yamlscan
func BenchmarkScan(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		var buf bytes.Buffer
		if err := dag.WriteYAML(&buf, synth.Layered(n)); err != nil {
			b.Fatal(err)
		}
		text := buf.String()
		bench := func(name string, decode func() error) {
			b.Run(fmt.Sprintf("stages=%d/%s", n, name), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					if err := decode(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		bench("yaml.v3", func() error {
			var doc yaml.Node
			return yaml.Unmarshal([]byte(text), &doc)
		})
		bench("scan-tree", func() error {
			_, err := yamlscan.Scan(text, yamlscan.Options{})
			return err
		})
		items := 0
		bench("scan-stream", func() error {
			_, err := yamlscan.Scan(text, yamlscan.Options{Stream: []string{"buffers", "kernels", "stages"},
				OnItem: func(key string, list, item *yaml.Node) { items++ }})
			return err
		})
		if items%(2*n) != 0 {
			b.Fatalf("streamed %d items, want a multiple of %d", items, 2*n)
		}
	}
}
