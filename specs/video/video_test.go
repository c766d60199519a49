package video_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/sim"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/specs/video"
	"github.com/dagrun/dagrun/verify"
)

// maxRelErr is the bound on the relative error of a frame's output.
const maxRelErr = 1e-4

// testFrames returns Go's own test images as 128×128 frames (37 of them),
// or skips when they are not installed.
func testFrames(t testing.TB) [][]byte {
	t.Helper()
	frames, err := video.LoadFrames(video.TestImageDir(), video.FrameW, video.FrameH)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("Go's image test data is not installed: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

func weights(t testing.TB) *video.Weights {
	t.Helper()
	w, err := video.LoadWeights(".")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// relErr is the largest |got−want|/|want| over the probabilities.
func relErr(got [video.Classes]float32, want [video.Classes]float64) float64 {
	var m float64
	for i, w := range want {
		m = max(m, math.Abs(float64(got[i])-w)/math.Abs(w))
	}
	return m
}

// checkOutput compares one frame's output with the float64 reference.
func checkOutput(t *testing.T, what string, got video.Output, ref video.RefOutput) float64 {
	t.Helper()
	e := relErr(got.Probs, ref.Probs)
	if e >= maxRelErr || math.IsNaN(e) {
		t.Errorf("%s: max relative error of the probabilities %.3g, want < %g\n got %v\nwant %v", what, e, maxRelErr, got.Probs, ref.Probs)
	}
	if got.Argmax != ref.Argmax {
		t.Errorf("%s: argmax %d, reference %d (logits %v)", what, got.Argmax, ref.Argmax, ref.Logits)
	}
	return e
}

// The float32 kernels (the CPU bodies and the GPU's arithmetic) match the
// independent float64 reference on every real test image.
func TestKernelsMatchReference(t *testing.T) {
	frames, wt := testFrames(t), weights(t)
	var worst float64
	classes := map[int]int{}
	for i, f := range frames {
		got := video.Infer(f, video.FrameW, video.FrameH, wt)
		ref := video.Reference(f, video.FrameW, video.FrameH, wt)
		worst = max(worst, checkOutput(t, fmt.Sprint("frame ", i), got, ref))
		classes[ref.Argmax]++
	}
	// Noise frames too: the test images are mostly one picture.
	for seed := int64(1); seed <= 16; seed++ {
		f := executor.RandomBytes(seed, video.FrameBytes)
		got := video.Infer(f, video.FrameW, video.FrameH, wt)
		ref := video.Reference(f, video.FrameW, video.FrameH, wt)
		worst = max(worst, checkOutput(t, fmt.Sprint("noise ", seed), got, ref))
		classes[ref.Argmax]++
	}
	t.Logf("%d images and 16 noise frames: max relative error %.3g; argmax histogram %v", len(frames), worst, classes)
}

// Other frame sizes (downscaling by a non-integer factor, upscaling) go
// through the same resize in both implementations.
func TestKernelsMatchReferenceResize(t *testing.T) {
	frames, wt := testFrames(t), weights(t)
	for _, sz := range [][2]int{{150, 103}, {97, 131}, {40, 30}, {64, 64}, {256, 128}} {
		f, err := video.LoadFrames(video.TestImageDir(), sz[0], sz[1])
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 9, len(frames) - 1} {
			got := video.Infer(f[i], sz[0], sz[1], wt)
			ref := video.Reference(f[i], sz[0], sz[1], wt)
			checkOutput(t, fmt.Sprintf("%dx%d frame %d", sz[0], sz[1], i), got, ref)
		}
	}
}

// The committed generated files (weights, frames, cameras.yaml) are what
// `go generate` writes.
func TestGenerated(t *testing.T) {
	files, err := video.Generated()
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("Go's image test data is not installed: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		old, err := os.ReadFile(f.Path)
		if err != nil {
			t.Errorf("%v (run go generate in specs/video)", err)
			continue
		}
		if !bytes.Equal(old, f.Data) {
			t.Errorf("%s differs from what go generate writes: run go generate in specs/video", f.Path)
		}
	}
}

// cameras.yaml loads, and is exactly Spec(2, 2).
func TestSpecFile(t *testing.T) {
	specFile(t, video.SpecFile, video.Spec(2, 2))
	specFile(t, video.SpecFile2GPU, video.SpecOn(2, 2, 2))
}

func specFile(t *testing.T, file string, want *dag.Spec) {
	s, err := dag.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	clearPos(s)
	want.File, want.Dir = s.File, s.Dir
	if !reflect.DeepEqual(s, want) {
		for i := range s.Buffers {
			if !reflect.DeepEqual(s.Buffers[i], want.Buffers[i]) {
				t.Errorf("buffer %d: loaded %+v, Spec %+v", i, s.Buffers[i], want.Buffers[i])
			}
		}
		for i := range s.Stages {
			if !reflect.DeepEqual(s.Stages[i], want.Stages[i]) {
				t.Errorf("stage %d: loaded %+v, Spec %+v", i, s.Stages[i], want.Stages[i])
			}
		}
		t.Fatalf("%s is not its Spec", file)
	}
}

// Spec for every camera count of the figures loads back from its
// YAML, plans and verifies.
func TestSpecPlans(t *testing.T) {
	for _, cams := range []int{1, 2, 4, 8} {
		for _, copies := range []int{1, 2, 3} {
			s := video.Spec(cams, copies)
			var b bytes.Buffer
			if err := dag.WriteYAML(&b, s); err != nil {
				t.Fatal(err)
			}
			if _, err := dag.Load(b.Bytes(), "gen.yaml", "."); err != nil {
				t.Fatalf("Spec(%d, %d) does not load: %v", cams, copies, err)
			}
			s.Dir = "."
			p, err := planner.Build(s, planner.Options{})
			if err != nil {
				t.Fatalf("Spec(%d, %d): %v", cams, copies, err)
			}
			if err := verify.Verify(p); err != nil {
				t.Fatalf("Spec(%d, %d): %v", cams, copies, err)
			}
			if cams > 1 && len(p.Streams) < 2 {
				t.Errorf("Spec(%d, %d): %d streams, want the cameras spread", cams, copies, len(p.Streams))
			}
		}
	}
}

func clearPos(s *dag.Spec) {
	for i := range s.Buffers {
		s.Buffers[i].Pos = dag.Pos{}
	}
	for i := range s.Kernels {
		s.Kernels[i].Pos = dag.Pos{}
	}
	for i := range s.Stages {
		st := &s.Stages[i]
		st.Pos = dag.Pos{}
		for j := range st.Reads {
			st.Reads[j].Pos = dag.Pos{}
		}
		for j := range st.Writes {
			st.Writes[j].Pos = dag.Pos{}
		}
	}
}

// One frame per camera through the whole spec on the simulator (race
// detector on), for 1, 2 and 4 cameras fed different real images, on one
// device and with a camera per device (2 and 4 devices): every camera's
// output equals the Go kernels' bit for bit and the float64 reference
// within 1e-4.
func TestSpecOnSimulator(t *testing.T) {
	frames, wt := testFrames(t), weights(t)
	dir := t.TempDir()
	var paths []string
	for i, f := range frames {
		p := filepath.Join(dir, fmt.Sprintf("f%02d.rgba", i))
		if err := os.WriteFile(p, f, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for _, run := range []struct{ cams, devices int }{{1, 1}, {2, 1}, {4, 1}, {2, 2}, {4, 2}, {4, 4}} {
		cams := run.cams
		for _, seed := range []int64{1, 2} {
			s := video.SpecOn(cams, 2, run.devices)
			s.Dir = "."
			// Camera c gets test image 9c+seed (spread over the set).
			var mine []string
			for c := 0; c < cams; c++ {
				mine = append(mine, paths[(9*c+int(seed))%len(paths)])
			}
			video.SetFrameFiles(s, mine)
			p, err := planner.Build(s, planner.Options{})
			if err != nil {
				t.Fatal(err)
			}
			// The simulator finds the Go bodies by PTX entry
			// (executor.LookupCPUKernel; this package registers them).
			b := sim.New(sim.Options{Seed: seed})
			res, err := executor.Run(context.Background(), p, b, executor.Options{})
			if err != nil {
				t.Fatalf("%d cameras: %v", cams, err)
			}
			if err := b.Close(); err != nil {
				t.Error(err)
			}
			outs := map[string][]byte{}
			for _, o := range res.Outputs {
				outs[o.Name] = o.Data
			}
			for c := 0; c < cams; c++ {
				got, err := video.DecodeOutput(outs[video.OutputBuffer(c)])
				if err != nil {
					t.Fatal(err)
				}
				f := frames[(9*c+int(seed))%len(frames)]
				if want := video.Infer(f, video.FrameW, video.FrameH, wt); got != want {
					t.Errorf("%d cameras, camera %d: sim %v, Go kernels %v", cams, c, got, want)
				}
				checkOutput(t, fmt.Sprintf("%d cameras, camera %d", cams, c), got, video.Reference(f, video.FrameW, video.FrameH, wt))
			}
			devs := map[int]bool{}
			for _, str := range p.Streams {
				devs[str.Device] = true
			}
			if len(devs) != run.devices {
				t.Errorf("%d cameras on %d devices: streams on %d", cams, run.devices, len(devs))
			}
			t.Logf("%d cameras, %d devices, seed %d: %d streams, %d waits", cams, run.devices, seed, len(p.Streams), res.Waits)
		}
	}
}

// The CPU bodies reject launches whose arguments do not fit.
func TestCPUKernelErrors(t *testing.T) {
	f, _ := executor.LookupCPUKernel(video.EntryFC)
	l := &executor.LaunchDesc{Name: "fc", Args: map[string]any{"in": "a", "wb": "w", "out": "o", "nin": 4096, "nout": 10},
		Reads: []executor.Arg{{Name: "a", Bytes: 16}, {Name: "w", Bytes: 4 * video.FCWords}}, Writes: []executor.Arg{{Name: "o", Bytes: 40}}}
	err := f(l, [][]byte{make([]byte, 16), make([]byte, 4*video.FCWords)}, [][]byte{make([]byte, 40)})
	if err == nil {
		t.Error("short input: no error")
	}
	l.Args["in"] = "nope"
	if err := f(l, [][]byte{make([]byte, 16), make([]byte, 4*video.FCWords)}, [][]byte{make([]byte, 40)}); err == nil {
		t.Error("unknown buffer: no error")
	}
	l.Args["in"], l.Args["nin"] = "a", 2.5
	if err := f(l, [][]byte{make([]byte, 16), make([]byte, 4*video.FCWords)}, [][]byte{make([]byte, 40)}); err == nil {
		t.Error("fractional nin: no error")
	}
}

// RegisterCPUKernel and LookupCPUKernel are safe for concurrent use.
func TestCPUKernelRegistryConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("video_test_kernel_", i%2)
			for range 100 {
				executor.RegisterCPUKernel(name, func(*executor.LaunchDesc, [][]byte, [][]byte) error { return nil })
				if _, ok := executor.LookupCPUKernel(name); !ok {
					t.Error("registered kernel not found")
				}
				if _, ok := executor.LookupCPUKernel(video.EntryConv); !ok {
					t.Error("video kernel not found")
				}
			}
		}()
	}
	wg.Wait()
	if _, ok := executor.LookupCPUKernel("no_such_entry"); ok {
		t.Error("lookup of an unregistered entry succeeded")
	}
}

func TestLoadFrames(t *testing.T) {
	frames := testFrames(t)
	if len(frames) < 30 {
		t.Errorf("%d frames, want the 37 test images", len(frames))
	}
	for i, f := range frames {
		if len(f) != video.FrameBytes {
			t.Fatalf("frame %d: %d bytes", i, len(f))
		}
		for p := 3; p < len(f); p += 4 {
			if f[p] != 255 {
				t.Fatalf("frame %d: alpha %d at byte %d", i, f[p], p)
			}
		}
	}
	// 150×103 → 128×128: 12 black rows on top, 13 at the bottom.
	if f := frames[1]; f[4*(128*11+64)] != 0 || f[4*(128*115+64)] != 0 {
		t.Error("frame 1 is not padded with black rows")
	}
	if _, err := video.LoadFrames(t.TempDir(), 8, 8); err == nil {
		t.Error("empty directory: no error")
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "x.png"), []byte("not a png"), 0o644)
	if _, err := video.LoadFrames(bad, 8, 8); err == nil {
		t.Error("undecodable file: no error")
	}
}

// The Go kernels reproduce what the H200 computed with the committed PTX
// (testdata/gpu_h200.txt, made by kernels/gpucheck.cu), bit for bit:
// preprocess, both conv layers, the logits and the output words.
func TestGPUOutputs(t *testing.T) {
	frames, wt := testFrames(t), weights(t)
	data, err := os.ReadFile("testdata/gpu_h200.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4+video.Classes+video.OutWords {
			t.Fatalf("bad line %q", line)
		}
		i, err := strconv.Atoi(f[0])
		if err != nil || i >= len(frames) {
			t.Fatalf("bad frame number in %q", line)
		}
		fr := frames[i]
		x0 := make([]float32, video.InC*video.Size*video.Size)
		a1 := make([]float32, video.C1*video.Size/2*video.Size/2)
		a2 := make([]float32, video.FCIn)
		logits := make([]float32, video.Classes)
		video.Preprocess(fr, video.FrameW, video.FrameH, video.Size, x0)
		video.ConvReluPool(x0, wt.Conv1, video.InC, video.C1, video.Size, a1)
		video.ConvReluPool(a1, wt.Conv2, video.C1, video.C2, video.Size/2, a2)
		video.FC(a2, wt.FC, video.FCIn, video.Classes, logits)
		for k, x := range [][]float32{x0, a1, a2} {
			if got := executor.Checksum(video.Bytes(x)); got != f[1+k] {
				t.Errorf("frame %d: %s checksum %s, GPU %s", i, []string{"x0", "a1", "a2"}[k], got, f[1+k])
			}
		}
		words := make([]byte, 0, 4*(video.Classes+video.OutWords))
		for _, h := range f[4:] {
			w, err := strconv.ParseUint(h, 16, 32)
			if err != nil {
				t.Fatalf("bad word %q", h)
			}
			words = binary.LittleEndian.AppendUint32(words, uint32(w))
		}
		for k, v := range video.Floats(words[:4*video.Classes]) {
			if v != logits[k] {
				t.Errorf("frame %d: logit %d = %v, GPU %v", i, k, logits[k], v)
			}
		}
		gpu, _ := video.DecodeOutput(words[4*video.Classes:])
		if got := video.Infer(fr, video.FrameW, video.FrameH, wt); gpu != got {
			t.Errorf("frame %d: GPU %v, Go %v", i, gpu, got)
		}
		n++
	}
	if n != len(frames) {
		t.Fatalf("%d frames in testdata/gpu_h200.txt, want %d", n, len(frames))
	}
}

// exp32 (the softmax's exponential, bit-identical to the GPU's video_exp) is
// within 1.1e-7 of e^d over its domain [−87, 0].
func TestExp32(t *testing.T) {
	var worst float64
	for i := 0; i <= 870000; i++ {
		d := -float32(i) * 1e-4
		got, want := float64(video.Exp32(d)), math.Exp(float64(d))
		worst = max(worst, math.Abs(got-want)/want)
	}
	if worst > 1.1e-7 {
		t.Errorf("max relative error %.3g, want ≤ 1.1e-7", worst)
	}
	if video.Exp32(0) != 1 || video.Exp32(-88) != 0 {
		t.Errorf("exp32(0) = %v, exp32(-88) = %v; want 1, 0", video.Exp32(0), video.Exp32(-88))
	}
}

// cameras.yaml as committed, on the simulator, gives each camera exactly the
// output the H200 computed for its frame (testdata/gpu_h200.txt), so
// `dagrun run` prints the same checksums on both backends.
func TestSpecFileMatchesGPU(t *testing.T) {
	frames := testFrames(t)
	s, err := dag.LoadFile(video.SpecFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Build(s, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := executor.Run(context.Background(), p, sim.New(sim.Options{}), executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gpu := map[int]string{} // frame → its 11 output words, as in the file
	data, err := os.ReadFile("testdata/gpu_h200.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > video.OutWords && f[0][0] != '#' {
			i, _ := strconv.Atoi(f[0])
			gpu[i] = strings.Join(f[len(f)-video.OutWords:], " ")
		}
	}
	for c := 0; c < 2; c++ {
		in, err := os.ReadFile(video.FrameFiles[c])
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(frames, func(f []byte) bool { return bytes.Equal(f, in) })
		if i < 0 {
			t.Fatalf("%s is none of the test images", video.FrameFiles[c])
		}
		var out []byte
		for _, o := range res.Outputs {
			if o.Name == video.OutputBuffer(c) {
				out = o.Data
				t.Logf("%s: checksum %s (test image %d)", o.Name, o.Checksum, i)
			}
		}
		var words []string
		for k := 0; k+4 <= len(out); k += 4 {
			words = append(words, fmt.Sprintf("%08x", binary.LittleEndian.Uint32(out[k:])))
		}
		if got := strings.Join(words, " "); got != gpu[i] {
			t.Errorf("camera %d: sim %s, GPU %s", c, got, gpu[i])
		}
	}
}
