package sm

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"github.com/gobtl/gobtl/core"
	"golang.org/x/sys/unix"
)

// cmaProbeMagic is the value of the word each rank lets its peers read to
// prove that CMA reaches it.
const cmaProbeMagic = 0x5a5ac0decafef00d

// cmaInfo says whether cross-memory attach works from this process.
type cmaInfo struct {
	ok   bool
	why  string  // why not, when !ok
	word *uint64 // a heap word holding cmaProbeMagic; kept alive here
}

func (c *cmaInfo) probeAddr() uint64 {
	if c.word == nil {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(c.word)))
}

// detectCMA decides at start whether process_vm_readv/writev can serve as
// RDMA. Three things stop it: the mechanism is switched off; Yama's
// ptrace_scope (1 lets only ancestors attach unless the target names a
// tracer, which PR_SET_PTRACER_ANY does for us as vader does; 3 forbids
// attaching at all); and a seccomp filter that refuses the system calls,
// as container runtimes' default profiles do without CAP_SYS_PTRACE (Open
// MPI issue #4948: vader trusted CMA there and failed at the first large
// message). The last is found by trying: reading our own probe word must
// work. Each peer is probed once more when it connects.
func detectCMA(mode string) cmaInfo {
	if mode == singleCopyNone {
		return cmaInfo{why: "single_copy = none"}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
		switch strings.TrimSpace(string(b)) {
		case "0", "2": // 2: CAP_SYS_PTRACE; the probes tell
		case "1":
			if err := unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0); err != nil {
				return cmaInfo{why: fmt.Sprintf("yama ptrace_scope is 1 and PR_SET_PTRACER failed: %v", err)}
			}
		default:
			return cmaInfo{why: "yama ptrace_scope is " + strings.TrimSpace(string(b)) + " (no process may attach)"}
		}
	}
	c := cmaInfo{word: new(uint64)}
	*c.word = cmaProbeMagic
	var got uint64
	if err := cmaRead(os.Getpid(), unsafe.Slice((*byte)(unsafe.Pointer(&got)), 8), c.probeAddr()); err != nil {
		return cmaInfo{why: fmt.Sprintf("process_vm_readv on this process: %v (a seccomp filter? CAP_SYS_PTRACE missing in a container?)", err)}
	}
	if got != cmaProbeMagic {
		return cmaInfo{why: "process_vm_readv read the wrong bytes"}
	}
	c.ok = true
	return c
}

// probe reads a peer's probe word.
func (c *cmaInfo) probe(pid int, addr, magic uint64) bool {
	if !c.ok || addr == 0 {
		return false
	}
	var got uint64
	err := cmaRead(pid, unsafe.Slice((*byte)(unsafe.Pointer(&got)), 8), addr)
	return err == nil && got == magic
}

// cmaRead copies len(dst) bytes at addr in process pid into dst.
func cmaRead(pid int, dst []byte, addr uint64) error { return cmaCopy(pid, dst, addr, false) }

// cmaWrite copies src into process pid at addr.
func cmaWrite(pid int, src []byte, addr uint64) error { return cmaCopy(pid, src, addr, true) }

// cmaCopy moves local to (write) or from (read) addr in process pid, going
// on where the kernel stops short (it may at a page it cannot pin).
func cmaCopy(pid int, local []byte, addr uint64, write bool) error {
	for len(local) > 0 {
		liov := [1]unix.Iovec{{Base: &local[0]}}
		liov[0].SetLen(len(local))
		riov := [1]unix.RemoteIovec{{Base: uintptr(addr), Len: len(local)}}
		var n int
		var err error
		if write {
			n, err = unix.ProcessVMWritev(pid, liov[:], riov[:], 0)
		} else {
			n, err = unix.ProcessVMReadv(pid, liov[:], riov[:], 0)
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return syscall.EFAULT
		}
		local, addr = local[n:], addr+uint64(n)
	}
	return nil
}

// region is registered memory. Registration costs nothing with CMA — the
// key is the owner's pid and the buffer's address — but the module keeps
// the buffer referenced until DeregisterMem, so that it stays put.
type region struct {
	buf []byte
	key core.MemKey
}

func (r *region) Key() core.MemKey { return r.key }
func (r *region) Bytes() []byte    { return r.buf }

var _ core.Registrar = (*Module)(nil)

// RegisterMem registers buf. Regions are recycled, so registering costs no
// allocation in steady state.
func (m *Module) RegisterMem(buf []byte, access core.Access) (core.Region, error) {
	if m.closed {
		return nil, fmt.Errorf("sm: register: %w", core.ErrClosed)
	}
	var r *region
	if n := len(m.rdma.regions); n > 0 {
		r, m.rdma.regions = m.rdma.regions[n-1], m.rdma.regions[:n-1]
	} else {
		r = new(region)
	}
	m.rdma.regGen++
	r.buf = buf
	r.key = core.MemKey{Len: uint64(len(buf)), Key: m.rdma.regGen, Aux: uint64(m.rdma.pid)}
	if len(buf) > 0 {
		r.key.Addr = uint64(uintptr(unsafe.Pointer(&buf[0])))
	}
	m.rdma.live = append(m.rdma.live, r)
	return r, nil
}

// DeregisterMem releases a registration.
func (m *Module) DeregisterMem(rg core.Region) error {
	r, ok := rg.(*region)
	if !ok || r.key.Aux != uint64(m.rdma.pid) {
		return fmt.Errorf("sm: deregister: not a region of this module")
	}
	for i, l := range m.rdma.live {
		if l == r {
			m.rdma.live[i] = m.rdma.live[len(m.rdma.live)-1]
			m.rdma.live[len(m.rdma.live)-1] = nil
			m.rdma.live = m.rdma.live[:len(m.rdma.live)-1]
			break
		}
	}
	r.buf, r.key = nil, core.MemKey{}
	m.rdma.regions = append(m.rdma.regions, r)
	return nil
}

// cmaErr wraps an error of a CMA call with rank p: a peer that is gone
// is lost, and the next Progress checks on it.
func (m *Module) cmaErr(p *peer, err error) error {
	if err == syscall.ESRCH {
		m.health.checkSoon = true
		return fmt.Errorf("sm: rank %d (pid %d) is gone: %w", p.rank, p.pid, core.ErrPeerLost)
	}
	return fmt.Errorf("sm: cma with rank %d: %w", p.rank, err)
}

// rdmaCompletion is a finished Put or Get waiting for Progress to report
// it: CMA copies synchronously, but completions run inside Progress.
type rdmaCompletion struct {
	op  *core.RDMAOp
	err error
}

// Get reads the peer's memory named by op.Remote at op.Offset into
// op.Local with one process_vm_readv.
func (p *peer) Get(op *core.RDMAOp) error { return p.rdma(op, false) }

// Put writes op.Local into the peer's memory with one process_vm_writev.
func (p *peer) Put(op *core.RDMAOp) error { return p.rdma(op, true) }

func (p *peer) rdma(op *core.RDMAOp, put bool) error {
	m := p.m
	if p.dead != nil {
		return p.dead
	}
	if !p.cma {
		return fmt.Errorf("sm: rank %d: no single-copy mechanism: %w", p.rank, core.ErrNotSupported)
	}
	k := op.Remote
	n := uint64(len(op.Local))
	if k.Aux != uint64(p.pid) {
		return fmt.Errorf("sm: memory key of pid %d used with rank %d (pid %d)", k.Aux, p.rank, p.pid)
	}
	if op.Offset > k.Len || n > k.Len-op.Offset {
		return fmt.Errorf("sm: %d bytes at offset %d outside the %d-byte region of rank %d", n, op.Offset, k.Len, p.rank)
	}
	if !put && p.coopStart(op) {
		return nil // progressGets reads it, and the peer may help
	}
	var err error
	if n > 0 {
		if put {
			err = cmaWrite(p.pid, op.Local, k.Addr+op.Offset)
		} else {
			err = cmaRead(p.pid, op.Local, k.Addr+op.Offset)
		}
	}
	switch {
	case err == nil:
		if put {
			m.st.cmaPuts++
		} else {
			m.st.cmaGets++
		}
		m.st.cmaBytes += n
	default:
		err = m.cmaErr(p, err)
	}
	m.rdma.done = append(m.rdma.done, rdmaCompletion{op, err})
	if op.Solicited {
		m.notifySelf()
	}
	return nil
}

// completeRDMA reports finished operations. Completers may start new ones,
// which land on the other list and wait for the next Progress.
func (m *Module) completeRDMA() int {
	done := m.rdma.done
	m.rdma.done = m.rdma.spare[:0]
	for i := range done {
		done[i].op.Done.RDMADone(done[i].op, done[i].err)
		done[i] = rdmaCompletion{}
	}
	m.rdma.spare = done[:0]
	return len(done)
}
