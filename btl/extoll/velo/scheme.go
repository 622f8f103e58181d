package velo

import (
	"fmt"
	"time"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
)

// scheme is the flow control an Engine runs, chosen once at New from the
// policy's setup: none (direct, seed 003 §4), or credits (credits.go) over
// a static (§5, static.go) or a dynamic (§6, dynamic.go) data region.
// Nothing on the data path asks which one runs.
type scheme interface {
	// send hands a train to dst, whose sends have not failed.
	send(dst int, pkts []nic.Slot) error
	// packet takes a packet whose header has been checked out of the
	// mailbox, data to rcv and flow control to the scheme, and releases
	// its slot.
	packet(s *nic.Slot, src int, tag uint8, rcv Receiver)
	// dropped accounts for a bad packet from src whose slot was released
	// unread.
	dropped(src int)
	// polled ends a Poll: the events it raised go to the policy.
	polled()
	// tick collects a policy's late decisions and samples the gauges.
	tick(now time.Duration)

	// kind is the value of the <prefix>.fc.scheme gauge.
	kind() int64
	// layout describes the parameters every rank must share.
	layout() string
	// slots is the mailbox's division (zero without credits).
	slots() split
	// quota, free, blocked and describe report the receiver's state for
	// Engine's accessors (zeros without credits).
	quota(src int) (intended, current int)
	free() (available, unassigned int)
	blocked(src int) bool
	describe(peer int) string
}

// split is how a receiver divides its mailbox (§5.2, §6.3): k credit
// slots per peer, the rest the data region; the static slots are the
// least quota a sender keeps, the initial slots the credits it starts
// with.
type split struct {
	k, data, static, initial int
}

// newScheme chooses the engine's flow control from the policy's setup.
func (e *Engine) newScheme(cfg Config) (scheme, error) {
	switch e.setup.Scheme {
	case core.FlowNone:
		return direct{e}, nil
	case core.FlowCredits:
		return newCredits(e, cfg)
	}
	return nil, fmt.Errorf("velo: flow-control scheme %d is not one EXTOLL runs", e.setup.Scheme)
}

// direct is no flow control at all (seed 003 §4): packets go straight to
// the device, which blocks the sender while the destination's mailbox is
// full — what the hardware does, and what every scheme is measured
// against.
type direct struct{ e *Engine }

func (d direct) send(dst int, pkts []nic.Slot) error {
	e := d.e
	e.m.sends.Inc()
	if _, err := e.dev.Send(dst, pkts); err != nil {
		e.tx[dst].failed = err
		return err
	}
	return nil
}

func (d direct) packet(s *nic.Slot, src int, tag uint8, rcv Receiver) {
	e := d.e
	if tag >= TagReserved {
		e.dev.Release()
		e.bad(src, fmt.Sprintf("flow-control packet (tag %d) but flow control is off", tag))
		return
	}
	rcv.Packet(src, tag, s.Payload())
	e.dev.Release()
}

func (direct) dropped(int)          {}
func (direct) polled()              {}
func (direct) tick(time.Duration)   {}
func (direct) kind() int64          { return SchemeNone }
func (direct) layout() string       { return "none" }
func (direct) slots() split         { return split{} }
func (direct) quota(int) (int, int) { return 0, 0 }
func (direct) free() (int, int)     { return 0, 0 }
func (direct) blocked(int) bool     { return false }
func (direct) describe(int) string  { return "" }
