package velo

import (
	"fmt"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
)

// The sender side of the credit schemes (seed 003 §5.1–5.2, §6.5.4): per
// destination a credit counter; packets go out while it lasts, the rest
// wait, in order, in a backlog — the receiver reassembles partial
// messages, so a message longer than the credits cannot deadlock — and
// compulsory-return requests and responses consume a credit and jump the
// backlog.

// send sends what the credits allow of a train to dst and queues the rest.
func (c *credits) send(dst int, pkts []nic.Slot) error {
	e := c.e
	t := &e.tx[dst]
	now := 0
	if t.qlen == 0 && !t.wantReq && !t.wantResp {
		now = min(int(t.credits), len(pkts))
	}
	rest := len(pkts) - now
	if rest > c.backlogCap-t.qlen {
		return fmt.Errorf("velo: send %d packets to rank %d: %d wait for credits already: %w", len(pkts), dst, t.qlen, core.ErrNoResources)
	}
	e.m.sends.Inc()
	if now > 0 {
		t.credits -= int32(now)
		if err := c.emit(dst, pkts[:now]); err != nil {
			return err
		}
	}
	if rest > 0 {
		e.m.delayed.Inc()
		c.enqueue(dst, pkts[now:])
	}
	return nil
}

// emit hands data packets to the device, piggybacking credits on those
// with room.
func (c *credits) emit(dst int, pkts []nic.Slot) error {
	if c.piggyback {
		for i := range pkts {
			if pkts[i].Len() <= PiggybackRoom {
				c.attach(dst, &pkts[i])
			} else {
				pkts[i].SetSpare(false)
			}
		}
	}
	if _, err := c.e.dev.Send(dst, pkts); err != nil {
		c.e.fail(dst, err)
		return err
	}
	return nil
}

func (c *credits) enqueue(dst int, pkts []nic.Slot) {
	e := c.e
	t := &e.tx[dst]
	if t.q == nil {
		t.q = make([]nic.Slot, c.backlogCap)
	}
	if t.qlen == 0 {
		t.since = e.clock.Now()
	}
	for i := range pkts {
		t.q[(t.qhead+t.qlen)%len(t.q)] = pkts[i]
		t.qlen++
	}
	e.m.backlog.Add(int64(len(pkts)))
}

// flush sends what waits for dst while credits last: a compulsory request
// first, then a compulsory response, then the backlog (§6.5.4).
func (c *credits) flush(dst int) {
	e := c.e
	t := &e.tx[dst]
	for t.credits > 0 && t.failed == nil {
		switch {
		case t.wantReq:
			t.wantReq = false
			t.credits--
			e.control(dst, TagRequest, 0)
			e.m.requests.Inc()
		case t.wantResp:
			// Return everything above the static slots; the response
			// itself takes one more credit (§6.5.4).
			t.wantResp = false
			back := max(t.credits-int32(c.static), 0)
			t.credits -= back + 1
			e.control(dst, TagResponse, back)
			e.m.responsesSent.Inc()
		case t.qlen > 0:
			n := min(int(t.credits), t.qlen, len(t.q)-t.qhead)
			t.credits -= int32(n)
			run := t.q[t.qhead : t.qhead+n]
			t.qhead = (t.qhead + n) % len(t.q)
			t.qlen -= n
			e.m.backlog.Add(-int64(n))
			if t.qlen == 0 {
				e.m.waitNS.Add(int64(e.clock.Now() - t.since))
			}
			if c.emit(dst, run) != nil {
				return
			}
		default:
			return
		}
	}
}

// credit is the sender side receiving credits (packet or piggyback).
func (c *credits) credit(src int, v int32) {
	if v <= 0 {
		return
	}
	c.e.tx[src].credits += v
	c.flush(src)
}
