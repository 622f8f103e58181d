package ib

import (
	"fmt"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
)

// opSlot is an RDMA operation in flight, in the send side's slots that
// the WRID indexes.
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

// rdma posts a write or read once the connection is up.
func (e *endpoint) rdma(op *core.RDMAOp, put bool) error {
	if err := e.usable(); err != nil {
		return err
	}
	return e.m.tx.rdma(e, op, put)
}

// rdma posts a write or read on the QP of the smallest queue, the one that
// carries control frames, so that a FIN sent after a write follows it.
func (s *sendSide) rdma(e *endpoint, op *core.RDMAOp, put bool) error {
	v, ok := op.Region.(*regView)
	if !ok {
		return fmt.Errorf("ib %s: RDMA with a region this module did not register (%T)", s.id, op.Region)
	}
	lkey, ok := v.lkeyFor(op.Local)
	if !ok {
		return fmt.Errorf("ib %s: RDMA local buffer outside its region", s.id)
	}
	if op.Offset > op.Remote.Len || uint64(len(op.Local)) > op.Remote.Len-op.Offset {
		return fmt.Errorf("ib %s: RDMA of %d bytes at offset %d beyond the peer's %d-byte region", s.id, len(op.Local), op.Offset, op.Remote.Len)
	}
	if e.tx.out[0] >= s.depth {
		return errSQFull
	}
	slot := s.newOp(opSlot{op: op, ep: e, solicited: op.Solicited, put: put})
	wr := &s.wr
	wr.WRID = wridRDMA | uint64(slot)
	wr.Opcode = verbs.OpRDMARead
	if put {
		wr.Opcode = verbs.OpRDMAWrite
	}
	wr.Flags = verbs.SendSignaled
	wr.SG = s.sg[:0]
	if len(op.Local) > 0 {
		s.sg[0] = verbs.SGE{Addr: verbs.AddrOf(op.Local), Length: uint32(len(op.Local)), LKey: lkey}
		wr.SG = s.sg[:1]
	}
	wr.RemoteAddr, wr.RKey = op.Remote.Addr+op.Offset, uint32(op.Remote.Key)
	if op.Solicited {
		if err := s.cq.beforeSolicited(); err != nil {
			s.log.Warn().Err(err).Msg("re-arm CQ")
		}
	}
	if err := e.qps[0].PostSend(wr); err != nil {
		s.freeOp(slot)
		return fmt.Errorf("ib %s: post RDMA to peer %d: %w", s.id, e.rank, err)
	}
	e.tx.out[0]++
	if op.Solicited {
		s.cq.solicitedOps++
	}
	if put {
		s.st.puts.Inc()
	} else {
		s.st.gets.Inc()
	}
	s.st.rdmaBytes.Add(int64(len(op.Local)))
	return nil
}

// rdmaDone takes back the slot of an RDMA completion.
func (s *sendSide) rdmaDone(idx int) opSlot {
	o := s.ops[idx]
	s.freeOp(idx)
	o.ep.tx.out[0]--
	s.completed++
	if o.solicited {
		s.cq.solicitedOps--
	}
	return o
}

func (s *sendSide) newOp(o opSlot) int {
	if n := len(s.free); n > 0 {
		i := s.free[n-1]
		s.free = s.free[:n-1]
		s.ops[i] = o
		return int(i)
	}
	s.ops = append(s.ops, o)
	return len(s.ops) - 1
}

func (s *sendSide) freeOp(i int) {
	s.ops[i] = opSlot{}
	s.free = append(s.free, int32(i))
}
