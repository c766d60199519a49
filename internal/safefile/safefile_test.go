package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"specs/a.yaml":  "specs/a.yaml",
		"出力.bin":        "出力.bin",
		"a b.yaml":      `"a b.yaml"`,
		"s\x1b[31m.yml": `"s\x1b[31m.yml"`,
		"a\u202eb":      `"a\u202eb"`,
		"a\u00a0b":      `"a\u00a0b"`,
		`a"b`:           `"a\"b"`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestCheckIn: a file by name or through a link inside the folder is in
// it; "..", an absolute path elsewhere and a link that leads out are
// outside; a missing file is left to its reader.
func TestCheckIn(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dir, "in.bin"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(other, "out.bin"), []byte("x"), 0o644)
	os.Symlink("in.bin", filepath.Join(dir, "link-in"))
	os.Symlink(filepath.Join(other, "out.bin"), filepath.Join(dir, "link-out"))
	os.Symlink(other, filepath.Join(dir, "sub"))
	for name, outside := range map[string]bool{
		filepath.Join(dir, "in.bin"):         false,
		filepath.Join(dir, "link-in"):        false,
		filepath.Join(dir, "missing.bin"):    false,
		filepath.Join(dir, "link-out"):       true,
		filepath.Join(dir, "sub", "out.bin"): true,
		filepath.Join(dir, "..", "x.bin"):    true,
		filepath.Join(other, "out.bin"):      true,
	} {
		err := CheckIn(dir, name)
		if errors.Is(err, ErrOutside) != outside {
			t.Errorf("CheckIn(%s): %v, want outside %v", name, err, outside)
		}
	}
}
