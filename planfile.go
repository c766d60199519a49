package dagrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/safefile"
	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

// WritePlanJSON writes p as a plan file (plan.PlanVersion, one
// trailing newline): what ReadPlan reads. With indent it is indented by two
// spaces, for people; without, compact, for big plans.
// It streams (Plan.EncodeJSON): one stage at a time, never the whole file
// in memory. Errors are w's.
func WritePlanJSON(w io.Writer, p *StreamPlan, indent bool) error {
	if p == nil {
		return errNilPlan
	}
	if err := p.EncodeJSON(w, indent); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// ReadPlan reads a plan file written by WritePlanJSON (`dagrun plan
// --json`) and checks it as Run would, without touching a backend. Every
// error is bad input, prefixed with path and, where the value at fault
// can be placed, its line:column: the file cannot be read ("cannot read
// plan file", wrapping the os error: errors.Is(err, os.ErrNotExist) for a
// missing one); it is not a regular file or is
// larger than plan.MaxPlanFileBytes; it is not JSON of a plan (a syntax
// or type error; a file that ends early, at its end; data after the plan);
// it has a field no plan has (named with its JSON path); its version is not
// plan.PlanVersion; it is not well-formed (Plan.Validate: the
// *plan.PlanError's JSON path, e.g. stages[3].writes[0].bytes); or it
// names unknown kernels or gives built-ins wrong arguments
// (executor.CheckPlan). The counts of Stats (stages, streams, waits,
// events, cross waits) and its one-stream and ideal times are recomputed
// from the plan itself (plan.Recount), never taken from the file.
//
// The files the plan names (init files, PTX files) must lie in the plan
// file's own folder or below it, by name: a plan file from someone else
// must not read your other files (its "dir" field is as much theirs as its
// paths). ReadPlanWith with LoadOptions.AllowOutside lifts that.
func ReadPlan(path string) (*StreamPlan, error) {
	return ReadPlanWith(path, LoadOptions{})
}

// ReadPlanWith is ReadPlan with options: o.AllowOutside lets the plan name
// init and PTX files outside the plan file's folder.
func ReadPlanWith(path string, o LoadOptions) (*StreamPlan, error) {
	b, err := safefile.ReadFile(path, plan.MaxPlanFileBytes, "plan file")
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return nil, fmt.Errorf("%s: cannot read plan file: %w (check the path; write a plan file with `dagrun plan --json SPEC > FILE`)", safefile.Quote(path), pe.Err)
	}
	if err != nil {
		return nil, err
	}
	p, err := decodePlan(path, b)
	if err != nil {
		return nil, err
	}
	if !o.AllowOutside {
		if err := planFilesInside(p, filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("%s: plan: %s: %s", placed(path, b, err.at), err.at, err.msg)
		}
	}
	return p, nil
}

// outsideError is a file a plan names outside the plan file's folder, at
// its JSON path.
type outsideError struct{ at, msg string }

// planFilesInside returns the first init or PTX file of p that does not
// resolve (against p.Dir, as the executor resolves it) inside dir, by name
// or through a symbolic link (safefile.CheckIn, the loader's rule for a
// spec's files).
func planFilesInside(p *StreamPlan, dir string) *outsideError {
	full := func(name string) string {
		if filepath.IsAbs(name) {
			return name
		}
		return filepath.Join(p.Dir, name)
	}
	inside := func(name string) bool { return safefile.CheckIn(dir, full(name)) == nil }
	// reads names the file a relative name stands for: the plan reads it
	// from its "dir" field's folder, which need not be the plan file's own
	// (a plan file copied elsewhere keeps the folder it was planned in).
	reads := func(name string) string {
		if filepath.IsAbs(name) {
			return ""
		}
		return fmt.Sprintf(" (the plan reads %s: its \"dir\" field is %s)", safefile.Quote(full(name)), safefile.Quote(p.Dir))
	}
	const hint = "keep the files a plan names in the plan file's folder or below it (a plan file from someone else must not read your other files); to allow others, pass --allow-outside-paths"
	for i, b := range p.Buffers {
		if b.Init == string(contract.InitFile) && !inside(b.InitPath) {
			return &outsideError{fmt.Sprintf("buffers[%d].init_path", i), fmt.Sprintf("buffer %s: init file %q is outside %s%s: %s", b.Name, b.InitPath, safefile.Quote(dir), reads(b.InitPath), hint)}
		}
	}
	for i, k := range p.Kernels {
		if !inside(k.PTX) {
			return &outsideError{fmt.Sprintf("kernels[%d].ptx", i), fmt.Sprintf("kernel %s: PTX file %q is outside %s%s: %s", k.Name, k.PTX, safefile.Quote(dir), reads(k.PTX), hint)}
		}
	}
	return nil
}

// decodePlan is ReadPlan of the file path whose bytes are b. A file that
// fails as a plan but is a JSON object without the fields every plan has
// is named as a spec.
func decodePlan(path string, b []byte) (*StreamPlan, error) {
	p, err := decodePlanFile(path, b)
	if err != nil && jsonSpecLike(b) {
		return nil, fmt.Errorf("%s: not a plan file: a JSON object without a plan's strategy and issue_order, like a spec (write a plan file with `dagrun plan --json SPEC > FILE`); a spec (JSON) is passed without --plan", path)
	}
	return p, err
}

// jsonSpecLike reports whether b is a JSON object with a "stages" field
// and none of the fields a plan file always has.
func jsonSpecLike(b []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return false
	}
	_, stages := top["stages"]
	_, strategy := top["strategy"]
	_, order := top["issue_order"]
	return stages && !strategy && !order
}

func decodePlanFile(path string, b []byte) (*StreamPlan, error) {
	const how = "(write one with `dagrun plan --json SPEC > FILE`)"
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] != '{' {
		line, col := lineCol(b, int64(len(b)-len(t)))
		return nil, fmt.Errorf("%s:%d:%d: not a plan file: a plan file is a JSON object %s; a spec (YAML) is passed without --plan", path, line, col, how)
	}
	var p plan.Plan
	if err := p.UnmarshalJSON(b); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		var pe *plan.PlanError
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &se) && se.Offset >= int64(len(b)):
			line, col := lineCol(b, int64(len(b)))
			return nil, fmt.Errorf("%s:%d:%d: not a plan file: the file ends early %s", path, line, col, how)
		case errors.As(err, &pe) && pe.Offset > 0:
			line, col := lineCol(b, skipSpace(b, pe.Offset))
			return nil, fmt.Errorf("%s:%d:%d: not a plan file: %s %s", path, line, col, pe.Msg, how)
		case errors.As(err, &se):
			line, col := lineCol(b, se.Offset)
			return nil, fmt.Errorf("%s:%d:%d: not a plan file: %v %s", path, line, col, err, how)
		case errors.As(err, &te) && te.Field != "":
			// A plan file with a value of the wrong type: name the field by
			// its JSON path and the two types, not the Go struct.
			line, col := lineCol(b, te.Offset)
			return nil, fmt.Errorf("%s:%d:%d: plan: %s: a JSON %s where the plan format has %s (re-plan the spec with `dagrun plan --json`)", path, line, col, strings.TrimPrefix(te.Field, "planAlias."), te.Value, jsonKind(te.Type))
		case errors.As(err, &te):
			line, col := lineCol(b, te.Offset)
			return nil, fmt.Errorf("%s:%d:%d: not a plan file: %v %s", path, line, col, err, how)
		case errors.As(err, &pe):
			return nil, fmt.Errorf("%s: %v", placed(path, b, pe.Path), err)
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			var raw any
			if json.Unmarshal(b, &raw) == nil {
				if at, uerr := unknownFields(reflect.TypeFor[plan.Plan](), raw, "", true); uerr != nil {
					return nil, fmt.Errorf("%s: not a plan file: %v %s", placed(path, b, at), uerr, how)
				}
			}
		}
		return nil, fmt.Errorf("%s: not a plan file: %v %s", path, err, how)
	}
	if p.Version != plan.PlanVersion {
		return nil, fmt.Errorf("%s: plan version %d, this dagrun reads version %d (re-plan the spec)", placed(path, b, "version"), p.Version, plan.PlanVersion)
	}
	if err := p.Validate(); err != nil {
		at := ""
		if pe := (*plan.PlanError)(nil); errors.As(err, &pe) {
			at = pe.Path
		}
		return nil, fmt.Errorf("%s: %v (re-plan the spec with `dagrun plan --json`)", placed(path, b, at), err)
	}
	plan.Recount(&p)
	if err := executor.CheckPlan(&p); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &p, nil
}

// jsonKind names the JSON form of a Go type, for a plan file's type errors.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}

// placed is path:line:col of the value at JSON path at in the plan file b
// (stages[3].writes[0].bytes; for an object's field, its key), or path
// alone when at is "" or not in b.
func placed(path string, b []byte, at string) string {
	if at == "" {
		return path
	}
	off, ok := jsonPathOffset(b, at)
	if !ok {
		return path
	}
	line, col := lineCol(b, off)
	return fmt.Sprintf("%s:%d:%d", path, line, col)
}

// jsonPathOffset returns the byte offset in the JSON document b of the
// value at path (dotted fields and [index] elements, as PlanError.Path),
// or of its key when the last step is a field. It walks b's tokens once,
// skipping values off the path, so its cost is linear in b.
func jsonPathOffset(b []byte, path string) (int64, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var walk func(at string) (int64, bool, error)
	// walk reads one value whose path is at; it returns the offset of the
	// wanted path if it lies within.
	walk = func(at string) (int64, bool, error) {
		start := skipSpace(b, dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return 0, false, err
		}
		if at == path {
			return start, true, nil
		}
		d, ok := tok.(json.Delim)
		if !ok || !strings.HasPrefix(path, at) {
			if ok { // skip the container
				for depth := 1; depth > 0; {
					t, err := dec.Token()
					if err != nil {
						return 0, false, err
					}
					if d, ok := t.(json.Delim); ok {
						if d == '{' || d == '[' {
							depth++
						} else {
							depth--
						}
					}
				}
			}
			return 0, false, nil
		}
		for i := 0; dec.More(); i++ {
			sub := fmt.Sprintf("%s[%d]", at, i)
			if d == '{' {
				keyAt := skipSpace(b, dec.InputOffset())
				k, err := dec.Token()
				if err != nil {
					return 0, false, err
				}
				key, _ := k.(string)
				sub = key
				if at != "" {
					sub = at + "." + key
				}
				if sub == path {
					return keyAt, true, nil
				}
			}
			if off, found, err := walk(sub); found || err != nil {
				return off, found, err
			}
		}
		_, err = dec.Token() // the closing delimiter
		return 0, false, err
	}
	off, found, err := walk("")
	return off, found && err == nil
}

// skipSpace returns the offset of the first byte at or after off in b that
// is no JSON whitespace, colon or comma (the start of the next token).
func skipSpace(b []byte, off int64) int64 {
	for off < int64(len(b)) && strings.IndexByte(" \t\r\n:,", b[off]) >= 0 {
		off++
	}
	return off
}

// unknownFields returns the JSON path and an error naming the first key
// of the decoded JSON value v that no field of t takes (json tags, else
// the field name, matched as encoding/json does, case-insensitively), at
// path. It does not look into maps, interfaces, types that decode
// themselves (except at the top, where Plan does) or a stream's ops (their
// JSON form is Plan's own). ReadPlan calls it to name the field that
// Plan.UnmarshalJSON refused.
func unknownFields(t reflect.Type, v any, path string, top bool) (string, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !top && reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return "", nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		items, _ := v.([]any)
		for i, it := range items {
			if at, err := unknownFields(t.Elem(), it, fmt.Sprintf("%s[%d]", path, i), false); err != nil {
				return at, err
			}
		}
	case reflect.Struct:
		obj, _ := v.(map[string]any)
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			val := obj[key]
			sub := key
			if path != "" {
				sub = path + "." + key
			}
			if t == reflect.TypeFor[plan.Stream]() && key == "ops" {
				if at, err := unknownOpFields(val, sub); err != nil {
					return at, err
				}
				continue
			}
			f, ok := jsonField(t, key)
			if !ok {
				if path == "" {
					return sub, fmt.Errorf("unknown field %q", key)
				}
				return sub, fmt.Errorf("unknown field %q in %s", key, path)
			}
			if at, err := unknownFields(f.Type, val, sub, false); err != nil {
				return at, err
			}
		}
	}
	return "", nil
}

// unknownOpFields names the first key of a stream's ops that no op has.
func unknownOpFields(v any, path string) (string, error) {
	ops, _ := v.([]any)
	for i, o := range ops {
		obj, _ := o.(map[string]any)
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			switch key {
			case "op", "stage", "event", "lag", "why": // why: a wait's reason, which reading ignores
			default:
				return fmt.Sprintf("%s[%d].%s", path, i, key), fmt.Errorf("unknown field %q in %s[%d] (an op has op, stage, event, lag and why)", key, path, i)
			}
		}
	}
	return "", nil
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
// and redundant waits with what implies them (verify.Warnings). Planned
// specs have none; hand-synchronized specs and edited plan files may.
func Warnings(p *StreamPlan) []string {
	if p == nil {
		return nil
	}
	return verify.Warnings(p)
}

// isPlanFile reports whether the file at path looks like a plan file: a
// JSON object with the fields only plans have ("spec", which plans write
// second, and "strategy"). It reads at most the first 64 KiB. LoadWith asks
// it only after a file failed to load as a spec.
func isPlanFile(path string) bool {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return false // a fifo or device is not read
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 64<<10)
	n, _ := io.ReadFull(f, head)
	head = bytes.TrimLeft(head[:n], " \t\r\n")
	return len(head) > 0 && head[0] == '{' && bytes.Contains(head, []byte(`"spec"`)) && bytes.Contains(head, []byte(`"strategy"`))
}
