package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"unicode"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/cmdline"
	"github.com/dagrun/dagrun/internal/safefile"
)

// outFiles holds the files a command writes (--out, --trace, --timeline)
// in staging folders until it succeeds: commit moves them into place,
// discard removes them, so a failed command leaves no partial output. A
// staging folder (".dagrun-tmp-*") sits in the nearest existing folder
// above each destination, on the same file system, so each move is a
// rename. Every path is claimed before the work (claim): a path that
// cannot be written, or that clashes with another the command writes, is
// refused then, never found after the run. A destination that is a fifo
// or a character device (/dev/null) is written through, never replaced.
type outFiles struct {
	mu      sync.Mutex        // outputs may arrive from the executor's host side
	stage   map[string]string // existing folder → its staging folder ("": the system's temporary folder)
	moves   []outMove
	claims  []outClaim
	through map[string]*os.File // destination → the fifo or device it writes through, opened by claim
}

type outMove struct{ from, to string }

// claimKind is what a claimed path becomes.
type claimKind int

const (
	claimFile      claimKind = iota // one file
	claimFolder                     // a folder other files go into (--out)
	claimOwnFolder                  // a folder of one writer's files only (a streamed output's NNNNNN.bin)
)

// outClaim is a path a command writes: who writes it (a flag, or
// "--out: buffer NAME's file"), the path as given and as an absolute path,
// and the output buffer it holds ("" for other files).
type outClaim struct {
	who, path, abs, buffer string
	kind                   claimKind
}

// Linux's limits on a file name (one component) and a path, in bytes.
const (
	maxNameBytes = 255
	maxPathBytes = 4095
)

// claim records, before any work, that the command writes path (kind: a
// file or a folder), and rejects it, as a usage error naming who, when it
// cannot be written: a name longer than the file system takes; a folder
// where a file is wanted or the other way round; a symbolic link (dagrun
// never replaces one; a link to a folder is a fine --out); a device other
// than a character device, or a socket; a missing folder above it (unless
// a folder claimed before makes it); a folder that takes no new entry.
// A path that is, lies inside, or holds a path claimed before (one file
// overwriting another, an output in the way of another's folder, --trace
// as --out or as a buffer's file in it) is refused too. A fifo or character device is opened
// for writing here and written through by commit: a fifo that no process
// reads is refused.
func (o *outFiles) claim(who, path string, kind claimKind) error {
	return o.claimBuffer(who, path, kind, "")
}

// claimBuffer is claim of the file or folder of output buffer buffer.
func (o *outFiles) claimBuffer(who, path string, kind claimKind, buffer string) error {
	if path == "" {
		return nil
	}
	if err := nameFits(who, path); err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return usagef("%s %s: %v", who, quotePath(path), err)
	}
	n := outClaim{who: who, path: path, abs: abs, buffer: buffer, kind: kind}
	for _, c := range o.claims {
		if err := clash(c, n); err != nil {
			return err
		}
	}
	if err := o.onDisk(n); err != nil {
		return err
	}
	o.mu.Lock()
	o.claims = append(o.claims, n)
	o.mu.Unlock()
	return nil
}

// nameFits rejects a path with a name (between two separators) longer
// than maxNameBytes, or longer than maxPathBytes in all; the message shows
// only the start of it.
func nameFits(who, path string) error {
	for _, part := range strings.Split(path, string(filepath.Separator)) {
		if len(part) > maxNameBytes {
			return usagef("%s %s: a name of %d bytes, more than a file system takes (%d bytes): shorten it", who, short(part), len(part), maxNameBytes)
		}
	}
	if len(path) > maxPathBytes {
		return usagef("%s %s: a path of %d bytes, more than a file system takes (%d bytes): shorten it", who, short(path), len(path), maxPathBytes)
	}
	return nil
}

// short is quotePath of the start of s, for a message that must not print
// a name of a megabyte.
func short(s string) string {
	if len(s) > 40 {
		s = strings.ToValidUTF8(s[:40], "") + "…"
	}
	return quotePath(s)
}

// clash is the usage error of claim n against the earlier claim c: the
// same path, or one inside the other where the outer one is a file or a
// folder of one writer's files.
func clash(c, n outClaim) error {
	if c.abs == n.abs || sameFile(c.path, n.path) {
		if c.buffer != "" && n.buffer != "" {
			return usagef("--out: buffers %q and %q would both be written as %s: rename one", c.buffer, n.buffer, quotePath(filepath.Base(n.path)))
		}
		return usagef("%s %s and %s %s name the same file: give each its own name", c.who, quotePath(c.path), n.who, quotePath(n.path))
	}
	for _, p := range [][2]outClaim{{c, n}, {n, c}} {
		outer, inner := p[0], p[1]
		if outer.kind == claimFolder {
			continue
		}
		if rel, err := filepath.Rel(outer.abs, inner.abs); err == nil && filepath.IsLocal(rel) {
			what := "a file"
			if outer.kind == claimOwnFolder {
				what = "a folder of its own files"
			}
			return usagef("%s %s lies inside %s %s, which is %s: give it a path of its own", inner.who, quotePath(inner.path), outer.who, quotePath(outer.path), what)
		}
	}
	return nil
}

// onDisk checks what the file system holds at claim n's path (claim).
func (o *outFiles) onDisk(n outClaim) error {
	who, path := n.who, quotePath(n.path)
	st, err := os.Lstat(n.path)
	switch {
	case err == nil && st.Mode()&os.ModeSymlink != 0:
		target, _ := os.Readlink(n.path)
		fst, serr := os.Stat(n.path)
		switch {
		case serr != nil:
			return usagef("%s %s: a symbolic link to nothing (%s): remove it or name another path", who, path, quotePath(target))
		case n.kind == claimFolder && fst.IsDir():
			return writable(who, path, n.path) // the files go into the folder it leads to
		case n.kind == claimFile && n.buffer == "" && fst.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) != 0:
			// A path the user named (/dev/stdout, /dev/fd/N of a pipe);
			// inside --out, where dagrun names the files, a link is
			// someone's, and is refused whatever it leads to.
			return o.writeThrough(n)
		}
		return usagef("%s %s: a symbolic link (to %s), which dagrun does not replace: name the file it leads to, or another path", who, path, quotePath(target))
	case err == nil && st.IsDir():
		if n.kind == claimFile {
			return usagef("%s %s: is a folder, want a file name", who, path)
		}
		if n.kind == claimOwnFolder {
			if err := ownFilesRegular(who, n.path); err != nil {
				return err
			}
		}
		return writable(who, path, n.path)
	case err == nil && n.kind == claimOwnFolder:
		return usagef("%s %s: a file is in the way of the folder its files go into: move it, or give --out another folder", who, path)
	case err == nil && n.kind == claimFolder:
		return usagef("%s %s: not a folder", who, path)
	case err == nil && st.Mode().IsRegular():
		return writable(who, path, filepath.Dir(n.abs))
	case err == nil && st.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) != 0:
		return o.writeThrough(n)
	case err == nil:
		return usagef("%s %s: not a regular file (%v): dagrun writes a regular file, or through a fifo or a character device (/dev/null), and never replaces what is there; name another path", who, path, st.Mode().Type())
	case !errors.Is(err, fs.ErrNotExist):
		return usagef("%s %s: %v (a file in the way of a folder above it?)", who, path, errors.Unwrap(err))
	}
	// A new entry: its folder must exist, or be a folder claimed before.
	parent := filepath.Dir(n.abs)
	for _, c := range o.claims {
		if c.kind != claimFile && c.abs == parent {
			return nil
		}
	}
	if st, err := os.Stat(parent); err != nil || !st.IsDir() {
		return usagef("%s %s: folder %s does not exist", who, path, quotePath(filepath.Dir(filepath.Clean(n.path))))
	}
	return writable(who, path, parent)
}

// writeThrough opens claim n's fifo or character device for writing,
// for commit to write through: a fifo that no process reads is refused
// (without blocking).
func (o *outFiles) writeThrough(n outClaim) error {
	f, err := os.OpenFile(n.path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ENXIO) {
		return usagef("%s %s: a fifo that no process reads: start its reader first", n.who, quotePath(n.path))
	}
	if err != nil {
		return usagef("%s %s: %v", n.who, quotePath(n.path), errors.Unwrap(err))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.through == nil {
		o.through = map[string]*os.File{}
	}
	o.through[n.abs] = f
	return nil
}

// ownFilesRegular rejects a folder of streamed files (NNNNNN.bin) that
// holds one of those names as something other than a regular file.
func ownFilesRegular(who, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return usagef("%s %s: %v", who, quotePath(dir), errors.Unwrap(err))
	}
	for _, e := range ents {
		if !e.Type().IsRegular() && streamedName.MatchString(e.Name()) {
			return usagef("%s %s: %s is not a regular file (%v), and a frame's output goes there: move it", who, quotePath(dir), quotePath(e.Name()), e.Type())
		}
	}
	return nil
}

// streamedName matches the names of a streamed output's files.
var streamedName = regexp.MustCompile(`^[0-9]{6,}\.bin$`)

// checkOutClash rejects, before any work, a --trace or --timeline naming
// input, the spec or plan file that run reads (the two naming one file
// is claim's to find).
func checkOutClash(input, trace, timeline string) error {
	for _, c := range []struct{ flag, path string }{{"--trace", trace}, {"--timeline", timeline}} {
		if sameFile(c.path, input) {
			return usagef("%s %s: the same file as %s, which run reads: name another file", c.flag, quotePath(c.path), quotePath(input))
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
func writable(who, path, dir string) error {
	probe, err := os.MkdirTemp(dir, ".dagrun-tmp-*")
	if err != nil {
		return usagef("%s %s: cannot write in folder %s (%v)", who, path, quotePath(dir), errors.Unwrap(err))
	}
	return os.Remove(probe)
}

// quotePath is path as messages print it (safefile.Quote): control
// characters escaped.
func quotePath(path string) string { return safefile.Quote(path) }

// path returns where to write the file that belongs at dst: a fresh
// name in a staging folder, moved to dst by commit.
func (o *outFiles) path(dst string) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	dst = filepath.Clean(dst)
	base := filepath.Dir(dst)
	if _, ok := o.through[o.absOf(dst)]; ok {
		base = "" // a fifo or device: staged in the system's temporary folder
	}
	for base != "" {
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
		addStaged(st)
		if stagedTo != nil { // the watcher removes it if this process crashes
			fmt.Fprintln(stagedTo, st)
		}
	}
	// A short name whatever the destination's (which may be up to
	// maxNameBytes long), keeping its extension for writers that go by it.
	ext := filepath.Ext(dst)
	if len(ext) > 16 {
		ext = ""
	}
	tmp := filepath.Join(st, fmt.Sprintf("%d%s", len(o.moves), ext))
	o.moves = append(o.moves, outMove{tmp, dst})
	return tmp, nil
}

// absOf is dst as an absolute path ("" when that fails).
func (o *outFiles) absOf(dst string) string {
	abs, _ := filepath.Abs(dst)
	return abs
}

// write stages data for dst (mode 0644).
func (o *outFiles) write(dst string, data []byte) error {
	tmp, err := o.path(dst)
	if err != nil {
		return err
	}
	return os.WriteFile(tmp, data, 0o644)
}

// commit writes the files for a fifo or device through to it, then moves
// every other staged file into place, creating the folders they need, and
// removes the staging folders. A destination that is a folder is an error
// before anything is written (claim refuses it before the work; this is
// the last word if one appeared since); so is a write-through that fails
// (/dev/full), before any file is moved.
func (o *outFiles) commit() error {
	defer o.discard()
	for _, m := range o.moves {
		if st, err := os.Stat(m.to); err == nil && st.IsDir() {
			return fmt.Errorf("%s is a folder: nothing written", quotePath(m.to))
		}
	}
	for _, m := range o.moves {
		if f := o.through[o.absOf(m.to)]; f != nil {
			if _, err := os.Stat(m.from); err != nil {
				continue // never written (the writer failed and said so)
			}
			if err := copyInto(f, m.from); err != nil {
				return fmt.Errorf("writing through to %s: %w", quotePath(m.to), err)
			}
		}
	}
	for _, m := range o.moves {
		if o.through[o.absOf(m.to)] != nil {
			continue
		}
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

// copyInto writes the file from to w.
func copyInto(w io.Writer, from string) error {
	f, err := os.Open(from)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// discard removes the staging folders and what is in them, and closes
// the fifos and devices written through.
func (o *outFiles) discard() {
	for _, st := range o.stage {
		os.RemoveAll(st)
		dropStaged(st)
	}
	o.stage = nil
	for k, f := range o.through {
		f.Close()
		delete(o.through, k)
	}
}

// staged holds the process's staging folders, for stopOn.
var staged struct {
	sync.Mutex
	dirs map[string]bool
}

func addStaged(dir string) {
	staged.Lock()
	defer staged.Unlock()
	if staged.dirs == nil {
		staged.dirs = map[string]bool{}
	}
	staged.dirs[dir] = true
}

func dropStaged(dir string) {
	staged.Lock()
	defer staged.Unlock()
	delete(staged.dirs, dir)
}

// removeStaged removes every staging folder of the process and what is in
// them (a stop signal's cleanup: the command writes nothing).
func removeStaged() {
	staged.Lock()
	defer staged.Unlock()
	for dir := range staged.dirs {
		os.RemoveAll(dir)
	}
	staged.dirs = nil
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

// claimOutputs claims, before the run, the files --out dir gets from
// the plan's output buffers (role: output): dir/NAME.bin (NAME: outName),
// or with streamed (a --frames run: the host_pinned outputs) the folder
// dir/NAME of each frame's file. Two buffers whose names are one file
// name in dir ("a/b" and "a_b"), or whose file and folder are one path
// ("y.bin" streamed, "y" not), are refused with the rest of claim's checks.
func claimOutputs(files *outFiles, p *dagrun.StreamPlan, dir string, streamed bool) error {
	host := map[int]bool{}
	if streamed {
		_, outs := cmdline.HostIO(p)
		for _, i := range outs {
			host[i] = true
		}
	}
	for i, b := range p.Buffers {
		if b.Role != dagrun.RoleOutput {
			continue
		}
		who := fmt.Sprintf("--out: buffer %s's file", short(b.Name))
		path, kind := filepath.Join(dir, outName(b.Name)+".bin"), claimFile
		if host[i] {
			who = fmt.Sprintf("--out: buffer %s's folder of frames", short(b.Name))
			path, kind = filepath.Join(dir, outName(b.Name)), claimOwnFolder
		}
		if err := files.claimBuffer(who, path, kind, b.Name); err != nil {
			return err
		}
	}
	return nil
}
