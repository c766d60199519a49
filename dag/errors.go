package dag

import (
	"fmt"
	"sort"
	"strings"
)

// Error is a mistake in a spec: where it is, what is wrong and what to do.
// Its text is
//
//	file:line:col: msg
//		hint: what to do
//
// (the hint line only when Hint is set). The loader returns errors as an
// ErrorList; errors.As(err, new(*Error)) finds the first one, and
// errors.As(err, new(ErrorList)) all of them. Callers (the CLI) treat any
// such error as bad input (exit status 2).
type Error struct {
	Pos  Pos
	Msg  string // what is wrong, naming the buffer, kernel or stage
	Hint string // what to do about it; may be empty
}

func (e *Error) Error() string {
	if e.Hint == "" {
		return e.Pos.String() + ": " + e.Msg
	}
	return e.Pos.String() + ": " + e.Msg + "\n\thint: " + e.Hint
}

// MaxErrors is the most errors the loader reports for one spec; past it the
// list ends with an entry saying how many more there were.
const MaxErrors = 20

// ErrorList is every error found in one spec, sorted by position
// (file, line, column; ties keep the order they were found in).
// A non-nil error returned by Load or LoadFile is always a non-empty ErrorList.
type ErrorList []*Error

func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns the errors as []error, so that errors.As(err, new(*Error))
// and errors.Is see each of them.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Err returns l sorted and capped at MaxErrors, or nil if l is empty.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	l.sort()
	if len(l) > MaxErrors {
		more := len(l) - MaxErrors
		last := l[MaxErrors-1]
		l = append(l[:MaxErrors:MaxErrors], &Error{
			Pos:  Pos{File: last.Pos.File},
			Msg:  fmt.Sprintf("%d more errors not shown", more),
			Hint: "fix the errors above and load the spec again",
		})
	}
	return l
}

func (l ErrorList) sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i].Pos, l[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}
