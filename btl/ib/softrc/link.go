package softrc

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
)

// What a transmitted item means to its QP once it is on the wire.
const (
	itemCtl      = iota // HELLO, ACK, NAK
	itemReq             // an RC request: starts the ACK timer
	itemReadResp        // a read response: frees a responder read slot
	itemUD              // a UD send: completes locally once written
)

// txItem is one packet waiting to be written: the header (and a small
// inline payload), then up to maxSGE segments of registered memory, read
// in place when written (no copy).
type txItem struct {
	head      [hdrSize + maxInline]byte
	headLen   int
	segs      [maxSGE][]byte
	nseg      int
	total     int
	off       int
	q         *qp
	kind      uint8
	wqe       uint64
	notBefore int64
	cancelled bool
}

// maxInline: payloads up to this long are copied behind the header when
// queued, so that the packet leaves as one contiguous write (the
// IBV_SEND_INLINE of an HCA). The registered memory is still the source
// of every retransmission.
const maxInline = 256

// directRead: a payload at least this long still to come is read straight
// into its destination, bypassing the link buffer.
const directRead = 16 << 10

// rxBufSize is a link's receive buffer.
const rxBufSize = 256 << 10

// link is one TCP connection between two ports. It is a byte pipe for
// packets of any QPs; a QP that sends over it, or hears over it, fails
// with it.
type link struct {
	d        *Device
	port     *port
	fd       int
	dialed   bool
	born     int64
	pend     *core.PendingConn // an accepted link in the handshake
	peerGID  [16]byte          // the dialed port, or the one the HELLO names
	peerLID  uint16
	dead     bool
	err      error
	pending  bool // on d.txPending
	outArmed bool // EPOLLOUT requested
	delay    int64

	// spare: a second connection to the peer's port, which no QP here
	// sends on; polls do not read it (port.markSpares)
	spare bool

	// handshake of an accepted link (auth.go): the stage, both nonces,
	// the CHALLENGE still to write and the payload being read
	auth           uint8
	nonceD, nonceA core.Nonce
	hs             [hdrSize + challengeSize]byte
	hsOff, hsLen   int
	hsIn           [helloSize]byte

	// receive side
	rbuf      []byte
	rlo, rhi  int
	inPkt     bool
	h         header
	sink      [maxSGE + 1][]byte
	nsink     int
	si, so    int
	remaining int
	discard   bool
	bigRun    bool // the last packet was large: read the next header alone
	act       rxAction

	// transmit side: a ring of items
	tx        []txItem
	txHead    int
	txN       int
	txReadyAt int64
	// wroteAt is the device's poll count at the last write: PostSend
	// leaves a packet queued for the next poll when one already went
	// since the last (qp.PostSend).
	wroteAt uint64
}

// rxAction says what finishing the current packet does.
type rxAction struct {
	kind uint8
	q    *qp
	wrid uint64 // the receive WQE consumed
	idx  uint64 // the read WQE answered
	psn  uint32
}

const (
	actNone = iota
	actHandshake
	actRecv     // complete a receive WQE (send, send with imm, write with imm)
	actWrite    // RDMA write placed
	actReadResp // read response placed
	actUD       // UD receive
	actDup      // duplicate request: re-acknowledge
)

func (d *Device) addLink(p *port, fd int, dialed bool) (*link, error) {
	if err := unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}); err != nil {
		return nil, fmt.Errorf("softrc: %s: epoll_ctl: %w", d.name, err)
	}
	// An accepted link gets its working buffers once it has proved it
	// belongs to the job (auth.go); until then it holds a few hundred bytes.
	l := &link{d: d, port: p, fd: fd, dialed: dialed, born: nowNS(), delay: p.delay, wroteAt: ^uint64(0)}
	if dialed {
		// Its handshake is done (port.handshake).
		l.auth, l.rbuf, l.tx = authDone, make([]byte, rxBufSize), make([]txItem, 64)
	} else {
		l.rbuf = make([]byte, pendingBuf)
	}
	d.links = append(d.links, l)
	d.byFD[int32(fd)] = l
	return l, nil
}

// usable says whether QPs may use l: it has proved it belongs to the job.
func (l *link) usable() bool { return !l.dead && l.auth == authDone }

func (l *link) txLen() int { return l.txN }

// enqueue queues a packet: header h, an inline payload (copied) and
// registered segments (referenced). It does not write; flush does.
func (l *link) enqueue(h *header, inline []byte, segs [][]byte, q *qp, kind uint8, wqe uint64, now int64) {
	if l.txN == len(l.tx) {
		n := make([]txItem, max(64, 2*len(l.tx)))
		for i := 0; i < l.txN; i++ {
			n[i] = l.tx[(l.txHead+i)%len(l.tx)]
		}
		l.tx, l.txHead = n, 0
	}
	if l.txN == 0 {
		l.port.bucket.wait(now, +1)
	}
	it := &l.tx[(l.txHead+l.txN)%len(l.tx)]
	l.txN++
	h.encode(it.head[:hdrSize])
	it.headLen = hdrSize + copy(it.head[hdrSize:], inline)
	it.nseg = 0
	n := 0
	for _, s := range segs {
		n += len(s)
	}
	if it.headLen+n <= len(it.head) {
		for _, s := range segs {
			it.headLen += copy(it.head[it.headLen:], s)
		}
	} else {
		for _, s := range segs {
			it.segs[it.nseg] = s
			it.nseg++
		}
	}
	it.total = it.headLen
	for i := 0; i < it.nseg; i++ {
		it.total += len(it.segs[i])
	}
	for i := it.nseg; i < maxSGE; i++ {
		it.segs[i] = nil
	}
	it.off, it.q, it.kind, it.wqe, it.cancelled = 0, q, kind, wqe, false
	it.notBefore = 0
	if l.delay > 0 {
		it.notBefore = now + l.delay
	}
	l.d.stats.PacketsSent++
	l.d.markTx(l)
}

// cancel drops q's packets that have not started on the wire: its
// requests only (reqOnly, when the requester goes back to retransmit), or
// everything (the QP went to error). A packet half written is finished, to
// keep the stream framed. A packet of q half received is discarded.
func (l *link) cancel(q *qp, reqOnly bool) {
	for i := 0; i < l.txN; i++ {
		it := &l.tx[(l.txHead+i)%len(l.tx)]
		if it.q == q && it.off == 0 && (!reqOnly || it.kind == itemReq) {
			it.cancelled = true
		}
	}
	if !reqOnly && l.inPkt && l.act.q == q {
		l.discard = true
		l.act = rxAction{}
	}
}

// flush writes queued packets with one sendmsg per batch, as far as the
// socket, the port's token bucket and any injected delay allow.
func (l *link) flush(now int64) {
	if l.auth != authDone || l.hsLen > 0 {
		if l.dead || !l.flushHandshake(now) {
			return
		}
	}
	for l.txN > 0 && !l.dead {
		// Drop cancelled packets at the head.
		it := &l.tx[l.txHead]
		if it.cancelled {
			l.pop()
			continue
		}
		if l.port.dropEvery > 0 && it.off == 0 && l.lose(now) {
			continue
		}
		budget := l.budget(now)
		if budget == 0 {
			return
		}
		iov, want := l.gather(now, budget)
		if len(iov) == 0 {
			return
		}
		if !l.write(iov, want, now) {
			return
		}
	}
	if l.txN == 0 {
		l.armOut(false)
	}
}

// budget is how many bytes the next write may take: what the port's token
// bucket allows of what is queued (4 MiB at most). At 0 it has set the
// device's deadline to when the bucket lets them go.
func (l *link) budget(now int64) int {
	budget := 4 << 20
	if b := l.port.bucket; b != nil {
		// Ask for what is queued: the bucket lets a small packet go
		// on the idle link's credit, and holds larger ones for a chunk.
		q := l.queued(budget)
		budget = b.allow(now, q)
		if budget == 0 {
			l.txReadyAt = b.readyAt(now, q)
			l.d.setDeadline(l.txReadyAt)
			l.d.pace(l.txReadyAt)
		}
	}
	return budget
}

// gather fills the device's iovec with the queued packets' unwritten
// bytes, up to budget and the iovec's room, stopping at a packet held by
// an injected delay (whose time becomes the deadline when it is first).
// It returns the iovec and the bytes it holds.
func (l *link) gather(now int64, budget int) ([]unix.Iovec, int) {
	d := l.d
	iov := d.iov[:0]
	want := 0
	for i := 0; i < l.txN && len(iov) < cap(d.iov)-maxSGE-1 && want < budget; i++ {
		it := &l.tx[(l.txHead+i)%len(l.tx)]
		if it.cancelled && it.off == 0 {
			if i == 0 {
				break
			}
			continue
		}
		if it.notBefore > now {
			if i == 0 {
				l.txReadyAt = it.notBefore
				d.setDeadline(it.notBefore)
			}
			break
		}
		skip := it.off
		iov, want, skip = appendIov(iov, it.head[:it.headLen], want, skip, budget)
		for s := 0; s < it.nseg && want < budget; s++ {
			iov, want, skip = appendIov(iov, it.segs[s], want, skip, budget)
		}
	}
	return iov, want
}

// appendIov adds b to iov, less its first skip bytes (those already
// written) and cut to what is left of budget after want; it returns the
// iovec, the bytes it now holds and the skip left for the next buffer.
func appendIov(iov []unix.Iovec, b []byte, want, skip, budget int) ([]unix.Iovec, int, int) {
	if skip >= len(b) {
		return iov, want, skip - len(b)
	}
	b = b[skip:]
	if room := budget - want; len(b) > room {
		b = b[:room]
	}
	if len(b) == 0 {
		return iov, want, 0
	}
	v := unix.Iovec{Base: &b[0]}
	v.SetLen(len(b)) // Len is 32 bits wide on 32-bit systems
	return append(iov, v), want + len(b), 0
}

// write sends the gathered iov, want bytes, and accounts what went. It
// reports whether flush may write more: not when the socket is full (it
// then waits for EPOLLOUT), took only part, or failed.
func (l *link) write(iov []unix.Iovec, want int, now int64) bool {
	d := l.d
	// Before the write: a reader may see the bytes before this thread
	// returns from sendmsg.
	wireWritten()
	var n int
	var e unix.Errno
	if len(iov) == 1 {
		// One contiguous packet (an inline send): sendto is cheaper.
		n, e = sendNB(l.fd, unsafe.Slice(iov[0].Base, iov[0].Len))
	} else {
		n, e = sendvNB(l.fd, &d.msg, iov)
	}
	for i := range iov {
		iov[i].Base = nil
	}
	switch e {
	case 0:
	case unix.EAGAIN:
		d.stats.WritesBlocked++
		l.armOut(true)
		return false
	case unix.EINTR:
		return true
	default:
		d.linkFailed(l, fmt.Errorf("write: %w", e), now)
		return false
	}
	l.wroteAt = d.polls
	d.stats.Writes++
	d.stats.BytesSent += int64(n)
	if b := l.port.bucket; b != nil {
		b.take(n)
	}
	l.advance(n, now)
	if n < want {
		d.stats.WritesBlocked++
		l.armOut(true)
		return false
	}
	return true
}

// lose is the DropPackets fault hook, deciding for the packet at the head
// of the queue: with probability 1/dropEvery it is taken off the queue as
// if written and never reaches the peer — a packet lost on the wire, which
// only the transport's retransmission recovers. The draw is random, not
// every n-th packet: a retransmitted window of n packets would lose the
// same one each time, forever.
func (l *link) lose(now int64) bool {
	p := l.port
	x := p.lossRNG
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	p.lossRNG = x
	if x%uint64(p.dropEvery) != 0 {
		return false
	}
	it := &l.tx[l.txHead]
	q, kind, wqe := it.q, it.kind, it.wqe
	l.pop()
	l.d.stats.FaultDrops++
	if q != nil {
		q.onWritten(kind, wqe, now)
	}
	return true
}

// queued returns the bytes waiting to be written, up to limit.
func (l *link) queued(limit int) int {
	n := 0
	for i := 0; i < l.txN && n < limit; i++ {
		it := &l.tx[(l.txHead+i)%len(l.tx)]
		if !it.cancelled || it.off > 0 {
			n += it.total - it.off
		}
	}
	return min(n, limit)
}

// advance accounts n written bytes against the queue's head items.
func (l *link) advance(n int, now int64) {
	for n > 0 && l.txN > 0 {
		it := &l.tx[l.txHead]
		if it.cancelled && it.off == 0 {
			l.pop()
			continue
		}
		left := it.total - it.off
		if n < left {
			it.off += n
			return
		}
		n -= left
		it.off = it.total
		q, kind, wqe := it.q, it.kind, it.wqe
		l.pop()
		if q != nil {
			q.onWritten(kind, wqe, now)
		}
	}
	for l.txN > 0 && l.tx[l.txHead].cancelled && l.tx[l.txHead].off == 0 {
		l.pop()
	}
}

func (l *link) pop() {
	it := &l.tx[l.txHead]
	it.q = nil
	for i := range it.segs {
		it.segs[i] = nil
	}
	l.txHead = (l.txHead + 1) % len(l.tx)
	if l.txN--; l.txN == 0 {
		l.port.bucket.wait(nowNS(), -1)
	}
}

func (l *link) armOut(on bool) {
	if on == l.outArmed || l.dead {
		return
	}
	l.outArmed = on
	ev := uint32(unix.EPOLLIN | unix.EPOLLRDHUP)
	if on {
		ev |= unix.EPOLLOUT
	}
	unix.EpollCtl(l.d.epfd, unix.EPOLL_CTL_MOD, l.fd, &unix.EpollEvent{Events: ev, Fd: int32(l.fd)})
}

// errLinkClosed is the error of a link the peer closed.
var errLinkClosed = errors.New("connection closed by peer")

// receive reads and handles what arrived, a bounded number of reads at a
// time so one busy link cannot starve the others. A read that returns less
// than it asked for has emptied the socket: receive stops there rather
// than ask again, which would almost always find nothing and cost a system
// call per message between the packet's arrival and its completion.
func (l *link) receive(now int64) {
	drained := false
	for budget := 16; budget > 0 && !l.dead; {
		if l.inPkt {
			if l.rhi > l.rlo {
				l.takeBuffered(now)
				continue
			}
			l.rlo, l.rhi = 0, 0
			if l.remaining >= directRead {
				if drained {
					return
				}
				n, asked, ok := l.readPayload(now)
				budget--
				if !ok {
					return
				}
				drained = n < asked
				continue
			}
		} else if l.rhi-l.rlo >= hdrSize {
			if !l.takeHeader(now) {
				return
			}
			continue
		}
		// Need more bytes in the buffer.
		if drained {
			return
		}
		n, asked, ok := l.fill(now)
		budget--
		if !ok {
			return
		}
		drained = n < asked
	}
}

// takeBuffered hands the packet's payload bytes in the receive buffer to
// their sink, and finishes the packet when they were its last.
func (l *link) takeBuffered(now int64) {
	n := l.rhi - l.rlo
	if n > l.remaining {
		n = l.remaining
	}
	l.consume(l.rbuf[l.rlo : l.rlo+n])
	l.rlo += n
	if l.remaining == 0 {
		l.inPkt = false
		l.d.finish(l, now)
	}
}

// readPayload reads the rest of a large packet's payload straight into
// its sink (or the trash, when discarded), without the receive buffer's
// copy. It returns the bytes read and asked for, and false when the
// socket had nothing (or the link failed).
func (l *link) readPayload(now int64) (n, asked int, ok bool) {
	dst := l.d.trash
	if !l.discard {
		dst = l.sink[l.si][l.so:]
	}
	if len(dst) > l.remaining {
		dst = dst[:l.remaining]
	}
	n, ok = l.read(dst, now)
	if !ok {
		return n, len(dst), false
	}
	l.remaining -= n
	if !l.discard {
		l.so += n
		l.normSink()
	}
	if l.remaining == 0 {
		l.inPkt = false
		l.d.finish(l, now)
	}
	return n, len(dst), true
}

// takeHeader decodes the packet header at the front of the receive buffer
// and begins the packet (a packet with no payload is finished at once).
// It returns false when the header was bad or the packet ended the link.
func (l *link) takeHeader(now int64) bool {
	d := l.d
	if err := l.h.decode(l.rbuf[l.rlo:]); err != nil {
		if l.auth != authDone {
			d.reject(l, fmt.Errorf("bad packet: %w", err), now)
		} else {
			d.linkFailed(l, fmt.Errorf("bad packet: %w", err), now)
		}
		return false
	}
	l.rlo += hdrSize
	d.stats.PacketsReceived++
	l.inPkt = true
	l.remaining = int(l.h.length)
	// Behind a large payload usually comes another: reading only
	// its header keeps the payload for a direct read into place.
	l.bigRun = l.remaining >= directRead
	l.nsink, l.si, l.so, l.discard = 0, 0, 0, false
	l.act = rxAction{}
	d.begin(l, now)
	if l.dead {
		return false
	}
	if l.remaining == 0 {
		l.inPkt = false
		d.finish(l, now)
	}
	return true
}

// fill reads more bytes into the receive buffer, after moving what is
// left to its front. It returns the bytes read and asked for, and false
// when the socket had nothing (or the link failed).
func (l *link) fill(now int64) (n, asked int, ok bool) {
	if l.rlo > 0 {
		copy(l.rbuf, l.rbuf[l.rlo:l.rhi])
		l.rhi -= l.rlo
		l.rlo = 0
	}
	room := l.rbuf[l.rhi:]
	switch {
	case l.inPkt && l.d.stats.ReadsOutstanding > 0:
		// A read response is due, most likely large: take this
		// packet's rest and the next header, no more, so that the
		// response's payload goes straight into place instead of
		// through this buffer (up to all of it, a copy more).
		room = room[:min(len(room), l.remaining+hdrSize)]
	case !l.inPkt && (l.bigRun || l.d.stats.ReadsOutstanding > 0):
		room = room[:hdrSize-(l.rhi-l.rlo)]
	}
	n, ok = l.read(room, now)
	if !ok {
		return n, len(room), false
	}
	l.rhi += n
	return n, len(room), true
}

// read does one non-blocking receive; ok is false when nothing came (or the
// link failed).
func (l *link) read(b []byte, now int64) (int, bool) {
	if len(b) == 0 {
		return 0, true
	}
	r, e := recvNB(l.fd, b)
	if e == unix.EAGAIN || e == unix.EINTR {
		l.d.stats.EmptyReads++
		return 0, false
	}
	if e != 0 {
		l.d.linkFailed(l, fmt.Errorf("read: %w", e), now)
		return 0, false
	}
	if r == 0 {
		l.d.linkFailed(l, errLinkClosed, now)
		return 0, false
	}
	wireRead()
	l.d.stats.Reads++
	l.d.stats.BytesReceived += int64(r)
	return r, true
}

// setSink points the current packet's payload at pre, then segs.
func (l *link) setSink(pre []byte, segs [][]byte) {
	l.nsink = 0
	if len(pre) > 0 {
		l.sink[0] = pre
		l.nsink = 1
	}
	for _, s := range segs {
		if len(s) > 0 {
			l.sink[l.nsink] = s
			l.nsink++
		}
	}
	l.si, l.so = 0, 0
}

func (l *link) normSink() {
	for l.si < l.nsink && l.so >= len(l.sink[l.si]) {
		l.si++
		l.so = 0
	}
}

// consume moves payload bytes from the link buffer into the sink.
func (l *link) consume(b []byte) {
	l.remaining -= len(b)
	if l.discard {
		return
	}
	for len(b) > 0 && l.si < l.nsink {
		n := copy(l.sink[l.si][l.so:], b)
		b = b[n:]
		l.so += n
		l.d.stats.StagedBytes += int64(n)
		l.normSink()
	}
}

// linkFailed closes a link and fails every QP that used it: for the QPs
// the wire is gone, as when an InfiniBand link fails and the transport
// retries run out.
func (d *Device) linkFailed(l *link, err error, now int64) {
	if l.dead {
		return
	}
	l.dead = true
	l.err = err
	d.stats.LinkFailures++
	l.pend.Done()
	unix.EpollCtl(d.epfd, unix.EPOLL_CTL_DEL, l.fd, nil)
	unix.Close(l.fd)
	delete(d.byFD, int32(l.fd))
	for i, x := range d.links {
		if x == l {
			d.links = append(d.links[:i], d.links[i+1:]...)
			break
		}
	}
	if l.auth == authDone {
		// A spare link left alone to the peer is read by every poll again.
		l.port.markSpares(l.peerGID, l.peerLID)
	}
	for l.txN > 0 {
		l.pop()
	}
	for _, q := range d.qps {
		if (q.out == l || q.in == l) && q.state != verbs.QPErr && q.state != verbs.QPReset {
			q.linkLost(fmt.Errorf("link %s:%d: %w", gidIP(l.peerGID), l.peerLID, err), now)
		}
	}
}
