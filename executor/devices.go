package executor

// Several devices: the optional Backend interfaces that a plan whose
// streams and buffers name devices needs (a stream, an allocation on a
// device; peer copies; collectives across devices, issued as one group).

import "errors"

// Devicer is an optional Backend interface: a backend that drives several
// devices, numbered as the plan numbers them (0 to DeviceCount−1; the
// backend maps them to hardware: cudart.Options.Devices). Its NewStream
// and NewStreamKind create streams on device 0; Alloc places a device
// buffer on BufferDesc.Device.
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
	// DeviceCount is the number of devices the backend drives.
	DeviceCount() int
	// NewStreamOn creates a stream of kind (planner.StreamNonBlocking or
	// "" for a non-blocking stream, planner.StreamBlocking; default
	// streams only on device 0) on device dev. Errors: dev out of range,
	// a kind the backend cannot make there.
	NewStreamOn(dev int, kind string) (Stream, error)
}

// ErrNoDevices is returned (wrapped) by Run when a plan whose streams or
// buffers name devices other than 0 meets a backend that is no Devicer,
// or one with fewer devices than the plan names.
var ErrNoDevices = errors.New("backend drives fewer devices than the plan names")

// Collective operations (CollectiveDesc.Op).
const (
	// CollectiveAllReduce: every rank's receive range gets the reduction,
	// element by element, of every rank's send range (float32 words).
	CollectiveAllReduce = "all_reduce"
)

// CollectiveDesc is one collective over several devices: one rank per
// device, each a stage of the plan on a stream of its device, issued
// together as one group (NCCL: ncclGroupStart, one call per rank,
// ncclGroupEnd), so that no rank's part waits on a part not yet issued.
type CollectiveDesc struct {
	// Name names the collective in messages (its spec stage's name).
	Name string
	// Op is CollectiveAllReduce.
	Op string
	// Reduce is the reduction: "sum", "prod", "max" or "min".
	Reduce string
	// Ranks are the rank stages in rank order: Ranks[r].Reads[0] is rank
	// r's send range and Ranks[r].Writes[0] its receive range (the same
	// number of bytes, a multiple of 4, on every rank; the two may be the
	// same range: in place).
	Ranks []*LaunchDesc
	// Devices[r] is rank r's device (the device of its stream).
	Devices []int
}

// Collectiver is an optional Backend interface: a backend that runs
// collectives across its devices (cudart through NCCL, loaded at run
// time). Run uses it for plans with collective stages.
type Collectiver interface {
	// Collective issues c, rank r's part on streams[r] (a stream of device
	// c.Devices[r]), as one group: each rank's part starts after the work
	// issued to its stream before the call and work issued to a rank's
	// stream after the call starts after that rank's part; the ranks'
	// parts run together (a rank's part completes only once every rank's
	// has started). Errors: ranks on one device, mismatched sizes, the
	// collective library's.
	Collective(c *CollectiveDesc, streams []Stream) error
}

// ErrNoCollectives is returned (wrapped) by Run when a plan with
// collective stages meets a backend that is no Collectiver.
var ErrNoCollectives = errors.New("backend cannot run collectives across devices")
