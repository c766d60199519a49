package verify_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/verify"
)

// A report with both fixed and unfixed races says how many no one wait
// fixes in a whole sentence, and lists those races indented like the rest.
func TestReportUnfixedSentence(t *testing.T) {
	e := &verify.RaceError{
		Races: []verify.Race{
			{First: 0, Second: 1, FirstName: "a", SecondName: "b", Kind: "RAW", Buffer: "x", Bytes: 4},
			{First: 0, Second: 2, FirstName: "a", SecondName: "c", Kind: "WAW", Buffer: "y", Bytes: 4},
			{First: 1, Second: 2, FirstName: "b", SecondName: "c", Kind: "WAW", Buffer: "y", Bytes: 4},
		},
		Fixes:   []verify.Fix{{After: 0, Before: 1, AfterName: "a", BeforeName: "b", Races: []int{0}}},
		Unfixed: []int{1, 2},
	}
	got := e.Error()
	first, _, _ := strings.Cut(got, "\n")
	if want := "3 races; 1 wait fixes them; 2 others no one wait fixes (each with its advice, below)"; first != want {
		t.Errorf("summary %q, want %q", first, want)
	}
	if strings.Contains(got, "\t") {
		t.Errorf("report has tab-indented lines:\n%s", got)
	}
}

// TestTableRecordAfter: the table names, for each record, the stage its
// stream launched last before it, even when stages on other streams record
// the same event.
func TestTableRecordAfter(t *testing.T) {
	p, err := planner.Build(loadSpec(t, `version: 1
sync: manual
buffers:
  - {name: a, bytes: 4096}
  - {name: b, bytes: 4096}
  - {name: o, bytes: 8, role: output}
stages:
  - {name: pa, kernel: fill, args: {value: 1.0}, writes: [a], stream: s0, event: E}
  - {name: pb, kernel: fill, args: {value: 2.0}, writes: [b], stream: s1, event: E}
  - {name: use, kernel: checksum, reads: [b], writes: [o], stream: w1, waits: [{event: E}]}
`), planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	p.WriteTable(&b)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\s+launch\s+pa\n\s+record\s+e\d+\s+after pa$`),
		regexp.MustCompile(`(?m)^\s+launch\s+pb\n\s+record\s+e\d+\s+after pb$`),
	} {
		if !want.MatchString(b.String()) {
			t.Errorf("table lacks %s:\n%s", want, b.String())
		}
	}
}
