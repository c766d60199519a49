// Package report holds what `dagrun check` reports besides the verifier's
// text: the JSON report of a plan or of input that could not be checked
// (CheckReport), and the notes on options a plan could not follow
// (PinNotes).
package report

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// PinNotes lists, one sentence each, the options of o (the command line's
// flags, which the notes name) that p could not follow because of spec s:
// a `sync: manual` spec ignores Strategy and MaxStreams, and stream pins
// beyond the single strategy's one stream or beyond MaxStreams (both per
// device) win over them (the hazard-dag strategy, never capped, has a note
// of its own). p is the plan of s under o.
func PinNotes(s *dagrun.Spec, o dagrun.PlanOptions, p *dagrun.StreamPlan) []string {
	if s.Sync == dag.SyncManual {
		if o.Strategy != "" || o.MaxStreams != 0 {
			return []string{fmt.Sprintf("%s uses sync: manual, so --strategy and --max-streams do not apply", cmp.Or(s.File, s.Name))}
		}
		return nil
	}
	// Both apply per device (docs/devices.md): count the streams of the
	// device with the most (host streams with device 0's, as on one device).
	perDev := map[int]int{}
	streams, dev := 0, 0
	for _, st := range p.Streams {
		perDev[st.Device]++
		if n := perDev[st.Device]; n > streams || n == streams && st.Device < dev {
			streams, dev = n, st.Device
		}
	}
	where := ""
	if p.DeviceCount() > 1 {
		where = fmt.Sprintf(" on device %d (the cap is per device)", dev)
	}
	var out []string
	if p.Strategy == string(planner.StrategySingle) && streams > 1 {
		out = append(out, fmt.Sprintf("strategy single, but the spec pins stages to %d streams%s; pins win", streams, where))
	}
	// The hazard-dag strategy is never capped; its plan's note says so.
	if o.MaxStreams > 0 && streams > o.MaxStreams && p.Strategy != string(planner.StrategyHazardDAG) {
		out = append(out, fmt.Sprintf("--max-streams %d, but the spec pins stages to %d streams%s; pins win", o.MaxStreams, streams, where))
	}
	return out
}

// CheckReport is `dagrun check --json`'s output: the verifier's report of
// a plan (its races grouped by the fewest waits that fix them, lifetime
// records cut short), the warnings and notes.
type CheckReport struct {
	Source string `json:"source"`
	OK     bool   `json:"ok"`
	// Report is verify.Verify's report; nil when the plan is race-free.
	Report *verify.RaceError `json:"report,omitempty"`
	// AfterPass, with PlanOptions.Check, names the planner pass after
	// which the plan first had Report's races (planner.PassRaceError).
	AfterPass string `json:"after_pass,omitempty"`
	// Refused is why the executor cannot run the plan in check's mode
	// (CheckRun's error: a period past its bound, or in graph mode what
	// graph mode lacks); set only with races, which are the verdict (a
	// race-free plan it refuses is bad input: one Errors entry).
	Refused string `json:"refused,omitempty"`
	// RefusedAt is Refused as an Errors entry: where the refusal points
	// (the wait or ring buffer a period refusal names, at its file, line
	// and column, as the text output gives it; else the input file).
	RefusedAt *CheckError `json:"refused_at,omitempty"`
	// Errors, when the input could not be checked (a spec or plan file
	// with mistakes: bad input, exit 2), is each mistake; OK is false and
	// Report nil then.
	Errors   []CheckError `json:"errors,omitempty"`
	Warnings []string     `json:"warnings"`
	Notes    []string     `json:"notes"`
}

// CheckError is one mistake in check's input, for CheckReport.Errors:
// where it is (the file, and the 1-based line and column where the loader
// knows them; zero otherwise), what is wrong and what to do.
type CheckError struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// OfError is the CheckReport of input from src that could not
// be checked: err is Load's, Plan's or ReadPlan's error. Each spec mistake
// (a dag.Error in err) is one entry with its position; any other error is
// one entry with its text.
func OfError(src string, err error) *CheckReport {
	r := &CheckReport{Source: src, Warnings: []string{}, Notes: []string{}}
	var list dag.ErrorList
	var one *dag.Error
	switch {
	case errors.As(err, &list):
		for _, e := range list {
			r.Errors = append(r.Errors, CheckError{File: e.Pos.File, Line: e.Pos.Line, Column: e.Pos.Col, Message: e.Msg, Hint: e.Hint})
		}
	case errors.As(err, &one):
		r.Errors = []CheckError{{File: one.Pos.File, Line: one.Pos.Line, Column: one.Pos.Col, Message: one.Msg, Hint: one.Hint}}
	default:
		r.Errors = []CheckError{{File: src, Message: err.Error()}}
	}
	return r
}

// Of is p's CheckReport. races is Verify's error for p (nil, a
// *verify.RaceError, or a *planner.PassRaceError); any other error is
// returned as it is.
func Of(src string, p *dagrun.StreamPlan, races error) (*CheckReport, error) {
	r := &CheckReport{Source: src, OK: races == nil, Warnings: dagrun.Warnings(p), Notes: p.Notes}
	if races != nil {
		re, ok := races.(*verify.RaceError)
		if pr, isPass := races.(*planner.PassRaceError); isPass {
			re, ok, r.AfterPass = pr.Err, true, pr.Pass
		}
		if !ok {
			return nil, races
		}
		c := *re
		if c.Unfixed == nil {
			c.Unfixed = []int{}
		}
		if c.Fixes == nil {
			c.Fixes = []verify.Fix{}
		}
		if c.Races == nil {
			c.Races = []verify.Race{}
		}
		r.Report = &c
	}
	if r.Warnings == nil {
		r.Warnings = []string{}
	}
	if r.Notes == nil {
		r.Notes = []string{}
	}
	return r, nil
}

// WriteJSON writes r as indented JSON.
func (r *CheckReport) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteCheckJSON writes p's CheckReport (Of) as indented JSON.
func WriteCheckJSON(w io.Writer, src string, p *dagrun.StreamPlan, races error) error {
	r, err := Of(src, p, races)
	if err != nil {
		return err
	}
	return r.WriteJSON(w)
}
