package dag

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Validate runs every check of Load on a spec built in Go, and returns a
// copy of s with every default filled in as Load fills it (Bytes of
// buffers given by dtype and shape, whole-buffer accesses given without
// Bytes, Where, Role, Init.Kind, Sync, Name). It does so with the loader
// itself: it writes s with WriteYAML and loads the text, so a spec built in
// Go obeys exactly the rules of a spec file. s is not modified.
//
// On failure it returns (nil, ErrorList) with every problem found, each
// naming the object and field by its path in s (stages[1].reads,
// buffers[0]) instead of a file position (stage arguments of a type no
// spec file holds, such as a slice or NaN, are reported first and alone,
// each at its stages[i].args): for example
//
//	stages[1].reads: stage b: reads unknown buffer "nope"
//
// The returned spec has no positions; File and Dir are s's (Dir is where
// relative PTX and init files resolve).
func Validate(s *Spec) (*Spec, error) {
	// An argument no spec file can hold has no text to load: each is
	// reported at its stage, before the rest is checked.
	var args ErrorList
	for i := range s.Stages {
		st := &s.Stages[i]
		for _, name := range slices.Sorted(maps.Keys(st.Args)) {
			if _, err := argText(st.Args[name]); err != nil {
				args = append(args, &Error{Pos: Pos{File: fmt.Sprintf("stages[%d].args", i)},
					Msg: fmt.Sprintf("stage %s: argument %s: %v", st.Name, name, err), Hint: "argument values are integers, finite floats or strings"})
			}
		}
	}
	if len(args) > 0 {
		return nil, args
	}
	var buf bytes.Buffer
	if err := WriteYAML(&buf, s); err != nil {
		return nil, ErrorList{{Pos: Pos{File: "spec"}, Msg: strings.TrimPrefix(err.Error(), "dag: writing ")}}
	}
	text := buf.String()
	out, err, _ := loadText(text, goSpecFile, s.Dir, LoadOptions{AllowOutside: true}, false)
	if err != nil {
		return nil, goErrors(err.(ErrorList), text)
	}
	out.File, out.Dir = s.File, s.Dir
	if s.Name == "" {
		out.Name = ""
	}
	for i := range out.Buffers {
		out.Buffers[i].Pos = s.Buffers[i].Pos
	}
	for i := range out.Kernels {
		out.Kernels[i].Pos = s.Kernels[i].Pos
	}
	for i := range out.Stages {
		st, orig := &out.Stages[i], &s.Stages[i]
		st.Pos = orig.Pos
		for j := range st.Reads {
			st.Reads[j].Pos = orig.Reads[j].Pos
		}
		for j := range st.Writes {
			st.Writes[j].Pos = orig.Writes[j].Pos
		}
		for j := range st.WaitFor {
			st.WaitFor[j].Pos = orig.WaitFor[j].Pos
		}
	}
	return out, nil
}

// goSpecFile names the text Validate loads; it never reaches the caller.
const goSpecFile = "\x00go-spec"

// goErrors replaces the positions in errs (in text, as WriteYAML wrote
// it) with paths in the spec: each line of text is one field of the
// header, one buffer or kernel (a flow mapping), or one field of a stage.
func goErrors(errs ErrorList, text string) ErrorList {
	lines := strings.Split(text, "\n")
	items := goItems(lines)
	path := func(line, col int) string {
		if line < 1 || line > len(lines) {
			return "spec"
		}
		p := items[line-1]
		ln := lines[line-1]
		if p == "" || col < 1 {
			return cmpOrStr(p, fieldOf(ln))
		}
		if col == 5 && strings.HasPrefix(ln, "  - ") {
			return p // the item itself
		}
		if strings.HasPrefix(p, "stages[") {
			return p + "." + fieldOf(strings.TrimLeft(ln, " -"))
		}
		if k := keyBefore(ln, col-1); k != "" {
			return p + "." + k
		}
		return p
	}
	out := make(ErrorList, len(errs))
	for i, e := range errs {
		c := *e
		if e.Pos.File == goSpecFile {
			c.Pos = Pos{File: path(e.Pos.Line, e.Pos.Col)}
		}
		c.Msg = goPosRef.ReplaceAllStringFunc(e.Msg, func(m string) string {
			sub := goPosRef.FindStringSubmatch(m)
			if sub[1] != "" {
				n, _ := strconv.Atoi(sub[1])
				col, _ := strconv.Atoi(sub[2])
				return path(n, col)
			}
			n, _ := strconv.Atoi(sub[3])
			return path(n, 0)
		})
		out[i] = &c
	}
	return out
}

var goPosRef = regexp.MustCompile(regexp.QuoteMeta(goSpecFile) + `:(\d+):(\d+)|line (\d+)`)

func cmpOrStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// goItems returns, for each line of WriteYAML's text, the item it
// belongs to ("buffers[0]", "stages[2]"), or "" for header lines.
func goItems(lines []string) []string {
	items := make([]string, len(lines))
	section, item := "", -1
	for i, ln := range lines {
		switch {
		case ln == "buffers:" || ln == "kernels:" || ln == "stages:":
			section, item = strings.TrimSuffix(ln, ":"), -1
		case strings.HasPrefix(ln, "  - ") && section != "":
			item++
			items[i] = section + "[" + strconv.Itoa(item) + "]"
		case strings.HasPrefix(ln, "    ") && section == "stages":
			items[i] = section + "[" + strconv.Itoa(item) + "]"
		default:
			section = ""
		}
	}
	return items
}

// keyBefore returns the key of the field whose key or value covers
// character col (0-based) of a WriteYAML line: the last "key: " that
// starts the line's content or follows "{" or ", " before col.
func keyBefore(ln string, col int) string {
	col = min(col, len(ln))
	key := ""
	for j := 0; j < col; j++ {
		start := strings.TrimLeft(ln[:j], " -") == "" ||
			ln[j-1] == '{' || j >= 2 && ln[j-2:j] == ", "
		if !start {
			continue
		}
		k := j
		for k < len(ln) && (ln[k] >= 'a' && ln[k] <= 'z' || ln[k] == '_') {
			k++
		}
		if k > j && strings.HasPrefix(ln[k:], ": ") {
			key = ln[j:k]
		}
	}
	return key
}

// fieldOf is the key of a "key: value" line.
func fieldOf(ln string) string {
	k, _, _ := strings.Cut(ln, ":")
	return k
}
