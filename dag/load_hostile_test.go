package dag

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loadErr loads src (as t.yaml in dir) and returns the error text, failing
// unless Load refused it with a positioned ErrorList in under 5 s.
func loadErr(t *testing.T, src, dir string, o LoadOptions) string {
	t.Helper()
	start := time.Now()
	s, err := LoadWith([]byte(src), filepath.Join(dir, "t.yaml"), dir, o)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Load took %v", d)
	}
	if err == nil || s != nil {
		t.Fatalf("Load accepted the spec")
	}
	if _, ok := err.(ErrorList); !ok {
		t.Fatalf("error %T is not an ErrorList", err)
	}
	return err.Error()
}

// A small file of aliases that expand to millions of nodes is refused
// before the loader builds them.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\nbuffers: [{name: x, bytes: 4096}]\nstages:\n  - &s {name: s, kernel: mix, writes: [x], reads: [")
	for i := range 3000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("x")
	}
	b.WriteString("]}\n")
	for range 3000 {
		b.WriteString("  - *s\n")
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	msg := loadErr(t, b.String(), t.TempDir(), LoadOptions{})
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if !strings.Contains(msg, fmt.Sprintf("YAML aliases (*name) expand to more than %d nodes", MaxAliasNodes)) {
		t.Errorf("got %s", msg)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<30 {
		t.Errorf("the loader allocated %d MB", grown>>20)
	}
	// A few aliases are fine.
	if _, err := Load([]byte("version: 1\nbuffers: [{name: x, bytes: 64}]\nstages:\n  - {name: a, kernel: mix, args: &a {spin_us: 1}, writes: [x]}\n  - {name: b, kernel: mix, args: *a, writes: [x]}\n"), "t.yaml", ""); err != nil {
		t.Error(err)
	}
}

// One stage with 100,000 writes is checked in near-linear time (the
// overlap check sorts by offset).
func TestManyWritesOneStage(t *testing.T) {
	const n = 60000 // under MaxStageAccesses
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nbuffers: [{name: x, bytes: %d}, {name: y, bytes: 64}]\nstages:\n  - {name: s, kernel: mix, reads: [y], writes: [", 4*n)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "\"x[%d:%d]\"", 4*i, 4*i+4)
	}
	b.WriteString("]}\n")
	start := time.Now()
	s, err := Load([]byte(b.String()), "t.yaml", "")
	if err != nil || len(s.Stages[0].Writes) != n {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Load took %v", d)
	}
	// Past the limit: refused, with the limit.
	over := strings.Replace(b.String(), "writes: [", "writes: [\"x[0:4]\", "+strings.Repeat("\"x[0:4]\", ", MaxStageAccesses-n), 1)
	if msg := loadErr(t, over, t.TempDir(), LoadOptions{}); !strings.Contains(msg, fmt.Sprintf("more than the %d a stage may have", MaxStageAccesses)) {
		t.Errorf("got %s", msg)
	}
	// Overlapping writes are found among many, each reported once.
	dup := strings.Replace(b.String(), "]}\n", ", \"x[6:10]\", \"x[100:104]\"]}\n", 1)
	msg := loadErr(t, dup, t.TempDir(), LoadOptions{})
	if !strings.Contains(msg, "writes x[4:8] and x[6:10] overlap") || !strings.Contains(msg, "writes x[100:104] and x[100:104] overlap") {
		t.Errorf("got %s", msg)
	}
}

// The limits of the format are errors naming the limit, at the place it
// is exceeded.
func TestSpecLimits(t *testing.T) {
	saved := limits
	defer func() { limits = saved }()
	limits.stages, limits.buffers, limits.accesses = 3, 2, 4
	dir := t.TempDir()
	cases := []struct{ src, want string }{
		{"version: 1\nstages: [{name: a, kernel: spin}, {name: b, kernel: spin}, {name: c, kernel: spin}, {name: d, kernel: spin}, {name: e, kernel: spin}]\n",
			"t.yaml:2:85: more than 3 stages: a spec has at most 3 (dag.MaxStages)"},
		{"version: 1\nbuffers: [{name: a, bytes: 4}, {name: b, bytes: 4}, {name: c, bytes: 4}]\nstages: [{name: s, kernel: spin}]\n",
			"t.yaml:2:53: more than 2 buffers"},
		{"version: 1\nbuffers: [{name: a, bytes: 64}]\nstages: [{name: s, kernel: mix, reads: [a, a, a], writes: [a]}, {name: t, kernel: mix, writes: [a]}]\n",
			"t.yaml:3:96: stage t: writes: more than 4 reads and writes in the spec (dag.MaxAccesses)"},
		{"version: 1\nbuffers: [{name: a, bytes: 2199023255552}]\nstages: [{name: s, kernel: spin}]\n",
			"t.yaml:2:28: buffer a: 2199023255552 bytes, more than the 1099511627776 (1 TiB) a buffer may have"},
		{"version: 1\nbuffers: [{name: a, dtype: f32, shape: [1048576, 1048576]}]\nstages: [{name: s, kernel: spin}]\n",
			"t.yaml:2:40: buffer a: 4398046511104 bytes, more than the 1099511627776 (1 TiB)"},
		{"version: 1\nbuffers: [{name: a, bytes: 1099511627776}, {name: b, bytes: 4, copies: 2}]\nstages: [{name: s, kernel: spin}]\n",
			"t.yaml:2:44: buffer b: the buffers (bytes times copies) add up to more than the 1099511627776 (1 TiB) a spec may have"},
	}
	for _, c := range cases {
		if msg := loadErr(t, c.src, dir, LoadOptions{}); !strings.HasPrefix(msg, filepath.Join(dir, c.want)) {
			t.Errorf("%s\ngot  %s\nwant %s", c.src, msg, c.want)
		}
	}
	// The spec file's size is checked before it is read.
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxSpecBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := LoadFile(big); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than a spec may have (%d bytes)", MaxSpecBytes)) {
		t.Errorf("big spec: %v", err)
	}
}

// Init and PTX files resolve inside the spec's folder; a path that leads
// out is refused without being looked up (the message is the same whether
// the file exists or not), unless the caller allows it. Only regular files
// are read: a fifo or a device is refused at once.
func TestPathsConfined(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "spec")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(root, "secret.bin")
	if err := os.WriteFile(secret, make([]byte, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link.bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ok.bin"), make([]byte, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := func(path string) string {
		return fmt.Sprintf("version: 1\nbuffers: [{name: a, bytes: 64, init: {file: %q}}]\nstages: [{name: s, kernel: spin}]\n", path)
	}
	for _, p := range []string{secret, "../secret.bin", "link.bin", "../nothing.bin", filepath.Join(root, "nothing.bin")} {
		msg := loadErr(t, spec(p), dir, LoadOptions{})
		if !strings.Contains(msg, "buffer a: init file "+p+" is outside the spec's folder") || strings.Contains(msg, "no such") || strings.Contains(msg, "bytes, the buffer") {
			t.Errorf("%s: got %s", p, msg)
		}
	}
	if _, err := LoadWith([]byte(spec("ok.bin")), filepath.Join(dir, "t.yaml"), dir, LoadOptions{}); err != nil {
		t.Errorf("a file in the folder: %v", err)
	}
	for _, p := range []string{secret, "../secret.bin", "link.bin"} {
		if _, err := LoadWith([]byte(spec(p)), filepath.Join(dir, "t.yaml"), dir, LoadOptions{AllowOutside: true}); err != nil {
			t.Errorf("%s allowed: %v", p, err)
		}
	}
	ptx := fmt.Sprintf("version: 1\nkernels: [{name: k, ptx: %q, entry: k}]\nstages: [{name: s, kernel: k}]\n", "../secret.bin")
	if msg := loadErr(t, ptx, dir, LoadOptions{}); !strings.Contains(msg, "kernel k: PTX file ../secret.bin is outside the spec's folder") {
		t.Errorf("ptx: %s", msg)
	}
	// A fifo is refused at once instead of blocking the loader.
	fifo := filepath.Join(dir, "fifo.bin")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no fifos here:", err)
	}
	for _, src := range []string{spec("fifo.bin"), strings.Replace(ptx, "../secret.bin", "fifo.bin", 1)} {
		if msg := loadErr(t, src, dir, LoadOptions{}); !strings.Contains(msg, "fifo.bin is not a regular file") {
			t.Errorf("fifo: %s", msg)
		}
	}
	if _, err := LoadFile(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("spec fifo: %v", err)
	}
	if _, err := LoadWith([]byte(spec("/dev/zero")), filepath.Join(dir, "t.yaml"), dir, LoadOptions{AllowOutside: true}); err == nil || !strings.Contains(err.Error(), "/dev/zero is not a regular file") {
		t.Errorf("device: %v", err)
	}
}

// A gzip-compressed spec or trace (the repository keeps large traces as
// .yaml.gz) is refused with what to do, not as a YAML syntax error.
func TestCompressedSpecSaysDecompress(t *testing.T) {
	msg := loadErr(t, "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", t.TempDir(), LoadOptions{})
	if !strings.Contains(msg, "gzip-compressed") || !strings.Contains(msg, "gunzip -k") {
		t.Errorf("got %s", msg)
	}
	// One of the two magic bytes is not gzip's: the YAML error stands.
	msg = loadErr(t, "\x1f\x8a\x08", t.TempDir(), LoadOptions{})
	if strings.Contains(msg, "gzip") {
		t.Errorf("got %s", msg)
	}
}
