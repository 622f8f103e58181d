package velo

import (
	"encoding/binary"

	"github.com/gobtl/gobtl/btl/extoll/nic"
)

// Piggybacking (seed 003 §5.4, §6.6): a data packet with room carries the
// credits owed to its destination in the last two bytes of its slot,
// flagged by the spare header bit, and the receiver's threshold can be
// reached "the piggyback way" (doc.go).

// maxPiggyback is the most credits two bytes carry.
const maxPiggyback = 1<<16 - 1

// attach piggybacks owed credits on a data packet to dst (§5.4, §6.6).
func (c *credits) attach(dst int, s *nic.Slot) {
	s.SetSpare(false)
	r := &c.rx[dst]
	if !r.blocked && r.retrieved > 0 {
		if r.retrieved+r.piggy >= c.fifo[c.headIdx(dst)] {
			c.reach(dst, true)
		} else {
			g := c.grant(dst, r.retrieved)
			r.retrieved -= g
			r.piggy += g
		}
	}
	if r.owed <= 0 {
		return
	}
	v := min(r.owed, maxPiggyback)
	r.owed -= v
	r.granted += int64(v)
	s.SetSpare(true)
	binary.LittleEndian.PutUint16(s[nic.SlotSize-2:], uint16(v))
	c.e.m.piggyPackets.Inc()
	c.e.m.piggyCredits.Add(int64(v))
}
