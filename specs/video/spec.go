package video

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
)

// Paths of the spec's files, relative to the spec directory (this package's
// directory, specs/video).
const (
	PTXFile  = "kernels/video.ptx"
	SpecFile = "cameras.yaml"
	// SpecFile2GPU is SpecOn(2, 2, 2): a camera per device.
	SpecFile2GPU = "cameras-2gpu.yaml"
)

// FrameFiles are the committed input frames (FrameW×FrameH RGBA8, made by
// `go generate` from Go's image test data): camera c starts with
// FrameFiles[c % len(FrameFiles)].
var FrameFiles = []string{"frames/frame0.rgba", "frames/frame1.rgba"}

// frameSources are the images under $(go env GOROOT)/src/image/testdata that
// FrameFiles were made from, in order.
var frameSources = []string{"video-001.png", "video-005.gray.png"}

// Kernel names of the spec (its kernels: section).
const (
	KernelPreprocess = "preprocess"
	KernelConv       = "conv_relu_pool"
	KernelFC         = "fc"
	KernelSoftmax    = "softmax_argmax"
)

// Weight buffer names; the weights are shared by all cameras.
const (
	BufConv1 = "conv1.wb"
	BufConv2 = "conv2.wb"
	BufFC    = "fc.wb"
)

// InputBuffer is camera cam's pinned input frame (FrameBytes, role input):
// the staging buffer the host fills.
func InputBuffer(cam int) string { return camName(cam, "frame_h") }

// OutputBuffer is camera cam's pinned result (OutWords words, role output;
// see DecodeOutput).
func OutputBuffer(cam int) string { return camName(cam, "out_h") }

func camName(cam int, what string) string { return fmt.Sprintf("cam%d/%s", cam, what) }

// Spec returns the multi-camera pipeline for the given number of cameras
// (≥ 1), with every per-frame buffer declared with copies (≥ 1; 1 means no
// ring). Per camera it declares, in order, the stages
//
//	camC/upload      copy  frame_h (pinned, input) → frame
//	camC/preprocess  video_preprocess      frame → x0 (3×64×64)
//	camC/conv1       video_conv_relu_pool  x0 → a1 (8×32×32), weights conv1.wb
//	camC/conv2       video_conv_relu_pool  a1 → a2 (16×16×16), weights conv2.wb
//	camC/fc          video_fc              a2 → logits (10), weights fc.wb
//	camC/softmax     video_softmax_argmax  logits → out (10 probs + argmax)
//	camC/download    copy  out → out_h (pinned, output)
//
// so the cameras are independent chains that share only the read-only
// weights, and the planner spreads them over streams. The spec is returned
// as dag.LoadFile would return it (every default filled in, no positions);
// cameras.yaml is Spec(2, 2) as written by dag.WriteYAML. Paths (the PTX,
// the weight and frame files) are relative to the spec directory: set Dir to
// where this package's files are before planning or running it. It panics if
// cameras or copies is < 1.
func Spec(cameras, copies int) *dag.Spec { return SpecOn(cameras, copies, 1) }

// WeightBuffer is the name of weight buffer name (BufConv1, BufConv2,
// BufFC) on device dev: name itself on device 0, "devD/name" on the
// others (each device has its own copy of the weights).
func WeightBuffer(name string, dev int) string {
	if dev == 0 {
		return name
	}
	return fmt.Sprintf("dev%d/%s", dev, name)
}

// SpecOn is Spec on devices devices (≥ 1): camera c's buffers and stages
// on device c % devices, with each device's own copy of the weights
// (WeightBuffer; the same files). SpecOn(c, k, 1) is Spec(c, k);
// cameras-2gpu.yaml is SpecOn(2, 2, 2) as written by dag.WriteYAML. It
// panics if cameras, copies or devices is < 1.
func SpecOn(cameras, copies, devices int) *dag.Spec {
	if cameras < 1 || copies < 1 || devices < 1 {
		panic(fmt.Sprintf("video: SpecOn(%d, %d, %d): cameras, copies and devices must be ≥ 1", cameras, copies, devices))
	}
	if copies == 1 {
		copies = 0 // the loader's "one copy"
	}
	s := &dag.Spec{
		Version: 1,
		Name:    fmt.Sprintf("video-%dcam", cameras),
		Sync:    dag.SyncAuto,
		Devices: devices,
	}
	if devices > 1 {
		s.Name = fmt.Sprintf("video-%dcam-%dgpu", cameras, devices)
	}
	dev := 0 // the device of the buffers buf declares
	buf := func(name, where, role, dtype string, shape []int64, init dag.Init, copies int) {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		if dtype == "f32" {
			n *= 4
		}
		if init.Kind == "" {
			init.Kind = dag.InitZeros
		}
		d := 0
		if where == dag.WhereDevice {
			d = dev
		}
		s.Buffers = append(s.Buffers, dag.BufferSpec{Name: name, Bytes: n, DType: dtype, Shape: shape,
			Where: where, Role: role, Init: init, Copies: copies, Device: d})
	}
	for dev = 0; dev < min(devices, cameras); dev++ {
		buf(WeightBuffer(BufConv1, dev), dag.WhereDevice, dag.RoleInput, "f32", []int64{Conv1Words}, dag.Init{Kind: dag.InitFile, Path: Conv1File}, 0)
		buf(WeightBuffer(BufConv2, dev), dag.WhereDevice, dag.RoleInput, "f32", []int64{Conv2Words}, dag.Init{Kind: dag.InitFile, Path: Conv2File}, 0)
		buf(WeightBuffer(BufFC, dev), dag.WhereDevice, dag.RoleInput, "f32", []int64{FCWords}, dag.Init{Kind: dag.InitFile, Path: FCFile}, 0)
	}

	param := func(spec string) dag.ParamSpec {
		for i := range spec {
			if spec[i] == ':' {
				return dag.ParamSpec{Name: spec[:i], Type: spec[i+1:]}
			}
		}
		panic("video: bad param " + spec)
	}
	kernel := func(name, entry string, params ...string) {
		k := dag.KernelSpec{Name: name, PTX: PTXFile, Entry: entry}
		for _, p := range params {
			k.Params = append(k.Params, param(p))
		}
		s.Kernels = append(s.Kernels, k)
	}
	kernel(KernelPreprocess, EntryPreprocess, "frame:ptr", "out:ptr", "w:u32", "h:u32", "size:u32")
	kernel(KernelConv, EntryConv, "in:ptr", "wb:ptr", "out:ptr", "cin:u32", "cout:u32", "size:u32")
	kernel(KernelFC, EntryFC, "in:ptr", "wb:ptr", "out:ptr", "nin:u32", "nout:u32")
	kernel(KernelSoftmax, EntrySoftmax, "in:ptr", "out:ptr", "n:u32")

	whole := func(name string) []dag.Access {
		return []dag.Access{{Buffer: name, Bytes: s.Buffer(name).Bytes}}
	}
	for c := 0; c < cameras; c++ {
		dev = c % devices
		b := func(what string) string { return camName(c, what) }
		conv1, conv2, fcw := WeightBuffer(BufConv1, dev), WeightBuffer(BufConv2, dev), WeightBuffer(BufFC, dev)
		frame := dag.Init{Kind: dag.InitFile, Path: FrameFiles[c%len(FrameFiles)]}
		buf(b("frame_h"), dag.WhereHostPinned, dag.RoleInput, "u8", []int64{FrameH, FrameW, 4}, frame, copies)
		buf(b("frame"), dag.WhereDevice, dag.RoleTemp, "u8", []int64{FrameH, FrameW, 4}, dag.Init{}, copies)
		buf(b("x0"), dag.WhereDevice, dag.RoleTemp, "f32", []int64{InC, Size, Size}, dag.Init{}, copies)
		buf(b("a1"), dag.WhereDevice, dag.RoleTemp, "f32", []int64{C1, Size / 2, Size / 2}, dag.Init{}, copies)
		buf(b("a2"), dag.WhereDevice, dag.RoleTemp, "f32", []int64{C2, Size / 4, Size / 4}, dag.Init{}, copies)
		buf(b("logits"), dag.WhereDevice, dag.RoleTemp, "f32", []int64{Classes}, dag.Init{}, copies)
		buf(b("out"), dag.WhereDevice, dag.RoleTemp, "f32", []int64{OutWords}, dag.Init{}, copies)
		buf(b("out_h"), dag.WhereHostPinned, dag.RoleOutput, "f32", []int64{OutWords}, dag.Init{}, copies)

		stage := func(name, kernel string, args map[string]any, grid, block int, reads, writes []string, us float64) {
			st := dag.StageSpec{Name: b(name), Kernel: kernel, Args: args, DurationUS: us, Device: dev}
			if grid > 0 {
				st.Launch = dag.Launch{Grid: [3]int{grid, 1, 1}, Block: [3]int{block, 1, 1}}
			}
			for _, r := range reads {
				st.Reads = append(st.Reads, whole(r)...)
			}
			for _, w := range writes {
				st.Writes = append(st.Writes, whole(w)...)
			}
			s.Stages = append(s.Stages, st)
		}
		stage("upload", dag.BuiltinCopy, nil, 0, 0, []string{b("frame_h")}, []string{b("frame")}, 5)
		stage("preprocess", KernelPreprocess,
			map[string]any{"frame": b("frame"), "out": b("x0"), "w": FrameW, "h": FrameH, "size": Size},
			Size*Size/256, 256, []string{b("frame")}, []string{b("x0")}, 4)
		stage("conv1", KernelConv,
			map[string]any{"in": b("x0"), "wb": conv1, "out": b("a1"), "cin": InC, "cout": C1, "size": Size},
			C1*(Size/2)*(Size/2)/256, 256, []string{b("x0"), conv1}, []string{b("a1")}, 8)
		stage("conv2", KernelConv,
			map[string]any{"in": b("a1"), "wb": conv2, "out": b("a2"), "cin": C1, "cout": C2, "size": Size / 2},
			C2*(Size/4)*(Size/4)/256, 256, []string{b("a1"), conv2}, []string{b("a2")}, 8)
		stage("fc", KernelFC,
			map[string]any{"in": b("a2"), "wb": fcw, "out": b("logits"), "nin": FCIn, "nout": Classes},
			Classes, FCLanes, []string{b("a2"), fcw}, []string{b("logits")}, 6)
		stage("softmax", KernelSoftmax,
			map[string]any{"in": b("logits"), "out": b("out"), "n": Classes},
			1, 32, []string{b("logits")}, []string{b("out")}, 3)
		stage("download", dag.BuiltinCopy, nil, 0, 0, []string{b("out")}, []string{b("out_h")}, 3)
	}
	return s
}

// SetFrameFiles makes camera c of s (a Spec) start with the raw frame file
// paths[c % len(paths)] (FrameBytes each, absolute or relative to s.Dir),
// for example frames written from LoadFrames. It panics if paths is empty.
func SetFrameFiles(s *dag.Spec, paths []string) {
	if len(paths) == 0 {
		panic("video: SetFrameFiles: no paths")
	}
	for c := 0; ; c++ {
		b := s.Buffer(InputBuffer(c))
		if b == nil {
			return
		}
		b.Init = dag.Init{Kind: dag.InitFile, Path: paths[c%len(paths)]}
	}
}
