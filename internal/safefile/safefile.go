// Package safefile reads input files that may come from someone else: only
// regular files, with their size checked against a limit before anything
// is read. A fifo, a device or a symbolic link to one (/dev/zero, say) is
// refused at once instead of hanging or exhausting memory.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Open opens the regular file path for reading and returns it with its
// size in bytes. It refuses, without opening it, a path that is not a
// regular file after following symbolic links (a fifo would block the
// open), and a file larger than limit bytes (limit < 0: no limit). what
// names the file in errors ("plan file", "frame").
func Open(path string, limit int64, what string) (*os.File, int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	if err := check(path, st, limit, what); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	// The file may have been replaced between Stat and Open: check again.
	if st, err = f.Stat(); err == nil {
		err = check(path, st, limit, what)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

func check(path string, st os.FileInfo, limit int64, what string) error {
	if !st.Mode().IsRegular() {
		return &RefusedError{Path: path, What: what, Mode: st.Mode().Type(), Irregular: true}
	}
	if limit >= 0 && st.Size() > limit {
		return &RefusedError{Path: path, What: what, Size: st.Size(), Limit: limit}
	}
	return nil
}

// RefusedError is a file Open refuses: not a regular file (Irregular), or
// of Size bytes, larger than Limit.
type RefusedError struct {
	Path, What  string
	Irregular   bool
	Mode        os.FileMode // the file's type, when Irregular
	Size, Limit int64
}

func (e *RefusedError) Error() string {
	if e.Irregular {
		return fmt.Sprintf("%s: not a regular file (%v): a %s must be a plain file", Quote(e.Path), e.Mode, e.What)
	}
	return fmt.Sprintf("%s: %d bytes, more than a %s may have (%d bytes)", Quote(e.Path), e.Size, e.What, e.Limit)
}

// ErrOutside is returned (wrapped) by OpenIn for a name that leads out of
// its folder: absolute, through "..", or through a symbolic link.
var ErrOutside = errors.New("outside the folder")

// OpenIn is Open of the file name inside the folder dir: name is relative
// to dir, and it is refused with ErrOutside, before anything is looked up,
// when it is absolute or climbs out with "..", and when a symbolic link
// on its way leads out of dir (os.Root), so that a refusal says nothing of
// what lies outside.
func OpenIn(dir, name string, limit int64, what string) (*os.File, int64, error) {
	if !filepath.IsLocal(name) {
		return nil, 0, &os.PathError{Op: "open", Path: name, Err: ErrOutside}
	}
	if dir == "" {
		dir = "."
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, 0, err
	}
	defer root.Close()
	st, err := root.Stat(name)
	if err != nil {
		return nil, 0, outside(name, err)
	}
	if err := check(name, st, limit, what); err != nil {
		return nil, 0, err
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, 0, outside(name, err)
	}
	if st, err = f.Stat(); err == nil {
		err = check(name, st, limit, what)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// CheckIn returns an error wrapping ErrOutside when the file path
// (absolute, or relative to the working folder) lies outside the folder
// dir: by name, or through a symbolic link on its way (OpenIn's rules, so
// a spec's files and a plan file's are confined alike). Any other
// problem with the file (missing, not a regular file) is left to the one
// who reads it: CheckIn returns nil then.
func CheckIn(dir, path string) error {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(absDir, abs)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: ErrOutside}
	}
	f, _, err := OpenIn(absDir, rel, -1, "file")
	if f != nil {
		f.Close()
	}
	if errors.Is(err, ErrOutside) {
		return &os.PathError{Op: "open", Path: path, Err: ErrOutside}
	}
	return nil
}

// outside turns os.Root's refusal of a path that escapes it into ErrOutside.
func outside(name string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes") {
		return &os.PathError{Op: "open", Path: name, Err: ErrOutside}
	}
	return err
}

// Quote is path as a message prints it: as it is when every character is
// printable and none is a space, quote or backslash, else Go-quoted
// (strconv.Quote), so that control characters (an escape sequence, a bidi
// override) and look-alike spaces show as escapes and never reach a
// terminal as they are.
func Quote(path string) string {
	for _, r := range path {
		if !unicode.IsPrint(r) || r == ' ' || r == '"' || r == '\\' || r == utf8.RuneError {
			return strconv.Quote(path)
		}
	}
	return path
}

// ReadFile is os.ReadFile of a regular file of at most limit bytes (Open's
// checks); a file that grows past limit while it is read is an error too.
func ReadFile(path string, limit int64, what string) ([]byte, error) {
	f, size, err := Open(path, limit, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := io.Reader(f)
	if limit >= 0 {
		r = io.LimitReader(f, limit+1)
	}
	b := make([]byte, 0, size+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
	if limit >= 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: more than %d bytes, more than a %s may have", Quote(path), limit, what)
	}
	return b, nil
}
