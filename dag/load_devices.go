package dag

import (
	"fmt"

	"github.com/dagrun/dagrun/contract"
)

// Checks of a spec's devices (docs/spec.md, "Several devices"): each
// stream, device buffer and stage gets its device (given, or implied by
// its stream and buffers), the count Spec.Devices is set, and what a
// device may touch is checked: a kernel its own device's memory and host
// memory, a copy two devices (a peer copy), a collective one buffer per
// device on distinct devices.

// checkDevices sets and checks every device (run after the stages and
// streams are checked, so names and accesses are resolved).
func (c *checker) checkDevices() {
	s := c.s
	balance := s.Options.Placement == PlacementBalance
	most, mostAt := -1, Pos{} // the largest device named, and where
	named := func(d int, p Pos) {
		if d > most {
			most, mostAt = d, p
		}
	}
	for i := range s.Buffers {
		b, src := &s.Buffers[i], &c.bufSrc[i]
		given := src.device != (at{})
		if b.Where != WhereDevice {
			if given {
				c.errorAt(src.device, "drop device: (every device reaches host memory: pinned memory is allocated portable)", "buffer %s is %s memory, which is on no device", b.Name, b.Where)
			}
			b.Device = 0
			continue
		}
		if b.Device == AnyDevice && !balance {
			b.Device = 0
		}
		if given {
			named(b.Device, c.posAt(src.device))
		}
	}
	streamDev := map[string]int{}
	for i := range s.Streams {
		d := &s.Streams[i]
		if d.Kind == KindHost || d.Name == HostStream {
			if d.Device != AnyDevice {
				c.errAt(d.Pos, "drop device: (a host stream runs on the host)", "stream %s is a host stream, which is on no device", d.Name)
			}
			d.Device = 0
			continue
		}
		if d.Device != AnyDevice {
			streamDev[d.Name] = d.Device
			named(d.Device, d.Pos)
		}
	}
	// Stages with a device: they give their stream its device when the
	// declaration gives none.
	for i := range s.Stages {
		st, src := &s.Stages[i], c.stageSrc.at(i)
		switch {
		case s.IsHostStream(st.Stream):
			if st.Device != AnyDevice {
				c.errorAt(src.fieldPos("device"), "drop device: (a host stage runs on the host)", "stage %s: a host stage is on no device", st.Name)
			}
			st.Device = 0
			continue
		case contract.IsCollective(st.Kernel):
			if st.Device != AnyDevice {
				c.errorAt(src.fieldPos("device"), "drop device: (each rank runs on its buffers' device)", "stage %s: a collective runs on the devices of its buffers", st.Name)
				st.Device = AnyDevice
			}
			continue
		case st.Device == AnyDevice:
			continue
		}
		named(st.Device, c.posAt(src.fieldPos("device")))
		if st.Stream == "" {
			continue
		}
		if d, ok := streamDev[st.Stream]; !ok {
			streamDev[st.Stream] = st.Device
		} else if d != st.Device {
			c.errorAt(src.fieldPos("device"), fmt.Sprintf("a stream's stages all run on its device: use device: %d, or a stream of device %d", d, st.Device),
				"stage %s: device %d, but its stream %s is on device %d", st.Name, st.Device, st.Stream, d)
		}
	}
	// A spec that names no device (placement spec) is on device 0 alone:
	// every stage, stream and buffer is, and only collectives have
	// device checks left.
	oneDevice := most < 0 && !balance
	// Stages without a device: their stream's, else (placement spec) their
	// buffers' or 0; with placement balance the planner places them.
	for i := range s.Stages {
		st := &s.Stages[i]
		if st.Device != AnyDevice || contract.IsCollective(st.Kernel) {
			continue
		}
		if d, ok := streamDev[st.Stream]; ok {
			st.Device = d
			continue
		}
		if balance {
			continue
		}
		st.Device = 0
		if !oneDevice {
			st.Device = c.bufferDevice(st)
		}
		if st.Stream != "" {
			streamDev[st.Stream] = st.Device
		}
	}
	for i := range s.Streams {
		if d := &s.Streams[i]; d.Device == AnyDevice {
			if dev, ok := streamDev[d.Name]; ok {
				d.Device = dev
			} else if !balance {
				d.Device = 0
			}
		}
	}
	switch {
	case s.Devices == 0:
		s.Devices = max(most+1, 1)
	case most >= s.Devices:
		c.errAt(mostAt, fmt.Sprintf("name a device below %d, or raise devices: to %d", s.Devices, most+1), "device %d, but the spec has devices: %d (devices are 0 to %d)", most, s.Devices, s.Devices-1)
	}
	for i := range s.Stages {
		if !oneDevice || contract.IsCollective(s.Stages[i].Kernel) {
			c.checkStageDevices(i)
		}
	}
	if s.Devices > 1 || balance {
		c.checkOneDeviceOnly()
	}
}

// bufferDevice is the device a stage without one runs on: its copy's
// destination device, else the first device buffer it touches, else 0.
func (c *checker) bufferDevice(st *StageSpec) int {
	if st.Kernel == contract.BuiltinCopy && len(st.Writes) == 1 {
		if b := c.buffer(st.Writes[0].Buffer); b != nil && b.Where == WhereDevice && b.Device != AnyDevice {
			return b.Device
		}
	}
	for _, list := range [2][]Access{st.Reads, st.Writes} {
		for _, a := range list {
			if b := c.buffer(a.Buffer); b != nil && b.Where == WhereDevice && b.Device != AnyDevice {
				return b.Device
			}
		}
	}
	return 0
}

// checkStageDevices checks what stage i's device may touch.
func (c *checker) checkStageDevices(i int) {
	st := &c.s.Stages[i]
	what := "stage " + st.Name
	if contract.IsCollective(st.Kernel) {
		c.checkCollective(i)
		return
	}
	if st.Device == AnyDevice || c.s.IsHostStream(st.Stream) {
		return
	}
	devOf := func(a Access) (int, bool) {
		b := c.buffer(a.Buffer)
		if b == nil || b.Where != WhereDevice || b.Device == AnyDevice {
			return 0, false
		}
		return b.Device, true
	}
	hostCopy := false // a copy between host memory and one device's buffer
	if st.Kernel == contract.BuiltinCopy && len(st.Reads) == 1 && len(st.Writes) == 1 {
		from, fok := devOf(st.Reads[0])
		to, tok := devOf(st.Writes[0])
		hostCopy = fok != tok && (c.isHost(st.Reads[0]) || c.isHost(st.Writes[0]))
		if fok && tok && from != to && st.Device != from && st.Device != to {
			c.errAt(st.Pos, fmt.Sprintf("run it on device %d (the destination's) or %d (the source's)", to, from),
				"%s: a peer copy from device %d to device %d runs on device %d", what, from, to, st.Device)
			return
		}
		if fok && tok && from != to {
			return // a peer copy: both devices are its own
		}
	}
	for k, list := range [2][]Access{st.Reads, st.Writes} {
		verb := [2]string{"reads", "writes"}[k]
		if k == 0 && c.s.Options.Placement == PlacementBalance {
			continue // placement copies what a stage reads of another device
		}
		for _, a := range list {
			if d, ok := devOf(a); ok && d != st.Device && hostCopy {
				// A copy with host memory on one side: not a peer copy,
				// so it runs on its device buffer's device.
				c.errAt(a.Pos, fmt.Sprintf("run the copy on device %d (device: %d, or drop device: and stream: to let it take its buffer's device), or put %s on device %d (device: %d)", d, d, a.Buffer, st.Device, st.Device),
					"%s runs on device %d but %s buffer %s on device %d: a copy between host memory and a device runs on that device (only a copy between two devices' buffers, a peer copy, may run on either)", what, st.Device, verb, a.Buffer, d)
			} else if ok && d != st.Device {
				c.errAt(a.Pos, fmt.Sprintf("put %s on device %d (device: %d), run the stage on device %d, or copy the bytes across with a copy stage (a peer copy)", a.Buffer, st.Device, st.Device, d),
					"%s runs on device %d but %s buffer %s on device %d: a kernel touches only its own device's memory and host memory", what, st.Device, verb, a.Buffer, d)
			}
		}
	}
}

// isHost reports whether a's buffer is host memory.
func (c *checker) isHost(a Access) bool {
	b := c.buffer(a.Buffer)
	return b != nil && b.Where != WhereDevice
}

// checkCollective checks collective stage i: one device buffer per device
// on each side, write k on the device of read k, distinct devices, equal
// sizes, sync: auto, no stream, rank names free.
func (c *checker) checkCollective(i int) {
	s := c.s
	st, src := &s.Stages[i], c.stageSrc.at(i)
	what := "stage " + st.Name
	if s.Sync == SyncManual {
		c.errAt(st.Pos, "write the collective in a sync: auto spec (the planner issues its ranks as one group)", "%s: a collective needs sync: auto", what)
	}
	if st.Stream != "" {
		c.errorAt(src.fieldPos("stream"), "drop stream: (the planner puts each rank on a stream of its device)", "%s: a collective runs on one stream per device", what)
	}
	if len(st.Reads) < 2 {
		c.errorAt(src.fieldPos("reads"), "read one buffer on each of two or more devices", "%s: a collective over %d device(s)", what, len(st.Reads))
		return
	}
	if len(st.Reads) != len(st.Writes) {
		c.errorAt(src.fieldPos("writes"), "write one buffer per device, in the order of the reads", "%s: %d reads but %d writes: a collective writes one buffer on each device it reads", what, len(st.Reads), len(st.Writes))
		return
	}
	seen := map[int]string{}
	for k := range st.Reads {
		r, w := st.Reads[k], st.Writes[k]
		rb, wb := c.buffer(r.Buffer), c.buffer(w.Buffer)
		if rb == nil || wb == nil {
			return // reported
		}
		for _, x := range [2]struct {
			a Access
			b *BufferSpec
		}{{r, rb}, {w, wb}} {
			if x.b.Where != WhereDevice {
				c.errAt(x.a.Pos, "use a device buffer (where: device) on each rank's device", "%s: buffer %s is %s memory: a collective's buffers are device memory", what, x.b.Name, x.b.Where)
				return
			}
			if x.b.Device == AnyDevice {
				c.errAt(x.a.Pos, "give the buffer a device: (placement does not place a collective's buffers)", "%s: buffer %s names no device", what, x.b.Name)
				return
			}
		}
		if rb.Device != wb.Device {
			c.errAt(w.Pos, fmt.Sprintf("write %d must be on device %d, as read %d (%s)", k, rb.Device, k, r.Buffer), "%s: writes %s on device %d for the rank that reads %s on device %d", what, w.Buffer, wb.Device, r.Buffer, rb.Device)
		}
		if prev, dup := seen[rb.Device]; dup {
			c.errAt(r.Pos, "give each rank a buffer on a device of its own", "%s: reads %s and %s are both on device %d: a collective has one rank per device", what, prev, r.Buffer, rb.Device)
		}
		seen[rb.Device] = r.Buffer
		if r.Bytes != st.Reads[0].Bytes || w.Bytes != st.Reads[0].Bytes {
			c.errAt(r.Pos, "reduce the same number of bytes on every device", "%s: rank %d reduces %d bytes (%s → %s) but rank 0 %d", what, k, r.Bytes, r, w, st.Reads[0].Bytes)
		}
	}
	for r := range st.Reads {
		if j, taken := c.stages[contract.RankName(st.Name, r)]; taken {
			c.errAt(s.Stages[j].Pos, "rename this stage: the planner names the collective's ranks NAME/0, NAME/1, …", "stage %s: the name of rank %d of collective %s", s.Stages[j].Name, r, st.Name)
		}
	}
}

// checkOneDeviceOnly refuses what dagrun models only on one device.
func (c *checker) checkOneDeviceOnly() {
	s := c.s
	for _, d := range s.Streams {
		switch d.Kind {
		case KindBlocking, KindLegacy, KindPerThread:
			c.errAt(d.Pos, "use non_blocking streams in a spec of several devices", "stream %s: kind %s with several devices is not modelled (each device has its own legacy default stream)", d.Name, d.Kind)
		}
	}
	if len(s.Captures) > 0 {
		c.errAt(s.Captures[0].Pos, "drop the captures, or plan for one device", "capture regions with several devices are not modelled")
	}
	for i := range s.Stages {
		if st := &s.Stages[i]; st.Copy == CopySync {
			c.errorAt(c.stageSrc.at(i).fieldPos("copy"), "use copy: async", "stage %s: copy: sync with several devices is not modelled", st.Name)
		}
	}
	if s.Options.Placement == PlacementBalance && s.Sync == SyncManual {
		c.errAt(s.Stages[0].Pos, "set placement: spec (a sync: manual spec places its own stages), or sync: auto", "options: placement: balance with sync: manual: the planner cannot add peer copies to a hand-synchronized spec")
	}
}
