package dagrun

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// WritePlanJSON writes p as a plan file (indented JSON, planner.PlanVersion,
// one trailing newline): what ReadPlan reads. Errors are w's.
func WritePlanJSON(w io.Writer, p *StreamPlan) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadPlan reads a plan file written by WritePlanJSON (`dagrun plan
// --json`) and checks it as Run would, without touching a backend. Every
// error is bad input: the file cannot be read; it is not JSON of a plan
// (path:line:column of a syntax or type error; a file that ends early, at
// its end) or has a field no plan has (named with its place); its version is
// not planner.PlanVersion; it is inconsistent (Plan.Validate); or it names
// unknown buffers or kernels, accesses outside a buffer, wrong built-in
// arguments or sizes beyond executor.MaxBufferBytes (executor.CheckPlan).
func ReadPlan(path string) (*StreamPlan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	const how = "(write one with `dagrun plan --json SPEC > FILE`)"
	var p planner.Plan
	if err := json.Unmarshal(b, &p); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line, col := lineCol(b, se.Offset)
			return nil, fmt.Errorf("%s:%d:%d: not a plan file: %v %s", path, line, col, err, how)
		case errors.As(err, &te):
			line, col := lineCol(b, te.Offset)
			return nil, fmt.Errorf("%s:%d:%d: not a plan file: %v %s", path, line, col, err, how)
		}
		return nil, fmt.Errorf("%s: not a plan file: %v %s", path, err, how)
	}
	// Plan.UnmarshalJSON ignores fields it does not know; a plan file must
	// not have any (a misspelt field would be silently dropped).
	var raw any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: not a plan file: %v %s", path, err, how)
	}
	if err := unknownFields(reflect.TypeFor[planner.Plan](), raw, "", true); err != nil {
		return nil, fmt.Errorf("%s: not a plan file: %v %s", path, err, how)
	}
	if p.Version != planner.PlanVersion {
		return nil, fmt.Errorf("%s: plan version %d, this dagrun reads version %d (re-plan the spec)", path, p.Version, planner.PlanVersion)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v (re-plan the spec with `dagrun plan --json`)", path, err)
	}
	if err := executor.CheckPlan(&p); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &p, nil
}

// unknownFields returns an error naming the first key of the decoded JSON
// value v that no field of t takes (json tags, else the field name, matched
// as encoding/json does, case-insensitively), at path. It does not look into
// maps, interfaces, types that decode themselves (except at the top, where
// Plan does) or a stream's ops (their JSON form is Plan's own).
func unknownFields(t reflect.Type, v any, path string, top bool) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !top && reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		items, _ := v.([]any)
		for i, it := range items {
			if err := unknownFields(t.Elem(), it, fmt.Sprintf("%s[%d]", path, i), false); err != nil {
				return err
			}
		}
	case reflect.Struct:
		obj, _ := v.(map[string]any)
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			val := obj[key]
			if t == reflect.TypeFor[planner.Stream]() && key == "ops" {
				continue
			}
			f, ok := jsonField(t, key)
			if !ok {
				if path == "" {
					return fmt.Errorf("unknown field %q", key)
				}
				return fmt.Errorf("unknown field %q in %s", key, path)
			}
			sub := key
			if path != "" {
				sub = path + "." + key
			}
			if err := unknownFields(f.Type, val, sub, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonField finds the field of struct type t that JSON key decodes into.
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, key) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// lineCol turns a byte offset into a 1-based line and column.
func lineCol(b []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < off && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// Warnings lists, one sentence each, what is legal but likely not meant
// in p's waits: waits issued before any record of their event (CUDA's
// wait-before-record trap), waits on an event recorded again before them,
// and redundant waits with what implies them (planner.Warnings). Planned
// specs have none; hand-synchronized specs and edited plan files may.
func Warnings(p *StreamPlan) []string { return planner.Warnings(p) }

// PinNotes lists, one sentence each, the options of o that p could not
// follow because of spec s: a `sync: manual` spec ignores Strategy and
// MaxStreams, and stream pins beyond the single strategy's one stream or
// beyond MaxStreams win over them. p is the plan of s under o.
func PinNotes(s *Spec, o PlanOptions, p *StreamPlan) []string {
	if s.Sync == dag.SyncManual {
		if o.Strategy != "" || o.MaxStreams != 0 {
			return []string{fmt.Sprintf("%s uses sync: manual, so the strategy and max_streams do not apply", cmp.Or(s.File, s.Name))}
		}
		return nil
	}
	var out []string
	streams := p.Stats.Streams
	if p.Strategy == planner.StrategySingle && streams > 1 {
		out = append(out, fmt.Sprintf("strategy single, but the spec pins stages to %d streams; pins win", streams))
	}
	if o.MaxStreams > 0 && streams > o.MaxStreams {
		out = append(out, fmt.Sprintf("max_streams %d, but the spec pins stages to %d streams; pins win", o.MaxStreams, streams))
	}
	return out
}

// CheckReport is `dagrun check --json`'s output: the verifier's report of
// a plan (its races grouped by the fewest waits that fix them, lifetime
// records cut short), the warnings and notes.
type CheckReport struct {
	Source string `json:"source"`
	OK     bool   `json:"ok"`
	// Report is planner.Verify's report; nil when the plan is race-free.
	Report   *planner.RaceError `json:"report,omitempty"`
	Warnings []string           `json:"warnings"`
	Notes    []string           `json:"notes"`
}

// WriteCheckJSON writes p's CheckReport as indented JSON. races is
// Verify's error for p (nil, or a *planner.RaceError); any other error is
// returned as it is.
func WriteCheckJSON(w io.Writer, src string, p *StreamPlan, races error) error {
	r := CheckReport{Source: src, OK: races == nil, Warnings: Warnings(p), Notes: p.Notes}
	if races != nil {
		re, ok := races.(*planner.RaceError)
		if !ok {
			return races
		}
		c := *re
		if c.Unfixed == nil {
			c.Unfixed = []int{}
		}
		if c.Fixes == nil {
			c.Fixes = []planner.Fix{}
		}
		if c.Races == nil {
			c.Races = []planner.Race{}
		}
		r.Report = &c
	}
	if r.Warnings == nil {
		r.Warnings = []string{}
	}
	if r.Notes == nil {
		r.Notes = []string{}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
