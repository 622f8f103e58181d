// Package nic is the interface of an EXTOLL network card as gobtl sees it:
// the two communication engines of seed 003 §2 and nothing above them.
//
// VELO (Virtualized Engine for Low Overhead) moves small packets: one
// programmed write of up to 56 bytes of payload behind an 8-byte header
// (source, length, tag bits and one spare bit). Packets land in the
// receiver's mailbox, a ring of 64-byte slots with a single write and a
// single read pointer, shared by all senders and read in arrival order.
// Packets from one sender arrive in the order it sent them. The hardware has
// link-level retransmission but no end-to-end flow control: when a mailbox
// is full, back-pressure holds the packet in the network and finally blocks
// the sending node (§2). Keeping mailboxes from filling is the job of the
// software above (package velo, §5–6).
//
// RMA moves bulk data with Put and Get on memory registered with the
// address-translation unit (ATU), which hands out keys a peer must present.
// Completions are reported as notifications, at the origin and, when asked,
// at the target (§2–3).
//
// The software device in package softnic implements this interface with
// the same semantics; a real libvelo/librma binding would implement it too.
package nic

import (
	"encoding/binary"
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// Sizes of a VELO packet.
const (
	// SlotSize is the size of one mailbox slot: one packet.
	SlotSize = 64
	// HeaderSize is the size of the packet header at the start of a slot.
	HeaderSize = 8
	// MaxPayload is the largest payload of one packet.
	MaxPayload = SlotSize - HeaderSize
	// MaxTag is the largest tag value (5 tag bits).
	MaxTag = 1<<5 - 1
	// MaxRank is the largest source rank the header can carry (20 bits).
	MaxRank = 1<<20 - 1
)

// The header is one little-endian 64-bit word:
//
//	bits  0–31  stamp   device-owned: marks the slot full for one lap of the ring
//	bits 32–51  source  rank of the sender, written by the device
//	bits 52–57  length  payload bytes, 0..56
//	bits 58–62  tag     five bits for the software above
//	bit  63     spare   the one bit left free (seed 003 §5.4 uses it)
const (
	srcShift   = 32
	lenShift   = 52
	tagShift   = 58
	spareShift = 63
	srcMask    = MaxRank
	lenMask    = 1<<6 - 1
	tagMask    = MaxTag
)

// Slot is the image of one VELO packet: the header word followed by the
// payload area.
type Slot [SlotSize]byte

// Word returns the header word.
func (s *Slot) Word() uint64 { return binary.LittleEndian.Uint64(s[:HeaderSize]) }

// Src is the rank that sent the packet.
func (s *Slot) Src() int { return int(s.Word() >> srcShift & srcMask) }

// Len is the payload length.
func (s *Slot) Len() int { return int(s.Word() >> lenShift & lenMask) }

// Tag is the packet's tag.
func (s *Slot) Tag() uint8 { return uint8(s.Word() >> tagShift & tagMask) }

// Spare reports the spare header bit.
func (s *Slot) Spare() bool { return s.Word()>>spareShift != 0 }

// Payload is the packet's payload, Len bytes (at most MaxPayload, whatever
// the header says).
func (s *Slot) Payload() []byte { return s[HeaderSize : HeaderSize+min(s.Len(), MaxPayload)] }

// Area is the whole payload area of the slot, MaxPayload bytes.
func (s *Slot) Area() []byte { return s[HeaderSize:] }

// SetHeader writes the software-owned header fields (length, tag, spare)
// and clears source and stamp, which the device fills in.
func (s *Slot) SetHeader(length int, tag uint8, spare bool) {
	w := uint64(length&lenMask)<<lenShift | uint64(tag&tagMask)<<tagShift
	if spare {
		w |= 1 << spareShift
	}
	binary.LittleEndian.PutUint64(s[:HeaderSize], w)
}

// SetSpare sets or clears the spare bit, leaving the other fields.
func (s *Slot) SetSpare(on bool) {
	w := s.Word() &^ (1 << spareShift)
	if on {
		w |= 1 << spareShift
	}
	binary.LittleEndian.PutUint64(s[:HeaderSize], w)
}

// Fields returns the header word without its stamp and source, as the
// software wrote it.
func (s *Slot) Fields() uint64 { return s.Word() &^ (1<<lenShift - 1) }

// WithSource returns header fields f with the source rank set and the stamp
// replaced by stamp: what the device stores into the mailbox.
func WithSource(f uint64, src int, stamp uint32) uint64 {
	return f&^(1<<lenShift-1) | uint64(src&srcMask)<<srcShift | uint64(stamp)
}

// CheckLength reports whether a payload length is valid.
func CheckLength(n int) error {
	if n < 0 || n > MaxPayload {
		return fmt.Errorf("velo: payload of %d bytes, at most %d fit a packet", n, MaxPayload)
	}
	return nil
}

// VELO is the small-message engine.
type VELO interface {
	// Send writes the packets, in order, into dst's mailbox. While that
	// mailbox is full the call blocks — the hardware's back-pressure — for
	// at most the device's stall bound, then fails with an error wrapping
	// core.ErrStalled. It returns how many packets left; an error wrapping
	// core.ErrPeerLost means dst is gone. Send sets each packet's source and
	// may write the slots in pkts.
	Send(dst int, pkts []Slot) (int, error)
	// Poll returns the oldest packet in this process's mailbox, or nil when
	// it is empty. The slot stays valid, and the mailbox does not advance,
	// until Release.
	Poll() *Slot
	// Release frees the slot Poll returned.
	Release()
}

// Notify asks for notifications of an RMA operation.
type Notify uint8

const (
	// NotifyTarget raises a notification at the target when the operation
	// has touched its memory. The origin is always notified.
	NotifyTarget Notify = 1 << iota
)

// Op is one RMA operation.
type Op struct {
	// Local is the source of a Put or the destination of a Get.
	Local []byte
	// Remote names the peer's registered memory; Offset is where in it.
	Remote core.MemKey
	Offset uint64
	Notify Notify
	// Cookie comes back in the origin notification.
	Cookie uint64
}

// NotifyKind says what a Notification reports.
type NotifyKind uint8

const (
	// OriginDone: a Put or Get this process issued has completed (or failed).
	OriginDone NotifyKind = iota + 1
	// TargetPut: a peer's Put has written this process's memory.
	TargetPut
	// TargetGet: a peer's Get has read this process's memory.
	TargetGet
)

// Notification is an RMA completion event.
type Notification struct {
	Kind   NotifyKind
	Peer   int    // the other side
	Cookie uint64 // OriginDone: the Op's cookie
	Key    uint64 // Target*: the key of the memory touched
	Len    int
	Err    error // OriginDone: nil on success
}

// RMA is the bulk-transfer engine with its address-translation unit.
type RMA interface {
	// Register enters buf into the ATU and returns its key.
	Register(buf []byte, access core.Access) (core.Region, error)
	// Deregister removes a registration; later operations on its key fail.
	Deregister(r core.Region) error
	// Put writes op.Local into dst's memory; Get reads it into op.Local.
	// An error means the operation did not start.
	Put(dst int, op Op) error
	Get(dst int, op Op) error
	// PollNotification returns the next notification, if any.
	PollNotification() (Notification, bool)
}

// PeerLoss reports a peer the device found dead.
type PeerLoss struct {
	Rank int
	Err  error
}

// Device is one EXTOLL card as seen by one process.
type Device interface {
	VELO
	RMA
	// Rank and Size place this process in the job.
	Rank() int
	Size() int
	// Slots is the number of slots of this process's mailbox.
	Slots() int
	// Lost returns, once, each peer found dead since the last call.
	Lost() (PeerLoss, bool)
	Close() error
}
