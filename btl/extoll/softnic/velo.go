package softnic

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"time"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
)

// Send writes pkts into dst's mailbox, blocking while it is full.
func (d *Device) Send(dst int, pkts []nic.Slot) (int, error) {
	p, err := d.peer(dst)
	if err != nil {
		return 0, err
	}
	if p.kind == viaTCP {
		return d.sendTCP(dst, p, pkts)
	}
	for i := range pkts {
		if !p.ring.TryPut(&pkts[i], d.cfg.Rank) {
			if err := d.waitPut(dst, p, &pkts[i]); err != nil {
				return i, err
			}
		}
	}
	return len(pkts), nil
}

// waitPut is the blocked sender: the mailbox is full and the packet waits
// in the "network" until the receiver frees a slot or the stall bound runs
// out.
func (d *Device) waitPut(dst int, p *peer, s *nic.Slot) error {
	d.blocked.Inc()
	start := d.clock.Now()
	var b backoff
	for {
		b.wait()
		if p.ring.TryPut(s, d.cfg.Rank) {
			d.blockedNS.Add(int64(d.clock.Now() - start))
			return nil
		}
		waited := d.clock.Now() - start
		switch {
		case d.closed.Load():
			return fmt.Errorf("softnic: send to rank %d: %w", dst, core.ErrClosed)
		case p.rma != nil && p.rma.isDead():
			return fmt.Errorf("softnic: send to rank %d: %w", dst, core.ErrPeerLost)
		case d.cfg.StallTimeout < 0 || d.cfg.StallTimeout > 0 && waited >= d.cfg.StallTimeout:
			d.blockedNS.Add(int64(waited))
			d.stalls.Inc()
			return fmt.Errorf("softnic: send to rank %d: its %d-slot mailbox stayed full for %v (no end-to-end flow control in hardware): %w",
				dst, p.ring.Slots(), waited.Round(time.Microsecond), core.ErrStalled)
		}
	}
}

func (d *Device) sendTCP(dst int, p *peer, pkts []nic.Slot) (int, error) {
	n := len(pkts) * nic.SlotSize
	if cap(p.wbuf) < n {
		p.wbuf = make([]byte, max(n, 64*nic.SlotSize))
	}
	buf := p.wbuf[:n]
	for i := range pkts {
		copy(buf[i*nic.SlotSize:], pkts[i][:])
	}
	switch {
	case d.cfg.StallTimeout > 0:
		p.conn.SetWriteDeadline(time.Now().Add(d.cfg.StallTimeout))
	case d.cfg.StallTimeout < 0:
		p.conn.SetWriteDeadline(time.Now().Add(time.Millisecond))
	}
	w, err := p.conn.Write(buf)
	if err == nil {
		return len(pkts), nil
	}
	// A write cut short leaves the stream mid-packet: the connection is
	// finished either way.
	if errors.Is(err, os.ErrDeadlineExceeded) {
		d.blocked.Inc()
		d.stalls.Inc()
		err = fmt.Errorf("softnic: send to rank %d over tcp: the network stayed blocked for %v (mailbox full, no end-to-end flow control in hardware): %w",
			dst, d.cfg.StallTimeout, core.ErrStalled)
	} else {
		err = fmt.Errorf("softnic: send to rank %d over tcp: %v: %w", dst, err, core.ErrPeerLost)
	}
	p.conn.Close()
	p.kind, p.err = failed, err
	return w / nic.SlotSize, err
}

// Poll returns the oldest packet of this process's mailbox.
func (d *Device) Poll() *nic.Slot { return d.box.Peek() }

// Release frees the slot Poll returned.
func (d *Device) Release() { d.box.Release() }

func (d *Device) dialVELO(ctx context.Context, rank int, p *peer) error {
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", p.addr.VELO)
	if err != nil {
		return err
	}
	tc := c.(*net.TCPConn)
	tc.SetNoDelay(true)
	if d.cfg.SocketBuffer > 0 {
		tc.SetWriteBuffer(d.cfg.SocketBuffer)
	}
	if err := d.writeHello(c, helloVELO, rank); err != nil {
		c.Close()
		return err
	}
	p.conn, p.kind = c, viaTCP
	return nil
}

// veloEngine is the receiving network engine of one TCP connection: it
// copies arriving packets into the mailbox and, while the mailbox is full,
// stops reading, so that the sender's socket fills and its writes block.
func (d *Device) veloEngine(c net.Conn, sv *served) {
	src, err := d.readHello(c, sv, helloVELO)
	if err != nil {
		return
	}
	if tc, ok := c.(*net.TCPConn); ok && d.cfg.SocketBuffer > 0 {
		tc.SetReadBuffer(d.cfg.SocketBuffer)
	}
	buf := make([]byte, 16*nic.SlotSize)
	have := 0
	for {
		n, err := c.Read(buf[have:])
		have += n
		whole := have / nic.SlotSize * nic.SlotSize
		for off := 0; off < whole; off += nic.SlotSize {
			s := (*nic.Slot)(buf[off : off+nic.SlotSize])
			var b backoff
			for !d.box.TryPut(s, src) {
				if d.closed.Load() {
					return
				}
				b.wait()
			}
		}
		have = copy(buf, buf[whole:have])
		if err != nil {
			return // the sender closed or died; its packets so far are in
		}
	}
}

func (d *Device) jobHash() uint64 {
	h := fnv.New64a()
	io.WriteString(h, d.cfg.JobID+"\x00"+d.cfg.Name)
	return h.Sum64()
}
