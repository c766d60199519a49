package plan

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// ArenaAlign is the alignment of every arena offset and the unit arena
// sizes are rounded up to, in bytes (cudaMalloc's own alignment).
const ArenaAlign = 256

// AlignUp rounds n bytes up to a multiple of ArenaAlign.
func AlignUp(n int64) int64 { return (n + ArenaAlign - 1) / ArenaAlign * ArenaAlign }

// NoReuseBytes is the arena p would need without any reuse: the sum of its
// arena buffers' sizes, each rounded up to ArenaAlign, in bytes.
func NoReuseBytes(p *Plan) int64 {
	var n int64
	for _, b := range p.Buffers {
		if b.ArenaOffset != nil {
			n += AlignUp(b.Bytes)
		}
	}
	return n
}

// writeArena writes the table's arena lines: the arena's size, each arena
// buffer at its offset (in offset order), and the budget loop's steps.
func (p *Plan) writeArena(w io.Writer) {
	type at struct {
		name string
		off  int64
	}
	n := p.DeviceCount()
	bufs := make([][]at, n)
	for _, b := range p.Buffers {
		if b.ArenaOffset != nil && b.Device >= 0 && b.Device < n {
			bufs[b.Device] = append(bufs[b.Device], at{b.Name, *b.ArenaOffset})
		}
	}
	for d, list := range bufs {
		if len(list) == 0 {
			continue
		}
		slices.SortStableFunc(list, func(x, y at) int { return cmp.Compare(x.off, y.off) })
		var b strings.Builder
		for _, x := range list {
			fmt.Fprintf(&b, " %s@%d", x.name, x.off)
		}
		if n == 1 {
			fmt.Fprintf(w, "arena: %d bytes (%d without reuse):%s\n", p.Stats.ArenaBytes, NoReuseBytes(p), b.String())
		} else if d < len(p.Stats.ArenaBytesPerDevice) {
			fmt.Fprintf(w, "arena of device %d: %d bytes:%s\n", d, p.Stats.ArenaBytesPerDevice[d], b.String())
		}
	}
	for i, s := range p.Budget {
		fmt.Fprintf(w, "budget step %d: %s\n", i+1, s)
	}
}
