package schema_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/schema"
)

// compileSchema compiles Spec with a real JSON Schema validator.
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := schema.Spec()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schema.ID, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(schema.ID)
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	return sch
}

// validateYAML validates YAML text against sch as an editor does: the YAML
// as JSON.
func validateYAML(t *testing.T, sch *jsonschema.Schema, text []byte) error {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(text, &v); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(inst)
}

// The committed docs/spec.schema.json is the generated schema (regenerate:
// go run ./cmd/dagrun schema > docs/spec.schema.json).
func TestSchemaFileCurrent(t *testing.T) {
	want, err := schema.Spec()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/spec.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/spec.schema.json is stale: go run ./cmd/dagrun schema > docs/spec.schema.json")
	}
}

// Every spec in the repository that the loader accepts, the schema
// accepts too.
func TestSchemaAcceptsEverySpec(t *testing.T) {
	sch := compileSchema(t)
	n := 0
	const root = "../.."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") || strings.HasPrefix(path, filepath.Join(root, "python")) {
			return err
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Contains(text, []byte("stages:")) {
			return nil // not a spec
		}
		if _, err := dagrun.Load(path); err != nil {
			return nil // a spec that is meant to be rejected
		}
		n++
		if err := validateYAML(t, sch, text); err != nil {
			t.Errorf("%s: the loader accepts it, the schema does not: %v", path, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 25 {
		t.Fatalf("validated %d specs, want every spec in specs/ (≥ 25)", n)
	}
}

// Mistakes an editor should flag, each rejected by the loader and by the
// schema.
func TestSchemaRejectsMistakes(t *testing.T) {
	sch := compileSchema(t)
	base := "version: 1\nbuffers:\n  - {name: x, bytes: 64}\nstages:\n  - {name: a, kernel: fill, args: {value: 1.0}, writes: [x]}\n"
	for _, tc := range []struct{ name, from, to string }{
		{"unknown top-level field", "version: 1\n", "version: 1\nstreams: 2\n"},
		{"unknown stage field", "writes: [x]}", "writes: [x], wirtes: [x]}"},
		{"version 2", "version: 1", "version: 2"},
		{"bad role", "bytes: 64}", "bytes: 64, role: outptu}"},
		{"negative bytes", "bytes: 64", "bytes: -4"},
		{"name with a space", "name: a,", "name: a b,"},
		{"bad access", "writes: [x]", "writes: [\"x[0-8]\"]"},
		{"stage without a name", "{name: a, kernel", "{kernel"},
		{"bad strategy", "version: 1\n", "version: 1\noptions: {strategy: fastest}\n"},
		{"two inits", "bytes: 64}", "bytes: 64, init: {fill: 1, random: 2}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(base, tc.from) {
				t.Fatalf("base lacks %q", tc.from)
			}
			text := strings.Replace(base, tc.from, tc.to, 1)
			dir := t.TempDir()
			path := filepath.Join(dir, "s.yaml")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := dagrun.Load(path); err == nil {
				t.Fatalf("the loader accepts:\n%s", text)
			}
			if err := validateYAML(t, sch, []byte(text)); err == nil {
				t.Errorf("the schema accepts:\n%s", text)
			}
		})
	}
	if err := validateYAML(t, sch, []byte(base)); err != nil {
		t.Fatalf("the base spec: %v", err)
	}
}
