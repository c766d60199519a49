package video

import (
	"errors"
	"fmt"
	"image"
	_ "image/gif"  // GIF frames
	_ "image/jpeg" // JPEG frames
	_ "image/png"  // PNG frames
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/frames"
)

// frameExts are the file name extensions LoadFrames reads (lower case).
var frameExts = []string{".png", ".jpg", ".jpeg", ".gif"}

// LoadFrames decodes every PNG, JPEG and GIF file directly in dir (by
// extension, case-insensitive; other files and subdirectories are skipped),
// in lexical order of the file names, into w×h RGBA8 frames: 4·w·h bytes
// each, row-major, opaque (alpha 255: images are composited over black).
//
// Each image is centred on a w×h canvas of opaque black: its top-left corner
// goes to ((w−iw)/2, (h−ih)/2) with Go's integer division (truncating), so a
// larger image is cropped equally on both sides (the extra pixel, if odd, on
// the right or bottom) and a smaller one is padded. Colour models are
// converted by image/draw (YCbCr, CMYK, gray, paletted → RGBA).
//
// For example, Go's own test images ($(go env GOROOT)/src/image/testdata:
// 37 files, all 150×103 but one of 256×128) at 128×128 lose 11 columns on
// the left and 11 on the right, and gain 12 black rows on top and 13 at the
// bottom.
//
// It returns an error naming the file when one fails to decode, and an error
// when dir holds no image.
func LoadFrames(dir string, w, h int) ([][]byte, error) {
	if w < 1 || h < 1 {
		return nil, fmt.Errorf("video: frame size %d×%d, want ≥ 1×1", w, h)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("video: frames: %w", err)
	}
	var frames [][]byte
	for _, e := range ents { // ReadDir sorts by name
		if e.IsDir() || !slices.Contains(frameExts, strings.ToLower(filepath.Ext(e.Name()))) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("video: frames: %w", err)
		}
		img, _, err := image.Decode(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("video: frames: %s: %w", path, err)
		}
		frames = append(frames, Frame(img, w, h))
	}
	if len(frames) == 0 {
		return nil, errors.New("video: frames: no .png, .jpg, .jpeg or .gif file in " + dir)
	}
	return frames, nil
}

// Frame converts img to a w×h RGBA8 frame as LoadFrames does (centred on
// opaque black, cropped or padded).
func Frame(img image.Image, w, h int) []byte {
	return frames.RGBAFrame(img, w, h)
}
