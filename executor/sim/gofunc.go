package sim

import (
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
	if err := b.checkArgs(l); err != nil {
		return err
	}
	b.markEpoch()
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
