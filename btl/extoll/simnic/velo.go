package simnic

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
)

// Send puts pkts on the wire to dst's mailbox, in order, each once the
// mailbox has room for it (back-pressure).
func (d *Device) Send(dst int, pkts []nic.Slot) (int, error) {
	p, err := d.peer(dst)
	if err != nil {
		return 0, err
	}
	for i := range pkts {
		if p.reserved >= p.cfg.Slots && !p.closed {
			if err := d.waitRoom(p); err != nil {
				return i, err
			}
		}
		if p.closed {
			continue // swallowed, as by a card whose process has gone
		}
		p.reserved++
		p.st.PeakSlots = max(p.st.PeakSlots, p.reserved)
		d.st.Packets++
		// The card's transmit queue holds txDepth packets; a processor
		// that writes more stalls in its programmed writes until the
		// port has room, as the hardware's does.
		if w := d.port.Busy(d.s.Now()) - d.txLimit; w > 0 {
			d.st.TxWait += w
			d.s.Compute(w)
		}
		p.card.push(d.port.Send(d.s.Now(), p.port, nic.SlotSize), p, d.cfg.Rank, &pkts[i])
	}
	return len(pkts), nil
}

// txDepth is how many VELO packets a card's transmit queue holds.
const txDepth = 64

// waitRoom is the blocked sender: p's mailbox is full and the network
// holds the packet until p frees a slot, for at most the stall bound of
// virtual time.
func (d *Device) waitRoom(p *Device) error {
	d.blocked.Inc()
	start := d.s.Now()
	for p.reserved >= p.cfg.Slots && !p.closed {
		waited := d.s.Now() - start
		if d.cfg.StallTimeout > 0 && waited >= d.cfg.StallTimeout {
			d.blockedNS.Add(int64(waited))
			d.stalls.Inc()
			return fmt.Errorf("simnic: send to rank %d: its %d-slot mailbox stayed full for %v (no end-to-end flow control in hardware): %w",
				p.cfg.Rank, p.cfg.Slots, waited, core.ErrStalled)
		}
		if !slices.Contains(p.waiters, d.cfg.Rank) {
			p.waiters = append(p.waiters, d.cfg.Rank)
		}
		d.s.Idle()
	}
	d.blockedNS.Add(int64(d.s.Now() - start))
	return nil
}

// land stores a packet that reached this mailbox.
func (d *Device) land(src int, slot *nic.Slot) {
	if d.closed {
		return
	}
	if d.n == len(d.box) {
		d.grow()
	}
	s := &d.box[(d.head+d.n)%len(d.box)]
	*s = *slot
	w := nic.WithSource(s.Fields(), src, 1)
	binary.LittleEndian.PutUint64(s[:nic.HeaderSize], w)
	d.n++
	d.s.Notify(d.cfg.Rank)
}

// grow doubles the ring's storage, up to the mailbox's size (reserved
// never exceeds it).
func (d *Device) grow() {
	box := make([]nic.Slot, min(max(16, 2*len(d.box)), d.cfg.Slots))
	for i := range d.n {
		box[i] = d.box[(d.head+i)%len(d.box)]
	}
	d.box, d.head = box, 0
}

// emptyPolls is how many empty polls in a row count as waiting.
const emptyPolls = 64

// Poll returns the oldest packet of the mailbox.
func (d *Device) Poll() *nic.Slot {
	if d.n == 0 {
		// A caller polling in a loop of its own, not the pml's back-off,
		// must let virtual time move too.
		if d.empty++; d.empty >= emptyPolls {
			d.empty = 0
			d.s.Idle()
		}
		return nil
	}
	d.empty = 0
	// The packets left are work for this rank: a caller that idles after
	// taking a batch, with the mailbox not empty, must go on at once, not
	// sleep until the next packet lands.
	d.s.Notify(d.cfg.Rank)
	return &d.box[d.head]
}

// Release frees the slot Poll returned.
func (d *Device) Release() {
	if d.n == 0 {
		return
	}
	d.head = (d.head + 1) % len(d.box)
	d.n--
	d.reserved--
	d.wake()
}

// wake makes the senders blocked on this mailbox look again.
func (d *Device) wake() {
	for _, r := range d.waiters {
		d.s.Notify(r)
	}
	d.waiters = d.waiters[:0]
}
