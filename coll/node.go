package coll

import (
	"context"
	"errors"
	"fmt"
)

// A node component serves the collectives of a communicator through the
// memory its ranks share on a node — flags and buffers in one segment per
// node, the network part between the nodes' leaders — as Open MPI's
// coll/sm, coll/xhc and HAN's intra-node level do beside coll/tuned. Its
// package (coll/shm) implements NodeComponent; a Tuning names it (Node),
// and the decision picks it by the name "shm": forced in the coll block
// (`coll { allreduce = "shm" }`) or, where the ranks own their cores
// (Machine.OwnCore), by nodeRule.
// Only the blocking collectives take it; the non-blocking ones, whose
// requests any wait advances, keep the point-to-point schedules.

// NodeComponent opens the module that serves a communicator.
type NodeComponent interface {
	// Open makes the module that serves c. Every rank of c calls it, in
	// the first collective that chooses the component, and every rank
	// gets a module, or none, alike. It may run c's collectives (they
	// take the point-to-point algorithms while it opens) and Split c. It
	// returns nil and no error where it has nothing to offer c (no two
	// ranks share a node): the table serves c then.
	Open(ctx context.Context, c *Comm) (NodeModule, error)
}

// NodeModule is a node component's module for one communicator. Its
// calls get arguments coll has checked, and return ErrUnserved — every
// rank alike, before any communication — for a call the module leaves
// to the point-to-point algorithms.
type NodeModule interface {
	Barrier(ctx context.Context) error
	Bcast(ctx context.Context, buf []byte, root int) error
	Reduce(ctx context.Context, send, recv []byte, op Op, root int) error
	Allreduce(ctx context.Context, send, recv []byte, op Op) error
	Allgather(ctx context.Context, send, recv []byte) error
}

// ErrUnserved is what a NodeModule returns for a call it leaves to the
// point-to-point algorithms.
var ErrUnserved = errors.New("coll: the node component does not serve this call")

// nodeState is a Comm's node module: not tried yet, opening, open, or
// none (with the error that made it none, if any).
type nodeState struct {
	state uint8
	m     NodeModule
	err   error
}

const (
	nodeUntried uint8 = iota
	nodeOpening
	nodeOpen
	nodeNone
)

// nodeRule is where the table, for ranks that own their cores, takes the
// node component: every barrier, and broadcasts, reduces, allreduces and
// allgathers of n ranks moving bytes — below 256 KiB on any number of
// ranks, larger ones from 4 ranks. With more ranks than cores a wait on
// a flag is a wait for a rank to be scheduled, as a message is, and the
// table measured for that case stays.
//
// Two ranks bound to the 2 CPUs of this VM, gobtl bench, the component
// against the point-to-point algorithms alternately (medians, µs; the
// machine loaded by other jobs, 12-25): barrier 0.45-0.53 against
// 0.48-0.53 (fastest 0.17 against 0.27-0.33, p99 0.7 against up to 25),
// allreduce 8 B 0.55-0.63 against 0.56-0.65 (0.19 against 0.35), 16 KiB
// 11-14 against 14-15, allgather of 16 KiB blocks 9-12 against 3.5-14; at
// 1 MiB a broadcast 470-644 against 437-476, an allreduce 584-1962
// against 567-659, an allgather 535-742 against 528-705. Two ranks read
// a 1 MiB message faster by one CMA copy than by the chunks' two copies;
// many ranks reading the one copy in a node's shared cache is what the
// chunks are for (on the 16-core node of issue 29 a memcpy moves 26.9
// GB/s where CMA moves 12), so large messages go through them from 4
// ranks, where no measurement here can say more.
func nodeRule(k Kind, n, bytes int) bool {
	switch k {
	case KindBarrier:
		return true
	case KindBcast, KindReduce, KindAllreduce, KindAllgather:
		return bytes < 256<<10 || n >= 4
	}
	return false
}

// useNode says whether a collective of kind k over n ranks moving bytes
// goes to the node component.
func (t *Tuning) useNode(k Kind, n, bytes int) bool {
	if t.Node == nil {
		return false
	}
	switch t.Force[k] {
	case Shm:
		return true
	case Auto:
		return t.Machine.OwnCore && nodeRule(k, n, bytes)
	}
	return false
}

// nodeModule returns the module to serve a blocking collective of kind k
// moving bytes, opening it on the first call that chooses it, or nil for
// the point-to-point algorithms. A module that failed to open fails the
// collectives forced to it with the reason; those the table chose go
// point to point.
//
// It opens the module with a context that does not end: the other ranks
// are opening it too, and a rank that left them half-way would leave
// them waiting.
func (c *Comm) nodeModule(ctx context.Context, k Kind, bytes int) (NodeModule, error) {
	if c.node.state == nodeOpening || !c.t.useNode(k, c.Size(), bytes) {
		return nil, nil
	}
	if c.node.state == nodeUntried {
		c.node.state = nodeOpening
		m, err := c.t.Node.Open(context.WithoutCancel(ctx), c)
		c.node = nodeState{state: nodeOpen, m: m}
		if m == nil || err != nil {
			c.node = nodeState{state: nodeNone, err: err}
		}
	}
	if c.node.state == nodeNone {
		if c.node.err != nil && c.t.Force[k] == Shm {
			return nil, fmt.Errorf("coll: %v shm: %w", k, c.node.err)
		}
		return nil, nil
	}
	return c.node.m, nil
}

// served finishes a call the node module took: true with its error,
// or false when the module left it to the point-to-point algorithms.
func (c *Comm) served(k Kind, err error) (bool, error) {
	if errors.Is(err, ErrUnserved) {
		return false, nil
	}
	c.count(k, Shm)
	return true, err
}

// The blocking collectives call these first: true means the node
// component served the call (or failed it) and err is its result.

func (c *Comm) nodeBarrier(ctx context.Context) (bool, error) {
	m, err := c.nodeModule(ctx, KindBarrier, 0)
	if m == nil {
		return err != nil, err
	}
	return c.served(KindBarrier, m.Barrier(ctx))
}

func (c *Comm) nodeBcast(ctx context.Context, buf []byte, root int) (bool, error) {
	if err := c.checkRoot("bcast", root); err != nil {
		return true, err
	}
	m, err := c.nodeModule(ctx, KindBcast, len(buf))
	if m == nil {
		return err != nil, err
	}
	return c.served(KindBcast, m.Bcast(ctx, buf, root))
}

func (c *Comm) nodeReduce(ctx context.Context, send, recv []byte, op Op, root int) (bool, error) {
	if err := c.checkRoot("reduce", root); err != nil {
		return true, err
	}
	if err := checkVector("reduce", op, send); err != nil {
		return true, err
	}
	if c.Rank() == root && len(recv) < len(send) {
		return true, errf("reduce", "a %d-byte result into %d bytes", len(send), len(recv))
	}
	m, err := c.nodeModule(ctx, KindReduce, len(send))
	if m == nil {
		return err != nil, err
	}
	var result []byte
	if c.Rank() == root {
		result = recv[:len(send)]
	}
	return c.served(KindReduce, m.Reduce(ctx, send, result, op, root))
}

func (c *Comm) nodeAllreduce(ctx context.Context, send, recv []byte, op Op) (bool, error) {
	if err := checkVector("allreduce", op, send); err != nil {
		return true, err
	}
	if len(recv) < len(send) {
		return true, errf("allreduce", "a %d-byte result into %d bytes", len(send), len(recv))
	}
	m, err := c.nodeModule(ctx, KindAllreduce, len(send))
	if m == nil {
		return err != nil, err
	}
	return c.served(KindAllreduce, m.Allreduce(ctx, send, recv[:len(send)], op))
}

func (c *Comm) nodeAllgather(ctx context.Context, send, recv []byte) (bool, error) {
	n, b := c.Size(), len(send)
	if len(recv) < n*b {
		return true, errf("allgather", "%d ranks' %d bytes into %d", n, b, len(recv))
	}
	m, err := c.nodeModule(ctx, KindAllgather, b)
	if m == nil {
		return err != nil, err
	}
	return c.served(KindAllgather, m.Allgather(ctx, send, recv[:n*b]))
}
