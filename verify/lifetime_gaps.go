package verify

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dagrun/dagrun/plan"
)

// LifetimeGap is a lifetime record that ends before a stream's last use of
// its buffer: the executor (a stream-ordered free, the arena, the host
// refilling a staging copy) may hand the bytes to another use while that
// use still runs — the allocator half of a missing record_stream.
type LifetimeGap struct {
	Buffer  string `json:"buffer"`
	Stream  string `json:"stream"`   // the stream's name
	LastUse string `json:"last_use"` // the stream's last stage that touches the buffer
	// Event is the lifetime's event on the stream, or −1 when the lifetime
	// lists none for it.
	Event int `json:"event"`
	// Unrecorded: no op records Event on the stream at all.
	Unrecorded bool `json:"unrecorded,omitempty"`
	// Next is the race the gap lets happen: the buffer's first stage of the
	// next iteration (issue order), which may get its bytes once the
	// lifetime's events complete (a dynamic free and a new allocation, the
	// host refilling a staging copy, another buffer's arena bytes) while
	// LastUse still runs; Kind is the hazard (LastUse, then Next). Empty
	// when both only read.
	Next       string `json:"next,omitempty"`
	NextStream string `json:"next_stream,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

func (g LifetimeGap) String() string {
	s := g.gap()
	if g.Next != "" {
		s += fmt.Sprintf("; the race it lets happen: %s on %s, %s (stream %s) → %s of the next iteration (stream %s), which may get %s's bytes once the lifetime's events complete",
			g.Kind, g.Buffer, g.LastUse, g.Stream, g.Next, g.NextStream, g.Buffer)
	}
	return s
}

func (g LifetimeGap) gap() string {
	if g.Event < 0 {
		return fmt.Sprintf("lifetime of %s: stream %s uses it (last in %s) but the lifetime has no event on stream %s: add one recorded after %s",
			g.Buffer, g.Stream, g.LastUse, g.Stream, g.LastUse)
	}
	if g.Unrecorded {
		return fmt.Sprintf("lifetime of %s on stream %s names event e%d, which is never recorded on stream %s, so nothing marks the end of %s, the stream's last use of %s: use an event recorded after %s",
			g.Buffer, g.Stream, g.Event, g.Stream, g.LastUse, g.Buffer, g.LastUse)
	}
	return fmt.Sprintf("lifetime of %s ends early on stream %s: event e%d is recorded before %s, the stream's last use of %s, so its bytes may be reused while %s runs: use an event recorded after %s",
		g.Buffer, g.Stream, g.Event, g.LastUse, g.Buffer, g.LastUse, g.LastUse)
}

// nextUse fills g's Next, NextStream and Kind: the first launch in issue
// order of p that touches buffer b (ids: AccessBuffers, accAt: each
// stage's first access in it), and the hazard of stage last's access of
// b, then its.
func nextUse(p *plan.Plan, ids, accAt []int32, b int32, last int, g *LifetimeGap) {
	touch := func(i int) (reads, writes bool) {
		st := &p.Stages[i]
		k := accAt[i]
		for range st.Reads {
			reads = reads || ids[k] == b
			k++
		}
		for range st.Writes {
			writes = writes || ids[k] == b
			k++
		}
		return
	}
	_, lw := touch(last)
	for _, so := range p.IssueOrder {
		o := p.Streams[so[0]].Ops[so[1]]
		if o.Kind != plan.OpLaunch {
			continue
		}
		r, w := touch(o.Stage)
		if !r && !w {
			continue
		}
		switch {
		case lw && w:
			g.Kind = plan.RaceWAW
		case lw:
			g.Kind = plan.RaceRAW
		case w:
			g.Kind = plan.RaceWAR
		default:
			return
		}
		g.Next, g.NextStream = p.Stages[o.Stage].Name, streamLabel(p.Streams[so[0]].Name, so[0])
		return
	}
}

// lifetimeGaps checks every lifetime record of p against the plan's
// stream order: for each stream that touches the buffer, the lifetime must
// name an event recorded on that stream after the stream's last launch
// that touches it.
func lifetimeGaps(p *plan.Plan) []LifetimeGap {
	if len(p.Lifetimes) == 0 {
		return nil
	}
	// Per buffer (p.Buffers' index), its (last) lifetime or -1: the same
	// index when the lifetimes are the buffers' in order (as the lifetimes
	// pass makes them), else by name; undeclared buffers by name (life).
	var life map[string]int32 // buffer → its (last) lifetime
	lifeOf := make([]int32, len(p.Buffers))
	inOrder := len(p.Lifetimes) == len(p.Buffers)
	for b := range p.Buffers {
		lifeOf[b] = int32(b)
		inOrder = inOrder && p.Lifetimes[b].Buffer == p.Buffers[b].Name
	}
	if !inOrder {
		life = make(map[string]int32, len(p.Lifetimes))
		for i, l := range p.Lifetimes {
			life[l.Buffer] = int32(i)
		}
		for b := range p.Buffers {
			lifeOf[b] = -1
			if i, ok := life[p.Buffers[b].Name]; ok {
				lifeOf[b] = i
			}
		}
	}
	lifeBuf := make([]int32, len(p.Lifetimes)) // per lifetime, its declared buffer or -1
	for i := range lifeBuf {
		lifeBuf[i] = -1
	}
	for b, i := range lifeOf {
		if i >= 0 {
			lifeBuf[i] = int32(b)
		}
	}
	ids := plan.AccessBuffers(p)
	accAt := make([]int32, len(p.Stages)+1) // per stage: its first access in ids
	for i := range p.Stages {
		accAt[i+1] = accAt[i] + int32(len(p.Stages[i].Reads)+len(p.Stages[i].Writes))
	}
	last := make([]int32, len(p.Lifetimes)) // per lifetime: op index of the stream's last launch touching it, or -1
	for i := range last {
		last[i] = -1
	}
	lastRec := make([]int32, p.Events) // per event: op index of its last record on the stream, or -1
	for e := range lastRec {
		lastRec[e] = -1
	}
	// The lifetimes' done entries by stream (doneAt[s]:doneAt[s+1] of
	// done), each lifetime's in its order: a stream reads its own, not
	// every entry of each lifetime it touches (a buffer every stream
	// reads has an entry per stream).
	doneAt := make([]int32, len(p.Streams)+1)
	for i := range p.Lifetimes {
		for _, d := range p.Lifetimes[i].Done {
			if d.Stream >= 0 && d.Stream < len(p.Streams) {
				doneAt[d.Stream+1]++
			}
		}
	}
	for s := range p.Streams {
		doneAt[s+1] += doneAt[s]
	}
	type lifeDone struct{ life, event int32 }
	done := make([]lifeDone, doneAt[len(p.Streams)])
	fill := slices.Clone(doneAt[:len(p.Streams)])
	for i := range p.Lifetimes {
		for _, d := range p.Lifetimes[i].Done {
			if d.Stream >= 0 && d.Stream < len(p.Streams) {
				done[fill[d.Stream]] = lifeDone{int32(i), int32(d.Event)}
				fill[d.Stream]++
			}
		}
	}
	evOf := make([]int32, len(p.Lifetimes))  // per lifetime: the stream's last done event, or -1
	covers := make([]bool, len(p.Lifetimes)) // per lifetime: a done event of the stream is recorded after its last use
	for i := range evOf {
		evOf[i] = -1
	}
	var gaps []LifetimeGap
	var touched []int32 // lifetimes the stream touches
	for s, str := range p.Streams {
		touched = touched[:0]
		for j, o := range str.Ops {
			switch o.Kind {
			case plan.OpRecord:
				lastRec[o.Event] = int32(j)
			case plan.OpLaunch:
				st := &p.Stages[o.Stage]
				k := accAt[o.Stage]
				for _, list := range [2][]plan.Access{st.Reads, st.Writes} {
					for _, a := range list {
						i := int32(-1)
						if b := ids[k]; b >= 0 {
							i = lifeOf[b]
						} else if life != nil {
							if x, ok := life[a.Buffer]; ok {
								i = x
							}
						}
						k++
						if i >= 0 {
							if last[i] < 0 {
								touched = append(touched, i)
							}
							last[i] = int32(j)
						}
					}
				}
			}
		}
		from := len(gaps)
		for _, d := range done[doneAt[s]:doneAt[s+1]] {
			if j := last[d.life]; j >= 0 {
				evOf[d.life] = d.event
				covers[d.life] = covers[d.life] || d.event >= 0 && int(d.event) < len(lastRec) && lastRec[d.event] > j
			}
		}
		for _, i := range touched {
			j := last[i]
			ev, covered := int(evOf[i]), covers[i]
			evOf[i], covers[i] = -1, false
			if !covered {
				use := p.Stages[str.Ops[j].Stage].Name
				never := ev >= 0 && (ev >= len(lastRec) || lastRec[ev] < 0)
				g := LifetimeGap{Buffer: p.Lifetimes[i].Buffer, Stream: streamLabel(str.Name, s), LastUse: use, Event: ev, Unrecorded: never}
				if b := lifeBuf[i]; b >= 0 {
					nextUse(p, ids, accAt, b, str.Ops[j].Stage, &g)
				}
				gaps = append(gaps, g)
			}
			last[i] = -1
		}
		// A stream's gaps by buffer name.
		slices.SortStableFunc(gaps[from:], func(x, y LifetimeGap) int { return strings.Compare(x.Buffer, y.Buffer) })
		for _, o := range str.Ops {
			if o.Kind == plan.OpRecord {
				lastRec[o.Event] = -1
			}
		}
	}
	return gaps
}
