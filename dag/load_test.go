package dag

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// loadDir is where loader test specs live; relative paths in inline test
// specs (PTX, init files) resolve against it.
const loadDir = "testdata/load"

// want is one expected error: its line, its column given as the first
// occurrence of at in that line (at == "" means column 1; line 0 means no
// position), and a substring of its message (and optionally of its hint).
type want struct {
	line int
	at   string
	msg  string
	hint string
}

func w(line int, at, msg string) want { return want{line: line, at: at, msg: msg} }

func wh(line int, at, msg, hint string) want { return want{line: line, at: at, msg: msg, hint: hint} }

// Prefixes shared by many cases; the stages of both start on line 8.
const (
	pre = `version: 1
buffers:
  - {name: a, bytes: 64}
  - {name: b, bytes: 64}
  - {name: in, bytes: 64, role: input}
  - {name: big, bytes: 4096}
stages:
`
	preK = `version: 1
buffers:
  - {name: a, bytes: 64}
  - {name: b, bytes: 64}
kernels:
  - {name: myk, ptx: kernels/my.ptx, entry: my_kernel, params: [{name: x, type: ptr}, {name: n, type: u32}]}
stages:
`
	spinStage = "stages: [{name: s, kernel: spin}]\n"
)

// buf is a spec whose buffers section is the given lines (from line 3 on).
func buf(lines string) string { return "version: 1\nbuffers:\n" + lines + spinStage }

// kern is a spec whose kernels section is the given lines (from line 3 on).
func kern(lines string) string { return "version: 1\nkernels:\n" + lines + spinStage }

var errorCases = []struct {
	name string
	src  string
	want []want
}{
	// Document level.
	{"empty file", "", []want{w(0, "", "spec is empty")}},
	{"only comments", "# nothing\n", []want{w(0, "", "spec is empty")}},
	{"null document", "~\n", []want{w(1, "~", "spec is empty")}},
	{"syntax error", "version: 1\nstages: [{name: s\n", []want{w(2, "", "YAML syntax error")}},
	// yaml.v3 gives a parser error's line 0-based: the loader says the
	// line of the block or bracket itself (scanner errors are 1-based).
	{"unclosed flow mapping", "version: 1\nname: x\nbuffers:\n  - {name: a, bytes: 4096\nstages: []\n", []want{w(4, "", "did not find expected ',' or '}'")}},
	{"unclosed flow list", "version: 1\nstages:\n  - name: s\n    writes: [a\n    kernel: spin\n", []want{w(4, "", "did not find expected ',' or ']'")}},
	{"block mapping broken", "version: 1\nstages:\n  - name: s\n    kernel: spin\n   writes: []\n", []want{w(3, "", "did not find expected '-' indicator")}},
	{"unclosed flow on line 1", "{version: 1\n", []want{w(1, "", "YAML syntax error")}},
	{"tab (scanner error)", "version: 1\n\tstages: []\n", []want{w(2, "", "YAML syntax error")}},
	{"two documents", "version: 1\n" + spinStage + "---\nversion: 1\n", []want{w(3, "---", "more than one YAML document")}},
	{"not a mapping", "- a\n", []want{w(1, "-", "spec must be a mapping, got a list")}},
	{"unknown top field", "version: 1\nstagez: []\n", []want{
		w(1, "version", `missing required field "stages"`),
		wh(2, "stagez", `unknown field "stagez"`, `did you mean "stages"`)}},
	{"duplicate field", "version: 1\nversion: 1\n" + spinStage, []want{w(2, "version", `field "version" given twice (first at line 1)`)}},
	{"duplicate field on one line", "{version: 1, version: 1, stages: [{name: s, kernel: spin}]}\n", []want{w(1, "version: 1, stages", `field "version" given twice (first at column 2 of this line)`)}},
	{"duplicate argument on one line", "version: 1\nstages: [{name: s, kernel: spin, args: {us: 1, us: 2}}]\n", []want{w(2, "us: 2", `argument "us" given twice (first at column 41 of this line)`)}},
	{"merge key", "version: 1\nx: &x {name: s, kernel: spin}\n" + spinStage, []want{w(2, "x", `unknown field "x"`)}},
	{"merge key in stage", "version: 1\nstages:\n  - &s {name: s, kernel: spin}\n  - {<<: *s, name: t}\n", []want{w(4, "{", `stage t: missing required field "kernel"`), w(4, "<<", "stage t: YAML merge keys (<<) are not supported")}},
	{"missing version", spinStage, []want{w(1, "", `missing required field "version"`)}},
	{"version 2", "version: 2\n" + spinStage, []want{w(1, "2", "version 2 is not supported")}},
	{"version string", "version: \"1\"\n" + spinStage, []want{wh(1, `"1"`, `version must be an integer, got the string "1"`, "whole number")}},
	{"empty stages", "version: 1\nstages: []\n", []want{w(2, "[", "stages is empty")}},
	{"stages not a list", "version: 1\nstages: {a: 1}\n", []want{w(2, "{", "stages must be a list, got a mapping")}},
	{"stage not a mapping", "version: 1\nstages: [s]\n", []want{w(2, "s]", "stage must be a mapping")}},
	{"sync unknown", "version: 1\nsync: manul\n" + spinStage, []want{wh(2, "manul", `sync: unknown value "manul"`, `did you mean "manual"`)}},
	{"strategy unknown", "version: 1\noptions: {strategy: greedy}\n" + spinStage, []want{w(2, "greedy", `strategy: unknown value "greedy"`)}},
	{"max_streams negative", "version: 1\noptions: {max_streams: -1}\n" + spinStage, []want{w(2, "-1", "max_streams must be in [0,")}},
	{"memory_budget 0", "version: 1\noptions: {memory_budget: 0}\n" + spinStage, []want{wh(2, "0", "memory_budget 0 would cap the arena at 0 bytes", "write none")}},
	{"memory_budget negative", "version: 1\noptions: {memory_budget: -3}\n" + spinStage, []want{w(2, "-3", "memory_budget (bytes, auto or none) must be ≥ 1, got -3")}},
	{"options unknown field", "version: 1\noptions: {streams: 4}\n" + spinStage, []want{wh(2, "streams", `options: unknown field "streams"`, "max_streams")}},
	{"spec name with space", "version: 1\nname: my spec\n" + spinStage, []want{w(2, "my", `spec name "my spec" contains a space`)}},

	// Buffers.
	{"buffer unknown field", buf("  - {name: a, byte: 64}\n"), []want{
		w(3, "{", "buffer a: missing size"),
		wh(3, "byte", `buffer a: unknown field "byte"`, `did you mean "bytes"`)}},
	{"buffer missing name", buf("  - {bytes: 64}\n"), []want{w(3, "{", `buffer: missing required field "name"`)}},
	{"buffer missing size", buf("  - {name: a}\n"), []want{wh(3, "{", "buffer a: missing size", "dtype")}},
	{"buffer bytes negative", buf("  - {name: a, bytes: -4}\n"), []want{w(3, "-4", "buffer a: bytes must be ≥ 1, got -4")}},
	{"buffer bytes float", buf("  - {name: a, bytes: 4.5}\n"), []want{w(3, "4.5", "bytes must be an integer, got the number 4.5")}},
	{"buffer bytes overflow", buf("  - {name: a, bytes: 99999999999999999999}\n"), []want{w(3, "999", "does not fit in a 64-bit integer")}},
	{"buffer bytes uint64", buf("  - {name: a, bytes: 18446744073709551615}\n"), []want{w(3, "184", "does not fit in a 64-bit integer")}},
	{"buffer bytes string", buf("  - {name: a, bytes: lots}\n"), []want{w(3, "lots", `bytes must be an integer, got the string "lots"`)}},
	{"dtype unknown", buf("  - {name: a, dtype: f31, shape: [4]}\n"), []want{wh(3, "f31", `dtype: unknown value "f31"`, `did you mean "f32"`)}},
	{"shape zero dim", buf("  - {name: a, dtype: f32, shape: [4, 0]}\n"), []want{w(3, "0]", "dimension 0 is not positive")}},
	{"shape negative dim", buf("  - {name: a, dtype: f32, shape: [-4]}\n"), []want{w(3, "-4", "dimension -4 is not positive")}},
	{"shape not a list", buf("  - {name: a, dtype: f32, shape: 4}\n"), []want{w(3, "4}", "shape must be a list")}},
	{"shape without dtype", buf("  - {name: a, shape: [4]}\n"), []want{w(3, "[", "buffer a: shape needs a dtype")}},
	{"dtype without shape", buf("  - {name: a, dtype: f32}\n"), []want{w(3, "f32", "buffer a: dtype needs a shape")}},
	{"bytes disagree with shape", buf("  - {name: a, bytes: 64, dtype: f32, shape: [4, 4, 2]}\n"), []want{
		wh(3, "64", "bytes 64 disagrees with dtype f32 × shape [4 4 2] = 128 bytes", "drop bytes")}},
	{"shape overflow", buf("  - {name: a, dtype: f64, shape: [4611686018427387904, 4]}\n"), []want{w(3, "[", "overflows int64")}},
	{"where unknown", buf("  - {name: a, bytes: 4, where: host}\n"), []want{w(3, "host", `where: unknown value "host"`)}},
	{"role unknown", buf("  - {name: a, bytes: 4, role: inout}\n"), []want{w(3, "inout", `role: unknown value "inout"`)}},
	{"init unknown scalar", buf("  - {name: a, bytes: 4, init: ones}\n"), []want{wh(3, "ones", `init: unknown initial contents the string "ones"`, "{fill: 1.5}")}},
	{"init two kinds", buf("  - {name: a, bytes: 4, init: {fill: 1, random: 2}}\n"), []want{w(3, "{fill", "give exactly one of fill, file, random")}},
	{"init unknown kind", buf("  - {name: a, bytes: 4, init: {fil: 1}}\n"), []want{wh(3, "fil", `unknown field "fil"`, `did you mean "fill"`)}},
	{"init empty mapping", buf("  - {name: a, bytes: 4, init: {}}\n"), []want{w(3, "{}", "init: empty mapping")}},
	{"init fill float32 overflow", buf("  - {name: a, bytes: 4, init: {fill: 1e39}}\n"), []want{w(3, "1e39", "fill value 1e39 overflows float32")}},
	{"init fill not a number", buf("  - {name: a, bytes: 4, init: {fill: one}}\n"), []want{w(3, "one", "fill must be a number")}},
	{"init fill size", buf("  - {name: a, bytes: 6, init: {fill: 1}}\n"), []want{w(3, "{fill", "init fill needs a size that is a multiple of 4 bytes, got 6")}},
	{"init file missing", buf("  - {name: a, bytes: 4, init: {file: nope.bin}}\n"), []want{wh(3, "nope.bin", "init file nope.bin: no such file", "relative to the spec's directory")}},
	{"init file wrong size", buf("  - {name: a, bytes: 64, init: {file: frame.bin}}\n"), []want{w(3, "frame.bin", "init file frame.bin is 4096 bytes, the buffer 64")}},
	{"init file is a directory", buf("  - {name: a, bytes: 64, init: {file: kernels}}\n"), []want{w(3, "kernels", "is not a regular file")}},
	{"init random not int", buf("  - {name: a, bytes: 4, init: {random: 1.5}}\n"), []want{w(3, "1.5", "random seed must be an integer")}},
	{"copies zero", buf("  - {name: a, bytes: 4, copies: 0}\n"), []want{w(3, "0}", "copies must be in [1, 65536], got 0")}},
	{"duplicate buffer", buf("  - {name: a, bytes: 4}\n  - {name: a, bytes: 8}\n"), []want{w(4, "a,", `buffer "a" declared twice (first at t.yaml:3:5)`)}},
	{"buffer name with bracket", buf("  - {name: \"a[0]\", bytes: 4}\n"), []want{w(3, `"a`, `buffer name "a[0]" contains '['`)}},
	{"buffer name empty", buf("  - {name: \"\", bytes: 4}\n"), []want{w(3, `""`, `buffer name "" is empty`)}},
	{"buffers not a list", "version: 1\nbuffers: {a: 1}\n" + spinStage, []want{w(2, "{", "buffers must be a list")}},

	// Kernels.
	{"kernel named like a built-in", kern("  - {name: copy, ptx: kernels/my.ptx, entry: my_kernel}\n"), []want{w(3, "copy", `kernel "copy" has the name of a built-in`)}},
	{"duplicate kernel", kern("  - {name: k, ptx: kernels/my.ptx, entry: my_kernel}\n  - {name: k, ptx: kernels/my.ptx, entry: my_kernel}\n"), []want{w(4, "k,", `kernel "k" declared twice`)}},
	{"kernel missing ptx", kern("  - {name: k, entry: my_kernel}\n"), []want{w(3, "{", `kernel k: missing required field "ptx"`)}},
	{"kernel missing entry", kern("  - {name: k, ptx: kernels/my.ptx}\n"), []want{w(3, "{", `kernel k: missing required field "entry"`)}},
	{"ptx file missing", kern("  - {name: k, ptx: kernels/nope.ptx, entry: my_kernel}\n"), []want{wh(3, "kernels/", "kernel k: PTX file kernels/nope.ptx: no such file", "nvcc -ptx")}},
	{"ptx is a directory", kern("  - {name: k, ptx: kernels, entry: my_kernel}\n"), []want{w(3, "kernels", "is not a regular file")}},
	{"entry not in ptx", kern("  - {name: k, ptx: kernels/my.ptx, entry: my_kernal}\n"), []want{wh(3, "my_kernal", `entry "my_kernal" not found in kernels/my.ptx`, `did you mean "my_kernel"`)}},
	{"param type unknown", kern("  - {name: k, ptx: kernels/my.ptx, entry: my_kernel, params: [{name: n, type: u31}]}\n"), []want{w(3, "u31", `param type: unknown value "u31"`)}},
	{"param missing type", kern("  - {name: k, ptx: kernels/my.ptx, entry: my_kernel, params: [{name: n}]}\n"), []want{w(3, "{name: n}", `missing required field "type"`)}},
	{"duplicate param", kern("  - {name: k, ptx: kernels/my.ptx, entry: my_kernel, params: [{name: n, type: u32}, {name: n, type: u32}]}\n"), []want{w(3, "n, type: u32}]", `parameter "n" declared twice`)}},

	// Stages: structure.
	{"stage missing kernel", pre + "  - {name: s}\n", []want{w(8, "{", `stage s: missing required field "kernel"`)}},
	{"stage missing name", pre + "  - {kernel: spin}\n", []want{w(8, "{", `stage: missing required field "name"`)}},
	{"stage unknown field", pre + "  - {name: s, kernel: spin, read: [a]}\n", []want{wh(8, "read", `stage s: unknown field "read"`, `did you mean "reads"`)}},
	{"unknown kernel", pre + "  - {name: s, kernel: mixx, writes: [a]}\n", []want{wh(8, "mixx", `stage s: unknown kernel "mixx"`, `did you mean "mix"`)}},
	{"duplicate stage", pre + "  - {name: s, kernel: spin}\n  - {name: s, kernel: spin}\n", []want{w(9, "s,", `stage "s" declared twice (first at t.yaml:8:5)`)}},
	{"grid four dims", pre + "  - {name: s, kernel: spin, grid: [1, 1, 1, 1]}\n", []want{w(8, "[", "grid has 4 dimensions")}},
	{"block zero", pre + "  - {name: s, kernel: spin, block: [0]}\n", []want{w(8, "0]", "block must be in [1, 2147483647], got 0")}},
	{"duration negative", pre + "  - {name: s, kernel: spin, duration_us: -1}\n", []want{w(8, "-1", "duration_us must be ≥ 0")}},
	{"duration string", pre + "  - {name: s, kernel: spin, duration_us: fast}\n", []want{w(8, "fast", "duration_us must be a number")}},
	{"duration inf", pre + "  - {name: s, kernel: spin, duration_us: .inf}\n", []want{w(8, ".inf", "must be a finite number")}},
	{"args not a mapping", pre + "  - {name: s, kernel: spin, args: [1]}\n", []want{w(8, "[", "args must be a mapping")}},
	{"args value a list", pre + "  - {name: s, kernel: spin, args: {us: [1]}}\n", []want{w(8, "[", "us must be a number or a string, got a list")}},
	{"args value bool", pre + "  - {name: s, kernel: spin, args: {us: true}}\n", []want{w(8, "true", "us must be a number or a string, got the boolean true")}},
	{"args duplicate", pre + "  - {name: s, kernel: spin, args: {us: 1, us: 2}}\n", []want{w(8, "us: 2", `argument "us" given twice`)}},
	{"after not a list", pre + "  - {name: s, kernel: spin}\n  - {name: t, kernel: spin, after: s}\n", []want{w(9, "s}", "after must be a list")}},
	{"stream bool", pre + "  - {name: s, kernel: spin, stream: true}\n", []want{w(8, "true", "stream must be a string")}},

	// Stages: accesses.
	{"unknown buffer", pre + "  - {name: s, kernel: mix, reads: [c], writes: [a]}\n", []want{wh(8, "c]", `stage s: reads unknown buffer "c"`, "declare it under buffers:")}},
	{"unknown buffer suggestion", pre + "  - {name: s, kernel: mix, writes: [bigg]}\n", []want{wh(8, "bigg", `writes unknown buffer "bigg"`, `did you mean "big"`)}},
	{"write to input", pre + "  - {name: s, kernel: mix, writes: [in]}\n", []want{wh(8, "in]", "stage s writes to input buffer in", "temp or output")}},
	{"range past end", pre + "  - {name: s, kernel: mix, writes: [\"a[0:128]\"]}\n", []want{w(8, `"a`, "writes range a[0:128] is out of range of buffer a (64 bytes)")}},
	{"range past end, stages before buffers", "version: 1\nstages:\n  - {name: s, kernel: mix, writes: [\"a[0:128]\"]}\nbuffers:\n  - {name: a, bytes: 64}\n", []want{w(3, `"a`, "writes range a[0:128] is out of range of buffer a (64 bytes)")}},
	{"range of a buffer declared twice, the first", "version: 1\nbuffers:\n  - {name: a, bytes: 64}\n  - {name: a, bytes: 256}\nstages:\n  - {name: s, kernel: mix, writes: [\"a[0:128]\"]}\n", []want{
		w(4, "a,", `buffer "a" declared twice (first at t.yaml:3:5)`), w(6, `"a`, "writes range a[0:128] is out of range of buffer a (64 bytes)")}},
	{"range of a buffer declared twice, the first, after a stage writing the buffer before it", "version: 1\nbuffers:\n  - {name: a, bytes: 64}\n  - {name: a, bytes: 256}\nstages:\n  - {name: s, kernel: mix, writes: [a]}\n  - {name: t, kernel: mix, writes: [\"a[0:128]\"]}\n", []want{
		w(4, "a,", `buffer "a" declared twice (first at t.yaml:3:5)`), w(7, `"a`, "writes range a[0:128] is out of range of buffer a (64 bytes)")}},
	{"range of a buffer declared twice after the stage, the first", "version: 1\nstages:\n  - {name: s, kernel: mix, writes: [\"a[0:128]\"]}\nbuffers:\n  - {name: a, bytes: 64}\n  - {name: a, bytes: 256}\n", []want{
		w(3, `"a`, "writes range a[0:128] is out of range of buffer a (64 bytes)"), w(6, "a,", `buffer "a" declared twice (first at t.yaml:5:5)`)}},
	{"range negative offset", pre + "  - {name: s, kernel: mix, writes: [{buffer: a, offset: -4, bytes: 4}]}\n", []want{w(8, "-4", "offset -4 is negative")}},
	{"range zero bytes", pre + "  - {name: s, kernel: mix, writes: [{buffer: a, bytes: 0}]}\n", []want{w(8, "0}", "bytes 0 is not positive")}},
	{"range end before start", pre + "  - {name: s, kernel: mix, writes: [\"a[8:4]\"]}\n", []want{w(8, `"a`, "end 4 is not after start 8")}},
	{"range not numbers", pre + "  - {name: s, kernel: mix, writes: [\"a[x:4]\"]}\n", []want{w(8, `"a`, `start "x" is not a byte offset`)}},
	{"range no colon", pre + "  - {name: s, kernel: mix, writes: [\"a[4]\"]}\n", []want{w(8, `"a`, "a byte range is [start:end]")}},
	{"range unclosed", pre + "  - {name: s, kernel: mix, writes: [\"a[0:4\"]}\n", []want{w(8, `"a`, "a byte range ends with ']'")}},
	{"range negative short", pre + "  - {name: s, kernel: mix, writes: [\"a[-4:4]\"]}\n", []want{w(8, `"a`, "start -4 is negative")}},
	{"range offset past end", pre + "  - {name: s, kernel: mix, writes: [\"a[64:]\"]}\n", []want{w(8, `"a`, "offset 64 is past the end of buffer a (64 bytes)")}},
	{"range overflow", pre + "  - {name: s, kernel: mix, writes: [{buffer: a, offset: 9223372036854775807, bytes: 9223372036854775807}]}\n", []want{w(8, "{buffer", "range a[9223372036854775807:+9223372036854775807] is out of range of buffer a")}},
	{"range past end of buffer with offset", pre + "  - {name: s, kernel: mix, writes: [{buffer: a, offset: 60, bytes: 8}]}\n", []want{w(8, "{buffer", "range a[60:68] is out of range")}},
	{"access not a string", pre + "  - {name: s, kernel: mix, writes: [1]}\n", []want{w(8, "1]", "access must be a buffer name, got the integer 1")}},
	{"access unknown field", pre + "  - {name: s, kernel: mix, writes: [{buffer: a, size: 4}]}\n", []want{wh(8, "size", `unknown field "size"`, "offset, bytes")}},
	{"access missing buffer", pre + "  - {name: s, kernel: mix, writes: [{bytes: 4}]}\n", []want{w(8, "{bytes", `missing required field "buffer"`)}},
	{"writes overlap", pre + "  - {name: s, kernel: mix, writes: [\"a[0:32]\", \"a[16:48]\"]}\n", []want{w(8, `"a[16`, "writes a[0:32] and a[16:48] overlap")}},

	// Built-ins.
	{"unaligned", pre + "  - {name: s, kernel: mix, writes: [\"a[2:6]\"]}\n", []want{w(8, `"a`, "built-in mix needs 4-byte aligned accesses, a multiple of 4 bytes long; a[2:6] is not")}},
	{"odd length", pre + "  - {name: s, kernel: mix, writes: [\"a[0:6]\"]}\n", []want{w(8, `"a`, "a[0:6] is not")}},
	{"copy size mismatch", pre + "  - {name: s, kernel: copy, reads: [\"a[0:32]\"], writes: [b]}\n", []want{w(8, "b]", "built-in copy reads 32 bytes (a[0:32]) but writes 64 (b[0:64])")}},
	{"copy two reads", pre + "  - {name: s, kernel: copy, reads: [a, b], writes: [big]}\n", []want{wh(8, "reads", "built-in copy takes exactly 1 read, got 2", "copy: reads: [x]")}},
	{"copy no write", pre + "  - {name: s, kernel: copy, reads: [a]}\n", []want{w(8, "{", "built-in copy takes exactly 1 write, got 0")}},
	{"copy partial overlap", pre + "  - {name: s, kernel: copy, reads: [\"big[0:64]\"], writes: [\"big[32:96]\"]}\n", []want{w(8, `"big[0`, "reads big[0:64], which overlaps its write big[32:96] without being the same range")}},
	{"scale size mismatch", pre + "  - {name: s, kernel: scale, args: {a: 2}, reads: [a], writes: [big]}\n", []want{w(8, "big]", "built-in scale reads 64 bytes")}},
	{"scale missing a", pre + "  - {name: s, kernel: scale, reads: [a], writes: [b]}\n", []want{w(8, "{", "built-in scale needs the argument a")}},
	{"scale a not a number", pre + "  - {name: s, kernel: scale, args: {a: two}, reads: [a], writes: [b]}\n", []want{w(8, "two", "argument a must be a number")}},
	{"axpy write is not y", pre + "  - {name: s, kernel: axpy, args: {a: 2}, reads: [a, b], writes: [a]}\n", []want{wh(8, "a]}", "built-in axpy writes a[0:64], not the range b[0:64] it reads as y", "in place")}},
	{"axpy sizes", pre + "  - {name: s, kernel: axpy, args: {a: 2}, reads: [\"a[0:32]\", b], writes: [b]}\n", []want{w(8, "b],", "reads x a[0:32] (32 bytes) and y b[0:64] (64 bytes) of different sizes")}},
	{"axpy one read", pre + "  - {name: s, kernel: axpy, args: {a: 2}, reads: [a], writes: [a]}\n", []want{w(8, "reads", "built-in axpy takes exactly 2 reads, got 1")}},
	{"checksum small", pre + "  - {name: s, kernel: checksum, reads: [a], writes: [\"b[0:4]\"]}\n", []want{wh(8, `"b`, "built-in checksum writes 4 bytes (b[0:4]); it needs at least 8", "two 4-byte words")}},
	{"checksum overlap", pre + "  - {name: s, kernel: checksum, reads: [a], writes: [\"a[0:8]\"]}\n", []want{w(8, `"a`, "built-in checksum writes a[0:8], which overlaps its read a[0:64]")}},
	{"fill no args", pre + "  - {name: s, kernel: fill, writes: [a]}\n", []want{w(8, "{", "built-in fill needs exactly one of the arguments value, bits")}},
	{"fill both args", pre + "  - {name: s, kernel: fill, args: {value: 1, bits: 2}, writes: [a]}\n", []want{w(8, "args", "exactly one of the arguments value, bits")}},
	{"fill two writes", pre + "  - {name: s, kernel: fill, args: {value: 1}, writes: [a, b]}\n", []want{w(8, "writes", "built-in fill takes exactly 1 write, got 2")}},
	{"fill reads", pre + "  - {name: s, kernel: fill, args: {value: 1}, reads: [b], writes: [a]}\n", []want{w(8, "reads", "built-in fill takes exactly 0 reads, got 1")}},
	{"fill bits negative", pre + "  - {name: s, kernel: fill, args: {bits: -1}, writes: [a]}\n", []want{w(8, "-1", "bits must be an integer in [0, 4294967295]")}},
	{"fill bits float", pre + "  - {name: s, kernel: fill, args: {bits: 1.5}, writes: [a]}\n", []want{w(8, "1.5", "bits must be an integer")}},
	{"fill bits float literal", pre + "  - {name: s, kernel: fill, args: {bits: 2.0}, writes: [a]}\n", []want{wh(8, "2.0", "argument bits must be an integer in [0, 4294967295], got 2.0", "not 64.0")}},
	{"mix max_words float literal", pre + "  - {name: s, kernel: mix, args: {max_words: 8.0}, writes: [a]}\n", []want{w(8, "8.0", "argument max_words must be a positive integer, got 8.0")}},
	{"fill value overflow", pre + "  - {name: s, kernel: fill, args: {value: 1e40}, writes: [a]}\n", []want{w(8, "1e40", "argument value = 1e+40 overflows float32")}},
	{"builtin unknown arg", pre + "  - {name: s, kernel: mix, args: {spinus: 3}, writes: [a]}\n", []want{wh(8, "spinus", `unknown argument "spinus" for built-in mix`, "spin_us, max_words")}},
	{"copy takes no args", pre + "  - {name: s, kernel: copy, args: {a: 1}, reads: [a], writes: [b]}\n", []want{wh(8, "a: 1", `unknown argument "a" for built-in copy`, "takes no arguments")}},
	{"mix same offset, shorter read", pre + "  - {name: s, kernel: mix, reads: [\"a[0:32]\"], writes: [a]}\n", []want{w(8, `"a[0`, "built-in mix reads a[0:32], which overlaps its write a[0:64] without being the same range")}},
	{"mix same offset, longer read", pre + "  - {name: s, kernel: mix, reads: [a], writes: [\"a[0:32]\"]}\n", []want{w(8, `a]`, "built-in mix reads a[0:64], which overlaps its write a[0:32] without being the same range")}},
	{"mix partial overlap", pre + "  - {name: s, kernel: mix, reads: [\"a[0:32]\"], writes: [\"a[16:48]\"]}\n", []want{w(8, `"a[0`, "built-in mix reads a[0:32], which overlaps its write a[16:48] without being the same range")}},
	{"mix no write", pre + "  - {name: s, kernel: mix, reads: [a]}\n", []want{w(8, "{", "built-in mix takes at least 1 write, got 0")}},
	{"mix max_words zero", pre + "  - {name: s, kernel: mix, args: {max_words: 0}, writes: [a]}\n", []want{w(8, "0}", "max_words must be a positive integer")}},
	{"mix spin_us negative", pre + "  - {name: s, kernel: mix, args: {spin_us: -3}, writes: [a]}\n", []want{w(8, "-3", "spin_us must be ≥ 0")}},
	{"spin us string", pre + "  - {name: s, kernel: spin, args: {us: long}}\n", []want{w(8, "long", "argument us must be a number")}},
	{"spin unaligned", pre + "  - {name: s, kernel: spin, reads: [\"a[1:5]\"]}\n", []want{w(8, `"a`, "4-byte aligned")}},

	// User kernels.
	{"kernel arg missing", preK + "  - {name: s, kernel: myk, args: {x: a}, reads: [a]}\n", []want{wh(8, "args", "missing argument n (u32) of kernel myk", "{n: ...}")}},
	{"kernel args absent", preK + "  - {name: s, kernel: myk, reads: [a]}\n", []want{
		w(8, "{", "missing argument x (ptr)"), w(8, "{", "missing argument n (u32)")}},
	{"kernel arg unknown", preK + "  - {name: s, kernel: myk, args: {x: a, n: 1, m: 2}, reads: [a]}\n", []want{wh(8, "m: 2", `kernel myk has no parameter "m"`, "x (ptr), n (u32)")}},
	{"kernel ptr unknown buffer", preK + "  - {name: s, kernel: myk, args: {x: c, n: 1}, reads: [a]}\n", []want{w(8, "c,", `argument x names unknown buffer "c"`)}},
	{"kernel ptr not accessed", preK + "  - {name: s, kernel: myk, args: {x: b, n: 1}, reads: [a]}\n", []want{wh(8, "b,", "argument x passes buffer b, which the stage neither reads nor writes", "list b under reads")}},
	{"kernel ptr not a string", preK + "  - {name: s, kernel: myk, args: {x: 5, n: 1}, reads: [a]}\n", []want{w(8, "5", "argument x (ptr) must be a buffer name, got the integer 5")}},
	{"kernel u32 out of range", preK + "  - {name: s, kernel: myk, args: {x: a, n: -1}, reads: [a]}\n", []want{w(8, "-1", "argument n = -1 is out of range for u32")}},
	{"kernel u32 float", preK + "  - {name: s, kernel: myk, args: {x: a, n: 1.5}, reads: [a]}\n", []want{w(8, "1.5", "argument n (u32) must be an integer")}},

	// after and waits.
	{"after unknown", pre + "  - {name: s1, kernel: spin}\n  - {name: s2, kernel: spin, after: [s3]}\n", []want{wh(9, "s3", `stage s2: after names unknown stage "s3"`, "name a stage declared before this one")}},
	{"after self", pre + "  - {name: s1, kernel: spin, after: [s1]}\n", []want{w(8, "s1]", "stage s1: after names the stage itself")}},
	{"after twice", pre + "  - {name: s1, kernel: spin}\n  - {name: s2, kernel: spin, after: [s1, s1]}\n", []want{w(9, "s1]", "after lists s1 twice")}},
	{"after later stage", pre + "  - {name: s1, kernel: spin, after: [s2]}\n  - {name: s2, kernel: spin}\n", []want{
		wh(8, "s2]", "stage s1: after names s2, which is declared later", "declare s2 before s1")}},
	{"after cycle of two", pre + "  - {name: s1, kernel: spin, after: [s2]}\n  - {name: s2, kernel: spin, after: [s1]}\n", []want{
		w(8, "s2]", "after forms a cycle: s1 → s2 → s1")}},
	{"after cycle of three", pre + "  - {name: s1, kernel: spin, after: [s3]}\n  - {name: s2, kernel: spin, after: [s1]}\n  - {name: s3, kernel: spin, after: [s2]}\n  - {name: s4, kernel: spin, after: [s5]}\n  - {name: s5, kernel: spin}\n", []want{
		w(8, "s3]", "after forms a cycle: s1 → s2 → s3 → s1"),
		w(11, "s5]", "stage s4: after names s5, which is declared later")}},
	{"waits in sync auto", pre + "  - {name: s1, kernel: spin, stream: x}\n  - {name: s2, kernel: spin, stream: y, waits: [s1]}\n", []want{
		wh(9, "waits", "stage s2: waits is only allowed with sync: manual", "set sync: manual")}},
	{"manual without stream", "version: 1\nsync: manual\nstages:\n  - {name: s1, kernel: spin}\n", []want{wh(4, "{", "stage s1: sync: manual needs a stream for every stage", "stream: s0")}},
	{"waits unknown", "version: 1\nsync: manual\nstages:\n  - {name: sa, kernel: spin, stream: a}\n  - {name: s2, kernel: spin, stream: b, waits: [s_a]}\n", []want{wh(5, "s_a", `waits names unknown stage "s_a"`, `did you mean "sa"`)}},
	{"waits self", "version: 1\nsync: manual\nstages:\n  - {name: s1, kernel: spin, stream: a, waits: [s1]}\n", []want{w(4, "s1]", "waits names the stage itself")}},
	{"waits twice in both forms", "version: 1\nsync: manual\nstages:\n  - {name: s1, kernel: spin, stream: a}\n  - {name: s2, kernel: spin, stream: b, waits: [s1, {stage: s1}]}\n", []want{wh(5, "{stage", "stage s2: waits lists s1 twice", "list each stage once")}},
	{"waits twice as mappings", "version: 1\nsync: manual\nstages:\n  - {name: s1, kernel: spin, stream: a, event: e}\n  - {name: s2, kernel: spin, stream: b, waits: [{event: e, lag: 1}, {event: e, lag: 1}]}\n", []want{wh(5, "{event: e, lag: 1}]", "stage s2: waits lists event e with lag 1 twice", "list each event once")}},

	// Many errors at once: sorted by position, decode and check errors mixed.
	{"sorted", pre + "  - {name: s1, kernel: mix, writes: [in], bogus: 1}\n  - {name: s2, kernel: mixx}\n  - {name: s1, kernel: spin, duration_us: -1}\n", []want{
		w(8, "in]", "stage s1 writes to input buffer in"),
		w(8, "bogus", `unknown field "bogus"`),
		w(9, "mixx", `unknown kernel "mixx"`),
		w(10, "s1", `stage "s1" declared twice`),
		w(10, "-1", "duration_us must be ≥ 0")}},
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load([]byte(tc.src), "t.yaml", loadDir)
			if err == nil {
				t.Fatalf("Load succeeded (%v); want errors %v", s, tc.want)
			}
			if s != nil {
				t.Errorf("Load returned a spec and an error")
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %T is not an ErrorList: %v", err, err)
			}
			lines := strings.Split(tc.src, "\n")
			if len(list) != len(tc.want) {
				t.Errorf("got %d errors, want %d:\n%v", len(list), len(tc.want), err)
			}
			for i, wt := range tc.want {
				if i >= len(list) {
					break
				}
				e := list[i]
				wantPos := Pos{File: "t.yaml"}
				if wt.line > 0 {
					col := 1
					if wt.at != "" {
						c := strings.Index(lines[wt.line-1], wt.at)
						if c < 0 {
							t.Fatalf("bad test: %q not in line %d", wt.at, wt.line)
						}
						col = c + 1
					}
					wantPos.Line, wantPos.Col = wt.line, col
				}
				if e.Pos != wantPos {
					t.Errorf("error %d at %v, want %v: %v", i, e.Pos, wantPos, e)
				}
				if !strings.Contains(e.Msg, wt.msg) {
					t.Errorf("error %d message %q does not contain %q", i, e.Msg, wt.msg)
				}
				if !strings.Contains(e.Hint, wt.hint) {
					t.Errorf("error %d hint %q does not contain %q", i, e.Hint, wt.hint)
				}
				if e.Hint == "" {
					t.Errorf("error %d has no hint: %v", i, e)
				}
			}
		})
	}
}

func TestLoadErrorCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\nbuffers:\n")
	for i := range 30 {
		fmt.Fprintf(&b, "  - {name: b%d, bytes: 4, colour: red}\n", i)
	}
	b.WriteString(spinStage)
	_, err := Load([]byte(b.String()), "cap.yaml", loadDir)
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("got %v, want an ErrorList", err)
	}
	if len(list) != MaxErrors+1 {
		t.Fatalf("got %d errors, want %d", len(list), MaxErrors+1)
	}
	if last := list[MaxErrors]; !strings.Contains(last.Msg, "10 more errors not shown") {
		t.Errorf("last error = %v, want a count of the rest", last)
	}
	if list[MaxErrors-1].Pos.Line != 2+MaxErrors {
		t.Errorf("error %d at %v, want line %d", MaxErrors-1, list[MaxErrors-1].Pos, 2+MaxErrors)
	}
}

func TestErrorFormat(t *testing.T) {
	_, err := Load([]byte("version: 1\nstages: [{name: s, kernel: spin, colour: red}]\n"), "x/y.yaml", "")
	want := "x/y.yaml:2:34: stage s: unknown field \"colour\"\n\thint: known fields: " + strings.Join(stageFields, ", ")
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Pos.Line != 2 {
		t.Errorf("errors.As(*Error) = %v", e)
	}
	if got := (&Error{Pos: Pos{File: "f", Line: 1, Col: 2}, Msg: "m"}).Error(); got != "f:1:2: m" {
		t.Errorf("error without hint: %q", got)
	}
	two := ErrorList{{Pos: Pos{File: "f", Line: 1, Col: 1}, Msg: "a"}, {Pos: Pos{File: "f", Line: 2, Col: 1}, Msg: "b", Hint: "h"}}
	if got := two.Error(); got != "f:1:1: a\nf:2:1: b\n\thint: h" {
		t.Errorf("ErrorList.Error() = %q", got)
	}
	if (ErrorList{}).Err() != nil {
		t.Error("empty ErrorList.Err() != nil")
	}
}

func TestLoadFileMissing(t *testing.T) {
	_, err := LoadFile(filepath.Join(t.TempDir(), "nope.yaml"))
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "cannot read spec") {
		t.Fatalf("got %v, want a spec error", err)
	}
}

func TestLoadDefaults(t *testing.T) {
	src := `version: 1
buffers:
  - {name: x, bytes: 64}
  - {name: y, dtype: f16, shape: [2, 3, 4]}
  - {name: z, dtype: u8, shape: []}
stages:
  - {name: s, kernel: mix, reads: [x, "x[8:]", "y[:16]"], writes: ["y[16:48]"], args: {spin_us: 3, max_words: 2}}
  - {name: t, kernel: spin, args: {us: 2.5}, block: [128, 2], stream: 7}
`
	s, err := Load([]byte(src), "dir/defaults.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "defaults" || s.Sync != SyncAuto || s.Version != 1 || s.File != "dir/defaults.yaml" || s.Dir != "dir" {
		t.Errorf("spec header = %+v", s)
	}
	x, y, z := s.Buffers[0], s.Buffers[1], s.Buffers[2]
	if x.Where != WhereDevice || x.Role != RoleTemp || x.Init.Kind != InitZeros || x.Bytes != 64 || x.Copies != 0 {
		t.Errorf("x = %+v", x)
	}
	if y.Bytes != 48 || y.DType != "f16" || !reflect.DeepEqual(y.Shape, []int64{2, 3, 4}) {
		t.Errorf("y = %+v", y)
	}
	if z.Bytes != 1 {
		t.Errorf("scalar z = %+v, want 1 byte", z)
	}
	if x.Pos != (Pos{File: "dir/defaults.yaml", Line: 3, Col: 5}) {
		t.Errorf("x.Pos = %v", x.Pos)
	}
	st := s.Stages[0]
	got := fmt.Sprint(st.Reads, st.Writes)
	if got != "[x[0:64] x[8:64] y[0:16]] [y[16:48]]" {
		t.Errorf("accesses = %s", got)
	}
	if v, ok := st.Args["spin_us"].(int); !ok || v != 3 {
		t.Errorf("spin_us = %#v, want int 3", st.Args["spin_us"])
	}
	t2 := s.Stages[1]
	if v, ok := t2.Args["us"].(float64); !ok || v != 2.5 {
		t.Errorf("us = %#v, want float64 2.5", t2.Args["us"])
	}
	if t2.Launch.Block != [3]int{128, 2, 1} || t2.Launch.Grid != [3]int{} {
		t.Errorf("launch = %+v", t2.Launch)
	}
	if t2.Stream != "7" {
		t.Errorf("stream = %q", t2.Stream)
	}
	if t2.Reads != nil || t2.After != nil || t2.Waits != nil {
		t.Errorf("absent lists should be nil: %+v", t2)
	}
}

// TestLoadRangeAtTheEnd: a stage's byte range at both sides of its
// buffer's end, in each form of an access: ending exactly at the end is
// loaded as written; ending one byte past (the same aligned range of a
// buffer one byte shorter) is an error at the access.
func TestLoadRangeAtTheEnd(t *testing.T) {
	for _, c := range []struct {
		access string
		want   string // the loaded range, or the error
		ok     bool
	}{
		{`"a[16:64]"`, "a[16:64]", true},
		{`"c[16:64]"`, "writes range c[16:64] is out of range of buffer c (63 bytes)", false},
		{`{buffer: a, offset: 16, bytes: 48}`, "a[16:64]", true},
		{`{buffer: c, offset: 16, bytes: 48}`, "writes range c[16:64] is out of range of buffer c (63 bytes)", false},
		{`{buffer: a, offset: 0, bytes: 64}`, "a[0:64]", true},
		{`{buffer: c, offset: 0, bytes: 64}`, "writes range c[0:64] is out of range of buffer c (63 bytes)", false},
		{`"a[60:]"`, "a[60:64]", true},
		{`"a[64:]"`, "offset 64 is past the end of buffer a (64 bytes)", false},
		{`"a[60:68]"`, "writes range a[60:68] is out of range of buffer a (64 bytes)", false},
	} {
		src := "version: 1\nbuffers:\n  - {name: a, bytes: 64}\n  - {name: c, bytes: 63}\nstages:\n  - {name: s, kernel: spin, args: {us: 1}, writes: [" + c.access + "]}\n"
		s, err := Load([]byte(src), "t.yaml", loadDir)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v", c.access, err)
		case c.ok && fmt.Sprint(s.Stages[0].Writes[0]) != c.want:
			t.Errorf("%s: loaded as %v, want %s", c.access, s.Stages[0].Writes[0], c.want)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "t.yaml:6:") || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error at t.yaml:6 saying %q", c.access, err, c.want)
		}
	}
}

func TestLoadFull(t *testing.T) {
	s, err := LoadFile(filepath.Join(loadDir, "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != "spec full (7 buffers, 1 kernels, 8 stages)" {
		t.Errorf("String() = %s", got)
	}
	if s.Options != (Options{Strategy: "default", MaxStreams: 4}) {
		t.Errorf("options = %+v", s.Options)
	}
	b := s.Buffer("frame2")
	if b == nil || b.Init != (Init{Kind: InitFile, Path: "frame.bin"}) || b.Role != RoleInput {
		t.Errorf("frame2 = %+v", b)
	}
	if r := s.Buffer("ring"); r.Copies != 2 {
		t.Errorf("ring copies = %d", r.Copies)
	}
	if o := s.Buffer("ones"); o.Init != (Init{Kind: InitFill, Value: 1.5}) {
		t.Errorf("ones init = %+v", o.Init)
	}
	if f := s.Buffer("frame"); f.Init != (Init{Kind: InitRandom, Seed: 7}) || f.Where != WhereHostPinned {
		t.Errorf("frame = %+v", f)
	}
	if k := s.Kernels[0]; k.Entry != "my_kernel" || len(k.Params) != 2 || k.Params[1] != (ParamSpec{Name: "n", Type: "u32"}) {
		t.Errorf("kernel = %+v", k)
	}
	prep := s.Stages[s.StageIndex("prep")]
	if got := fmt.Sprint(prep.Reads); got != "[frame[0:4096] frame2[0:512] frame2[512:4096]]" {
		t.Errorf("prep reads = %s", got)
	}
	if prep.DurationUS != 12.5 || prep.Launch.Block != [3]int{256, 1, 1} {
		t.Errorf("prep = %+v", prep)
	}
}

// TestLoadAliases checks that YAML anchors and aliases work anywhere.
func TestLoadAliases(t *testing.T) {
	src := `version: 1
buffers:
  - &a {name: a, bytes: 64}
stages:
  - {name: s, kernel: mix, reads: &r [a], writes: [{buffer: a}]}
  - {name: t, kernel: mix, reads: *r, writes: [a], args: &args {spin_us: 1}}
  - {name: u, kernel: mix, reads: *r, writes: [a], args: *args}
`
	s, err := Load([]byte(src), "alias.yaml", loadDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Stages[2].Reads) != 1 || s.Stages[2].Args["spin_us"] != 1 {
		t.Errorf("aliases not followed: %+v", s.Stages[2])
	}
}

// clearPos removes what depends on where a spec was loaded from.
func clearPos(s *Spec) *Spec {
	c := *s
	c.File, c.Dir = "", ""
	c.Buffers = append([]BufferSpec(nil), s.Buffers...)
	for i := range c.Buffers {
		c.Buffers[i].Pos = Pos{}
	}
	c.Kernels = append([]KernelSpec(nil), s.Kernels...)
	for i := range c.Kernels {
		c.Kernels[i].Pos = Pos{}
	}
	c.Stages = append([]StageSpec(nil), s.Stages...)
	for i := range c.Stages {
		st := &c.Stages[i]
		st.Pos = Pos{}
		st.Reads = append([]Access(nil), st.Reads...)
		st.Writes = append([]Access(nil), st.Writes...)
		for j := range st.Reads {
			st.Reads[j].Pos = Pos{}
		}
		for j := range st.Writes {
			st.Writes[j].Pos = Pos{}
		}
		st.WaitFor = append([]WaitSpec(nil), st.WaitFor...)
		for j := range st.WaitFor {
			st.WaitFor[j].Pos = Pos{}
		}
	}
	c.Streams = append([]StreamSpec(nil), s.Streams...)
	for i := range c.Streams {
		c.Streams[i].Pos = Pos{}
	}
	c.Captures = append([]CaptureSpec(nil), s.Captures...)
	for i := range c.Captures {
		c.Captures[i].Pos = Pos{}
	}
	return &c
}

// roundTrip checks Load → WriteYAML → Load gives an equal spec, and that
// writing is stable (the second write gives the same bytes).
func roundTrip(t *testing.T, s *Spec, dir string) {
	t.Helper()
	var out1 bytes.Buffer
	if err := WriteYAML(&out1, s); err != nil {
		t.Fatal(err)
	}
	s2, err := Load(out1.Bytes(), "roundtrip.yaml", dir)
	if err != nil {
		t.Fatalf("reloading written spec: %v\n%s", err, out1.String())
	}
	if a, b := clearPos(s), clearPos(s2); !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip differs:\nbefore %#v\nafter  %#v\nYAML:\n%s", a, b, out1.String())
	}
	var out2 bytes.Buffer
	if err := WriteYAML(&out2, s2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out1.Bytes(), out2.Bytes()) {
		t.Fatalf("WriteYAML not stable:\n%s\n---\n%s", out1.String(), out2.String())
	}
}

func TestRoundTrip(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(loadDir, "*.yaml"))
	seeds, _ := filepath.Glob("../specs/*/*.yaml")
	files = append(files, seeds...)
	if len(files) < 2 {
		t.Fatalf("only %d spec files found", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := LoadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, s, filepath.Dir(f))
		})
	}
}

// TestWriteYAMLGoSpec writes a spec built in Go (as the graph importer
// does: defaults left empty, whole-buffer accesses with Bytes set) and loads it.
func TestWriteYAMLGoSpec(t *testing.T) {
	s := &Spec{
		Name: "go-built",
		Buffers: []BufferSpec{
			{Name: "in", Bytes: 64, Role: RoleInput, Init: Init{Kind: InitRandom, Seed: 3}},
			{Name: "mid", Bytes: 64},
			{Name: "out", Bytes: 64, Role: RoleOutput, Where: WhereHostPinned},
		},
		Stages: []StageSpec{
			{Name: "a", Kernel: BuiltinMix, Args: map[string]any{"spin_us": 6.0, "max_words": 64}, Launch: Launch{Grid: [3]int{1, 1, 1}},
				Reads: []Access{{Buffer: "in", Bytes: 64}}, Writes: []Access{{Buffer: "mid"}}, DurationUS: 6},
			{Name: "b", Kernel: BuiltinScale, Args: map[string]any{"a": float32(0.5)},
				Reads: []Access{{Buffer: "mid", Offset: 32, Bytes: 32}}, Writes: []Access{{Buffer: "out", Bytes: 32}}, After: []string{"a"}},
			{Name: "true", Kernel: BuiltinSpin, Args: map[string]any{"us": uint32(2)}},
		},
	}
	var out bytes.Buffer
	if err := WriteYAML(&out, s); err != nil {
		t.Fatal(err)
	}
	want := `version: 1
name: go-built
buffers:
  - {name: in, bytes: 64, role: input, init: {random: 3}}
  - {name: mid, bytes: 64}
  - {name: out, bytes: 64, where: host_pinned, role: output}
stages:
  - name: a
    kernel: mix
    args: {max_words: 64, spin_us: 6.0}
    grid: [1, 1, 1]
    reads: [in]
    writes: [mid]
    duration_us: 6.0
  - name: b
    kernel: scale
    args: {a: 0.5}
    reads: ["mid[32:64]"]
    writes: ["out[0:32]"]
    after: [a]
  - name: "true"
    kernel: spin
    args: {us: 2}
`
	if out.String() != want {
		t.Errorf("WriteYAML:\n%s\nwant:\n%s", out.String(), want)
	}
	s2, err := Load(out.Bytes(), "go.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if s2.Stages[2].Name != "true" || s2.Stages[0].Writes[0].Bytes != 64 || s2.Stages[1].Args["a"] != 0.5 {
		t.Errorf("reloaded = %+v", s2.Stages)
	}
	roundTrip(t, s2, "")

	bad := &Spec{Stages: []StageSpec{{Name: "x", Kernel: "spin", Args: map[string]any{"us": []int{1}}}}}
	if err := WriteYAML(&bytes.Buffer{}, bad); err == nil {
		t.Error("WriteYAML accepted a list argument")
	}
}

// TestLoadWaitsLater checks that a manual spec may wait on a later-declared
// stage: the wait is issued before the record and waits for nothing, a race
// that `dagrun check` reports rather than a malformed spec.
func TestLoadWaitsLater(t *testing.T) {
	src := "version: 1\nsync: manual\nstages:\n  - {name: s1, kernel: spin, stream: a, waits: [s2]}\n  - {name: s2, kernel: spin, stream: b}\n"
	s, err := Load([]byte(src), "t.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Stages[0].Waits; len(got) != 1 || got[0] != "s2" {
		t.Errorf("waits = %v", got)
	}
}

// TestLoadMemoryBudgetWords: memory_budget takes bytes, auto or none
// (none: no budget, as when the field is left out).
func TestLoadMemoryBudgetWords(t *testing.T) {
	for src, want := range map[string]int64{"none": 0, "auto": MemoryBudgetAuto, "4096": 4096} {
		s, err := Load([]byte("version: 1\noptions: {memory_budget: "+src+"}\n"+spinStage), "t.yaml", ".")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if s.Options.MemoryBudget != want {
			t.Errorf("memory_budget: %s gave %d, want %d", src, s.Options.MemoryBudget, want)
		}
	}
}
