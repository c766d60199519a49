package dag

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPTXReadOnce: a PTX file that many kernels name is read once, and a
// missing entry's hint names the nearest few of the file's entries and how
// many others there are, not every one.
func TestPTXReadOnce(t *testing.T) {
	dir := t.TempDir()
	var ptx strings.Builder
	const n = 300
	for i := range n {
		fmt.Fprintf(&ptx, ".visible .entry kern%03d(\n\t.param .u64 p\n)\n{\n\tret;\n}\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "k.ptx"), []byte(ptx.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var spec strings.Builder
	spec.WriteString("version: 1\nkernels:\n")
	for i := range n {
		fmt.Fprintf(&spec, "  - {name: k%d, ptx: k.ptx, entry: kern%03d}\n", i, i)
	}
	spec.WriteString("  - {name: missing, ptx: k.ptx, entry: kern5000}\n")
	spec.WriteString("buffers: [{name: x, bytes: 64}]\nstages: [{name: s, kernel: k0, writes: [x]}]\n")
	before := ptxReads.Load()
	msg := loadErr(t, spec.String(), dir, LoadOptions{})
	if reads := ptxReads.Load() - before; reads != 1 {
		t.Errorf("k.ptx, named by %d kernels, read %d times", n+1, reads)
	}
	if !strings.Contains(msg, `entry "kern5000" not found in k.ptx`) || !strings.Contains(msg, "(and 295 more)") || len(msg) > 400 {
		t.Errorf("the missing entry's error (%d bytes): %.600s", len(msg), msg)
	}
}
