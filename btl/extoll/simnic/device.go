package simnic

import (
	"fmt"
	"time"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/sim"
)

// Device is one process's view of its simulated EXTOLL card
// (nic.Device, and Connect as the extoll BTL wants it). Like every
// simulated device it is used only by the rank that holds the
// scheduler's baton, and by the scheduler's events.
type Device struct {
	f       *Fabric
	s       *sim.Sched
	cfg     Config
	node    int
	card    *card
	port    *sim.Port
	txLimit time.Duration // the port time txDepth packets take
	peers   []*Device     // the job's devices of this instance, by rank

	// The mailbox: the landed packets are box[head], box[head+1], … (mod
	// len(box)), n of them; reserved counts them and those in flight.
	box       []nic.Slot
	head, n   int
	reserved  int
	waiters   []int // ranks blocked on this mailbox
	empty     int   // consecutive empty polls
	extra     string
	closed    bool
	regions   map[uint64]*region
	nextKey   uint64
	out       []int32 // RMA operations outstanding, by target
	notes     []nic.Notification
	notesHead int
	st        Stats
	blocked   *core.Counter
	blockedNS *core.Counter
	stalls    *core.Counter
}

// Stats are a device's counters.
type Stats struct {
	// Packets counts VELO packets this device sent; Puts and Gets the
	// RMA operations it issued that completed, RMABytes their data.
	Packets, Puts, Gets, RMABytes int64
	// Mailbox is the mailbox the device maps, in bytes (slots × 64);
	// PeakSlots the most slots occupied at once (landed or in flight).
	Mailbox   int64
	PeakSlots int
	// Registered is the memory registered with the ATU now;
	// PeakRegistered its peak.
	Registered, PeakRegistered int64
	// MaxOutstanding is the most RMA operations outstanding toward one
	// target.
	MaxOutstanding int
	// TxWait is the virtual time the process stalled in VELO sends
	// because its card's transmit queue was full.
	TxWait time.Duration
}

// Stats returns the device's counters.
func (d *Device) Stats() Stats { return d.st }

// Rank places the process in the job.
func (d *Device) Rank() int { return d.cfg.Rank }

// Size is the job's size.
func (d *Device) Size() int { return d.cfg.Size }

// Node is the node whose card this device is on.
func (d *Device) Node() int { return d.node }

// Slots is the mailbox's size in packets.
func (d *Device) Slots() int { return d.cfg.Slots }

// Occupancy is how many slots of the mailbox hold packets now.
func (d *Device) Occupancy() int { return d.n }

// SetExtra sets what this device tells its peers besides its address
// (the extoll BTL's flow-control layout), as softnic.Device.SetExtra.
func (d *Device) SetExtra(s string) { d.extra = s }

// PeerExtra is what rank set with SetExtra, if its device is open.
func (d *Device) PeerExtra(rank int) (string, bool) {
	if rank < 0 || rank >= len(d.peers) || d.peers[rank] == nil {
		return "", false
	}
	return d.peers[rank].extra, true
}

// Connect checks that rank has a device on the fabric: there is no
// connection to set up.
func (d *Device) Connect(rank int) error {
	_, err := d.peer(rank)
	return err
}

func (d *Device) peer(rank int) (*Device, error) {
	if d.closed {
		return nil, fmt.Errorf("simnic: rank %d: %w", d.cfg.Rank, core.ErrClosed)
	}
	if rank < 0 || rank >= len(d.peers) {
		return nil, fmt.Errorf("simnic: rank %d of %d: %w", rank, len(d.peers), core.ErrUnreachable)
	}
	p := d.peers[rank]
	if p == nil {
		return nil, fmt.Errorf("simnic: rank %d has no device %q: %w", rank, d.cfg.Name, core.ErrUnreachable)
	}
	return p, nil
}

// Lost never reports a peer: the simulated fabric does not fail.
func (d *Device) Lost() (nic.PeerLoss, bool) { return nic.PeerLoss{}, false }

// Close closes the device: what is in flight to it is dropped, and
// senders blocked on its mailbox go on.
func (d *Device) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	d.box, d.head, d.n = nil, 0, 0
	d.wake()
	return nil
}

var _ nic.Device = (*Device)(nil)
