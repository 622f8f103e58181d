package ib

import (
	"fmt"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
)

// rdmaOps are the RDMA writes and reads in flight, in slots the WRID
// indexes, with a free list of slots.
type rdmaOps struct {
	ops     []opSlot
	freeOps []int32
}

// opSlot is an RDMA operation in flight.
type opSlot struct {
	op        *core.RDMAOp
	ep        *endpoint
	solicited bool
	put       bool
}

// Put writes op.Local into the peer's memory (RDMA write).
func (e *endpoint) Put(op *core.RDMAOp) error { return e.rdma(op, true) }

// Get reads the peer's memory into op.Local (RDMA read).
func (e *endpoint) Get(op *core.RDMAOp) error { return e.rdma(op, false) }

// rdma posts a write or read on the QP of the smallest queue, the one that
// carries control frames, so that a FIN sent after a write follows it.
func (e *endpoint) rdma(op *core.RDMAOp, put bool) error {
	m := e.m
	if err := e.usable(); err != nil {
		return err
	}
	v, ok := op.Region.(*regView)
	if !ok {
		return fmt.Errorf("ib %s: RDMA with a region this module did not register (%T)", m.id, op.Region)
	}
	lkey, ok := v.lkeyFor(op.Local)
	if !ok {
		return fmt.Errorf("ib %s: RDMA local buffer outside its region", m.id)
	}
	if op.Offset > op.Remote.Len || uint64(len(op.Local)) > op.Remote.Len-op.Offset {
		return fmt.Errorf("ib %s: RDMA of %d bytes at offset %d beyond the peer's %d-byte region", m.id, len(op.Local), op.Offset, op.Remote.Len)
	}
	if e.out[0] >= m.cfg.sendQueue {
		return errSQFull
	}
	slot := m.newOp(opSlot{op: op, ep: e, solicited: op.Solicited, put: put})
	wr := &m.swr
	wr.WRID = wridRDMA | uint64(slot)
	wr.Opcode = verbs.OpRDMARead
	if put {
		wr.Opcode = verbs.OpRDMAWrite
	}
	wr.Flags = verbs.SendSignaled
	wr.SG = m.sg[:0]
	if len(op.Local) > 0 {
		m.sg[0] = verbs.SGE{Addr: verbs.AddrOf(op.Local), Length: uint32(len(op.Local)), LKey: lkey}
		wr.SG = m.sg[:1]
	}
	wr.RemoteAddr, wr.RKey = op.Remote.Addr+op.Offset, uint32(op.Remote.Key)
	if op.Solicited && m.armed && m.armSolicitedOnly {
		// Verbs raise solicited events for receives only: a CQ armed for
		// them would sleep through this completion. Re-armed before the
		// post, not after: the operation may complete (on the device's
		// own thread) before PostSend returns, and an arm after its
		// completion waits for the next one — a progress thread asleep on
		// the CQ then never woke (the conformance suite's solicited RDMA
		// notification, 3 in 360 race runs).
		m.armSolicitedOnly = false
		if err := m.cq.ReqNotify(false); err != nil {
			m.log.Warn().Err(err).Msg("re-arm CQ")
		}
	}
	if err := e.qps[0].PostSend(wr); err != nil {
		m.freeOp(slot)
		return fmt.Errorf("ib %s: post RDMA to peer %d: %w", m.id, e.rank, err)
	}
	e.out[0]++
	if op.Solicited {
		m.solicitedOps++
	}
	if put {
		m.puts.Inc()
	} else {
		m.gets.Inc()
	}
	m.rdmaBytes.Add(int64(len(op.Local)))
	return nil
}

func (m *module) newOp(s opSlot) int {
	if n := len(m.freeOps); n > 0 {
		i := m.freeOps[n-1]
		m.freeOps = m.freeOps[:n-1]
		m.ops[i] = s
		return int(i)
	}
	m.ops = append(m.ops, s)
	return len(m.ops) - 1
}

func (m *module) freeOp(i int) {
	m.ops[i] = opSlot{}
	m.freeOps = append(m.freeOps, int32(i))
}
