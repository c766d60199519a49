package plan

import (
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/contract"
)

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
	if p.Devices < 0 || p.Devices > contract.MaxDevices {
		return ErrorAt("devices", "devices is %d (want 1 to %d)", p.Devices, contract.MaxDevices)
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
		if b.Device != 0 && b.Where != "" && b.Where != string(contract.WhereDevice) {
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
			if contract.IsCollective(st.Kernel) {
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
			if k, ok := bufIdx[a.Buffer]; ok && p.Buffers[k].Where != "" && p.Buffers[k].Where != string(contract.WhereDevice) {
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

// DeviceArenaStride separates the devices' arenas in the address space the
// verifier's arena checks share (ArenaAt): device d's arena starts at d ×
// it, past any arena offset plus size (each at most MaxBufferBytes).
const DeviceArenaStride = 2 * MaxBufferBytes

// ArenaAt is the address of arena buffer b in the verifier's one address
// space of every device's arena: two buffers share bytes only on one
// device.
func (b *Buffer) ArenaAt() int64 { return int64(b.Device)*DeviceArenaStride + *b.ArenaOffset }

// streamLabel is s's name in pictures of p: with several devices, with
// its device ("s1 (device 1)").
func (p *Plan) streamLabel(s Stream) string {
	if p.DeviceCount() > 1 && !s.Host {
		return fmt.Sprintf("%s (device %d)", s.Name, s.Device)
	}
	return s.Name
}

// RankGroupName is a group's collective name from its ranks' names
// (NAME/0 …), or the first rank's name.
func RankGroupName(ranks []string) string {
	if len(ranks) == 0 {
		return ""
	}
	if i := strings.LastIndexByte(ranks[0], '/'); i > 0 {
		return ranks[0][:i]
	}
	return ranks[0]
}
