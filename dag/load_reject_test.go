package dag

import (
	"strings"
	"testing"
)

// Names a terminal shows wrongly or not at all, a float tag where an
// integer is wanted, a duration over the limit, and after: in a
// hand-synchronized spec: each is an error at its line and column.
func init() {
	errorCases = append(errorCases, []struct {
		name string
		src  string
		want []want
	}{
		{"name with a C1 control (CSI)", buf(`  - {name: "a\u009b31mb", bytes: 64}` + "\n"), []want{w(3, `"a`, "U+009B")}},
		{"name with a no-break space", buf(`  - {name: "a\u00a0b", bytes: 64}` + "\n"), []want{w(3, `"a`, "U+00A0")}},
		{"name with a line separator", buf(`  - {name: "a\u2028b", bytes: 64}` + "\n"), []want{w(3, `"a`, "U+2028")}},
		{"name with a bidi override", "version: 1\nstages: [{name: \"s\\u202eb\", kernel: spin}]\n", []want{w(2, `"s`, "U+202E")}},
		{"name with a variation selector", buf(`  - {name: "a\ufe0fb", bytes: 64}` + "\n"), []want{w(3, `"a`, "U+FE0F")}},
		{"name with a hangul filler", "version: 1\nstages: [{name: \"s\\u3164\", kernel: spin}]\n", []want{w(2, `"s`, "U+3164")}},
		{"name with a combining grapheme joiner", buf(`  - {name: "a\u034fb", bytes: 64}` + "\n"), []want{w(3, `"a`, "U+034F")}},
		{"stream name with a zero-width space", "version: 1\nstages: [{name: s, kernel: spin, stream: \"a\\u200bb\"}]\n", []want{w(2, `"a`, "U+200B")}},
		{"float tag for an integer", buf("  - {name: a, bytes: !!float 64}\n"), []want{wh(3, "!!float", "tagged !!float", "bytes: 64")}},
		{"float tag for an integer argument", "version: 1\nbuffers: [{name: a, bytes: 64}]\nstages: [{name: s, kernel: mix, writes: [a], args: {max_words: !!float 64}}]\n",
			[]want{wh(3, "!!float", "argument max_words: 64 is tagged !!float, but a positive integer is wanted", "max_words: 64")}},
		{"float tag for a lag", "version: 1\nsync: manual\nstages:\n  - {name: a, kernel: spin, stream: x}\n  - {name: s, kernel: spin, stream: y, waits: [{stage: a, lag: !!float 2}]}\n",
			[]want{wh(5, "!!float", "lag: 2 is tagged !!float", "lag: 2")}},
		{"int tag on a fraction", buf("  - {name: a, bytes: !!int 64.5}\n"), []want{w(3, "!!int", "64.5 is tagged !!int, but is no integer")}},
		{"float tag on a nan", buf("  - {name: a, bytes: !!float .nan}\n"), []want{w(3, "!!float", "bytes must be an integer, got the number .nan")}},
		{"duration over the limit", "version: 1\nstages: [{name: s, kernel: spin, duration_us: 1e12}]\n", []want{wh(2, "1e12", "stage s: duration_us 1e+12 µs is more than", "60 s")}},
		{"duration just over the limit", "version: 1\nstages: [{name: s, kernel: spin, duration_us: 60000000.5}]\n", []want{w(2, "6000", "is more than")}},
		{"after in a manual spec", "version: 1\nsync: manual\nstages:\n  - {name: s1, kernel: spin, stream: a}\n  - {name: s2, kernel: spin, stream: b, after: [s1]}\n",
			[]want{wh(5, "after", "stage s2: after is only allowed with sync: auto", "waits: [s1]")}},
	}...)
}

// TestDurationAtLimitLoads: a duration of exactly the limit (60 s) loads;
// one a half µs over it is refused (errorCases).
func TestDurationAtLimitLoads(t *testing.T) {
	if _, err := Load([]byte("version: 1\nstages: [{name: s, kernel: spin, duration_us: 60000000}]\n"), "t.yaml", loadDir); err != nil {
		t.Fatal(err)
	}
}

// TestOtherNamesRefuseInvisibleCharacters: every kind of name (spec,
// kernel, event, stream) refuses a bidi override, with its position.
func TestOtherNamesRefuseInvisibleCharacters(t *testing.T) {
	for _, src := range []string{
		"version: 1\nname: \"a\\u202eb\"\n" + spinStage,
		"version: 1\nsync: manual\nstages: [{name: s, kernel: spin, stream: a, event: \"e\\u202eb\"}]\n",
		"version: 1\nkernels:\n  - {name: \"k\\u202e\", ptx: kernels/my.ptx, entry: my_kernel}\n" + spinStage,
	} {
		_, err := Load([]byte(src), "t.yaml", loadDir)
		if err == nil || !strings.Contains(err.Error(), "U+202E") || !strings.Contains(err.Error(), "t.yaml:") {
			t.Errorf("%q: %v, want an error at its position naming U+202E", src, err)
		}
	}
}
