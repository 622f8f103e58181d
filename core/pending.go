package core

import (
	"sync"
	"time"
)

// Connections that have not proved they belong to the job. Anyone who can
// reach a transport's listener can open connections to it, and each one
// costs the process a descriptor (and a goroutine or a buffer) until it
// proves itself or goes. So every listener keeps the connections still in
// the challenge–response in a Pending set: at most MaxPending of them —
// the oldest goes to make room for a new one — and none for longer than
// PendingTimeout. A flood from outside the job (issue 30: 5,000
// connections took a rank from 16 to 5,016 descriptors) then costs a
// bounded number of descriptors, and the job's own connections, which
// prove themselves in a round trip, still get in.
const (
	// MaxPending bounds a listener's connections in the handshake. It is
	// far above what a job's own ranks open at once.
	MaxPending = 1024
	// PendingTimeout drops, at the next connection, one that has not
	// proved itself for this long.
	PendingTimeout = 10 * time.Second
)

// Pending is the set of a listener's accepted connections that have not
// proved themselves yet, oldest first. The zero value applies MaxPending
// and PendingTimeout; it is safe for concurrent use.
type Pending struct {
	// Max and Timeout override MaxPending and PendingTimeout when set.
	Max     int
	Timeout time.Duration

	mu   sync.Mutex
	q    []*PendingConn // by admission; entries that are gone wait to be skipped
	live int
}

// PendingConn is one connection of a Pending set.
type PendingConn struct {
	set  *Pending
	born time.Duration
	drop func()
	gone bool
}

// Admit enters a connection accepted at now (a Clock's time) and returns
// its entry; drop ends the connection. First it takes out every
// connection that has waited longer than the timeout and, when the set is
// full, the oldest, and calls their drop functions — after its own lock is
// released, in the caller's goroutine, so that a drop may call Done.
func (p *Pending) Admit(now time.Duration, drop func()) *PendingConn {
	max, timeout := p.Max, p.Timeout
	if max <= 0 {
		max = MaxPending
	}
	if timeout <= 0 {
		timeout = PendingTimeout
	}
	var drops []func()
	p.mu.Lock()
	for len(p.q) > 0 {
		c := p.q[0]
		if !c.gone && now-c.born <= timeout && p.live < max {
			break
		}
		p.q[0] = nil
		p.q = p.q[1:]
		if !c.gone {
			c.gone = true
			p.live--
			drops = append(drops, c.drop)
		}
	}
	if len(p.q) > 2*p.live+64 {
		p.compact()
	}
	c := &PendingConn{set: p, born: now, drop: drop}
	p.q = append(p.q, c)
	p.live++
	p.mu.Unlock()
	for _, d := range drops {
		d()
	}
	return c
}

// compact drops the entries that are gone, when they have piled up behind
// an old connection still waiting. Called with p.mu held.
func (p *Pending) compact() {
	q := p.q[:0]
	for _, c := range p.q {
		if !c.gone {
			q = append(q, c)
		}
	}
	clear(p.q[len(q):])
	p.q = q
}

// Done takes c out of its set: the connection proved itself, or ended. It
// may be called more than once, and after the set dropped c.
func (c *PendingConn) Done() {
	if c == nil {
		return
	}
	p := c.set
	p.mu.Lock()
	if !c.gone {
		c.gone = true
		p.live--
	}
	p.mu.Unlock()
}

// Len is the number of connections in the handshake.
func (p *Pending) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

// AcceptRetry paces a listener's accept loop after errors. An accept that
// fails — the process is out of descriptors (EMFILE), the system too
// (ENFILE), a connection reset before it was taken — is no reason to stop
// serving: a listener that returns then is dead for good (issue 30 item
// 4), and one that retries at once spins. Next is the pause before the
// next accept, doubling from 5 ms to 1 s as net/http's server does; Reset
// after an accept that worked. The zero value is ready.
type AcceptRetry struct{ pause time.Duration }

// Bounds of AcceptRetry's pause.
const (
	AcceptPauseMin = 5 * time.Millisecond
	AcceptPauseMax = time.Second
)

// Next returns the pause before the next accept.
func (r *AcceptRetry) Next() time.Duration {
	r.pause = min(max(2*r.pause, AcceptPauseMin), AcceptPauseMax)
	return r.pause
}

// Reset starts the pauses over.
func (r *AcceptRetry) Reset() { r.pause = 0 }
