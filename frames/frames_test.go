package frames_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/frames"
	"github.com/dagrun/dagrun/specs/video"
)

// ReadFrames decodes Go's own test images exactly as the video demo's
// LoadFrames does, and reads raw frames of the buffer's size.
func TestReadFrames(t *testing.T) {
	dir := video.TestImageDir()
	want, err := video.LoadFrames(dir, video.FrameW, video.FrameH)
	if errors.Is(err, os.ErrNotExist) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := frames.ReadFrames(dir, video.FrameBytes, []int64{video.FrameH, video.FrameW, 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d frames, LoadFrames %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d differs from LoadFrames'", i)
		}
	}
	raw := t.TempDir()
	os.WriteFile(filepath.Join(raw, "b.raw"), []byte("5678"), 0o644)
	os.WriteFile(filepath.Join(raw, "a.bin"), []byte("1234"), 0o644)
	os.WriteFile(filepath.Join(raw, "notes.txt"), []byte("skipped"), 0o644)
	fr, err := frames.ReadFrames(raw, 4, nil)
	if err != nil || len(fr) != 2 || string(fr[0]) != "1234" || string(fr[1]) != "5678" {
		t.Fatalf("raw frames %q, %v", fr, err)
	}
	for _, c := range []struct {
		n     int64
		shape []int64
		want  string
	}{{5, nil, "has 4 bytes"}} {
		if _, err := frames.ReadFrames(raw, c.n, c.shape); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadFrames(n=%d): %v, want %q", c.n, err, c.want)
		}
	}
	if _, err := frames.ReadFrames(dir, 16, []int64{4}); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Errorf("images into a flat buffer: %v", err)
	}
	if _, err := frames.ReadFrames(t.TempDir(), 4, nil); err == nil {
		t.Error("empty directory: no error")
	}
}
