package planner

import (
	"bytes"
	"strings"
	"testing"
)

// TestDumpAfterSkippedPassManual: a sync: manual spec skips the assign and
// sync passes (its streams and waits are its own), so dumping after one
// of them is an error that says so, not an empty dump.
func TestDumpAfterSkippedPassManual(t *testing.T) {
	s := manual(spec(stage("a", on("s0"), writes("x")), stage("b", on("s1"), reads("x"), waits("a"))))
	for _, pass := range []string{"assign", "sync"} {
		var buf bytes.Buffer
		_, err := Build(s, Options{DumpAfter: pass, Dump: &buf})
		if err == nil || !strings.Contains(err.Error(), "sync: manual") || !strings.Contains(err.Error(), `"`+pass+`"`) {
			t.Errorf("dump after %s: err = %v, dump %q; want an error naming the pass and sync: manual", pass, err, buf.String())
		}
	}
	var buf bytes.Buffer
	if _, err := Build(s, Options{DumpAfter: "lifetimes", Dump: &buf}); err != nil || !strings.HasPrefix(buf.String(), `# after pass "lifetimes"`) {
		t.Errorf("dump after lifetimes: err = %v, dump %q", err, buf.String())
	}
}
