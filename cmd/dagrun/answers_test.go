package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSpec writes text to name in a new temporary folder.
func writeSpec(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// primeRings is a sync: auto spec of n ring buffers whose sizes are the
// first n primes: their least common multiple passes 2^63 at n = 16.
func primeRings(n int) string {
	primes := []int{2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71}[:n]
	var b strings.Builder
	b.WriteString("version: 1\nbuffers:\n")
	for i, p := range primes {
		fmt.Fprintf(&b, "  - {name: r%d, bytes: 64, copies: %d}\n", i, p)
	}
	b.WriteString("  - {name: out, bytes: 64, role: output}\nstages:\n")
	var reads []string
	for i := range primes {
		fmt.Fprintf(&b, "  - {name: w%d, kernel: fill, args: {value: 1.0}, writes: [r%d]}\n", i, i)
		reads = append(reads, fmt.Sprintf("r%d", i))
	}
	fmt.Fprintf(&b, "  - {name: sum, kernel: mix, reads: [%s], writes: [out]}\n", strings.Join(reads, ", "))
	return b.String()
}

// TestRingPeriodOverflowRefused: a sync: auto spec whose ring sizes'
// least common multiple overflows an int is no race (the planner's period
// saturates), and check refuses it as run does, with exit 2 and what to
// change, instead of reporting thousands of races with fixes that add
// waits.
func TestRingPeriodOverflowRefused(t *testing.T) {
	t.Parallel()
	for _, n := range []int{18, 20} {
		spec := writeSpec(t, "rings.yaml", primeRings(n))
		for _, args := range [][]string{{"check", spec}, {"run", "--backend", "sim", "--iterations", "3", spec}} {
			out, errs, code := cli(t, args...)
			if code != exitUsage || strings.Contains(out+errs, "RACE") || !strings.Contains(errs, "fewer distinct ring sizes") {
				t.Errorf("%d rings: %s: exit %d, want 2 naming the ring sizes\nstdout:\n%.1500s\nstderr:\n%.1500s", n, args[0], code, out, errs)
			}
		}
	}
}

// lagSpec is a hand-synchronized spec whose stage up waits for pre lag
// iterations back; with racy, up rewrites the ring buffer frame of two
// copies that pre of the previous iteration still reads.
func lagSpec(lag int, racy bool) string {
	if racy {
		return fmt.Sprintf(`version: 1
sync: manual
buffers:
  - {name: frame, bytes: 4096, copies: 2}
  - {name: res, bytes: 4096, role: output}
stages:
  - {name: up,  kernel: fill, args: {value: 1.0}, writes: [frame], stream: h2d, waits: [{stage: pre, lag: %d}]}
  - {name: pre, kernel: scale, args: {a: 2.0}, reads: [frame], writes: [res], stream: comp, waits: [up]}
`, lag)
	}
	return fmt.Sprintf(`version: 1
sync: manual
buffers:
  - {name: x, bytes: 4096}
  - {name: y, bytes: 4096, role: output}
stages:
  - {name: up,  kernel: fill, args: {value: 1.0}, writes: [x], stream: a, waits: [{stage: pre, lag: %d}]}
  - {name: pre, kernel: fill, args: {value: 2.0}, writes: [y], stream: b}
`, lag)
}

// TestLongLagCheckAndRunAgree: a lag that gives an event more slots than
// a plan has events is checked like any other (a racy spec is the race,
// exit 1, not a plan error), and a race-free spec whose period is past
// what run takes is refused by check as by run (exit 2, the same words);
// one iteration short of that limit both accept.
func TestLongLagCheckAndRunAgree(t *testing.T) {
	t.Parallel()
	racy := writeSpec(t, "racy.yaml", lagSpec(1100, true))
	out, errs, code := cli(t, "check", racy)
	if code != exitFailure || !strings.Contains(out, "RACE") || strings.Contains(out+errs, "plan: events") {
		t.Errorf("racy, lag 1100: exit %d, want 1 with the race\nstdout:\n%.1500s\nstderr:\n%.1500s", code, out, errs)
	}
	// One event of lag+1 slots beside one of 1: the period is lag+1.
	for _, c := range []struct {
		lag int
		ok  bool
	}{{1023, true}, {1024, false}, {1100, false}} {
		spec := writeSpec(t, "free.yaml", lagSpec(c.lag, false))
		// Graph mode replays one iteration at a time (no slots across
		// iterations): its check and run take every one of these.
		for _, args := range [][]string{{"check", "--mode", "graph", spec}, {"run", "--backend", "sim", "--mode", "graph", "--iterations", "3", spec}} {
			if out, errs, code := cli(t, args...); code != exitOK {
				t.Errorf("lag %d: %v: exit %d, want 0\nstdout:\n%.1500s\nstderr:\n%.1500s", c.lag, args[:len(args)-1], code, out, errs)
			}
		}
		for _, args := range [][]string{{"check", spec}, {"run", "--backend", "sim", "--iterations", "3", spec}} {
			out, errs, code := cli(t, args...)
			switch {
			case c.ok && code != exitOK:
				t.Errorf("lag %d: %v: exit %d, want 0\nstdout:\n%.1500s\nstderr:\n%.1500s", c.lag, args[:len(args)-1], code, out, errs)
			case !c.ok && (code != exitUsage || strings.Contains(out, "ok: no race") || !strings.Contains(errs, "repeat only after more than 1024 iterations")):
				t.Errorf("lag %d: %v: exit %d, want 2 refusing the period\nstdout:\n%.1500s\nstderr:\n%.1500s", c.lag, args[:len(args)-1], code, out, errs)
			}
		}
	}
}

// TestTruncatedRacesFixCountIsALowerBound: with more races than the
// verifier lists, the fixes of the races listed are not said to fix them
// all (250 pairs of streams race, 50 buffers each: the first 10,000 races
// reach 200 of the 250 waits needed).
func TestTruncatedRacesFixCountIsALowerBound(t *testing.T) {
	t.Parallel()
	const pairs, bufs = 250, 50
	var b strings.Builder
	b.WriteString("version: 1\nsync: manual\nbuffers:\n")
	for i := range pairs {
		for j := range bufs {
			fmt.Fprintf(&b, "  - {name: b%d_%d, bytes: 64}\n", i, j)
		}
		fmt.Fprintf(&b, "  - {name: o%d, bytes: 64}\n", i)
	}
	b.WriteString("stages:\n")
	for i := range pairs {
		var names []string
		for j := range bufs {
			names = append(names, fmt.Sprintf("b%d_%d", i, j))
		}
		list := strings.Join(names, ", ")
		fmt.Fprintf(&b, "  - {name: w%d, kernel: mix, writes: [%s], stream: a%d}\n", i, list, i)
		fmt.Fprintf(&b, "  - {name: r%d, kernel: mix, reads: [%s], writes: [o%d], stream: c%d}\n", i, list, i, i)
	}
	spec := writeSpec(t, "pairs.yaml", b.String())
	out, errs, code := cli(t, "check", spec)
	first := strings.SplitN(out, "\n", 3)
	if code != exitFailure || len(first) < 2 || !strings.Contains(first[1], "or more races") {
		t.Fatalf("exit %d, want 1 with 10000 or more races\nstdout:\n%.1500s\nstderr:\n%.1500s", code, out, errs)
	}
	if strings.Contains(first[1], "fix them") || !strings.Contains(first[1], "fix the first 10000") || !strings.Contains(first[1], "may need more waits") {
		t.Errorf("the fix count is not said to cover only the races listed:\n%s", first[1])
	}
}
