package dagrun

import (
	"errors"
	"regexp"

	"github.com/dagrun/dagrun/dag"
)

// goHints are the loader's hints that name YAML fields, each with the words
// for a spec built in Go (with SpecBuilder, or as a dag.Spec): Plan
// validates such a spec by loading its YAML text (dag.Validate), so its
// hints are the loader's. Each pattern matches one hint of dag/load_check.go.
var goHints = []struct {
	yaml *regexp.Regexp
	goes string
}{
	{regexp.MustCompile(`^declare it under buffers: or fix the name$`),
		"declare it with SpecBuilder.Buffer or Tensor (in a dag.Spec, in Spec.Buffers), or fix the name"},
	{regexp.MustCompile(`^list (\S+) under reads: or writes: so that the planner orders the accesses$`),
		"pass $1 to the stage's Reads or Writes so that the planner orders the accesses"},
	{regexp.MustCompile(`^(use a built-in \([^)]*\)), declare it under kernels:, or name a Go function bound at run time: \{go: name\}$`),
		"$1, or make the stage a Go function bound at run time (StageBuilder.GoFunc, StageSpec.Go; RunOptions.Funcs)"},
	{regexp.MustCompile(`^after names earlier stages only \(stages run in declaration order\); declare (\S+) before (\S+)$`),
		"After names earlier stages only (stages run in the order Stage added them); add $1 before $2"},
	{regexp.MustCompile(`^fill writes float32 elements: make the size a multiple of 4 bytes, or use init: zeros or \{file: \.\.\.\}$`),
		"Fill writes float32 elements: make the size a multiple of 4 bytes, or use Random or no initial value"},
	{regexp.MustCompile(`^write a buffer name \(x\), a byte range \(x\[0:512\]\) or \{buffer: x, offset: 0, bytes: 512\}$`),
		"pass a Buf, or a byte range of one: x.Range(0, 512) for bytes [0, 512)"},
}

// inGoTerms returns err, a dag.ErrorList of a spec built in Go, with
// each hint that names a YAML field in the builder's words (goHints); any
// other error as it is.
func inGoTerms(err error) error {
	var list dag.ErrorList
	if !errors.As(err, &list) {
		return err
	}
	out := make(dag.ErrorList, len(list))
	for i, e := range list {
		c := *e
		for _, h := range goHints {
			if h.yaml.MatchString(c.Hint) {
				c.Hint = h.yaml.ReplaceAllString(c.Hint, h.goes)
				break
			}
		}
		out[i] = &c
	}
	return out
}
