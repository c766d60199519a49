package dagrun_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"math"

	"github.com/dagrun/dagrun"
)

// Build a spec in Go with a stage that is a Go function, plan it and run it
// over a stream of inputs. Each frame goes through a pinned staging buffer
// with two copies (a ring: iteration i uses copy i%2), is uploaded, negated
// by the Go stage and downloaded; the host fills a copy only after the
// upload of two frames earlier has read it, and reads each result after its
// download. On the GPU the Go function gets its CUstream (c.Stream) and the
// device pointers of its buffers (c.Reads[0].Ptr) to queue its own kernels
// or library calls; on the simulator it works on the bytes (Host). The
// example imports no package of dagrun's but the root one.
func Example_goStage() {
	const n = 16 // bytes: four float32s
	b := dagrun.NewSpec("negate")
	inH := b.Buffer("in_h", n).HostPinned().Input().Copies(2)
	in := b.Buffer("in", n).Copies(2)
	out := b.Buffer("out", n).Copies(2)
	outH := b.Buffer("out_h", n).HostPinned().Output().Copies(2)
	b.Stage("upload", "copy").Reads(inH).Writes(in)
	b.Stage("negate", "negate").GoFunc().Reads(in).Writes(out)
	b.Stage("download", "copy").Reads(out).Writes(outH)
	plan, err := dagrun.Plan(b.Spec(), dagrun.PlanOptions{})
	if err != nil {
		log.Fatal(err)
	}
	negate := func(c *dagrun.FuncCall) error {
		if c.Stream != 0 {
			return fmt.Errorf("on the GPU: launch a kernel on stream %#x over %#x", c.Stream, c.Reads[0].Ptr)
		}
		in, out := c.Reads[0].Host, c.Writes[0].Host
		for i := 0; i < len(out); i += 4 {
			binary.LittleEndian.PutUint32(out[i:], binary.LittleEndian.Uint32(in[i:])^0x80000000)
		}
		return nil
	}
	_, err = dagrun.Run(context.Background(), plan, dagrun.RunOptions{
		Backend:    dagrun.BackendSim,
		Iterations: 3,
		Funcs:      map[string]func(*dagrun.FuncCall) error{"negate": negate},
		Inputs: map[string]func(int, []byte) error{"in_h": func(frame int, dst []byte) error {
			binary.LittleEndian.PutUint32(dst, math.Float32bits(float32(frame)+0.5))
			return nil
		}},
		Outputs: map[string]func(int, []byte) error{"out_h": func(frame int, res []byte) error {
			fmt.Println("frame", frame, "→", math.Float32frombits(binary.LittleEndian.Uint32(res)))
			return nil
		}},
	})
	fmt.Println("err:", err)
	// Output:
	// frame 0 → -0.5
	// frame 1 → -1.5
	// frame 2 → -2.5
	// err: <nil>
}
