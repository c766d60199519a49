package dag

// The stream and capture tables of the spec format, and the vocabularies
// of their values.

import (
	"gopkg.in/yaml.v3"
)

var (
	streamTable = []field[StreamSpec, struct{}]{
		{key: "name", need: "give the stream a name: {name: s, kind: blocking}",
			decode: func(d *decoding[StreamSpec, struct{}], v *yaml.Node) {
				if n, ok := d.name(v, "stream name"); ok {
					d.x.Name = n
					d.what = "stream " + n
				}
			},
			write:  func(x *StreamSpec, _ *writing) (string, error) { return str(x.Name), nil },
			schema: FormatField{Type: "name", Doc: "a stream that stages name in stream:"}},
		{key: "kind",
			decode: func(d *decoding[StreamSpec, struct{}], v *yaml.Node) {
				if k, ok := d.oneOf(v, d.what+": kind", streamKinds); ok {
					d.x.Kind = k
				}
			},
			write:  func(x *StreamSpec, _ *writing) (string, error) { return strIf(x.Kind, KindNonBlocking), nil },
			schema: FormatField{Type: "enum", Enum: streamKinds, Doc: "how the stream orders with the legacy default stream, or host: a host thread's host stream"}},
		{key: "thread",
			decode: func(d *decoding[StreamSpec, struct{}], v *yaml.Node) {
				if t, ok := d.name(v, d.what+": thread"); ok {
					d.x.Thread = t
				}
			},
			write:  func(x *StreamSpec, _ *writing) (string, error) { return strIf(x.Thread, MainThread), nil },
			schema: FormatField{Type: "name", Doc: "the host thread that issues the stream's ops (default main)"}},
		{key: "device",
			decode: func(d *decoding[StreamSpec, struct{}], v *yaml.Node) {
				if n, ok := d.intIn(v, d.what+": device", 0, MaxDevices-1); ok {
					d.x.Device = int(n)
				}
			},
			write: func(x *StreamSpec, w *writing) (string, error) {
				if x.Kind == KindHost {
					return "", nil
				}
				return w.deviceIf(x.Device), nil
			},
			schema: FormatField{Type: "integer", Min: 0, Max: MaxDevices - 1, HasMin: true, HasMax: true, Doc: "the GPU whose context creates the stream (default: its stages')"}},
	}
	streamDeclKeys = keysOf(streamTable)

	captureTable = []field[CaptureSpec, struct{}]{
		{key: "stream", need: "name the capture's stream: {stream: s, first: a, last: z}",
			decode: func(d *decoding[CaptureSpec, struct{}], v *yaml.Node) {
				if n, ok := d.name(v, "capture: stream"); ok {
					d.x.Stream = n
				}
			},
			write:  func(x *CaptureSpec, _ *writing) (string, error) { return str(x.Stream), nil },
			schema: FormatField{Type: "name", Doc: "the stream the capture begins and ends on"}},
		{key: "first", need: "name the first captured stage: first: a",
			decode: func(d *decoding[CaptureSpec, struct{}], v *yaml.Node) {
				if n, ok := d.name(v, "capture: first"); ok {
					d.x.First = n
				}
			},
			write:  func(x *CaptureSpec, _ *writing) (string, error) { return str(x.First), nil },
			schema: FormatField{Type: "name", Doc: "the stage the capture begins before (on the capture's stream)"}},
		{key: "last", need: "name the last captured stage: last: z",
			decode: func(d *decoding[CaptureSpec, struct{}], v *yaml.Node) {
				if n, ok := d.name(v, "capture: last"); ok {
					d.x.Last = n
				}
			},
			write:  func(x *CaptureSpec, _ *writing) (string, error) { return str(x.Last), nil },
			schema: FormatField{Type: "name", Doc: "the stage the capture ends after (on the capture's stream)"}},
		{key: "mode",
			decode: func(d *decoding[CaptureSpec, struct{}], v *yaml.Node) {
				if m, ok := d.oneOf(v, "capture: mode", captureModes); ok {
					d.x.Mode = m
				}
			},
			write:  func(x *CaptureSpec, _ *writing) (string, error) { return strIf(x.Mode, CaptureGlobal), nil },
			schema: FormatField{Type: "enum", Enum: captureModes, Doc: "cuStreamBeginCapture's mode (default global)"}},
	}
	captureKeys = keysOf(captureTable)

	streamKinds  = []string{KindNonBlocking, KindBlocking, KindLegacy, KindPerThread, KindHost}
	captureModes = []string{CaptureGlobal, CaptureThreadLocal, CaptureRelaxed}
	copyModes    = []string{CopyAsync, CopySync}
	allocModes   = []string{AllocLazy, AllocProducer}
	placements   = []string{PlacementSpec, PlacementBalance}
)
