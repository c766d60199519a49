// Package safefile reads input files that may come from someone else: only
// regular files, with their size checked against a limit before anything
// is read. A fifo, a device or a symbolic link to one (/dev/zero, say) is
// refused at once instead of hanging or exhausting memory.
package safefile

import (
	"fmt"
	"io"
	"os"
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
		return fmt.Errorf("%s: not a regular file (%v): a %s must be a plain file", path, st.Mode().Type(), what)
	}
	if limit >= 0 && st.Size() > limit {
		return fmt.Errorf("%s: %d bytes, more than a %s may have (%d bytes)", path, st.Size(), what, limit)
	}
	return nil
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
		return nil, fmt.Errorf("%s: more than %d bytes, more than a %s may have", path, limit, what)
	}
	return b, nil
}
