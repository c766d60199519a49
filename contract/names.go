package contract

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// hidden reports whether a terminal shows r wrongly or not at all: C0
// and C1 controls, DEL, spaces other than ' ' (no-break, line and
// paragraph separators), format characters (bidi overrides, zero-width
// spaces), the other default-ignorable code points that Unicode's
// DerivedCoreProperties lists (variation selectors, the Hangul fillers,
// the combining grapheme joiner: letters and marks that print as
// nothing), and bytes that are not UTF-8. Two names that look alike
// would differ, and a control character in a message acts on the
// terminal.
func hidden(r rune) bool {
	if r < utf8.RuneSelf {
		return r < ' ' || r == 0x7f
	}
	return !unicode.IsPrint(r) || r == utf8.RuneError ||
		unicode.In(r, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// RuneHidden says, for a rune that a terminal shows wrongly or not at all
// (hidden), what it is ("contains U+202E, ..."); "" for any other rune.
func RuneHidden(r rune) string {
	if !hidden(r) {
		return ""
	}
	return fmt.Sprintf("contains %U, a control, format, space or invisible character that a terminal shows wrongly or not at all", r)
}

// NameHidden says, for a name of a stage, buffer, stream or kernel that
// holds a character a terminal shows wrongly or not at all, what it holds
// ("contains U+202E, ..."), as the spec loader says it of a name; "" for any other name. Plan
// files are held to it (plan.Plan.Validate).
func NameHidden(name string) string {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= utf8.RuneSelf || c < ' ' || c == 0x7f {
			for _, r := range name[i:] {
				if m := RuneHidden(r); m != "" {
					return m
				}
			}
			return ""
		}
	}
	return ""
}

// IsCollective reports whether kernel names a collective built-in.
func IsCollective(kernel string) bool { return kernel == BuiltinAllReduce }

// MaxDevices bounds a spec's and a plan's devices (and every device index + 1).
const MaxDevices = 64

// RankName is the name of rank r of collective stage name: the stage the
// planner lowers it to on the rank's device ("reduce/0").
func RankName(name string, r int) string { return name + "/" + strconv.Itoa(r) }
