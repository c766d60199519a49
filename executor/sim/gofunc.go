package sim

import (
	"fmt"

	"github.com/dagrun/dagrun/executor"
)

var _ executor.FuncLauncher = (*Backend)(nil)

// LaunchFunc enqueues the Go-function stage f on s: it runs in stream order
// on the stream's goroutine, like a kernel body, with the race detector
// checking its accesses. FuncCall.Stream is 0 and each FuncBuffer's Host is
// the access's bytes (reads that overlap a write of the stage are copies;
// other reads are live and must not be modified).
func (b *Backend) LaunchFunc(hs executor.Stream, l *executor.LaunchDesc, f executor.StageFunc) error {
	s, err := b.stream(hs)
	if err != nil {
		return err
	}
	for _, set := range [2][]executor.Arg{l.Reads, l.Writes} {
		for _, a := range set {
			buf, err := b.buffer(a.Buffer)
			if err != nil {
				return fmt.Errorf("%s %s: %w", l.Name, a.Name, err)
			}
			if a.Offset < 0 || a.Bytes <= 0 || a.Offset+a.Bytes > int64(len(buf.data)) {
				return fmt.Errorf("sim: stage %s: access %s[%d:%d] is outside the buffer's %d bytes", l.Name, a.Name, a.Offset, a.Offset+a.Bytes, len(buf.data))
			}
		}
	}
	s.push(op{kind: opLaunch, desc: l, fn: f})
	return nil
}

// runFunc calls a Go-function stage's body with the stage's bytes.
func runFunc(l *executor.LaunchDesc, f executor.StageFunc, in, out [][]byte) error {
	c := &executor.FuncCall{Stage: l.Name, Desc: l,
		Reads: make([]executor.FuncBuffer, len(l.Reads)), Writes: make([]executor.FuncBuffer, len(l.Writes))}
	for i, a := range l.Reads {
		c.Reads[i] = executor.FuncBuffer{Name: a.Name, Bytes: a.Bytes, Host: in[i]}
	}
	for i, a := range l.Writes {
		c.Writes[i] = executor.FuncBuffer{Name: a.Name, Bytes: a.Bytes, Host: out[i]}
	}
	return f(c)
}
