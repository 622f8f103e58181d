package softrc

import "golang.org/x/sys/unix"

// Pacing: a rate-limited link whose bucket holds its next chunk must be
// written when the tokens are there, as an HCA serialises its wire
// whatever the host does. The process polls the device inline, but a rank
// waiting for a rendezvous backs off into sleeps of up to hundreds of
// microseconds, and the device goroutine takes over only after IdleAfter
// without a poll; writing the chunk at the next poll made every transfer
// of a few chunks late by a sleep or more (a 256 KiB message on a 1GB/s
// link took twice its serialisation time). So when a link waits for
// tokens, the device goroutine wakes for it: it sleeps until the link is
// due (nanosleep, not a Go timer, whose granularity here is about a
// millisecond), writes what the bucket allows, and goes back to waiting
// for the idle timer when no link waits for tokens any more. It does not
// read the wire: that stays with the polling process.

// pace asks the device goroutine to write a link that is due at t.
// Called with d.mu held.
func (d *Device) pace(t int64) {
	if d.pacing || d.nicEngaged || d.closed {
		return
	}
	d.pacing = true
	select {
	case d.paceCh <- struct{}{}:
	default:
	}
}

// paceLinks runs in the device goroutine while links wait for tokens. It
// returns false when the device closed.
func (d *Device) paceLinks() bool {
	for {
		d.mu.Lock()
		if d.closed {
			d.pacing = false
			d.mu.Unlock()
			return false
		}
		now := nowNS()
		next := int64(0)
		for _, l := range d.txPending {
			if l.dead || l.txLen() == 0 || l.outArmed || l.port.bucket == nil {
				continue
			}
			if l.txReadyAt <= now {
				l.flush(now)
			}
			if l.txLen() > 0 && l.txReadyAt > now && (next == 0 || l.txReadyAt < next) {
				next = l.txReadyAt
			}
		}
		if next == 0 || d.nicEngaged {
			// Nothing waits for tokens, or the engaged device goroutine
			// serves every deadline anyway.
			d.pacing = false
			d.mu.Unlock()
			return true
		}
		d.mu.Unlock()
		ts := unix.NsecToTimespec(next - now)
		unix.Nanosleep(&ts, nil)
	}
}
