// Package schema generates the JSON Schema of the spec format
// (`dagrun schema`, docs/spec.schema.json) from the loader's own field
// tables.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/dagrun/dagrun/dag"
)

// ID is the $id of the spec JSON Schema, the path of its copy in the
// repository (docs/spec.schema.json).
const ID = "https://github.com/dagrun/dagrun/raw/main/docs/spec.schema.json"

// Spec returns a JSON Schema (draft 2020-12) of the spec format,
// generated from the loader's own field tables (dag.Format): every mapping
// with its fields, required fields, enums, bounds and one-line docs, and
// no unknown fields. Editors use it to validate and complete spec YAML
// (docs/spec.md says how). It checks what a field looks like; what needs
// the whole spec (that a named buffer exists, byte ranges within their
// buffer, kernel arguments) only Load checks. It returns an error for a
// field type the generator does not know, so a new kind of field in the
// loader's tables cannot be left out silently.
func Spec() ([]byte, error) {
	defs := map[string]any{}
	var root map[string]any
	for _, m := range dag.Format() {
		obj, err := schemaOfMapping(m)
		if err != nil {
			return nil, err
		}
		if m.Name == "spec" {
			root = obj
			continue
		}
		defs[m.Name] = obj
	}
	if root == nil {
		return nil, fmt.Errorf("schema: dag.Format has no spec mapping")
	}
	defs["name"] = map[string]any{
		"type":        "string",
		"pattern":     namePattern,
		"description": "a name: no spaces, brackets, commas or control characters (letters, digits and _ . - / : are fine)",
	}
	if err := checkRefs(root, defs); err != nil {
		return nil, err
	}
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = ID
	root["title"] = "dagrun spec"
	root["$defs"] = defs
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// namePattern is the loader's rule for names (dag: nameProblem): no
// control characters or spaces, none of []{},#&*!|>'"%@`.
const namePattern = "^[^\\x00-\\x20\\x7f\\[\\]{},#&*!|>'\"%@`]+$"

// accessPattern is the short form of an access: a name, optionally with a
// byte range [start:end] (either end may be left out).
const accessPattern = "^[^\\x00-\\x20\\x7f\\[\\]{},#&*!|>'\"%@`]+(\\[ *[0-9]* *: *[0-9]* *\\])?$"

func schemaOfMapping(m dag.FormatMapping) (map[string]any, error) {
	props := map[string]any{}
	var required []string
	for _, f := range m.Fields {
		s, err := schemaOfField(m.Name, f)
		if err != nil {
			return nil, err
		}
		if f.Doc != "" {
			s["description"] = f.Doc
		}
		props[f.Key] = s
		if f.Required {
			required = append(required, f.Key)
		}
	}
	obj := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		obj["required"] = required
	}
	if m.OneOf {
		obj["minProperties"], obj["maxProperties"] = 1, 1
	}
	return obj, nil
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/$defs/" + name} }

// bounded adds f's bounds to s.
func bounded(s map[string]any, f dag.FormatField) map[string]any {
	if f.HasMin {
		s["minimum"] = jsonNumber(f.Min)
	}
	if f.HasMax {
		s["maximum"] = jsonNumber(f.Max)
	}
	return s
}

// jsonNumber writes whole numbers as integers (2147483647, not 2.147483647e+09).
func jsonNumber(x float64) any {
	if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
		return int64(x)
	}
	return x
}

// scalarSchema is the schema of a value of type t (not a list).
func scalarSchema(mapping string, f dag.FormatField, t string) (map[string]any, error) {
	switch t {
	case "integer", "number":
		return bounded(map[string]any{"type": t}, f), nil
	case "string", "boolean":
		return map[string]any{"type": t}, nil
	case "name":
		return ref("name"), nil
	case "enum":
		return map[string]any{"enum": f.Enum}, nil
	case "args":
		return map[string]any{"type": "object", "additionalProperties": map[string]any{"type": []string{"number", "string"}}}, nil
	case "access":
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "string", "pattern": accessPattern},
			ref("access"),
		}}, nil
	case "name|mapping":
		return map[string]any{"anyOf": []any{ref("name"), ref(f.Items)}}, nil
	case "integer|auto":
		return map[string]any{"anyOf": []any{bounded(map[string]any{"type": "integer"}, f), map[string]any{"const": "auto"}}}, nil
	case "integer|auto|none":
		return map[string]any{"anyOf": []any{bounded(map[string]any{"type": "integer"}, f), map[string]any{"enum": []any{"auto", "none"}}}}, nil
	case "zeros|mapping":
		return map[string]any{"anyOf": []any{map[string]any{"const": "zeros"}, ref(f.Items)}}, nil
	case "mapping":
		return ref(f.Items), nil
	}
	return nil, fmt.Errorf("schema: %s.%s has type %q, which the schema generator does not know", mapping, f.Key, t)
}

func schemaOfField(mapping string, f dag.FormatField) (map[string]any, error) {
	if f.Type != "list" {
		return scalarSchema(mapping, f, f.Type)
	}
	var items map[string]any
	switch f.Items {
	case "name|mapping":
		// A list of names or mappings named by the list's key in the
		// singular (waits: wait).
		items = map[string]any{"anyOf": []any{ref("name"), ref(strings.TrimSuffix(f.Key, "s"))}}
	case "integer", "number", "string", "name", "enum", "access", "args":
		var err error
		if items, err = scalarSchema(mapping, f, f.Items); err != nil {
			return nil, err
		}
	default: // a mapping's name
		items = ref(f.Items)
	}
	return map[string]any{"type": "array", "items": items}, nil
}

// checkRefs returns an error for a $ref in v to a definition defs lacks.
func checkRefs(v any, defs map[string]any) error {
	switch x := v.(type) {
	case map[string]any:
		if r, ok := x["$ref"].(string); ok {
			if _, ok := defs[strings.TrimPrefix(r, "#/$defs/")]; !ok {
				return fmt.Errorf("schema: %s names no mapping of dag.Format", r)
			}
		}
		for _, y := range x {
			if err := checkRefs(y, defs); err != nil {
				return err
			}
		}
	case []any:
		for _, y := range x {
			if err := checkRefs(y, defs); err != nil {
				return err
			}
		}
	}
	return nil
}
