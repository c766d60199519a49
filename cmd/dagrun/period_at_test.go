package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// periodSpec is a spec whose ring r has %d copies and whose stage up
// waits on pre with lag %d: the two causes of a long period.
const periodSpec = "version: 1\nsync: manual\nbuffers:\n  - {name: x, bytes: 4096}\n  - {name: y, bytes: 4096, role: output}\n  - {name: r, bytes: 4096, copies: %d}\nstages:\n" +
	"  - {name: up,  kernel: fill, args: {value: 1.0}, writes: [x], stream: a, waits: [{stage: pre, lag: %d}]}\n" +
	"  - {name: pre, kernel: fill, args: {value: 2.0}, writes: [y], stream: b}\n" +
	"  - {name: rw, kernel: fill, args: {value: 3.0}, writes: [r], stream: b}\n"

// TestPeriodRefusalNamesItsCause: a wait's lag or a ring's copies that
// make the iterations repeat only after more than 1024 are refused by run
// of several iterations before planning, at the wait or buffer with a hint,
// and by check after its verdict at the waiting stage's or buffer's
// position, naming the wait (stage, stream) or buffer; plan plans them and
// one iteration runs. A lag within the bound alone that passes it with a
// ring of 3 copies is named with what came before it.
func TestPeriodRefusalNamesItsCause(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name           string
		copies, lag    int
		run, check     []string // what run's and check's errors hold
		runAt, checkAt string
	}{
		{"lag", 1, 1024, []string{"by stage up's wait on the record of stage pre with lag 1024 (1025 event slots)", "hint: "},
			[]string{"by the wait of stage up on stream a on event e0 with lag 1024 (1025 event slots)"}, ":8:83: ", ":8:5: "},
		{"ring", 1100, 1, []string{"by buffer r's 1100 ring copies", "hint: "}, []string{"by buffer r's 1100 ring copies"}, ":6:5: ", ":6:5: "},
		{"both", 3, 400, []string{"by stage up's wait on the record of stage pre with lag 400 (401 event slots) together with those before it (which repeat every 3 iterations)"},
			[]string{"by the wait of stage up on stream a on event e0 with lag 400 (401 event slots) together with those before it (which repeat every 3 iterations)"}, ":8:83: ", ":8:5: "},
	} {
		spec := writeSpec(t, c.name+".yaml", fmt.Sprintf(periodSpec, c.copies, c.lag))
		out, errs, code := cli(t, "run", "--backend", "sim", "--iterations", "2", spec)
		if code != exitUsage || out != "" || !strings.Contains(errs, spec+c.runAt+"the spec's event slots and ring sizes repeat only after more than 1024 iterations") {
			t.Errorf("%s: run: exit %d, want 2 at %s\nstdout:\n%s\nstderr:\n%s", c.name, code, c.runAt, out, errs)
		}
		for _, w := range c.run {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: run: stderr lacks %q:\n%s", c.name, w, errs)
			}
		}
		out, errs, code = cli(t, "check", spec)
		if code != exitUsage || out != "" || !strings.Contains(errs, spec+c.checkAt+"executor: the plan's stream sets, event slots and ring sizes repeat only after more than 1024 iterations") {
			t.Errorf("%s: check: exit %d, want 2 at %s\nstdout:\n%s\nstderr:\n%s", c.name, code, c.checkAt, out, errs)
		}
		for _, w := range c.check {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: check: stderr lacks %q:\n%s", c.name, w, errs)
			}
		}
		if _, errs, code := cli(t, "plan", spec); code != exitOK {
			t.Errorf("%s: plan: exit %d\n%s", c.name, code, errs)
		}
		if _, errs, code := cli(t, "run", "--backend", "sim", spec); code != exitOK {
			t.Errorf("%s: run of one iteration: exit %d\n%s", c.name, code, errs)
		}
	}
}

// TestPeriodRefusalJSONAt: check --json gives a period refusal the
// position the text output gives it: a race-free spec's refusal is its one
// error (file, line, column; exit 2), a racy spec's is refused_at beside
// the races (exit 1).
func TestPeriodRefusalJSONAt(t *testing.T) {
	t.Parallel()
	const racy = "  - {name: rd, kernel: copy, reads: [x], writes: [y], stream: b}\n" // reads x with no wait on up
	type at struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Column  int    `json:"column"`
		Message string `json:"message"`
	}
	for _, c := range []struct {
		name         string
		copies, lag  int
		line, column int
		racy         bool
	}{
		{"lag", 1, 1024, 8, 5, false},
		{"ring", 1100, 1, 6, 5, false},
		{"lag-racy", 1, 1024, 8, 5, true},
		{"ring-racy", 1100, 1, 6, 5, true},
	} {
		text := fmt.Sprintf(periodSpec, c.copies, c.lag)
		if c.racy {
			text += racy
		}
		spec := writeSpec(t, c.name+".yaml", text)
		_, textErrs, _ := cli(t, "check", spec)
		textOut, _, _ := cli(t, "check", spec)
		out, errs, code := cli(t, "check", "--json", spec)
		var r struct {
			Errors    []at `json:"errors"`
			Refused   string
			RefusedAt *at       `json:"refused_at"`
			Report    *struct{} `json:"report"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Errorf("%s: check --json: %v\nstdout:\n%s\nstderr:\n%s", c.name, err, out, errs)
			continue
		}
		var e *at
		switch {
		case !c.racy && (code != exitUsage || len(r.Errors) != 1 || r.Report != nil):
			t.Errorf("%s: check --json: exit %d, %d errors; want exit 2 and the refusal as the one error\n%s", c.name, code, len(r.Errors), out)
			continue
		case !c.racy:
			e = &r.Errors[0]
		case code != exitFailure || r.Report == nil || r.RefusedAt == nil || len(r.Errors) != 0:
			t.Errorf("%s: check --json: exit %d; want exit 1 with the races and refused_at\n%s", c.name, code, out)
			continue
		default:
			e = r.RefusedAt
		}
		pos := fmt.Sprintf("%s:%d:%d: ", spec, e.Line, e.Column)
		if e.File != spec || e.Line != c.line || e.Column != c.column || !strings.Contains(e.Message, "repeat only after more than 1024 iterations") {
			t.Errorf("%s: check --json: refusal %+v; want %s:%d:%d", c.name, *e, spec, c.line, c.column)
		}
		if !strings.Contains(textErrs+textOut, pos+e.Message) {
			t.Errorf("%s: the text output lacks %q:\n%s%s", c.name, pos+e.Message, textOut, textErrs)
		}
	}
}
