package frames_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/frames"
	"github.com/dagrun/dagrun/specs/video"
)

// repeatScan returns the JPEG jpg with its first scan (SOS segment and
// its entropy-coded data, up to the next marker) repeated so that it has
// scans in all.
func repeatScan(t *testing.T, jpg []byte, scans int) []byte {
	t.Helper()
	sos := bytes.Index(jpg, []byte{0xFF, 0xDA})
	have := bytes.Count(jpg, []byte{0xFF, 0xDA})
	if sos < 0 || have > scans {
		t.Fatalf("no scan to repeat (%d scans)", have)
	}
	end := sos + 2
	for end+1 < len(jpg) && !(jpg[end] == 0xFF && jpg[end+1] != 0x00 && (jpg[end+1] < 0xD0 || jpg[end+1] > 0xD7)) {
		end++
	}
	out := append([]byte(nil), jpg[:end]...)
	for range scans - have {
		out = append(out, jpg[sos:end]...)
	}
	return append(out, jpg[end:]...)
}

// TestReadFramesJPEGScans: a progressive JPEG frame whose last scan is
// repeated to frames.MaxJPEGScans scans decodes; one more scan is refused
// before decoding, naming the file and the bound.
func TestReadFramesJPEGScans(t *testing.T) {
	jpg, err := os.ReadFile(filepath.Join(video.TestImageDir(), "video-001.progressive.jpeg"))
	if err != nil {
		t.Skip(err)
	}
	shape := []int64{103, 150, 4} // the image's height and width
	for _, c := range []struct {
		scans int
		want  string
	}{{frames.MaxJPEGScans, ""}, {frames.MaxJPEGScans + 1, "a JPEG of 101 scans: want at most 100"}} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "f.jpg"), repeatScan(t, jpg, c.scans), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := frames.ReadFrames(dir, 4*shape[0]*shape[1], shape)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "f.jpg")) {
			t.Errorf("%d scans: %v, want %q", c.scans, err, c.want)
		}
	}
}
