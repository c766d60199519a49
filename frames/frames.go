// Package frames decodes the host inputs of a streamed run: raw frame
// files and images (PNG, JPEG, GIF) centred on an RGBA8 canvas, for
// executor.Options.Inputs (dagrun run --frames).
package frames

import (
	"errors"
	"fmt"
	"image"
	"image/draw"
	_ "image/gif"  // GIF frames
	_ "image/jpeg" // JPEG frames
	_ "image/png"  // PNG frames
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Frame file name extensions ReadFrames reads (lower case).
var (
	imageExts = []string{".png", ".jpg", ".jpeg", ".gif"}
	rawExts   = []string{".raw", ".bin", ".rgba"}
)

// ReadFrames reads the inputs of a buffer of n bytes from the files directly
// in dir, in lexical order of their names (other files and subdirectories
// are skipped):
//
//   - raw frames (.raw, .bin, .rgba): the file's bytes, exactly n of them;
//   - images (.png, .jpg, .jpeg, .gif, decoded by Go's image packages), for
//     a buffer of shape [H, W, 4] (RGBA8, n = 4·W·H): the image centred on
//     a W×H canvas of opaque black (its top-left corner at ((W−w)/2,
//     (H−h)/2), Go's integer division; larger images are cropped, smaller
//     ones padded), colour models converted by image/draw, alpha 255 — the
//     frames of specs/video's LoadFrames.
//
// It returns an error naming the file that is the wrong size or does not
// decode, an error for images when shape is not [H, W, 4], and an error
// when dir holds no frame.
func ReadFrames(dir string, n int64, shape []int64) ([][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("executor: frames: %w", err)
	}
	var frames [][]byte
	for _, e := range ents {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (!slices.Contains(imageExts, ext) && !slices.Contains(rawExts, ext)) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("executor: frames: %w", err)
		}
		if slices.Contains(rawExts, ext) {
			if int64(len(data)) != n {
				return nil, fmt.Errorf("executor: frames: %s has %d bytes, the buffer %d", path, len(data), n)
			}
			frames = append(frames, data)
			continue
		}
		if len(shape) != 3 || shape[2] != 4 || 4*shape[0]*shape[1] != n {
			return nil, fmt.Errorf("executor: frames: %s is an image; the buffer needs shape [H, W, 4] (RGBA8) to take images, it has shape %v and %d bytes", path, shape, n)
		}
		img, _, err := image.Decode(strings.NewReader(string(data)))
		if err != nil {
			return nil, fmt.Errorf("executor: frames: %s: %w", path, err)
		}
		frames = append(frames, RGBAFrame(img, int(shape[1]), int(shape[0])))
	}
	if len(frames) == 0 {
		return nil, errors.New("executor: frames: no .png, .jpg, .jpeg, .gif, .raw, .bin or .rgba file in " + dir)
	}
	return frames, nil
}

// RGBAFrame draws img centred on a w×h canvas of opaque black and returns
// its RGBA8 bytes (ReadFrames' conversion).
func RGBAFrame(img image.Image, w, h int) []byte {
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(dst, dst.Bounds(), image.Black, image.Point{}, draw.Src)
	b := img.Bounds()
	off := image.Pt((w-b.Dx())/2, (h-b.Dy())/2)
	draw.Draw(dst, b.Sub(b.Min).Add(off), img, b.Min, draw.Over)
	return dst.Pix
}
