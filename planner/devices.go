package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/dag"
)

// Several devices (docs/spec.md, "Several devices"): a plan's streams and
// device buffers each name a device; a stage runs on its stream's device.

// DeviceCount is the number of devices of p: Devices, at least 1.
func (p *Plan) DeviceCount() int { return max(p.Devices, 1) }

// StageDevice is the device stage i runs on: its stream's (0 for a stage
// on a host stream, or without a valid stream).
func (p *Plan) StageDevice(i int) int {
	if s := p.Stages[i].Stream; s >= 0 && s < len(p.Streams) {
		return p.Streams[s].Device
	}
	return 0
}

// validateDevices checks the device fields: counts and indices in range,
// no device on host memory or host streams, each device's arena size and
// its buffers inside it, and each collective's ranks:
// the built-in and its reduction, one read and one write of equal bytes,
// Ranks ≥ 2, every rank of a group given once with the group's op,
// reduction, rank count and bytes, on distinct devices. Errors are
// *PlanError with the JSON path.
func (p *Plan) validateDevices(bufIdx map[string]int) error {
	if p.Devices < 0 || p.Devices > dag.MaxDevices {
		return ErrorAt("devices", "devices is %d (want 1 to %d)", p.Devices, dag.MaxDevices)
	}
	n := p.DeviceCount()
	for i, s := range p.Streams {
		if s.Device < 0 || s.Device >= n {
			return ErrorAt(fmt.Sprintf("streams[%d].device", i), "stream %s is on device %d, but the plan has %d device(s)", s.Name, s.Device, n)
		}
		if s.Host && s.Device != 0 {
			return ErrorAt(fmt.Sprintf("streams[%d].device", i), "stream %s is a host stream, which is on no device", s.Name)
		}
		if n > 1 && !s.Host && s.Kind != "" && s.Kind != StreamNonBlocking {
			return ErrorAt(fmt.Sprintf("streams[%d].kind", i), "stream %s: kind %s with several devices is not modelled (each device has its own legacy default stream): use non_blocking streams", s.Name, s.Kind)
		}
	}
	for i, b := range p.Buffers {
		if b.Device < 0 || b.Device >= n {
			return ErrorAt(fmt.Sprintf("buffers[%d].device", i), "buffer %s is on device %d, but the plan has %d device(s)", b.Name, b.Device, n)
		}
		if b.Device != 0 && b.Where != "" && b.Where != dag.WhereDevice {
			return ErrorAt(fmt.Sprintf("buffers[%d].device", i), "buffer %s is %s memory, which is on no device", b.Name, b.Where)
		}
	}
	if per := p.Stats.ArenaBytesPerDevice; len(per) > 0 {
		if len(per) != n {
			return ErrorAt("stats.arena_bytes_per_device", "%d entries, but the plan has %d devices", len(per), n)
		}
		for d, a := range per {
			if a < 0 || a > MaxBufferBytes {
				return ErrorAt(fmt.Sprintf("stats.arena_bytes_per_device[%d]", d), "%d, want 0 to %d (1 TiB)", a, int64(MaxBufferBytes))
			}
		}
		for i, b := range p.Buffers {
			if b.ArenaOffset != nil && !contract.InBounds(*b.ArenaOffset, b.Bytes, per[b.Device]) {
				return ErrorAt(fmt.Sprintf("buffers[%d].arena_offset", i), "buffer %s: arena bytes [%d:%d] past device %d's arena of %d bytes (stats.arena_bytes_per_device)", b.Name, *b.ArenaOffset, *b.ArenaOffset+b.Bytes, b.Device, per[b.Device])
			}
		}
	}
	type group struct {
		first   int // a rank's stage
		seen    []bool
		devices map[int]int // device → rank
		left    int
	}
	groups := map[int]*group{}
	for i := range p.Stages {
		st := &p.Stages[i]
		c := st.Collective
		at := func(f string) string { return fmt.Sprintf("stages[%d].%s", i, f) }
		if c == nil {
			if dag.IsCollective(st.Kernel) {
				return ErrorAt(at("collective"), "stage %s runs collective %s but is no rank of one (give it collective: {group, op, reduce, rank, ranks})", st.Name, st.Kernel)
			}
			continue
		}
		switch {
		case c.Op != contract.BuiltinAllReduce || st.Kernel != c.Op:
			return ErrorAt(at("collective.op"), "stage %s: collective op %q with kernel %q (want %s for both)", st.Name, c.Op, st.Kernel, contract.BuiltinAllReduce)
		case c.Reduce != contract.ReduceSum:
			return ErrorAt(at("collective.reduce"), "stage %s: reduction %q (want %s)", st.Name, c.Reduce, contract.ReduceSum)
		case c.Ranks < 2 || c.Ranks > n:
			return ErrorAt(at("collective.ranks"), "stage %s: %d ranks (want 2 to the plan's %d devices)", st.Name, c.Ranks, n)
		case c.Rank < 0 || c.Rank >= c.Ranks:
			return ErrorAt(at("collective.rank"), "stage %s: rank %d of %d", st.Name, c.Rank, c.Ranks)
		case c.Group < 0 || c.Group >= len(p.Stages):
			return ErrorAt(at("collective.group"), "stage %s: group %d (want 0 to %d)", st.Name, c.Group, len(p.Stages)-1)
		case len(st.Reads) != 1 || len(st.Writes) != 1 || st.Reads[0].Bytes != st.Writes[0].Bytes || st.Reads[0].Bytes%contract.WordBytes != 0:
			return ErrorAt(at("reads"), "stage %s: a rank reads one range and writes one of the same bytes, a multiple of %d", st.Name, contract.WordBytes)
		}
		for _, a := range [2]Access{st.Reads[0], st.Writes[0]} {
			if k, ok := bufIdx[a.Buffer]; ok && p.Buffers[k].Where != "" && p.Buffers[k].Where != dag.WhereDevice {
				return ErrorAt(at("reads"), "stage %s: rank buffer %s is %s memory (a collective's buffers are device memory)", st.Name, a.Buffer, p.Buffers[k].Where)
			}
		}
		g := groups[c.Group]
		if g == nil {
			g = &group{first: i, seen: make([]bool, c.Ranks), devices: map[int]int{}, left: c.Ranks}
			groups[c.Group] = g
		}
		f := &p.Stages[g.first]
		if fc := f.Collective; fc.Ranks != c.Ranks || fc.Op != c.Op || fc.Reduce != c.Reduce || f.Reads[0].Bytes != st.Reads[0].Bytes {
			return ErrorAt(at("collective"), "stage %s: rank %d of group %d differs from stage %s (op, reduction, ranks and bytes are the group's)", st.Name, c.Rank, c.Group, f.Name)
		}
		if c.Rank >= len(g.seen) || g.seen[c.Rank] {
			return ErrorAt(at("collective.rank"), "stage %s: rank %d of group %d is given twice", st.Name, c.Rank, c.Group)
		}
		g.seen[c.Rank] = true
		g.left--
		d := p.StageDevice(i)
		if r, dup := g.devices[d]; dup {
			return ErrorAt(at("stream"), "stage %s: ranks %d and %d of group %d are both on device %d (one rank per device)", st.Name, r, c.Rank, c.Group, d)
		}
		g.devices[d] = c.Rank
	}
	for id, g := range groups {
		if g.left != 0 {
			return ErrorAt(fmt.Sprintf("stages[%d].collective", g.first), "group %d has %d of its %d ranks", id, len(g.seen)-g.left, len(g.seen))
		}
	}
	return nil
}

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
func splitArena(p *Plan) {
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
			spans[k] = span{lo, lo + AlignUp(p.Buffers[i].Bytes)}
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

// deviceArenaStride separates the devices' arenas in the address space the
// verifier's arena checks share (arenaAt): device d's arena starts at d ×
// it, past any arena offset plus size (each at most MaxBufferBytes).
const DeviceArenaStride = 2 * MaxBufferBytes

// arenaAt is the address of arena buffer b in the verifier's one address
// space of every device's arena: two buffers share bytes only on one
// device.
func (b *Buffer) ArenaAt() int64 { return int64(b.Device)*DeviceArenaStride + *b.ArenaOffset }

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

// rankLaunches returns, per collective group of p, the global op ids
// (numbered from base, per stream) of its ranks' launches.
func rankLaunches(p *Plan, base []int32) map[int][]int32 {
	var out map[int][]int32
	for s := range p.Streams {
		for j, o := range p.Streams[s].Ops {
			if o.Kind != OpLaunch || o.Stage < 0 || o.Stage >= len(p.Stages) {
				continue
			}
			if c := p.Stages[o.Stage].Collective; c != nil {
				if out == nil {
					out = map[int][]int32{}
				}
				out[c.Group] = append(out[c.Group], base[s]+int32(j))
			}
		}
	}
	return out
}

// streamLabel is s's name in pictures of p: with several devices, with
// its device ("s1 (device 1)").
func (p *Plan) streamLabel(s Stream) string {
	if p.DeviceCount() > 1 && !s.Host {
		return fmt.Sprintf("%s (device %d)", s.Name, s.Device)
	}
	return s.Name
}

// idleDevicesNote says which of p's devices run nothing (no device stream
// of the plan is theirs), "" when every device runs something: a CUDA run
// still opens a context on a GPU for each (docs/spec.md, "Several
// devices"), so a spec that says devices: N but names, or is placed on,
// fewer is likely not what was meant. balance: the spec's placement is
// balance (the planner chose to leave them idle).
func idleDevicesNote(p *Plan, balance bool) string {
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
