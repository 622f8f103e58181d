package extoll

import (
	"fmt"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
)

// RegisterMem implements core.Registrar: the ATU entry for buf.
func (m *Module) RegisterMem(buf []byte, access core.Access) (core.Region, error) {
	r, err := m.dev.Register(buf, access)
	if err != nil {
		return nil, fmt.Errorf("extoll: %w", err)
	}
	return r, nil
}

// DeregisterMem implements core.Registrar.
func (m *Module) DeregisterMem(r core.Region) error { return m.dev.Deregister(r) }

// Put implements core.RDMA.
func (ep *endpoint) Put(op *core.RDMAOp) error {
	if err := ep.connect(); err != nil {
		return err
	}
	return ep.m.rma(ep.rank, op, true)
}

// Get implements core.RDMA.
func (ep *endpoint) Get(op *core.RDMAOp) error {
	if err := ep.connect(); err != nil {
		return err
	}
	return ep.m.rma(ep.rank, op, false)
}

func (m *Module) rma(rank int, op *core.RDMAOp, put bool) error {
	if err := m.lost[rank]; err != nil {
		return err
	}
	var cookie uint64
	if n := len(m.freeOps); n > 0 {
		cookie = m.freeOps[n-1]
		m.freeOps = m.freeOps[:n-1]
	} else {
		cookie = uint64(len(m.ops))
		m.ops = append(m.ops, nil)
	}
	m.ops[cookie] = op
	o := nic.Op{Local: op.Local, Remote: op.Remote, Offset: op.Offset, Cookie: cookie}
	var err error
	if put {
		err = m.dev.Put(rank, o)
	} else {
		err = m.dev.Get(rank, o)
	}
	if err != nil {
		m.ops[cookie] = nil
		m.freeOps = append(m.freeOps, cookie)
		return fmt.Errorf("extoll: %w", err)
	}
	return nil
}

// rmaProgress turns RMA notifications into completions.
func (m *Module) rmaProgress() int {
	n := 0
	for {
		note, ok := m.dev.PollNotification()
		if !ok {
			return n
		}
		n++
		if note.Kind != nic.OriginDone {
			m.targetNotes.Inc()
			continue
		}
		if note.Cookie >= uint64(len(m.ops)) || m.ops[note.Cookie] == nil {
			continue
		}
		op := m.ops[note.Cookie]
		m.ops[note.Cookie] = nil
		m.freeOps = append(m.freeOps, note.Cookie)
		err := note.Err
		if err != nil {
			err = fmt.Errorf("extoll: %w", err)
		}
		if op.Done != nil {
			op.Done.RDMADone(op, err)
		}
	}
}
