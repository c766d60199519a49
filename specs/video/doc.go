// Package video is dagrun's multi-camera inference demo: per camera and
// frame, copy an RGBA frame in, preprocess it to 3×64×64 float32, run a
// small CNN (two conv3x3+ReLU+maxpool2x2 layers and a fully
// connected layer, fixed deterministic weights), take softmax and argmax, and
// copy the result out.
//
// The package holds everything the demo needs besides the YAML:
//
//   - the network's shapes and weights (Weights, GenerateWeights,
//     LoadWeights; the committed weights/*.bin are GenerateWeights' output);
//   - Go implementations of the four CUDA kernels of kernels/video.cu, in
//     float32 with the same operations in the same order as the GPU
//     (Preprocess, ConvReluPool, FC, SoftmaxArgmax), registered at init with
//     executor.RegisterCPUKernel under their PTX entry names, so the
//     simulator runs the spec with real arithmetic;
//   - an independent float64 reference of the whole network (Reference),
//     which the tests hold the float32 kernels to (max relative error of the
//     probabilities < 1e-4);
//   - frames: LoadFrames decodes a directory of PNG/JPEG/GIF images into
//     fixed-size RGBA frames;
//   - the spec: Spec(cameras, copies) builds the pipeline for any number of
//     cameras; cameras.yaml is Spec(2, 2) as written by `go generate`.
//
// # Data layout
//
// Every float buffer is little-endian float32. A frame is FrameW×FrameH RGBA8,
// row-major, 4 bytes a pixel (alpha is ignored). Activations are CHW
// (channel, row, column). A conv layer's weight buffer holds the weights
// w[cout][cin][3][3] followed by the biases b[cout]; the FC layer's holds
// w[Classes][FCIn] followed by b[Classes]. The output of a frame is Classes
// float32 probabilities followed by one uint32 word, the argmax (OutWords
// words in all; see DecodeOutput).
package video

//go:generate go run gen.go
