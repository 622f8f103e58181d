package softnic

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
)

// On one host the RMA engine needs no connection: the address-translation
// table is published in shared memory, and the origin checks the key
// against it and moves the data itself with one process_vm_readv or
// process_vm_writev — a single copy that the target process does not take
// part in, as the card's RMA unit (or LiMIC, seed 003 §3) would do it.
// Operations that ask for a target notification, peers on other hosts,
// and hosts that forbid cross-memory attach (ptrace rules, containers) go
// through the RMA engine's socket instead.
//
// Table layout: a 64-byte header (magic, owner pid) then attEntries
// entries of 48 bytes (seq, key, address, length, access), each written
// under a sequence lock: seq is odd while the owner writes it. A key with
// bit 0 set has an entry, whose index is in bits 1–12.

const (
	attEntries   = 4096
	attEntrySize = 48
	attHeader    = 64
	attMagic     = 0x7474616c6c6f7478 // "xtollatt"
	keyInTable   = 1
	keyIndexBits = 12
)

func attSize() int { return attHeader + attEntries*attEntrySize }

func attWord(mem []byte, i, field int) *uint64 {
	return (*uint64)(unsafe.Pointer(&mem[attHeader+i*attEntrySize+8*field]))
}

// sharedATT is this process's published table.
type sharedATT struct {
	mem  []byte
	path string
	free []int
}

func openSharedATT(dir, prefix string) (*sharedATT, error) {
	mem, path, err := createMapping(dir, prefix, ".att", attSize())
	if err != nil {
		return nil, err
	}
	t := &sharedATT{mem: mem, path: path}
	*(*uint64)(unsafe.Pointer(&mem[8])) = uint64(os.Getpid())
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&mem[0])), attMagic)
	for i := attEntries - 1; i >= 0; i-- {
		t.free = append(t.free, i)
	}
	return t, nil
}

// publish enters a registration and returns its index, or -1 when the
// table is full.
func (t *sharedATT) publish(key uint64, buf []byte, access core.Access) int {
	if len(t.free) == 0 {
		return -1
	}
	i := t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	var addr uint64
	if len(buf) > 0 {
		addr = uint64(uintptr(unsafe.Pointer(&buf[0])))
	}
	t.write(i, key, addr, uint64(len(buf)), uint64(access))
	return i
}

func (t *sharedATT) remove(i int) {
	t.write(i, 0, 0, 0, 0)
	t.free = append(t.free, i)
}

func (t *sharedATT) write(i int, key, addr, n, access uint64) {
	seq := attWord(t.mem, i, 0)
	atomic.AddUint64(seq, 1) // odd: being written
	atomic.StoreUint64(attWord(t.mem, i, 1), key)
	atomic.StoreUint64(attWord(t.mem, i, 2), addr)
	atomic.StoreUint64(attWord(t.mem, i, 3), n)
	atomic.StoreUint64(attWord(t.mem, i, 4), access)
	atomic.AddUint64(seq, 1)
}

func (t *sharedATT) close() {
	unmap(t.mem)
	os.Remove(t.path)
}

// readATT reads entry i of a peer's table consistently.
func readATT(mem []byte, i int) (key, addr, n uint64, access core.Access) {
	for {
		s1 := atomic.LoadUint64(attWord(mem, i, 0))
		if s1&1 != 0 {
			continue
		}
		key = atomic.LoadUint64(attWord(mem, i, 1))
		addr = atomic.LoadUint64(attWord(mem, i, 2))
		n = atomic.LoadUint64(attWord(mem, i, 3))
		access = core.Access(atomic.LoadUint64(attWord(mem, i, 4)))
		if atomic.LoadUint64(attWord(mem, i, 0)) == s1 {
			return
		}
	}
}

// errNoCMA sends an operation the socket way.
var errNoCMA = errors.New("no cross-memory attach")

// mapATT maps the peer's address-translation table; a table that cannot
// be mapped, or is not the peer's (another owner, another pid), rules
// cross-memory attach to the peer out.
func mapATT(p *peer) bool {
	mem, err := openMapping(p.addr.ATT, attSize())
	if err != nil || atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[0]))) != attMagic ||
		*(*uint64)(unsafe.Pointer(&mem[8])) != uint64(p.addr.Pid) {
		if err == nil {
			unmap(mem)
		}
		p.cma = -1
		return false
	}
	p.att = mem
	return true
}

// cma moves op by cross-memory attach and queues its completion; errNoCMA
// means it must go through the socket.
func (d *Device) cma(dst int, p *peer, kind int, op nic.Op) error {
	if p.cma < 0 || p.addr.ATT == "" || p.addr.Pid <= 0 || op.Remote.Key&keyInTable == 0 {
		return errNoCMA
	}
	if p.att == nil && !mapATT(p) {
		return errNoCMA
	}
	i := int(op.Remote.Key>>1) & (attEntries - 1)
	key, addr, n, access := readATT(p.att, i)
	need := core.AccessRemoteRead
	if kind == opPut {
		need = core.AccessRemoteWrite
	}
	status := rmaOK
	switch {
	case key != op.Remote.Key:
		status = rmaBadKey
	case addr != op.Remote.Addr || n != op.Remote.Len:
		// The entry is the target's; the key is what the target said it
		// registered. They agree, or neither is used: an address from
		// the table alone would let whoever wrote it aim our copy.
		status = rmaMismatch
	case op.Offset > n || uint64(len(op.Local)) > n-op.Offset:
		status = rmaBounds
	case access&need != need:
		status = rmaAccess
	}
	var err error
	if status != rmaOK {
		err = fmt.Errorf("softnic: rma %s at rank %d, key %#x: %s", opName(uint8(kind)), dst, op.Remote.Key, rmaStatusText[status])
	} else if err = d.copyCMA(p.addr.Pid, kind, op.Local, addr+op.Offset); errors.Is(err, errNoCMA) {
		p.cma = -1
		return errNoCMA
	} else if err != nil {
		err = fmt.Errorf("softnic: rma %s at rank %d: %w", opName(uint8(kind)), dst, err)
	}
	p.cma = 1
	d.cmaOps.Inc()
	d.notes.push(nic.Notification{Kind: nic.OriginDone, Peer: dst, Cookie: op.Cookie, Len: len(op.Local), Err: err})
	return nil
}

// copyCMA copies between local and pid's memory at remote, in as many
// calls as the kernel needs.
func (d *Device) copyCMA(pid, kind int, local []byte, remote uint64) error {
	for done := 0; done < len(local); {
		l := []unix.Iovec{{Base: &local[done]}}
		l[0].SetLen(len(local) - done)
		r := []unix.RemoteIovec{{Base: uintptr(remote) + uintptr(done), Len: len(local) - done}}
		var n int
		var err error
		if kind == opGet {
			n, err = unix.ProcessVMReadv(pid, l, r, 0)
		} else {
			n, err = unix.ProcessVMWritev(pid, l, r, 0)
		}
		switch {
		case errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS):
			if done == 0 {
				return errNoCMA
			}
			return err
		case errors.Is(err, unix.ESRCH):
			return fmt.Errorf("process %d is gone: %w", pid, core.ErrPeerLost)
		case err != nil:
			return err
		case n == 0:
			return fmt.Errorf("cross-memory copy made no progress")
		}
		done += n
	}
	return nil
}
