package softrc

import (
	"fmt"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

// Fault hooks: what tests and experiments do to the wire.

// DropLinks closes the TCP connections of a port — all of them, or only
// those to the peer port (gid, lid) when lid is not 0. Every QP that used
// them fails, on both sides, as when a cable is pulled and the transport
// retries run out. The port stays up; new connections may be made.
func (d *Device) DropLinks(port uint8, gid verbs.GID, lid uint16) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.portLocked(port)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range append([]*link(nil), d.links...) {
		if l.port == p && (lid == 0 || (l.peerLID == lid && l.peerGID == gid)) {
			d.linkFailed(l, fmt.Errorf("dropped by fault hook"), nowNS())
			n++
		}
	}
	return n, nil
}

// DelayLinks adds delay to every packet leaving the port, on links that
// exist and links made later (0 removes it).
func (d *Device) DelayLinks(port uint8, delay time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.portLocked(port)
	if err != nil {
		return err
	}
	p.delay = int64(delay)
	for _, l := range d.links {
		if l.port == p {
			l.delay = int64(delay)
		}
	}
	return nil
}

// DropPackets loses packets leaving the port at random, one in every on
// average (0 stops it), on links that exist and links made later: the wire is lossy,
// and only the requester's ACK timeout and retransmission (or a NAK for
// the gap) recover. The handshake that opens a link is never dropped.
func (d *Device) DropPackets(port uint8, every int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.portLocked(port)
	if err != nil {
		return err
	}
	p.dropEvery = max(every, 0)
	if p.lossRNG == 0 {
		p.lossRNG = uint64(nowNS()) | 1
	}
	return nil
}

// KillPort takes a port down for good: its listener and links close, its
// QPs fail, and the port error async event is raised.
func (d *Device) KillPort(port uint8) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.portLocked(port)
	if err != nil {
		return err
	}
	if p.down {
		return nil
	}
	p.down = true
	p.stopListening()
	now := nowNS()
	for _, l := range append([]*link(nil), d.links...) {
		if l.port == p {
			d.linkFailed(l, fmt.Errorf("port %d killed", port), now)
		}
	}
	for _, q := range d.qps {
		if q.port == p && q.state != verbs.QPErr && q.state != verbs.QPReset {
			q.linkLost(fmt.Errorf("port %d down", port), now)
		}
	}
	d.raise(verbs.AsyncEvent{Type: verbs.EventPortErr, Port: port})
	return nil
}
