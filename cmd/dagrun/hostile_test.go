package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestHostilePlans runs every case of testdata/hostile-plans.txt through
// check --plan and run --plan: each gets its exit code and its words (a
// run that succeeds prints its figures instead of check's), and leaves
// nothing on stdout when it is bad input.
func TestHostilePlans(t *testing.T) {
	t.Parallel()
	base, err := os.ReadFile(filepath.Join("testdata", "plans", "fan-out-fan-in.json"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join("testdata", "hostile-plans.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for line := 0; sc.Scan(); {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		c, err := parseHostile(text)
		if err != nil {
			t.Fatalf("hostile-plans.txt:%d: %v", line, err)
		}
		n++
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, err := c.apply(base)
			if err != nil {
				t.Fatalf("hostile-plans.txt:%d: %v", line, err)
			}
			path := filepath.Join(t.TempDir(), c.name+".json")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"check", "--plan", path}, {"run", "--backend", "sim", "--plan", path}} {
				out, errs, code := cli(t, args...)
				want := c.exit
				if args[0] == "check" {
					want = c.checkExit
				}
				if code != want {
					t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args[:1], " "), code, want, out, errs)
				}
				if (args[0] == "check" && c.checkExit == c.exit || code != exitOK) && !strings.Contains(out+errs, c.words) {
					t.Errorf("%s: output does not say %q\nstdout:\n%s\nstderr:\n%s", args[0], c.words, out, errs)
				}
				if code == exitUsage && out != "" {
					t.Errorf("%s: bad input but stdout has:\n%s", args[0], out)
				}
			}
		})
	}
	if n == 0 {
		t.Fatal("no cases in hostile-plans.txt")
	}
}

type hostileCase struct {
	name            string
	edits           []string
	checkExit, exit int // check's and run's
	words           string
}

func parseHostile(text string) (hostileCase, error) {
	lhs, rhs, ok := strings.Cut(text, "=>")
	if !ok {
		return hostileCase{}, fmt.Errorf("no => in %q", text)
	}
	fs := strings.Fields(lhs)
	if len(fs) < 1 {
		return hostileCase{}, fmt.Errorf("no name in %q", text)
	}
	code, words, _ := strings.Cut(strings.TrimSpace(rhs), " ")
	ce, re, both := strings.Cut(code, "/") // CHECK/RUN, or one code for both
	if !both {
		re = ce
	}
	checkExit, err := strconv.Atoi(ce)
	if err != nil {
		return hostileCase{}, fmt.Errorf("exit code %q: %v", code, err)
	}
	exit, err := strconv.Atoi(re)
	if err != nil {
		return hostileCase{}, fmt.Errorf("exit code %q: %v", code, err)
	}
	return hostileCase{name: fs[0], edits: fs[1:], checkExit: checkExit, exit: exit, words: strings.TrimSpace(words)}, nil
}

var editRE = regexp.MustCompile(`^(-?)([a-z_]+(?:\[\d+\]|\.[a-z_]+)*)(\+?=(.*))?$`)

// apply edits the plan file b (numbers kept exact) and returns it.
func (c hostileCase) apply(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, err
	}
	for _, e := range c.edits {
		m := editRE.FindStringSubmatch(e)
		if m == nil {
			return nil, fmt.Errorf("edit %q: want PATH=JSON, PATH+=JSON or -PATH", e)
		}
		del, path, op, val := m[1] == "-", m[2], m[3], m[4]
		var v any
		if !del {
			d := json.NewDecoder(strings.NewReader(val))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				return nil, fmt.Errorf("edit %q: value: %v", e, err)
			}
		}
		steps := regexp.MustCompile(`[a-z_]+|\[\d+\]`).FindAllString(path, -1)
		var err error
		root, err = edit(root, steps, func(old any) (any, bool, error) {
			switch {
			case del:
				return nil, false, nil
			case strings.HasPrefix(op, "+="):
				l, ok := old.([]any)
				if !ok {
					return nil, false, fmt.Errorf("%s is not a list", path)
				}
				return append(l, v), true, nil
			}
			return v, true, nil
		})
		if err != nil {
			return nil, fmt.Errorf("edit %q: %v", e, err)
		}
	}
	return json.MarshalIndent(root, "", "  ")
}

// edit replaces the value at steps below v by f(old); keep false deletes it.
func edit(v any, steps []string, f func(any) (any, bool, error)) (any, error) {
	if len(steps) == 0 {
		nv, _, err := f(v)
		return nv, err
	}
	s := steps[0]
	if strings.HasPrefix(s, "[") {
		i, _ := strconv.Atoi(strings.Trim(s, "[]"))
		l, ok := v.([]any)
		if !ok || i >= len(l) {
			return nil, fmt.Errorf("no %s", s)
		}
		if len(steps) == 1 {
			nv, keep, err := f(l[i])
			if !keep {
				return append(l[:i:i], l[i+1:]...), err
			}
			l[i] = nv
			return l, err
		}
		nv, err := edit(l[i], steps[1:], f)
		l[i] = nv
		return l, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no field %s", s)
	}
	if len(steps) == 1 {
		nv, keep, err := f(m[s])
		if !keep {
			delete(m, s)
		} else {
			m[s] = nv
		}
		return m, err
	}
	nv, err := edit(m[s], steps[1:], f)
	m[s] = nv
	return m, err
}

// TestSimMemoryBeforeRun: a plan whose buffers the simulator cannot hold
// (a 1 TiB buffer) is refused before any work, exit 2, with the bytes and
// the way out, not after planning as a failed run naming a Go option.
func TestSimMemoryBeforeRun(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "big.yaml")
	os.WriteFile(spec, []byte("version: 1\nname: big\nbuffers:\n  - {name: a, bytes: 1099511627776, role: output}\nstages:\n  - {name: s, kernel: fill, writes: [a], args: {value: 1}}\n"), 0o644)
	out, errOut, code := cli(t, "run", "--backend", "sim", spec)
	if code != exitUsage || out != "" || !strings.Contains(errOut, "1099511627776 bytes (1024.0 GiB), more than the simulator holds") || strings.Contains(errOut, "sim.Options") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and the simulator's limit before the run", code, out, errOut)
	}
}
