package tracepng

import (
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/executor/trace"
	"github.com/dagrun/dagrun/executor/trace/internal/plantest"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
)

// -trace.pngdir DIR keeps the pictures that TestWritePNGExamples draws, for a
// person to look at.
var pngDir = flag.String("trace.pngdir", "", "directory to write example timeline PNGs into")

func decodePNG(t *testing.T, path string) (w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a valid PNG: %v", path, err)
	}
	b := img.Bounds()
	return b.Dx(), b.Dy()
}

func onlyFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s holds %q, want %q", dir, got, want)
	}
}

func forkJoinTimeline(t *testing.T) *trace.Timeline {
	p := plantest.New("s0", "s1", "s2").
		Launch(0, "load_input", 3).Record(0, 0).
		Wait(1, 0).Launch(1, "conv_branch_1x1", 6).Record(1, 1).
		Wait(2, 0).Launch(2, "pool", 2).Launch(2, "conv_branch_3x3", 5).Record(2, 2).
		Launch(0, "conv_5x5_long_name_that_will_not_fit", 4).
		Wait(0, 1).Wait(0, 2).Launch(0, "concat", 1).Launch(0, "fc", 0.5).
		Plan(t)
	return trace.FromPlan(p, trace.Ideal(p))
}

func TestWritePNG(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tl.png")
	tl := forkJoinTimeline(t)
	if err := Write(tl, path, 900, 300); err != nil {
		t.Fatal(err)
	}
	if w, h := decodePNG(t, path); w != 900 || h != 300 {
		t.Errorf("png is %d×%d px, want 900×300", w, h)
	}
	// Overwriting works and leaves only the file.
	if err := Write(tl, path, 0, 0); err != nil {
		t.Fatal(err)
	}
	if w, h := decodePNG(t, path); w != defaultWidth || h < 3*minPx {
		t.Errorf("default size %d×%d px", w, h)
	}
	onlyFiles(t, dir, "tl.png")
}

func TestWritePNGHeightScalesWithLanes(t *testing.T) {
	var heights []int
	for _, k := range []int{3, 40, 160} {
		tl := &trace.Timeline{Streams: make([]string, k)}
		w, h := pngSize(tl, 0, 0)
		if w != defaultWidth {
			t.Errorf("%d lanes: width %d px, want %d", k, w, defaultWidth)
		}
		heights = append(heights, h)
		if w, h := pngSize(tl, 640, 480); w != 640 || h != 480 {
			t.Errorf("%d lanes: asked 640×480 px, got %d×%d", k, w, h)
		}
	}
	if !(heights[0] < heights[1] && heights[1] < heights[2]) || heights[2] < 160*laneMinPx {
		t.Errorf("heights for 3, 40, 160 lanes = %v px, want increasing and ≥ %d for 160", heights, 160*laneMinPx)
	}
}

func TestWritePNGEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.png")
	for _, tl := range []*trace.Timeline{{}, {Streams: []string{"only"}}} {
		if err := Write(tl, path, 400, 300); err != nil {
			t.Fatalf("%+v: %v", tl, err)
		}
		decodePNG(t, path)
	}
}

func TestWritePNGErrorsLeaveNothing(t *testing.T) {
	tl := forkJoinTimeline(t)
	dir := t.TempDir()

	// A directory that does not exist, and one whose "directory" is a file.
	if err := Write(tl, filepath.Join(dir, "missing", "tl.png"), 0, 0); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(tl, filepath.Join(file, "tl.png"), 0, 0); err == nil {
		t.Error("write below a regular file succeeded")
	}

	// The target is a directory: the rename fails after the temporary file
	// was written; it must be removed.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(tl, sub, 400, 300); err == nil {
		t.Error("write over a non-empty directory succeeded")
	}

	// A read-only directory (meaningless as root, who may write anyway).
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		if err := Write(tl, filepath.Join(ro, "tl.png"), 0, 0); err == nil {
			t.Error("write into a read-only directory succeeded")
		}
		onlyFiles(t, ro)
	}

	// Bad arguments and bad spans fail before touching an existing file.
	if err := os.WriteFile(filepath.Join(dir, "old.png"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := &trace.Timeline{Streams: []string{"x"}, Spans: []trace.Span{{Name: "a", Stream: 1, EndUS: 1}}}
	for _, err := range []error{
		Write(tl, filepath.Join(dir, "old.png"), 50, 0),
		Write(tl, filepath.Join(dir, "old.png"), 0, -1),
		Write(bad, filepath.Join(dir, "old.png"), 0, 0),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "trace: ") {
			t.Errorf("err = %v, want a trace: error", err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "old.png")); string(b) != "old" {
		t.Errorf("old.png = %q after failed writes, want it untouched", b)
	}
	wantLeft := []string{"file", "old.png"}
	if os.Geteuid() != 0 {
		wantLeft = append(wantLeft, "ro")
	}
	onlyFiles(t, dir, append(wantLeft, "sub")...)
	onlyFiles(t, sub, "x")
}

// TestWritePNGExamples draws a small fork-join plan and a 200-lane random
// one (1,300 stages, like nasnetalarge). With -trace.pngdir they are kept
// for viewing, at the default size; without, the big one is drawn small, so
// that the test stays quick under -race, and its lane names are thinned.
func TestWritePNGExamples(t *testing.T) {
	dir, w, h := *pngDir, 0, 0
	if dir == "" {
		dir, w, h = t.TempDir(), 800, 600
	}
	big, _ := plantest.Random(t, 42, 1300, 200)
	bigTL := trace.FromPlan(big, trace.Ideal(big))
	bigTL.Title = "random: 1,300 stages on 200 streams (ideal)"
	for _, ex := range []struct {
		name string
		tl   *trace.Timeline
		w, h int
	}{{"forkjoin.png", forkJoinTimeline(t), 0, 0}, {"random200.png", bigTL, w, h}} {
		path := filepath.Join(dir, ex.name)
		if err := Write(ex.tl, path, ex.w, ex.h); err != nil {
			t.Fatal(err)
		}
		w, h := decodePNG(t, path)
		t.Logf("%s: %d×%d px", path, w, h)
	}
}

func TestUSTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 11.5, "0,2,4,6,8,10"},
		{0, 956.8, "0,100,200,300,400,500,600,700,800,900"},
		{0, 0.37, "0.00,0.05,0.10,0.15,0.20,0.25,0.30,0.35"},
		{-3, 3, "-3,-2,-1,0,1,2,3"},
	} {
		var got []string
		for _, tk := range (usTicks{}).Ticks(c.lo, c.hi) {
			got = append(got, tk.Label)
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("ticks on [%g, %g] = %s, want %s", c.lo, c.hi, strings.Join(got, ","), c.want)
		}
	}
}

// A name is shown whole or not at all: a name cut short ("con…") names no
// stage.
func TestFitLabelWholeNamesOnly(t *testing.T) {
	sty := text.Style{Font: font.From(plot.DefaultFont, 8), Handler: plot.New().TextHandler}
	name := "conv2d_relu_17"
	w := sty.Width(name)
	if got := fitLabel(sty, name, w); got != name {
		t.Errorf("fits exactly: %q", got)
	}
	if got := fitLabel(sty, name, w-1); got != "" {
		t.Errorf("one point short: %q, want no label", got)
	}
}
