package planner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/verify"
)

// FuzzBuild: any spec the loader accepts plans without error or panic
// under every strategy, and automatically synchronized plans verify.
// Seeds: the spec.yaml of every golden file.
func FuzzBuild(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.txtar")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		a := parseArchive(string(data))
		f.Add([]byte(a.files[0].data), uint8(0))
	}
	f.Fuzz(func(t *testing.T, yaml []byte, opt uint8) {
		s, err := dag.Load(yaml, "fuzz.yaml", ".")
		if err != nil || len(s.Stages) > 200 {
			return
		}
		o := Options{
			Strategy:    []Strategy{"default", "naive", "round-robin", "single"}[opt%4],
			MaxStreams:  int(opt/4) % 4,
			Check:       true,
			ShuffleSeed: int64(opt / 16),
		}
		p, err := Build(s, o)
		if err != nil {
			return // user errors: cycles through after:, manual specs without streams
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if s.Sync != dag.SyncManual {
			if err := verify.Verify(p); err != nil {
				t.Fatalf("%+v: %v", o, err)
			}
		}
	})
}
