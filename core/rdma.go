package core

import (
	"encoding/binary"
	"fmt"
)

// The RDMA set: one-sided Put and Get on the endpoints (RDMA) and the
// module's registration of the memory they touch (Registrar), the pair
// libfabric calls FI_RMA with its memory regions and verbs an RC QP with
// its MRs. A module offers both or neither: the PML takes an endpoint's
// Put and Get only from a module that registers, and the conformance suite
// fails an RDMA endpoint whose module does not. A transport that needs no
// registration (shared memory by CMA, a process's own memory) registers
// all the same, handing out keys that name the memory its way.
//
// Whether a module offers the set may depend on its configuration or its
// device (btl "inproc" with rdma = false, sm without CMA, a libfabric
// provider without FI_RMA): such a module hands out endpoints of a type
// without Put and Get. The usual shape is a base endpoint type and an RDMA
// one that embeds it and adds Put and Get (inproc); a transport whose hot
// path cannot afford the promoted methods' wrappers gives the full type to
// the RDMA case and a forwarding one to the other (sm).

// MemKeySize is the wire size of a MemKey.
const MemKeySize = 32

// MemKey names registered memory so that a peer can reach it with a Put or
// a Get. Its meaning belongs to the transport that issued it (an rkey and a
// virtual address, a process id for CMA, a slot in a table).
type MemKey struct {
	Addr uint64 // base address or offset as the transport defines it
	Len  uint64 // bytes registered
	Key  uint64 // the remote key
	Aux  uint64 // transport-specific (process id, segment id, ...)
}

// Encode writes k into b, which must hold MemKeySize bytes.
func (k MemKey) Encode(b []byte) {
	_ = b[MemKeySize-1]
	binary.LittleEndian.PutUint64(b[0:], k.Addr)
	binary.LittleEndian.PutUint64(b[8:], k.Len)
	binary.LittleEndian.PutUint64(b[16:], k.Key)
	binary.LittleEndian.PutUint64(b[24:], k.Aux)
}

// DecodeMemKey reads a MemKey from b.
func DecodeMemKey(b []byte) (MemKey, error) {
	if len(b) < MemKeySize {
		return MemKey{}, fmt.Errorf("memory key: %d bytes, want %d: %w", len(b), MemKeySize, ErrBadFrame)
	}
	return MemKey{
		Addr: binary.LittleEndian.Uint64(b[0:]),
		Len:  binary.LittleEndian.Uint64(b[8:]),
		Key:  binary.LittleEndian.Uint64(b[16:]),
		Aux:  binary.LittleEndian.Uint64(b[24:]),
	}, nil
}

// Access says what a registration allows.
type Access uint8

const (
	// AccessLocalWrite lets the local device write the memory (Get target).
	AccessLocalWrite Access = 1 << iota
	// AccessRemoteRead lets peers Get from the memory.
	AccessRemoteRead
	// AccessRemoteWrite lets peers Put into the memory.
	AccessRemoteWrite
)

// Region is registered memory.
type Region interface {
	// Key is what a peer needs to reach the memory.
	Key() MemKey
	// Bytes is the registered memory.
	Bytes() []byte
}

// Registrar is the module's half of the RDMA set: every module whose
// endpoints implement RDMA implements it. The memory must stay reachable
// and unmoved until Deregister; Go's heap does not move objects, and the
// module keeps a reference.
type Registrar interface {
	// RegisterMem registers buf for the given access.
	RegisterMem(buf []byte, access Access) (Region, error)
	// DeregisterMem releases a registration.
	DeregisterMem(r Region) error
}

// Completer is told when a Put or Get finishes.
type Completer interface {
	// RDMADone runs inside Progress (or an armed event drain) on the
	// initiator. err is nil on success.
	RDMADone(op *RDMAOp, err error)
}

// RDMAOp describes one Put or Get. The initiator owns it until RDMADone.
type RDMAOp struct {
	// Local is the local side: the source of a Put, the destination of a
	// Get. It lies within Region.
	Local []byte
	// Region is the local registration covering Local, made with the
	// module's Registrar.
	Region Region
	// Remote names the peer's memory; Offset is where in it to start.
	Remote MemKey
	Offset uint64
	// Solicited asks for a solicited event when this operation completes
	// locally, waking an armed Notifier (seed 004 §4.3).
	Solicited bool
	// Done is told of completion.
	Done Completer
	// Cookie is the initiator's own bookkeeping; modules never touch it.
	Cookie uint64
}

// RDMA is the endpoint's half of the RDMA set: an endpoint that
// implements it does both, and its module implements Registrar. A
// returned error means the operation did not start; ErrNoResources means
// retry after Progress.
type RDMA interface {
	// Put writes op.Local into the peer's memory (RDMA write).
	Put(op *RDMAOp) error
	// Get reads the peer's memory into op.Local (RDMA read).
	Get(op *RDMAOp) error
}
