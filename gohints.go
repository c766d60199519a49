package dagrun

import (
	"errors"
	"regexp"

	"github.com/dagrun/dagrun/dag"
)

// goHints are the loader's hints that name YAML fields, each with the words
// for a spec built in Go (with SpecBuilder, or as a dag.Spec): Plan
// validates such a spec by loading its YAML text (dag.Validate), so its
// hints are the loader's. Each pattern matches one hint of the loader
// (dag/load_check.go, dag/load_values.go, dag/load_devices.go,
// contract/check.go); where the hint is shared by mistakes that differ in
// Go, msg also matches the error's message.
var goHints = []struct {
	msg  *regexp.Regexp // nil: any message
	yaml *regexp.Regexp
	goes string
}{
	{nil, regexp.MustCompile(`^declare it under buffers: or fix the name$`),
		"declare it with SpecBuilder.Buffer or Tensor (in a dag.Spec, in Spec.Buffers), or fix the name"},
	{nil, regexp.MustCompile(`^list (\S+) under reads: or writes: so that the planner orders the accesses$`),
		"pass $1 to the stage's Reads or Writes so that the planner orders the accesses"},
	{nil, regexp.MustCompile(`^(use a built-in \([^)]*\)), declare it under kernels:, or name a Go function bound at run time: \{go: name\}$`),
		"$1, or make the stage a Go function bound at run time (StageBuilder.GoFunc, StageSpec.Go; RunOptions.Funcs)"},
	{nil, regexp.MustCompile(`^after names earlier stages only \(stages run in declaration order\); declare (\S+) before (\S+)$`),
		"After names earlier stages only (stages run in the order Stage added them); add $1 before $2"},
	{nil, regexp.MustCompile(`^fill writes float32 elements: make the size a multiple of 4 bytes, or use init: zeros or \{file: \.\.\.\}$`),
		"Fill writes float32 elements: make the size a multiple of 4 bytes, or use Random or no initial value"},
	{nil, regexp.MustCompile(`^write a buffer name \(x\), a byte range \(x\[0:512\]\) or \{buffer: x, offset: 0, bytes: 512\}$`),
		"pass a Buf, or a byte range of one: x.Range(0, 512) for bytes [0, 512)"},
	{nil, regexp.MustCompile(`^buffer (\S+) is (\d+) bytes; use a range within \[0:\d+\]$`),
		"buffer $1 is $2 bytes: pass $1.Range(start, end) with end ≤ $2"},
	{nil, regexp.MustCompile(`^add it to args: \{(\w+): \.\.\.\}$`),
		`add it with Arg("$1", …)`},
	// A built-in's arguments, as contract's hints write them (give it:
	// args: {a: 2.0}; give args: {value: 1.5} or args: {bits: …}).
	{nil, regexp.MustCompile(`args: \{(\w+): ([^}]+)\}`),
		`Arg("$1", $2)`},
	// Devices (dag/load_devices.go).
	{nil, regexp.MustCompile(`^put (\S+) on device (\d+) \(device: \d+\), run the stage on device (\d+), (or copy the bytes across .*)$`),
		"put $1 on device $2 ($1.InDevice($2)), run the stage on device $3 (OnDevice($3)), $4"},
	{nil, regexp.MustCompile(`^run the copy on device (\d+) \(device: \d+, or drop device: and stream: to let it take its buffer's device\), or put (\S+) on device (\d+) \(device: \d+\)$`),
		"run the copy on device $1 (OnDevice($1), or neither OnDevice nor OnStream to let it take its buffer's device), or put $2 on device $3 ($2.InDevice($3))"},
	{nil, regexp.MustCompile(`^drop device: \((a host stage runs on the host|each rank runs on its buffers' device)\)$`),
		"drop the stage's OnDevice ($1)"},
	{nil, regexp.MustCompile(`^drop device: \((every device reaches host memory.*)\)$`),
		"drop the buffer's InDevice ($1)"},
	{nil, regexp.MustCompile(`^give the buffer a device: \((.*)\)$`),
		"give the buffer a device with InDevice ($1)"},
	{regexp.MustCompile(`: (reads|writes): buffer "" is empty$`), regexp.MustCompile(`^names are non-empty.*$`),
		"a zero Buf (declared by no SpecBuilder) names no buffer: pass the Buf that SpecBuilder.Buffer or Tensor returned"},
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
			if h.yaml.MatchString(c.Hint) && (h.msg == nil || h.msg.MatchString(c.Msg)) {
				c.Hint = h.yaml.ReplaceAllString(c.Hint, h.goes)
				break
			}
		}
		out[i] = &c
	}
	return out
}
