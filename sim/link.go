package sim

import "time"

// Link is a port's LogGP model (Alexandrov et al.): a message of n bytes
// posted at t leaves its port at max(t+o, the port's previous departure +
// max(g, n·G)) and lands L later; the destination port takes n·G per
// message in arrival order (so incast queues), and the receive side adds
// o.
type Link struct {
	// Latency is L, the wire and switch time of a message.
	Latency time.Duration
	// Overhead is o, paid by the sender before a message leaves and by
	// the receiver after it lands.
	Overhead time.Duration
	// Gap is g, the least time between two messages leaving a port.
	Gap time.Duration
	// Rate is 1/G in bytes per second (0: unlimited).
	Rate float64
}

// Wire is n·G, the time n bytes occupy a port.
func (l Link) Wire(n int) time.Duration {
	if l.Rate <= 0 {
		return 0
	}
	return time.Duration(float64(n) / l.Rate * 1e9)
}

// Port is one end of a LogGP link: its departures and its arrivals are
// each first in, first out.
type Port struct {
	Link           Link
	txFree, rxFree time.Duration
}

// Send models n bytes posted at now on port p toward dst and returns when
// they are delivered at dst, the receiver's overhead included. Two
// messages between the same ports are delivered in the order they were
// posted.
func (p *Port) Send(now time.Duration, dst *Port, n int) time.Duration {
	ls, ld := p.Link, dst.Link
	depart := max(now+ls.Overhead, p.txFree)
	p.txFree = depart + max(ls.Gap, ls.Wire(n))
	arrive := depart + ls.Wire(n) + ls.Latency
	in := max(arrive, dst.rxFree+ld.Wire(n))
	dst.rxFree = in
	return in + ld.Overhead
}

// Busy is how long the port's departures are booked beyond now: what
// waits in its transmit queue.
func (p *Port) Busy(now time.Duration) time.Duration { return max(0, p.txFree-now) }

// Ack is when a response without payload sent now from p arrives:
// latency only.
func (p *Port) Ack(now time.Duration) time.Duration { return now + p.Link.Latency }
