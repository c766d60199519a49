package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/plan"
)

// The link model of placement: a peer copy of n bytes between two devices
// takes n / LinkBytesPerUS + LinkLatencyUS µs. LinkBytesPerUS is NVLink 4
// between two H200s in one direction: 450 GB/s, half of the 900 GB/s the
// H200's data sheet gives for NVLink in both directions together (NVIDIA
// H200 Tensor Core GPU datasheet, "Interconnect"). LinkLatencyUS is an
// assumed cost of one cuMemcpyPeerAsync beyond its bytes.
const (
	LinkBytesPerUS = 450e3 // bytes per µs (450 GB/s)
	LinkLatencyUS  = 5.0   // µs
)

// PeerCopyUS is the link model's time for a peer copy of bytes bytes, µs.
func PeerCopyUS(bytes int64) float64 { return float64(bytes)/LinkBytesPerUS + LinkLatencyUS }

// lowering is what lowerDevices made of a spec: per stage of the lowered
// spec, its rank of a collective (nil for other stages); the placement's
// summary for Plan.Notes.
type lowering struct {
	coll []*plan.Collective
	// origin is, per stage of the lowered spec, its index in the spec
	// lowerDevices was given: a rank's is its collective's, a peer copy
	// placement added has -1 (Stage.Seed).
	origin []int
	notes  []string
}

// lowerDevices is the planner's first step on a spec of several devices
// (docs/spec.md, "Several devices"): with placement: balance it places the
// stages and device buffers that name no device and adds a peer copy
// wherever a stage reads a buffer of another device (place); then it
// lowers each collective stage to one rank stage per device, NAME/0 …,
// numbered in device order (the order the all-reduce adds them in),
// consecutive in declaration order (so in the planner's topological order
// too). Specs of one device without collectives are returned as they are.
func lowerDevices(s *dag.Spec) (*dag.Spec, *lowering, error) {
	hasColl := false
	for i := range s.Stages {
		hasColl = hasColl || contract.IsCollective(s.Stages[i].Kernel)
	}
	if s.Options.Placement != dag.PlacementBalance && !hasColl {
		return s, nil, nil
	}
	low := &lowering{}
	index := make(map[string]int, len(s.Stages)) // the user's stages by name
	for i := range s.Stages {
		index[s.Stages[i].Name] = i
	}
	origin := func(name string) int {
		if i, ok := index[name]; ok {
			return i
		}
		return -1 // placement's peer copies have fresh names
	}
	if s.Options.Placement == dag.PlacementBalance {
		var err error
		if s, err = place(s, low); err != nil {
			return nil, nil, err
		}
	}
	if !hasColl {
		for i := range s.Stages {
			low.origin = append(low.origin, origin(s.Stages[i].Name))
		}
		return s, low, nil
	}
	out := *s
	out.Stages = make([]dag.StageSpec, 0, len(s.Stages)+len(s.Stages)/2)
	ranks := map[string][]string{} // collective → its rank names
	group := 0
	for _, sg := range s.Stages {
		if len(sg.After) > 0 { // after a collective: after each of its ranks
			var after []string
			for _, a := range sg.After {
				if rs, ok := ranks[a]; ok {
					after = append(after, rs...)
				} else {
					after = append(after, a)
				}
			}
			sg.After = after
		}
		if !contract.IsCollective(sg.Kernel) {
			out.Stages = append(out.Stages, sg)
			low.coll = append(low.coll, nil)
			low.origin = append(low.origin, origin(sg.Name))
			continue
		}
		n := len(sg.Reads)
		if n != len(sg.Writes) || n < 2 {
			return nil, nil, fmt.Errorf("%s: stage %s: a collective reads and writes one buffer per device (%d reads, %d writes)", sg.Pos, sg.Name, n, len(sg.Writes))
		}
		op, _ := sg.Args["op"].(string)
		// Ranks in device order: rank r is the collective's r-th device,
		// whatever the order of its reads, so that the sum, added in rank
		// order, is added in device order.
		dev := make([]int, n)
		for k := 0; k < n; k++ {
			b := s.Buffer(sg.Reads[k].Buffer)
			if b == nil || b.Device < 0 {
				return nil, nil, fmt.Errorf("%s: stage %s: read %d's buffer %s has no device", sg.Pos, sg.Name, k, sg.Reads[k].Buffer)
			}
			dev[k] = b.Device
		}
		byDevice := make([]int, n) // rank → index in the reads and writes
		for k := range byDevice {
			byDevice[k] = k
		}
		slices.SortStableFunc(byDevice, func(a, b int) int { return cmp.Compare(dev[a], dev[b]) })
		for r, k := range byDevice {
			rank := sg
			rank.Name = contract.RankName(sg.Name, r)
			rank.Reads = []dag.Access{sg.Reads[k]}
			rank.Writes = []dag.Access{sg.Writes[k]}
			rank.Device = dev[k]
			rank.Stream = ""
			out.Stages = append(out.Stages, rank)
			low.coll = append(low.coll, &plan.Collective{Group: group, Op: sg.Kernel, Reduce: op, Rank: r, Ranks: n})
			low.origin = append(low.origin, origin(sg.Name))
			ranks[sg.Name] = append(ranks[sg.Name], rank.Name)
		}
		group++
	}
	return &out, low, nil
}

// place is placement: balance. Stages are taken in declaration order (a
// topological order); a stage without a device goes to the device where it
// would finish earliest, given when each device is free (the compute
// already placed there, duration_us, 0 counted as 1 µs) and when its
// reads are there (a read of a buffer that lives on another device waits
// for a peer copy, PeerCopyUS); a stage that writes a buffer already on a
// device goes to that device. This is list scheduling by earliest finish
// time, HEFT's processor selection (Topcuoglu, Hariri and Wu, IEEE TPDS
// 2002, section 4.1) without its upward-rank priority: declaration order
// decides which stage is placed first. A device buffer without a device
// goes where its first writer (or, for an input, its first reader) runs.
// Each read of a buffer on another device gets a copy stage BUF/toD
// before the reader (a peer copy into the replica BUF/onD on the reader's
// device), shared by the later readers on that device until the buffer is
// written again.
func place(s *dag.Spec, low *lowering) (*dag.Spec, error) {
	pl := newPlacer(s)
	out := pl.out
	for _, sg := range s.Stages {
		if s.IsHostStream(sg.Stream) || contract.IsCollective(sg.Kernel) {
			out.Stages = append(out.Stages, sg)
			continue
		}
		dev := pl.device(&sg)
		for _, w := range sg.Writes {
			if b := pl.bufIdx[w.Buffer]; pl.isDev(b) && out.Buffers[b].Device >= 0 && out.Buffers[b].Device != dev {
				return nil, fmt.Errorf("%s: stage %s runs on device %d but writes buffer %s, which is on device %d: a kernel writes only its own device's memory; give %s device: %d, or drop the stage's device:",
					w.Pos, sg.Name, dev, w.Buffer, out.Buffers[b].Device, w.Buffer, dev)
			}
		}
		sg.Device = dev
		if sg.Stream != "" {
			pl.streamDev[sg.Stream] = dev
		}
		// Buffers without a device go where they are first used.
		for _, list := range [2][]dag.Access{sg.Writes, sg.Reads} {
			for _, a := range list {
				if b := pl.bufIdx[a.Buffer]; pl.isDev(b) && out.Buffers[b].Device < 0 {
					out.Buffers[b].Device = dev
				}
			}
		}
		start := pl.peerCopies(&sg, dev)
		end := start + plan.CostUS(sg.DurationUS)
		pl.free[dev] = end
		for _, w := range sg.Writes {
			b := pl.bufIdx[w.Buffer]
			pl.ready[b] = end
			pl.version[b]++
		}
		out.Stages = append(out.Stages, sg)
	}
	for i := range out.Buffers {
		if out.Buffers[i].Device < 0 {
			out.Buffers[i].Device = 0 // touched by no device stage
		}
	}
	for i := range out.Streams {
		if d := &out.Streams[i]; d.Device < 0 {
			d.Device = max(pl.streamDev[d.Name], 0)
		}
	}
	per := make([]int, pl.n)
	for _, sg := range out.Stages {
		if sg.Device >= 0 && !s.IsHostStream(sg.Stream) && !contract.IsCollective(sg.Kernel) {
			per[sg.Device]++
		}
	}
	low.notes = append(low.notes, fmt.Sprintf("placement balance: stages per device %v; %d peer copies added (%d bytes; %.1f µs at %.0f GB/s + %.0f µs each); the placed compute ends at %.1f µs (device time, without waits)",
		per, pl.copies, pl.moved, float64(pl.moved)/LinkBytesPerUS+float64(pl.copies)*LinkLatencyUS, LinkBytesPerUS/1e3, LinkLatencyUS, maxOf(pl.free)))
	return out, nil
}

// placer is the state of place: the spec being written, and per device
// and buffer when each is free or ready in the list schedule (µs).
type placer struct {
	out                  *dag.Spec
	n                    int // devices
	bufIdx               map[string]int
	stageNames, bufNames map[string]bool // names in use, for the copies' fresh names
	streamDev            map[string]int  // each placed stream's device
	free                 []float64       // when each device's placed compute ends, µs
	ready                []float64       // when each buffer's last write ends, µs
	version              []int           // writes so far, per buffer
	reps                 map[[2]int]*replica
	copies               int   // peer copies added
	moved                int64 // bytes they copy
}

// replica is a buffer's copy on another device (place): the replica
// buffer, the version of the buffer it holds (-1: none), when it is
// there (µs) and the bytes of that version it holds.
type replica struct {
	buf     int
	version int
	at      float64
	lo, hi  int64
}

func newPlacer(s *dag.Spec) *placer {
	out := *s
	out.Buffers = append([]dag.BufferSpec(nil), s.Buffers...)
	out.Stages = make([]dag.StageSpec, 0, len(s.Stages)+len(s.Stages)/4)
	out.Streams = append([]dag.StreamSpec(nil), s.Streams...)
	n := max(s.Devices, 1)
	pl := &placer{out: &out, n: n, bufIdx: make(map[string]int, len(out.Buffers)),
		stageNames: make(map[string]bool, len(s.Stages)), bufNames: make(map[string]bool, len(s.Buffers)),
		streamDev: map[string]int{}, free: make([]float64, n), ready: make([]float64, len(s.Buffers)),
		version: make([]int, len(s.Buffers)), reps: map[[2]int]*replica{}}
	for i, b := range out.Buffers {
		pl.bufIdx[b.Name] = i
	}
	for _, sg := range s.Stages {
		pl.stageNames[sg.Name] = true
	}
	for _, b := range s.Buffers {
		pl.bufNames[b.Name] = true
	}
	for _, d := range out.Streams {
		if d.Device >= 0 {
			pl.streamDev[d.Name] = d.Device
		}
	}
	return pl
}

// fresh returns base, or base.K for the least K ≥ 2 that names gives no
// meaning yet, and adds it to names.
func fresh(names map[string]bool, base string) string {
	name := base
	for k := 2; names[name]; k++ {
		name = base + "." + strconv.Itoa(k)
	}
	names[name] = true
	return name
}

func (pl *placer) isDev(b int) bool { return pl.out.Buffers[b].Where == dag.WhereDevice }

// device returns the device stage sg runs on: its own, its stream's, or a
// written buffer's; else the device where it would finish earliest.
func (pl *placer) device(sg *dag.StageSpec) int {
	out := pl.out
	fixed := sg.Device
	if fixed < 0 {
		if d, ok := pl.streamDev[sg.Stream]; ok {
			fixed = d
		}
	}
	if fixed < 0 {
		for _, w := range sg.Writes {
			if b := pl.bufIdx[w.Buffer]; pl.isDev(b) && out.Buffers[b].Device >= 0 {
				fixed = out.Buffers[b].Device
				break
			}
		}
	}
	if fixed >= 0 {
		return fixed
	}
	dur := plan.CostUS(sg.DurationUS)
	finish := func(d int) float64 {
		t := pl.free[d]
		for _, r := range sg.Reads {
			b := pl.bufIdx[r.Buffer]
			at := pl.ready[b]
			if h := out.Buffers[b].Device; pl.isDev(b) && h >= 0 && h != d {
				if rp := pl.reps[[2]int{b, d}]; rp != nil && rp.version == pl.version[b] && rp.lo <= r.Offset && r.End() <= rp.hi {
					at = rp.at
				} else {
					at += PeerCopyUS(r.Bytes)
				}
			}
			t = math.Max(t, at)
		}
		return t + dur
	}
	dev, best := -1, math.Inf(1)
	for d := 0; d < pl.n; d++ {
		if f := finish(d); f < best-1e-9 {
			best, dev = f, d
		}
	}
	return dev
}

// peerCopies gives each of sg's reads of a buffer on another device than
// dev a copy into that buffer's replica on dev (a copy stage BUF/toD, and
// the replica BUF/onD the first time), unless the replica holds those
// bytes of the buffer's latest version already, and points the read at
// the replica. It returns when sg may start on dev, µs.
func (pl *placer) peerCopies(sg *dag.StageSpec, dev int) float64 {
	out := pl.out
	start := pl.free[dev]
	reads := append([]dag.Access(nil), sg.Reads...)
	for k, r := range reads {
		b := pl.bufIdx[r.Buffer]
		h := out.Buffers[b].Device
		if !pl.isDev(b) || h == dev || sg.Kernel == contract.BuiltinCopy && len(sg.Writes) == 1 && k == 0 {
			start = math.Max(start, pl.ready[b])
			continue // a copy stage reads another device itself (a peer copy)
		}
		key := [2]int{b, dev}
		rp := pl.reps[key]
		if rp == nil {
			src := out.Buffers[b]
			rb := dag.BufferSpec{Name: fresh(pl.bufNames, src.Name+"/on"+strconv.Itoa(dev)), Bytes: src.Bytes, Where: dag.WhereDevice,
				Role: dag.RoleTemp, Init: dag.Init{Kind: dag.InitZeros}, Copies: src.Copies, Device: dev, Pos: src.Pos}
			pl.bufIdx[rb.Name] = len(out.Buffers)
			out.Buffers = append(out.Buffers, rb)
			pl.ready = append(pl.ready, 0)
			pl.version = append(pl.version, 0)
			rp = &replica{buf: len(out.Buffers) - 1, version: -1}
			pl.reps[key] = rp
		}
		if rp.version != pl.version[b] || r.Offset < rp.lo || r.End() > rp.hi {
			cp := dag.StageSpec{Name: fresh(pl.stageNames, out.Buffers[b].Name+"/to"+strconv.Itoa(dev)), Kernel: contract.BuiltinCopy,
				Reads:      []dag.Access{r},
				Writes:     []dag.Access{{Buffer: out.Buffers[rp.buf].Name, Offset: r.Offset, Bytes: r.Bytes, Pos: r.Pos}},
				DurationUS: PeerCopyUS(r.Bytes), Device: dev, Pos: sg.Pos}
			out.Stages = append(out.Stages, cp)
			pl.copies++
			pl.moved += r.Bytes
			rp.version, rp.lo, rp.hi = pl.version[b], r.Offset, r.End()
			rp.at = pl.ready[b] + cp.DurationUS
		}
		reads[k].Buffer = out.Buffers[rp.buf].Name
		start = math.Max(start, rp.at)
	}
	sg.Reads = reads
	return start
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}
