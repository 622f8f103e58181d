package softnic

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
)

// att is the address-translation table: registered memory by key.
type att struct {
	mu      sync.RWMutex
	regions map[uint64]*region
}

type region struct {
	buf    []byte
	key    core.MemKey
	access core.Access
	index  int // entry in the shared table, -1 if none
}

func (r *region) Key() core.MemKey { return r.key }
func (r *region) Bytes() []byte    { return r.buf }

func (a *att) init() { a.regions = map[uint64]*region{} }

// Status codes of an RMA response.
const (
	rmaOK uint8 = iota
	rmaBadKey
	rmaBounds
	rmaAccess
	rmaBye      // the target is shutting down
	rmaMismatch // the shared table's entry is not the region the key names
)

var rmaStatusText = [...]string{"ok", "unknown key", "out of bounds", "access denied", "target closed",
	"the shared translation table's entry does not match the key's region"}

func (a *att) lookup(key, off, n uint64, need core.Access) (*region, uint8) {
	a.mu.RLock()
	r := a.regions[key]
	a.mu.RUnlock()
	switch {
	case r == nil:
		return nil, rmaBadKey
	case off > uint64(len(r.buf)) || n > uint64(len(r.buf))-off:
		return nil, rmaBounds
	case r.access&need != need:
		return nil, rmaAccess
	}
	return r, rmaOK
}

// Register enters buf into the address-translation table.
func (d *Device) Register(buf []byte, access core.Access) (core.Region, error) {
	if d.closed.Load() {
		return nil, fmt.Errorf("softnic: register: %w", core.ErrClosed)
	}
	var kb [8]byte
	d.att.mu.Lock()
	defer d.att.mu.Unlock()
	for {
		rand.Read(kb[:])
		k := binary.LittleEndian.Uint64(kb[:]) &^ (1<<(keyIndexBits+1) - 1)
		if k == 0 || d.att.regions[k] != nil {
			continue
		}
		r := &region{buf: buf, access: access, index: -1}
		// Published in the shared table too, when it has room: then peers
		// on the host can check the key themselves and copy directly.
		if d.satt != nil {
			if i := d.satt.free; len(i) > 0 {
				idx := i[len(i)-1]
				k |= uint64(idx)<<1 | keyInTable
				if d.att.regions[k] != nil {
					continue
				}
				r.index = d.satt.publish(k, buf, access)
			}
		}
		r.key = core.MemKey{Len: uint64(len(buf)), Key: k, Aux: uint64(d.cfg.Rank)}
		if len(buf) > 0 {
			r.key.Addr = uint64(uintptr(unsafe.Pointer(&buf[0])))
		}
		d.att.regions[k] = r
		return r, nil
	}
}

// Deregister removes a registration. Operations already moving data finish.
func (d *Device) Deregister(r core.Region) error {
	rr, ok := r.(*region)
	if !ok {
		return fmt.Errorf("softnic: deregister: not a softnic region")
	}
	d.att.mu.Lock()
	defer d.att.mu.Unlock()
	if d.att.regions[rr.key.Key] != rr {
		return fmt.Errorf("softnic: deregister: key %#x is not registered", rr.key.Key)
	}
	delete(d.att.regions, rr.key.Key)
	if rr.index >= 0 && d.satt != nil {
		d.satt.remove(rr.index)
	}
	return nil
}

// PollNotification returns the next RMA notification.
func (d *Device) PollNotification() (nic.Notification, bool) { return d.notes.pop() }

// Put writes op.Local into dst's registered memory.
func (d *Device) Put(dst int, op nic.Op) error { return d.issue(dst, opPut, op) }

// Get reads dst's registered memory into op.Local.
func (d *Device) Get(dst int, op nic.Op) error { return d.issue(dst, opGet, op) }

const (
	opPut = 1
	opGet = 2

	rmaAck    = 0x4b43414d52584521 // the engine's answer to a hello
	reqBytes  = 40                 // op, notify, pad[6], key, offset, length, cookie
	respBytes = 24                 // status, pad[7], cookie, length
)

type rmaReq struct {
	op uint8
	o  nic.Op
}

// rmaConn is the origin side of one RMA connection: requests (and Put
// data) are written by the caller, and a reader goroutine takes the
// responses, in order, and turns them into notifications — the card's DMA
// engine.
type rmaConn struct {
	d    *Device
	rank int
	c    net.Conn

	wmu sync.Mutex // serialises request writes
	hdr [reqBytes]byte

	mu      sync.Mutex
	pending []rmaReq // issued, awaiting their responses, in order
	dead    atomic.Bool
	bye     atomic.Bool
}

// maxOutstanding bounds the operations in flight on one connection.
const maxOutstanding = 256

func (rc *rmaConn) isDead() bool { return rc.dead.Load() }

func (d *Device) issue(dst, kind int, op nic.Op) error {
	if uint64(len(op.Local)) > op.Remote.Len || op.Offset > op.Remote.Len-uint64(len(op.Local)) {
		return fmt.Errorf("softnic: rma to rank %d: %d bytes at offset %d exceed the %d-byte region", dst, len(op.Local), op.Offset, op.Remote.Len)
	}
	p, err := d.peer(dst)
	if err != nil {
		return err
	}
	if op.Notify&nic.NotifyTarget == 0 && p.addr.Host == d.addr.Host && d.cfg.Transport != TCP {
		if err := d.cma(dst, p, kind, op); !errors.Is(err, errNoCMA) {
			return err
		}
	}
	rc, err := d.rmaTo(dst, p)
	if err != nil {
		return err
	}
	return rc.send(rmaReq{op: uint8(kind), o: op})
}

// send writes a request. A write that fails kills the connection, which
// completes the operation with the error.
func (rc *rmaConn) send(r rmaReq) error {
	rc.wmu.Lock()
	defer rc.wmu.Unlock()
	rc.mu.Lock()
	switch {
	case rc.dead.Load():
		rc.mu.Unlock()
		return fmt.Errorf("softnic: rma to rank %d: %w", rc.rank, core.ErrPeerLost)
	case len(rc.pending) >= maxOutstanding:
		rc.mu.Unlock()
		return fmt.Errorf("softnic: rma to rank %d: %d operations outstanding: %w", rc.rank, maxOutstanding, core.ErrNoResources)
	}
	rc.pending = append(rc.pending, r)
	rc.mu.Unlock()
	h := rc.hdr[:]
	h[0], h[1] = r.op, uint8(r.o.Notify)
	binary.LittleEndian.PutUint64(h[8:], r.o.Remote.Key)
	binary.LittleEndian.PutUint64(h[16:], r.o.Offset)
	binary.LittleEndian.PutUint64(h[24:], uint64(len(r.o.Local)))
	binary.LittleEndian.PutUint64(h[32:], r.o.Cookie)
	_, err := rc.c.Write(h)
	if err == nil && r.op == opPut {
		_, err = rc.c.Write(r.o.Local)
	}
	if err != nil {
		rc.die(err)
	}
	return nil
}

func (d *Device) rmaTo(rank int, p *peer) (*rmaConn, error) {
	if p.rma != nil {
		return p.rma, nil
	}
	network, addr := "tcp", p.addr.RMATCP
	if p.addr.Host == d.addr.Host && d.cfg.Transport != TCP {
		network, addr = "unix", p.addr.RMAUnix
	}
	c, err := net.DialTimeout(network, addr, d.cfg.ConnectTimeout)
	if err != nil {
		return nil, fmt.Errorf("softnic: rma connect rank %d: %w", rank, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if err := d.writeHello(c, helloRMA, rank); err != nil {
		c.Close()
		return nil, fmt.Errorf("softnic: rma connect rank %d: %w", rank, err)
	}
	// Wait for the engine's acknowledgement: from then on the target knows
	// the connection and says goodbye on it when it closes, so that a
	// reset means death.
	var ack [8]byte
	c.SetReadDeadline(time.Now().Add(d.cfg.ConnectTimeout))
	_, err = io.ReadFull(c, ack[:])
	c.SetReadDeadline(time.Time{})
	if err != nil || binary.LittleEndian.Uint64(ack[:]) != rmaAck {
		c.Close()
		return nil, fmt.Errorf("softnic: rma connect rank %d: no acknowledgement (%v)", rank, err)
	}
	rc := &rmaConn{d: d, rank: rank, c: c, pending: make([]rmaReq, 0, 16)}
	p.rma = rc
	d.wg.Add(1)
	go rc.reader()
	return rc, nil
}

func (rc *rmaConn) reader() {
	defer rc.d.wg.Done()
	var h [respBytes]byte
	for {
		if _, err := io.ReadFull(rc.c, h[:]); err != nil {
			rc.die(err)
			return
		}
		status := h[0]
		if status == rmaBye {
			rc.bye.Store(true)
			rc.die(errors.New("target closed"))
			return
		}
		rc.mu.Lock()
		if len(rc.pending) == 0 {
			rc.mu.Unlock()
			rc.die(errors.New("response without a request"))
			return
		}
		r := rc.pending[0]
		left := copy(rc.pending, rc.pending[1:])
		rc.pending[left] = rmaReq{}
		rc.pending = rc.pending[:left]
		rc.mu.Unlock()
		n := binary.LittleEndian.Uint64(h[16:])
		var err error
		switch {
		case binary.LittleEndian.Uint64(h[8:]) != r.o.Cookie:
			rc.die(errors.New("responses out of order"))
			return
		case status != rmaOK:
			text := "bad status"
			if int(status) < len(rmaStatusText) {
				text = rmaStatusText[status]
			}
			err = fmt.Errorf("softnic: rma %s at rank %d, key %#x: %s", opName(r.op), rc.rank, r.o.Remote.Key, text)
		case r.op == opGet:
			if n != uint64(len(r.o.Local)) {
				rc.die(errors.New("get response of the wrong length"))
				return
			}
			if _, e := io.ReadFull(rc.c, r.o.Local); e != nil {
				rc.pushBack(r)
				rc.die(e)
				return
			}
		}
		rc.d.complete(rc.rank, r, err)
	}
}

func (rc *rmaConn) pushBack(r rmaReq) {
	rc.mu.Lock()
	rc.pending = append([]rmaReq{r}, rc.pending...)
	rc.mu.Unlock()
}

// die fails every outstanding operation and, unless the target said
// goodbye or we are closing, reports the peer lost.
func (rc *rmaConn) die(cause error) {
	rc.mu.Lock()
	first := !rc.dead.Swap(true)
	pend := rc.pending
	rc.pending = nil
	rc.mu.Unlock()
	if !first {
		return
	}
	rc.c.Close()
	err := fmt.Errorf("softnic: rma to rank %d: %v: %w", rc.rank, cause, core.ErrPeerLost)
	for _, r := range pend {
		rc.d.complete(rc.rank, r, err)
	}
	if !rc.bye.Load() && !rc.d.closed.Load() {
		rc.d.fail(rc.rank, err)
	}
}

func (rc *rmaConn) close() {
	rc.bye.Store(true)
	rc.die(core.ErrClosed)
}

func (d *Device) complete(rank int, r rmaReq, err error) {
	d.notes.push(nic.Notification{Kind: nic.OriginDone, Peer: rank, Cookie: r.o.Cookie, Len: len(r.o.Local), Err: err})
}

func opName(op uint8) string {
	if op == opPut {
		return "put"
	}
	return "get"
}

// rmaEngine serves one peer's RMA requests on this process's memory.
func (d *Device) rmaEngine(c net.Conn, sv *served) {
	src, err := d.readHello(c, sv, helloRMA)
	if err != nil {
		return
	}
	wmu := &sv.mu
	var ack [8]byte
	binary.LittleEndian.PutUint64(ack[:], rmaAck)
	wmu.Lock()
	_, err = c.Write(ack[:])
	wmu.Unlock()
	if err != nil {
		return
	}
	var h [reqBytes]byte
	var resp [respBytes]byte
	for {
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return
		}
		op, notify := h[0], nic.Notify(h[1])
		key := binary.LittleEndian.Uint64(h[8:])
		off := binary.LittleEndian.Uint64(h[16:])
		n := binary.LittleEndian.Uint64(h[24:])
		cookie := binary.LittleEndian.Uint64(h[32:])
		var r *region
		var status uint8
		var kind nic.NotifyKind
		switch op {
		case opGet:
			r, status = d.att.lookup(key, off, n, core.AccessRemoteRead)
			kind = nic.TargetGet
		case opPut:
			r, status = d.att.lookup(key, off, n, core.AccessRemoteWrite)
			kind = nic.TargetPut
			var err error
			if status == rmaOK {
				_, err = io.ReadFull(c, r.buf[off:off+n])
			} else {
				_, err = io.CopyN(io.Discard, c, int64(n))
			}
			if err != nil {
				return
			}
		default:
			return
		}
		resp[0] = status
		binary.LittleEndian.PutUint64(resp[8:], cookie)
		if status == rmaOK && op == opGet {
			binary.LittleEndian.PutUint64(resp[16:], n)
		} else {
			binary.LittleEndian.PutUint64(resp[16:], 0)
		}
		wmu.Lock()
		_, err := c.Write(resp[:])
		if err == nil && status == rmaOK && op == opGet {
			_, err = c.Write(r.buf[off : off+n])
		}
		wmu.Unlock()
		if err != nil {
			return
		}
		if status == rmaOK && notify&nic.NotifyTarget != 0 {
			d.notes.push(nic.Notification{Kind: kind, Peer: src, Key: key, Len: int(n)})
		}
	}
}

// sayBye tells the origins of every served RMA connection that this
// process is closing, so they do not take it for dead, and shuts the
// connection for writing; the engine ends when the origin hangs up.
func (d *Device) sayBye() {
	var resp [respBytes]byte
	resp[0] = rmaBye
	d.accepted.Range(func(k, v any) bool {
		c, sv := k.(net.Conn), v.(*served)
		if !sv.rma {
			return true
		}
		sv.mu.Lock()
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.Write(resp[:])
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		sv.mu.Unlock()
		return true
	})
}
