// Package frames decodes the host inputs of a streamed run: raw frame
// files and images (PNG, JPEG, GIF) centred on an RGBA8 canvas, for
// executor.Options.Inputs (dagrun run --frames).
package frames

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/draw"
	_ "image/gif"  // GIF frames
	_ "image/jpeg" // JPEG frames
	_ "image/png"  // PNG frames
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/internal/safefile"
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
// Only regular files are read (a fifo, a device or a link to one is an
// error), each checked before it is read: a raw frame's size, an image's
// file size (MaxFileBytes) and the dimensions its header declares
// (MaxPixels); all frames together take at most MaxBytes. It returns an
// error naming the file that is the wrong size, too large or does not
// decode, an error for images when shape is not [H, W, 4], and an error
// when dir holds no frame.
func ReadFrames(dir string, n int64, shape []int64) ([][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("executor: frames: %w", err)
	}
	var frames [][]byte
	var total int64
	for _, e := range ents {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (!slices.Contains(imageExts, ext) && !slices.Contains(rawExts, ext)) {
			continue
		}
		if total += n; total > MaxBytes {
			return nil, fmt.Errorf("executor: frames: the frames in %s take more than %d bytes (%d GiB) of %d bytes each: stream fewer frames", dir, int64(MaxBytes), MaxBytes>>30, n)
		}
		path := filepath.Join(dir, e.Name())
		var frame []byte
		if slices.Contains(rawExts, ext) {
			frame, err = readRaw(path, n)
		} else {
			frame, err = readImage(path, n, shape)
		}
		if err != nil {
			return nil, fmt.Errorf("executor: frames: %w", err)
		}
		frames = append(frames, frame)
	}
	if len(frames) == 0 {
		return nil, errors.New("executor: frames: no .png, .jpg, .jpeg, .gif, .raw, .bin or .rgba file in " + dir)
	}
	return frames, nil
}

// Limits of frame inputs.
const (
	// MaxPixels bounds an image's width × height as its header declares
	// it, checked before the image is decoded (2^25 pixels, 128 MiB as
	// RGBA8): a 68-byte PNG may declare 100000×100000.
	MaxPixels = 1 << 25
	// MaxFileBytes bounds an image file's size (256 MiB).
	MaxFileBytes = 1 << 28
	// MaxBytes bounds all frames of one input together (4 GiB): they are
	// held in memory for the run.
	MaxBytes = 1 << 32
	// MaxJPEGScans bounds the scans of a JPEG frame, counted before it is
	// decoded: a progressive JPEG decodes the whole image once per scan,
	// so a 200 KB file that repeats one small scan thousands of times
	// takes minutes. Encoders write about 10 (libjpeg's progressive
	// script) and at most a few dozen.
	MaxJPEGScans = 100
)

// readRaw reads the raw frame path, exactly n bytes, checked before it is
// read; only a regular file is read.
func readRaw(path string, n int64) ([]byte, error) {
	f, size, err := safefile.Open(path, -1, "frame")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size != n {
		return nil, fmt.Errorf("%s has %d bytes, the buffer %d", path, size, n)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// readImage decodes the image path onto the buffer's H×W RGBA8 canvas,
// after checking the file (regular, at most MaxFileBytes) and the
// dimensions its header declares (at most MaxPixels).
func readImage(path string, n int64, shape []int64) ([]byte, error) {
	if len(shape) != 3 || shape[2] != 4 || shape[0] <= 0 || shape[1] <= 0 || shape[0] > n || shape[1] > n || 4*shape[0]*shape[1] != n {
		return nil, fmt.Errorf("%s is an image; the buffer needs shape [H, W, 4] (RGBA8) to take images, it has shape %v and %d bytes", path, shape, n)
	}
	data, err := safefile.ReadFile(path, MaxFileBytes, "frame")
	if err != nil {
		return nil, err
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return nil, fmt.Errorf("%s: a %d×%d image: want 1 to %d pixels (frames.MaxPixels)", path, cfg.Width, cfg.Height, MaxPixels)
	}
	if format == "jpeg" {
		if n := jpegScans(data); n > MaxJPEGScans {
			return nil, fmt.Errorf("%s: a JPEG of %d scans: want at most %d (frames.MaxJPEGScans; each scan decodes the whole image again): re-encode it, as a baseline JPEG or a PNG", path, n, MaxJPEGScans)
		}
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return RGBAFrame(img, int(shape[1]), int(shape[0])), nil
}

// jpegScans counts the scans (SOS segments) of the JPEG data, walking its
// markers (ITU T.81, B.1): a segment's length skips its header, and the
// entropy-coded data after a scan's header is passed byte by byte up to
// the next marker (0xFF not followed by 0x00 or a restart marker). It
// stops at EOI or the end of data.
func jpegScans(data []byte) int {
	n := 0
	for i := 2; i+1 < len(data); {
		if data[i] != 0xFF {
			i++ // entropy-coded data
			continue
		}
		switch m := data[i+1]; {
		case m == 0xFF:
			i++ // a fill byte
			continue
		case m == 0x00 || m == 0x01 || m >= 0xD0 && m <= 0xD8:
			i += 2 // stuffed 0xFF, TEM, RSTn, SOI: no length
			continue
		case m == 0xD9:
			return n // EOI
		case m == 0xDA:
			n++
		}
		if i+3 >= len(data) {
			break
		}
		i += 2 + (int(data[i+2])<<8 | int(data[i+3]))
	}
	return n
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
