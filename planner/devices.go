package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// Several devices (docs/spec.md, "Several devices"): a plan's streams and
// device buffers each name a device; a stage runs on its stream's device.

// setDevices sets st.dev from the spec's stage devices when the spec has
// several (nil otherwise: every stage on device 0).
func (st *state) setDevices() {
	if st.spec.Devices <= 1 {
		return
	}
	st.dev = make([]int32, st.n)
	for v, sg := range st.spec.Stages {
		if !st.spec.IsHostStream(sg.Stream) {
			st.dev[v] = int32(max(sg.Device, 0))
		}
	}
}

// device is stage v's device.
func (st *state) device(v int32) int32 {
	if st.dev == nil {
		return 0
	}
	return st.dev[v]
}

// sameDevice reports whether stages u and v run on one device: a chain
// (a stream) never mixes devices.
func (st *state) sameDevice(u, v int32) bool { return st.dev == nil || st.dev[u] == st.dev[v] }

// streamDevice is stream s's device (assign's), 0 for a host stream.
func (st *state) streamDevice(s int) int {
	if s >= len(st.streamDev) || st.names[s] == dag.HostStream || st.spec.IsHostStream(st.names[s]) {
		return 0
	}
	return int(st.streamDev[s])
}

// splitArena turns the arena layout of a plan of several devices into one
// arena per device. The layout never shares bytes between buffers of two
// devices (arenaInfo.before), so each device's buffers keep their relative
// placement: the byte ranges no buffer of device d covers are cut out of
// d's address space (a monotone map of offsets, which keeps every overlap
// and every gap between d's buffers, and ArenaAlign, since every offset and
// rounded size is a multiple of it). Stats.ArenaBytesPerDevice gets each
// arena's size, Stats.ArenaBytes their sum. Plans of one device are left
// as they are.
func splitArena(p *plan.Plan) {
	n := p.DeviceCount()
	if n <= 1 {
		p.Stats.ArenaBytesPerDevice = nil
		return
	}
	type span struct{ lo, hi int64 }
	per := make([][]int, n) // buffer indices by device
	for i := range p.Buffers {
		if p.Buffers[i].ArenaOffset != nil {
			d := p.Buffers[i].Device
			per[d] = append(per[d], i)
		}
	}
	p.Stats.ArenaBytesPerDevice = make([]int64, n)
	p.Stats.ArenaBytes = 0
	for d, bufs := range per {
		spans := make([]span, len(bufs))
		for k, i := range bufs {
			lo := *p.Buffers[i].ArenaOffset
			spans[k] = span{lo, lo + plan.AlignUp(p.Buffers[i].Bytes)}
		}
		sorted := slices.Clone(spans)
		slices.SortFunc(sorted, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
		// The covered union as disjoint runs, each with the bytes cut before it.
		var runs []span
		var cut []int64
		var end, gap int64
		for _, s := range sorted {
			if len(runs) == 0 || s.lo > runs[len(runs)-1].hi {
				gap += s.lo - end
				runs = append(runs, s)
				cut = append(cut, gap)
			} else {
				runs[len(runs)-1].hi = max(runs[len(runs)-1].hi, s.hi)
			}
			end = runs[len(runs)-1].hi
		}
		for k, i := range bufs {
			r, _ := slices.BinarySearchFunc(runs, spans[k].lo, func(s span, x int64) int {
				if s.hi <= x {
					return -1
				}
				if s.lo > x {
					return 1
				}
				return 0
			})
			off := spans[k].lo - cut[r]
			p.Buffers[i].ArenaOffset = &off
			p.Stats.ArenaBytesPerDevice[d] = max(p.Stats.ArenaBytesPerDevice[d], off+spans[k].hi-spans[k].lo)
		}
		p.Stats.ArenaBytes += p.Stats.ArenaBytesPerDevice[d]
	}
}

// consecutiveRanks reports whether the stages at topological positions
// i, i+1, … are ranks 0, 1, … of one collective, all of them.
func (st *state) consecutiveRanks(i int) bool {
	c0 := st.coll[st.topo[i]]
	for r := 0; r < c0.Ranks; r++ {
		if i+r >= len(st.topo) {
			return false
		}
		c := st.coll[st.topo[i+r]]
		if c == nil || c.Group != c0.Group || c.Rank != r {
			return false
		}
	}
	return true
}

// idleDevicesNote says which of p's devices run nothing (no device stream
// of the plan is theirs), "" when every device runs something: a CUDA run
// still opens a context on a GPU for each (docs/spec.md, "Several
// devices"), so a spec that says devices: N but names, or is placed on,
// fewer is likely not what was meant. balance: the spec's placement is
// balance (the planner chose to leave them idle).
func idleDevicesNote(p *plan.Plan, balance bool) string {
	n := p.DeviceCount()
	if n == 1 {
		return ""
	}
	used := make([]bool, n)
	for _, s := range p.Streams {
		if !s.Host && s.Device >= 0 && s.Device < n {
			used[s.Device] = true
		}
	}
	var idle []string
	for d, u := range used {
		if !u {
			idle = append(idle, strconv.Itoa(d))
		}
	}
	if len(idle) == 0 {
		return ""
	}
	what, it := fmt.Sprintf("device %s runs", idle[0]), "it"
	if len(idle) > 1 {
		what, it = fmt.Sprintf("devices %s run", strings.Join(idle, ", ")), "them"
	}
	fix := "name " + it + " on stages, streams or buffers (device: N) or let the planner place the stages that name no device (options: {placement: balance})"
	if balance {
		fix = "placement put nothing there (docs/spec.md, \"Placement\": the stages of one stream share its device, a stage without duration_us costs 1 µs, a read across devices a peer copy): name devices (device: N)"
	}
	return fmt.Sprintf("the spec has devices: %d, but %s nothing, and a CUDA run still opens a context for each plan device (plan device d on GPU d unless --devices maps it): %s, or lower the spec's devices:", n, what, fix)
}
