//go:build ofi && cgo

package ofi

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/btl/ofi/fabric"
	"github.com/gobtl/gobtl/core"
)

// RDMA operations in flight: a table of slots whose index is the
// operation's context, so that a completion finds its core.RDMAOp
// without a Go pointer ever handed to C.
type rdmaOps struct {
	slots []rdmaSlot
	free  []int32
	done  []*core.RDMAOp // zero-length operations, done at the next Progress
	tmp   []*core.RDMAOp
}

type rdmaSlot struct {
	op     *core.RDMAOp // nil: free, or failed already (orphan)
	peer   int32
	orphan bool // failed with its peer; the slot waits for the provider's completion
}

func (o *rdmaOps) init(n int) {
	o.slots = make([]rdmaSlot, n)
	o.free = make([]int32, n)
	for i := range o.free {
		o.free[i] = int32(n - 1 - i)
	}
}

func (o *rdmaOps) take(op *core.RDMAOp, peer int) int {
	n := len(o.free)
	if n == 0 {
		return -1
	}
	i := o.free[n-1]
	o.free = o.free[:n-1]
	o.slots[i] = rdmaSlot{op: op, peer: int32(peer)}
	return int(i)
}

func (o *rdmaOps) release(i int) {
	o.slots[i] = rdmaSlot{}
	o.free = append(o.free, int32(i))
}

// finish completes slot i (ce nil: success). An operation that failed
// because its peer could not be reached loses the peer; one refused by
// the target (a bad key, out of range) fails alone.
func (o *rdmaOps) finish(m *Module, i int, ce *fabric.CQError) {
	if i < 0 || i >= len(o.slots) {
		return
	}
	s := o.slots[i]
	o.release(i)
	if s.orphan || s.op == nil {
		return
	}
	var err error
	if ce != nil {
		err = fmt.Errorf("ofi: rdma with rank %d: %w", s.peer, ce)
		if p := m.peers[s.peer]; p != nil && unreachable(ce.Err) {
			p.lose(err)
			err = p.err
		}
	}
	if s.op.Done != nil {
		s.op.Done.RDMADone(s.op, err)
	}
}

// unreachable tells the errors of a peer gone from those of one
// operation.
func unreachable(e fabric.Errno) bool {
	switch unix.Errno(e) {
	case unix.ECONNREFUSED, unix.ECONNRESET, unix.ENOTCONN, unix.EPIPE, unix.EHOSTUNREACH, unix.ETIMEDOUT,
		unix.ENOENT, unix.ECONNABORTED, unix.ENETUNREACH, unix.EADDRNOTAVAIL:
		return true
	}
	return false
}

// drainDone completes the zero-length operations.
func (o *rdmaOps) drainDone(m *Module) int {
	if len(o.done) == 0 {
		return 0
	}
	o.tmp, o.done = o.done, o.tmp[:0]
	for _, op := range o.tmp {
		if op.Done != nil {
			op.Done.RDMADone(op, nil)
		}
	}
	n := len(o.tmp)
	clear(o.tmp)
	o.tmp = o.tmp[:0]
	return n
}

// failPeer fails rank's operations in flight with err; their slots stay
// taken until the provider completes them (the memory may still be in
// its hands).
func (o *rdmaOps) failPeer(m *Module, rank int, err error) {
	for i := range o.slots {
		s := &o.slots[i]
		if s.op == nil || s.orphan || int(s.peer) != rank {
			continue
		}
		op := s.op
		s.orphan = true
		if op.Done != nil {
			op.Done.RDMADone(op, err)
		}
	}
}

// The registration cache. The PML registers a message's buffer once per
// rendezvous; registering it with the provider each time costs a system
// call or more (fi_mr_reg, and pinning where the domain pins), so
// registrations outlive their use, keyed by the buffer, up to a bound in
// bytes, least recently used first out. Each holds its memory pinned
// (runtime.Pinner, in fabric.MR): Go does not free or move it while the
// provider may reach it, and a new buffer can never take a cached one's
// address — the failure libfabric's own cache, blind to Go's frees,
// would risk (it is off: fabric's doc).
type regCache struct {
	m          *Module
	max, bytes int64
	byBuf      map[regKey]*regEntry
	// idle entries, least recently used at head
	head, tail *regEntry
}

type regKey struct {
	base uintptr
	n    int
}

// regEntry is a registration: the core.Region the PML holds.
type regEntry struct {
	c          *regCache
	mr         *fabric.MR
	buf        []byte
	key        core.MemKey
	k          regKey
	refs       int
	prev, next *regEntry
}

// Key implements core.Region.
func (e *regEntry) Key() core.MemKey { return e.key }

// Bytes implements core.Region.
func (e *regEntry) Bytes() []byte { return e.buf }

// covers reports whether b lies within the registration.
func (e *regEntry) covers(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	p, base := uintptr(unsafe.Pointer(&b[0])), e.k.base
	return p >= base && p+uintptr(len(b)) <= base+uintptr(e.k.n)
}

func newRegCache(m *Module, max int64) *regCache {
	return &regCache{m: m, max: max, byBuf: map[regKey]*regEntry{}}
}

// access is what every registration allows: the local side of both
// operations and both remote ones, so that one entry serves a buffer
// whatever the PML registers it for (a rendezvous's keys go to the one
// peer it is with).
const access = fabric.AccessRead | fabric.AccessWrite | fabric.AccessRemRead | fabric.AccessRemWrite |
	fabric.AccessSend | fabric.AccessRecv

func (c *regCache) get(buf []byte, _ core.Access) (*regEntry, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("ofi: register an empty buffer")
	}
	k := regKey{uintptr(unsafe.Pointer(&buf[0])), len(buf)}
	if e := c.byBuf[k]; e != nil {
		if e.refs == 0 {
			c.unlink(e)
		}
		e.refs++
		c.m.st.regHits.Inc()
		return e, nil
	}
	c.m.st.regMisses.Inc()
	var mr *fabric.MR
	var err error
	for try := 0; try < 4; try++ {
		mr, err = c.m.ep.Register(buf, access, randomKey(c.m.ep))
		if err == nil || !errors.Is(err, fabric.ErrNoKey) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ofi: register %d bytes: %w", len(buf), err)
	}
	e := &regEntry{c: c, mr: mr, buf: buf, k: k, refs: 1,
		key: core.MemKey{Addr: mr.Base, Len: uint64(len(buf)), Key: mr.Key}}
	c.byBuf[k] = e
	c.bytes += int64(len(buf))
	c.evict()
	return e, nil
}

// put drops a reference; an unused entry stays for reuse.
func (c *regCache) put(e *regEntry) {
	e.refs--
	if e.refs > 0 {
		return
	}
	e.prev, e.next = c.tail, nil
	if c.tail != nil {
		c.tail.next = e
	} else {
		c.head = e
	}
	c.tail = e
	c.evict()
}

func (c *regCache) unlink(e *regEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

// evict deregisters idle entries, oldest first, while the cache holds
// more than its bound.
func (c *regCache) evict() {
	for c.bytes > c.max && c.head != nil {
		e := c.head
		c.unlink(e)
		c.drop(e)
	}
}

func (c *regCache) drop(e *regEntry) {
	delete(c.byBuf, e.k)
	c.bytes -= int64(len(e.buf))
	e.mr.Close()
	e.buf = nil
}

// closeAll deregisters everything (the endpoint closes next).
func (c *regCache) closeAll() {
	for _, e := range c.byBuf {
		c.drop(e)
	}
	c.head, c.tail = nil, nil
}
