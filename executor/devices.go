package executor

// Several devices: the optional Backend interfaces that a plan whose
// streams and buffers name devices needs (a stream, an allocation on a
// device; peer copies; collectives across devices, issued as one group).

import (
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/plan"
)

// Devicer is an optional Backend interface: a backend that drives several
// devices, numbered as the plan numbers them (0 to Devices()−1; the
// backend maps them to hardware: cudart.Options.Devices). Its NewStream
// and NewStreamKind create streams on device 0; Alloc places a device
// buffer on BufferDesc.Device. Run uses it for plans of several devices
// (plan.Plan.Devices > 1).
//
// Events are the backend's, not a device's: one event may be recorded on
// streams of different devices, and Wait(s, e) orders s, on any device,
// after the work captured by the most recent Record(e, ·) issued before
// the Wait call, as on one device (cuStreamWaitEvent accepts an event of
// another device's context; cudart keeps one driver event per device).
//
// A copy stage (kernel copy) whose read and write lie on different devices
// is a peer copy: the backend copies between the devices on the stage's
// stream (cudart: cuMemcpyPeerAsync), ordered by that stream alone.
type Devicer interface {
	// Devices is the number of devices the backend drives.
	Devices() int
	// NewStreamOn creates a stream of kind (plan.StreamNonBlocking or
	// "" for a non-blocking stream, plan.StreamBlocking; default
	// streams only on device 0) on device dev. Errors: dev out of range,
	// a kind the backend cannot make there.
	NewStreamOn(dev int, kind string) (Stream, error)
}

// ErrNoDevices is returned (wrapped) by Run when a plan whose streams or
// buffers name devices other than 0 meets a backend that is no Devicer,
// or one with fewer devices than the plan names.
var ErrNoDevices = errors.New("backend drives fewer devices than the plan names")

// Collectiver is an optional Backend interface: a backend that runs
// collective stages (plan.Stage.Collective: one rank stage per device,
// each launched on a stream of its device). Run uses it for plans with
// collective stages and asks it first for its collective library, so
// that a missing library fails the run before anything is created.
//
// The ranks of one collective reach Launch one after another, rank 0
// first, with no other call between them (the planner emits them
// consecutively in issue order); a backend that must issue them together
// (cudart: ncclGroupStart, one ncclAllReduce per rank, ncclGroupEnd)
// issues the group at the last rank's Launch and refuses any other call
// while a group is incomplete. Each rank's part starts after the work
// issued to its stream before it; work issued to a rank's stream after
// the group starts after that rank's part.
type Collectiver interface {
	// CollectiveLibrary loads the library that runs collectives and says
	// which (e.g. "NCCL 2.27.3 (/usr/lib/libnccl.so.2)"); the error says
	// why it cannot be had (cudart: ErrNoNCCL, naming the paths tried).
	CollectiveLibrary() (string, error)
}

// ErrRanksShareGPU is returned (wrapped) by a Collectiver's Launch of a
// collective two of whose ranks' devices are one GPU (plan devices mapped
// onto one ordinal), which its library refuses: NCCL runs one rank per
// GPU.
var ErrRanksShareGPU = errors.New("two ranks of a collective on one GPU")

// ErrNoCollectives is returned (wrapped) by Run when a plan with
// collective stages meets a backend that is no Collectiver.
var ErrNoCollectives = errors.New("backend cannot run collectives across devices")

// checkDevices rejects what a plan of several devices cannot do here:
// capture regions in graph mode (their eager parts and captures are one
// device's) and dynamic allocation (the free stream is device 0's). Graph
// mode captures the whole iteration as one graph over every device: the
// capture forks from the origin stream into each device's streams by
// events and joins them back, as on one device (CUDA records each node in
// its stream's context; cuGraphLaunch on the origin stream replays them
// all).
func checkDevices(p *plan.Plan, graph, dynamic bool) error {
	n := p.DeviceCount()
	if n == 1 {
		return nil
	}
	switch {
	case graph && len(p.Captures) > 0:
		return fmt.Errorf("executor: graph mode: the plan runs on %d devices and has capture regions, which graph mode runs on one device: use stream mode, or no capture regions (the whole iteration is then one graph)", n)
	case dynamic:
		return fmt.Errorf("executor: --alloc dynamic: the plan runs on %d devices, and stream-ordered frees run on one device's stream: use static allocation (each device's arena)", n)
	}
	return nil
}

// streamDevices sets x.streamDev, the device of each physical stream (its
// plan stream's; the executor's own streams are device 0's), for plans of
// several devices.
func (x *program) streamDevices() {
	p := x.p
	if p.DeviceCount() == 1 {
		return
	}
	x.streamDev = make([]int, x.m.Streams)
	for _, set := range x.m.Sets {
		for s, ps := range set {
			x.streamDev[ps] = p.Streams[s].Device
		}
	}
}

// arenaFigure is the plan's arena size of device d, bytes: Stats.ArenaBytes
// with one device, Stats.ArenaBytesPerDevice[d] with several (0 when the
// plan does not say).
func arenaFigure(p *plan.Plan, d int) int64 {
	if p.DeviceCount() == 1 {
		return p.Stats.ArenaBytes
	}
	if d < len(p.Stats.ArenaBytesPerDevice) {
		return p.Stats.ArenaBytesPerDevice[d]
	}
	return 0
}

// requiresDevices checks that b drives the plan's devices (Devicer) and
// runs its collectives (Collectiver, with its library loaded now, so that
// a missing library fails before anything is created).
func (x *program) requiresDevices(b Backend) error {
	if n := x.p.DeviceCount(); n > 1 {
		d, ok := b.(Devicer)
		if !ok {
			return fmt.Errorf("executor: %s: %w (the plan runs on %d devices; this backend drives one)", b.Name(), ErrNoDevices, n)
		}
		if have := d.Devices(); have < n {
			return fmt.Errorf("executor: %s: %w (the plan runs on %d devices; this backend drives %d)", b.Name(), ErrNoDevices, n, have)
		}
	}
	if x.collectives {
		c, ok := b.(Collectiver)
		if !ok {
			return fmt.Errorf("executor: %s: %w (the plan has collective stages)", b.Name(), ErrNoCollectives)
		}
		if _, err := c.CollectiveLibrary(); err != nil {
			return fmt.Errorf("executor: %s: the plan's collective stages need a collective library: %w", b.Name(), err)
		}
	}
	return nil
}
