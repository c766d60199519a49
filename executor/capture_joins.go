package executor

import (
	"fmt"
	"maps"
)

// captureJoins follows CUDA's cross-stream capture rule in an emulated
// capture (CUDA programming guide, "CUDA Graphs", cross-stream
// dependencies): a stream joins the capture by waiting on an event
// recorded in it by a captured stream, and every stream that joined must
// be joined back into the origin stream (the origin waits, directly or
// through other captured streams, for its last captured op) before the
// capture ends; otherwise cuStreamEndCapture fails with
// CUDA_ERROR_STREAM_CAPTURE_UNJOINED. Vector clocks over the captured
// streams (Fidge 1988, Mattern 1989), the same construction as Verify's.
type captureJoins struct {
	origin Stream
	order  []Stream                  // captured streams, in joining order
	ops    map[Stream]int            // per captured stream: its captured launches (the graph's nodes)
	last   map[Stream]string         // per captured stream: its last captured stage
	clock  map[Stream]map[Stream]int // per captured stream: the launches of each stream ordered before its next op
	events map[Event]map[Stream]int  // per event recorded in the capture: the clock of its record
}

func (c *captureJoins) begin(origin Stream) {
	*c = captureJoins{origin: origin, ops: map[Stream]int{}, last: map[Stream]string{},
		clock: map[Stream]map[Stream]int{origin: {}}, events: map[Event]map[Stream]int{}}
	c.order = append(c.order, origin)
}

func (c *captureJoins) captured(s Stream) bool { _, ok := c.clock[s]; return ok }

func (c *captureJoins) launch(s Stream, stage string) {
	if c.captured(s) {
		c.ops[s]++
		c.last[s] = stage
	}
}

func (c *captureJoins) record(ev Event, s Stream) {
	if !c.captured(s) {
		delete(c.events, ev) // a record outside the capture: a wait on it joins nothing
		return
	}
	k := maps.Clone(c.clock[s])
	k[s] = c.ops[s]
	c.events[ev] = k
}

// isolated reports whether a wait of stream s on ev crosses the capture's
// boundary: s is captured and ev's latest record was not made in the
// capture (CUDA_ERROR_STREAM_CAPTURE_ISOLATION).
func (c *captureJoins) isolated(s Stream, ev Event) bool {
	_, in := c.events[ev]
	return c.captured(s) && !in
}

func (c *captureJoins) wait(s Stream, ev Event) {
	k, ok := c.events[ev]
	if !ok {
		return
	}
	if !c.captured(s) {
		c.clock[s] = map[Stream]int{}
		c.order = append(c.order, s)
	}
	for x, n := range k {
		c.clock[s][x] = max(c.clock[s][x], n)
	}
}

// end returns CUDA's error if a stream that joined is not joined back.
func (c *captureJoins) end(origin Stream) error {
	for _, s := range c.order[1:] {
		if c.clock[origin][s] < c.ops[s] {
			what := "its last launch"
			if st := c.last[s]; st != "" {
				what = "stage " + st
			}
			return fmt.Errorf("executor: emulated graphs: a stream joined the capture and was not joined back before it ended (CUDA_ERROR_STREAM_CAPTURE_UNJOINED): the capture stream does not wait for %s", what)
		}
	}
	return nil
}
