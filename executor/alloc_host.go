package executor

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/dagrun/dagrun/contract"
)

// hostLaunch runs a host stage (a launch on the plan's host stream) on the
// calling goroutine, now: it reads its inputs with HostSyncer.HostRead,
// computes the built-in (one of contract.HostKernels, with the semantics
// documented on contract.BuiltinFill and the others) and writes the results
// with HostWrite. The plan orders it after device work
// by host waits (SyncEvent), and work issued after it is ordered after it.
func hostLaunch(hs HostSyncer, d *LaunchDesc) error {
	in := make([][]byte, len(d.Reads))
	for i, a := range d.Reads {
		in[i] = make([]byte, a.Bytes)
		if err := hs.HostRead(a.Buffer, a.Offset, in[i]); err != nil {
			return fmt.Errorf("host stage %s: %w", d.Name, err)
		}
	}
	out, err := HostKernel(d, in)
	if err != nil {
		return fmt.Errorf("host stage %s: %w", d.Name, err)
	}
	for i, a := range d.Writes {
		if out[i] == nil {
			continue
		}
		if err := hs.HostWrite(a.Buffer, a.Offset, out[i]); err != nil {
			return fmt.Errorf("host stage %s: %w", d.Name, err)
		}
	}
	return nil
}

// HostKernel computes a host stage's built-in (one of contract.HostKernels)
// on the CPU: in holds the bytes of each read, and the result holds, per
// write, the bytes to write at the start of its range (nil: nothing; a
// checksum writes its first 8 bytes only). spin sleeps its µs.
func HostKernel(d *LaunchDesc, in [][]byte) ([][]byte, error) {
	le := binary.LittleEndian
	out := make([][]byte, len(d.Writes))
	switch d.Kernel {
	case contract.BuiltinFill:
		w, err := contract.FillWord(d.Args)
		if err != nil {
			return nil, err
		}
		o := make([]byte, d.Writes[0].Bytes)
		for i := 0; i+4 <= len(o); i += 4 {
			le.PutUint32(o[i:], w)
		}
		out[0] = o
	case contract.BuiltinCopy:
		out[0] = in[0]
	case contract.BuiltinScale:
		a, err := contract.ScaleFactor(d.Args)
		if err != nil {
			return nil, err
		}
		o := make([]byte, len(in[0]))
		for i := 0; i+4 <= len(o); i += 4 {
			le.PutUint32(o[i:], math.Float32bits(float32(a*math.Float32frombits(le.Uint32(in[0][i:])))))
		}
		out[0] = o
	case contract.BuiltinChecksum:
		sum, x := contract.Checksum(in[0])
		o := make([]byte, 8)
		le.PutUint32(o, sum)
		le.PutUint32(o[4:], x)
		out[0] = o
	case contract.BuiltinSpin:
		us, err := contract.SpinUS(d.Kernel, d.Args, d.DurationUS)
		if err != nil {
			return nil, err
		}
		time.Sleep(time.Duration(us * float64(time.Microsecond)))
	default:
		return nil, fmt.Errorf("kernel %s cannot run on the host (host stages run %v)", d.Kernel, contract.HostKernels())
	}
	return out, nil
}
