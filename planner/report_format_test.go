package planner

import (
	"strings"
	"testing"
)

// A report with both fixed and unfixed races says how many no one wait
// fixes in a whole sentence, and lists those races indented like the rest.
func TestReportUnfixedSentence(t *testing.T) {
	e := &RaceError{
		Races: []Race{
			{First: 0, Second: 1, FirstName: "a", SecondName: "b", Kind: "RAW", Buffer: "x", Bytes: 4},
			{First: 0, Second: 2, FirstName: "a", SecondName: "c", Kind: "WAW", Buffer: "y", Bytes: 4},
			{First: 1, Second: 2, FirstName: "b", SecondName: "c", Kind: "WAW", Buffer: "y", Bytes: 4},
		},
		Fixes:   []Fix{{After: 0, Before: 1, AfterName: "a", BeforeName: "b", Races: []int{0}}},
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
