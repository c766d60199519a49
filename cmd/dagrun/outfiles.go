package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode"

	"github.com/dagrun/dagrun"
)

// outFiles holds the files a command writes (--out, --trace, --timeline)
// in staging folders until it succeeds: commit moves them into place,
// discard removes them, so a failed command leaves no partial output. A
// staging folder (".dagrun-tmp-*") sits in the nearest existing folder
// above each destination, on the same file system, so each move is a
// rename.
type outFiles struct {
	mu    sync.Mutex        // outputs may arrive from the executor's host side
	stage map[string]string // existing folder → its staging folder
	moves []outMove
}

type outMove struct{ from, to string }

// checkOutPath rejects, before any work, an output path that cannot be
// written: flag names it in the error. A file path (dir false) must not
// be a folder and its folder must exist; a folder path (--out) must be a
// folder if it exists, and its parent must exist.
func checkOutPath(flag, path string, dir bool) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() != dir {
			if dir {
				return usagef("%s %s: not a folder", flag, path)
			}
			return usagef("%s %s: is a folder, want a file name", flag, path)
		}
		if dir {
			return writable(flag, path, path) // the files go into it
		}
		return writable(flag, path, filepath.Dir(filepath.Clean(path)))
	}
	parent := filepath.Dir(filepath.Clean(path))
	if st, err := os.Stat(parent); err != nil || !st.IsDir() {
		return usagef("%s %s: folder %s does not exist", flag, path, parent)
	}
	return writable(flag, path, parent)
}

// checkOutClash rejects, before any work, a --trace and a --timeline
// that name one file (one would overwrite the other), and either one
// naming input, the spec or plan file that run reads.
func checkOutClash(input, trace, timeline string) error {
	if sameFile(trace, timeline) {
		return usagef("--trace %s and --timeline %s name the same file: give each its own name", trace, timeline)
	}
	for _, c := range []struct{ flag, path string }{{"--trace", trace}, {"--timeline", timeline}} {
		if sameFile(c.path, input) {
			return usagef("%s %s: the same file as %s, which run reads: name another file", c.flag, c.path, input)
		}
	}
	return nil
}

// sameFile reports whether paths a and b, both given, name one file: the
// same absolute path, or the same existing file by another name.
func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if aa, err := filepath.Abs(a); err == nil {
		if bb, err := filepath.Abs(b); err == nil && aa == bb {
			return true
		}
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// writable checks that the folder dir, where the staging folder for path
// will be made, takes a new entry: it makes and removes one.
func writable(flag, path, dir string) error {
	probe, err := os.MkdirTemp(dir, ".dagrun-tmp-*")
	if err != nil {
		return usagef("%s %s: cannot write in folder %s (%v)", flag, path, dir, errors.Unwrap(err))
	}
	return os.Remove(probe)
}

// path returns where to write the file that belongs at dst: a fresh
// name in a staging folder, moved to dst by commit.
func (o *outFiles) path(dst string) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	dst = filepath.Clean(dst)
	base := filepath.Dir(dst)
	for {
		if st, err := os.Stat(base); err == nil && st.IsDir() {
			break
		}
		up := filepath.Dir(base)
		if up == base {
			return "", fmt.Errorf("%s: no folder above it exists", dst)
		}
		base = up
	}
	if o.stage == nil {
		o.stage = map[string]string{}
	}
	st, ok := o.stage[base]
	if !ok {
		var err error
		if st, err = os.MkdirTemp(base, ".dagrun-tmp-*"); err != nil {
			return "", err
		}
		o.stage[base] = st
		if stagedTo != nil { // the watcher removes it if this process crashes
			fmt.Fprintln(stagedTo, st)
		}
	}
	tmp := filepath.Join(st, fmt.Sprintf("%d-%s", len(o.moves), filepath.Base(dst)))
	o.moves = append(o.moves, outMove{tmp, dst})
	return tmp, nil
}

// write stages data for dst (mode 0644).
func (o *outFiles) write(dst string, data []byte) error {
	tmp, err := o.path(dst)
	if err != nil {
		return err
	}
	return os.WriteFile(tmp, data, 0o644)
}

// commit moves every staged file into place, creating the folders they
// need, and removes the staging folders. A destination that is a folder is
// an error before anything is moved.
func (o *outFiles) commit() error {
	defer o.discard()
	for _, m := range o.moves {
		if st, err := os.Stat(m.to); err == nil && st.IsDir() {
			return fmt.Errorf("%s is a folder: nothing written", m.to)
		}
	}
	for _, m := range o.moves {
		if _, err := os.Stat(m.from); err != nil {
			continue // never written (the writer failed and said so)
		}
		if err := os.MkdirAll(filepath.Dir(m.to), 0o755); err != nil {
			return err
		}
		if err := os.Rename(m.from, m.to); err != nil {
			return err
		}
	}
	o.moves = nil
	return nil
}

// discard removes the staging folders and what is in them.
func (o *outFiles) discard() {
	for _, st := range o.stage {
		os.RemoveAll(st)
	}
	o.stage = nil
}

// outName is a buffer name as a file name in --out: characters other than
// letters and digits (of any script: 出力 stays 出力), '.', '_' and '-'
// become '_', and a name that is empty or starts with '.' (".." among
// them) gets a '_' in front, so that no name leaves the folder or hides in
// it.
func outName(buffer string) string {
	s := strings.Map(func(r rune) rune {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, buffer)
	if s == "" || s[0] == '.' {
		s = "_" + s
	}
	return s
}

// checkOutNames rejects, before the run, output buffers (role: output,
// the ones --out writes) whose names are the same file name in --out
// (outName: "a/b" and "a_b").
func checkOutNames(p *dagrun.StreamPlan) error {
	seen := map[string]string{}
	for _, b := range p.Buffers {
		if b.Role != dagrun.RoleOutput {
			continue
		}
		n := outName(b.Name)
		if other, dup := seen[n]; dup {
			return usagef("--out: buffers %q and %q would both be written as %s: rename one", other, b.Name, n)
		}
		seen[n] = b.Name
	}
	return nil
}
