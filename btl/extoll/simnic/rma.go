package simnic

import (
	"fmt"
	"unsafe"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
)

// region is memory entered into the ATU.
type region struct {
	buf    []byte
	key    core.MemKey
	access core.Access
}

func (r *region) Key() core.MemKey { return r.key }
func (r *region) Bytes() []byte    { return r.buf }

// Register enters buf into the address-translation unit.
func (d *Device) Register(buf []byte, access core.Access) (core.Region, error) {
	if d.closed {
		return nil, fmt.Errorf("simnic: register: %w", core.ErrClosed)
	}
	// Keys are unique per device and say whose they are; deterministic,
	// as everything in a simulated run.
	d.nextKey++
	r := &region{buf: buf, access: access}
	r.key = core.MemKey{Len: uint64(len(buf)), Key: d.nextKey<<20 | uint64(d.cfg.Rank), Aux: uint64(d.cfg.Rank)}
	if len(buf) > 0 {
		r.key.Addr = uint64(uintptr(unsafe.Pointer(&buf[0])))
	}
	d.regions[r.key.Key] = r
	d.st.Registered += int64(len(buf))
	d.st.PeakRegistered = max(d.st.PeakRegistered, d.st.Registered)
	return r, nil
}

// Deregister removes a registration; later operations on its key fail.
func (d *Device) Deregister(r core.Region) error {
	rr, ok := r.(*region)
	if !ok || d.regions[rr.key.Key] != rr {
		return fmt.Errorf("simnic: deregister: not a region of rank %d's device", d.cfg.Rank)
	}
	delete(d.regions, rr.key.Key)
	d.st.Registered -= int64(len(rr.buf))
	return nil
}

// lookup is the target ATU's check of an operation.
func (d *Device) lookup(key, off, n uint64, need core.Access) (*region, string) {
	r := d.regions[key]
	switch {
	case d.closed:
		return nil, "target closed"
	case r == nil:
		return nil, "unknown key"
	case off > uint64(len(r.buf)) || n > uint64(len(r.buf))-off:
		return nil, "out of bounds"
	case r.access&need != need:
		return nil, "access denied"
	}
	return r, ""
}

// PollNotification returns the next RMA notification.
func (d *Device) PollNotification() (nic.Notification, bool) {
	if d.notesHead == len(d.notes) {
		return nic.Notification{}, false
	}
	n := d.notes[d.notesHead]
	d.notes[d.notesHead] = nic.Notification{}
	if d.notesHead++; d.notesHead == len(d.notes) {
		d.notes, d.notesHead = d.notes[:0], 0
	} else {
		d.s.Notify(d.cfg.Rank) // more to take: as in Poll
	}
	return n, true
}

func (d *Device) notify(n nic.Notification) {
	if d.closed {
		return
	}
	d.notes = append(d.notes, n)
	d.s.Notify(d.cfg.Rank)
}

// maxOutstanding bounds the operations in flight toward one target, as
// softnic's connections do.
const maxOutstanding = 256

// reqBytes is an RMA request on the wire (softnic's: op, notify, key,
// offset, length, cookie).
const reqBytes = 40

// Put writes op.Local into dst's registered memory.
func (d *Device) Put(dst int, op nic.Op) error { return d.issue(dst, true, op) }

// Get reads dst's registered memory into op.Local.
func (d *Device) Get(dst int, op nic.Op) error { return d.issue(dst, false, op) }

func (d *Device) issue(dst int, put bool, op nic.Op) error {
	name := "get"
	if put {
		name = "put"
	}
	if uint64(len(op.Local)) > op.Remote.Len || op.Offset > op.Remote.Len-uint64(len(op.Local)) {
		return fmt.Errorf("simnic: rma to rank %d: %d bytes at offset %d exceed the %d-byte region", dst, len(op.Local), op.Offset, op.Remote.Len)
	}
	p, err := d.peer(dst)
	if err != nil {
		return err
	}
	if d.out[dst] >= maxOutstanding {
		return fmt.Errorf("simnic: rma to rank %d: %d operations outstanding: %w", dst, maxOutstanding, core.ErrNoResources)
	}
	d.out[dst]++
	d.st.MaxOutstanding = max(d.st.MaxOutstanding, int(d.out[dst]))
	n := len(op.Local)
	done := func(err error) {
		d.out[dst]--
		if err == nil {
			if put {
				d.st.Puts++
			} else {
				d.st.Gets++
			}
			d.st.RMABytes += int64(n)
		}
		d.notify(nic.Notification{Kind: nic.OriginDone, Peer: dst, Cookie: op.Cookie, Len: n, Err: err})
	}
	fail := func(why string) error {
		return fmt.Errorf("simnic: rma %s at rank %d, key %#x: %s", name, dst, op.Remote.Key, why)
	}
	s := d.s
	if put {
		s.At(d.port.Send(s.Now(), p.port, reqBytes+n), func() {
			r, why := p.lookup(op.Remote.Key, op.Offset, uint64(n), core.AccessRemoteWrite)
			var err error
			if r == nil {
				err = fail(why)
			} else {
				copy(r.buf[op.Offset:], op.Local)
				if op.Notify&nic.NotifyTarget != 0 {
					p.notify(nic.Notification{Kind: nic.TargetPut, Peer: d.cfg.Rank, Key: op.Remote.Key, Len: n})
				}
			}
			s.At(p.port.Ack(s.Now()), func() { done(err) })
		})
		return nil
	}
	s.At(d.port.Send(s.Now(), p.port, reqBytes), func() {
		r, why := p.lookup(op.Remote.Key, op.Offset, uint64(n), core.AccessRemoteRead)
		if r == nil {
			err := fail(why)
			s.At(p.port.Ack(s.Now()), func() { done(err) })
			return
		}
		// The target's card reads the memory now and sends it back.
		copy(op.Local, r.buf[op.Offset:])
		if op.Notify&nic.NotifyTarget != 0 {
			p.notify(nic.Notification{Kind: nic.TargetGet, Peer: d.cfg.Rank, Key: op.Remote.Key, Len: n})
		}
		s.At(p.port.Send(s.Now(), d.port, n), func() { done(nil) })
	})
	return nil
}
