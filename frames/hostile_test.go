package frames_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dagrun/dagrun/frames"
)

// pngOf is a small PNG; declared, when > 0, rewrites the width and height
// its header declares (the pixel data stays 2×2), with a valid CRC.
func pngOf(t testing.TB, declared uint32) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if declared > 0 {
		// 8-byte signature, then IHDR: length(4) "IHDR"(4) width(4) height(4) ... CRC.
		binary.BigEndian.PutUint32(b[16:], declared)
		binary.BigEndian.PutUint32(b[20:], declared)
		binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	}
	return b
}

// TestReadFramesHostile: inputs that once crashed or hung a run are
// refused at once with an error naming the file: a tiny PNG declaring
// 100000×100000 pixels, a raw frame that is a link to /dev/zero, a fifo.
func TestReadFramesHostile(t *testing.T) {
	shape := []int64{2, 2, 4}
	for _, c := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"huge.png", func(p string) error { return os.WriteFile(p, pngOf(t, 100000), 0o644) }, "a 100000×100000 image: want 1 to 33554432 pixels"},
		{"zero.raw", func(p string) error { return os.Symlink("/dev/zero", p) }, "not a regular file"},
		{"fifo.raw", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "not a regular file"},
		{"fifo.png", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "not a regular file"},
		{"short.raw", func(p string) error { return os.WriteFile(p, []byte("abc"), 0o644) }, "has 3 bytes, the buffer 16"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, c.name)
		if err := c.make(path); err != nil {
			t.Skipf("%s: %v", c.name, err)
		}
		_, err := frames.ReadFrames(dir, 16, shape)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: %v, want an error naming the file and saying %q", c.name, err, c.want)
		}
	}
	if _, err := frames.ReadFrames(t.TempDir(), 16, []int64{-2, -2, 4}); err == nil {
		t.Error("negative shape: no error")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ok.png"), pngOf(t, 0), 0o644)
	if fr, err := frames.ReadFrames(dir, 16, shape); err != nil || len(fr) != 1 || len(fr[0]) != 16 {
		t.Errorf("a valid 2×2 PNG: %v", err)
	}
}

// FuzzFrames decodes arbitrary bytes as a frame file of each kind (PNG,
// JPEG, GIF, raw) for an 8×8 RGBA8 input: every input is a frame of the
// buffer's size or an error, never a panic, and never more memory than
// the limits allow.
func FuzzFrames(f *testing.F) {
	f.Add(pngOf(f, 0), uint8(0))
	f.Add(pngOf(f, 100000), uint8(0))
	f.Add(pngOf(f, 3000), uint8(0))
	var j, g bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 3, 5))
	jpeg.Encode(&j, img, nil)
	gif.Encode(&g, img, nil)
	f.Add(j.Bytes(), uint8(1))
	f.Add(g.Bytes(), uint8(2))
	f.Add(make([]byte, 256), uint8(3))
	exts := []string{".png", ".jpg", ".gif", ".raw"}
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "f"+exts[int(kind)%len(exts)]), data, 0o644); err != nil {
			t.Fatal(err)
		}
		fr, err := frames.ReadFrames(dir, 256, []int64{8, 8, 4})
		if err == nil && (len(fr) != 1 || len(fr[0]) != 256) {
			t.Fatalf("%d frames, the first of %d bytes; want 1 of 256", len(fr), len(fr[0]))
		}
	})
}
