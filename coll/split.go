package coll

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Undefined is the color of a rank that joins no communicator in Split.
const Undefined = -1

// Split partitions c's ranks by color — every rank with the same color
// gets one new communicator, ranked by key, ties by rank in c — as
// MPI_Comm_split does. A rank with color Undefined gets nil. Every rank
// of c must call it. The new communicators' context ids are agreed in the
// same exchange: the largest id any rank of c has handed out, plus one,
// is free on all of them. If ctx ends first, Split returns its error and
// no communicator; the exchange goes on in the background, on buffers of
// its own.
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	if color < 0 && color != Undefined {
		return nil, errf("split", "color %d: colors are 0 or more, or Undefined", color)
	}
	n := c.Size()
	const rec = 20 // color, key (int64 each), next free context (uint32)
	mine := make([]byte, rec)
	binary.LittleEndian.PutUint64(mine, uint64(int64(color)))
	binary.LittleEndian.PutUint64(mine[8:], uint64(int64(key)))
	binary.LittleEndian.PutUint32(mine[16:], c.p.NextContext())
	all := make([]byte, n*rec)
	if err := c.Allgather(ctx, mine, all); err != nil {
		return nil, fmt.Errorf("coll: split: %w", c.drop(err))
	}
	type member struct{ rank, key int }
	var members []member
	var next uint32
	for r := range n {
		b := all[r*rec:]
		next = max(next, binary.LittleEndian.Uint32(b[16:]))
		if int(int64(binary.LittleEndian.Uint64(b))) == color && color != Undefined {
			members = append(members, member{r, int(int64(binary.LittleEndian.Uint64(b[8:])))})
		}
	}
	if color == Undefined {
		return nil, nil
	}
	slices.SortStableFunc(members, func(a, b member) int { return cmp.Compare(a.key, b.key) })
	ranks := make([]int, len(members))
	for i, m := range members {
		ranks[i] = m.rank
	}
	d, err := c.derive(next, ranks)
	if err != nil {
		return nil, fmt.Errorf("coll: split: %w", err)
	}
	return d, nil
}

// Dup returns a communicator over c's ranks with contexts of its own,
// agreed like Split's; a context that ends first is as for Split.
func (c *Comm) Dup(ctx context.Context) (*Comm, error) {
	next := make([]byte, 4)
	binary.LittleEndian.PutUint32(next, c.p.NextContext())
	if err := c.Allreduce(ctx, next, next, maxUint32); err != nil {
		return nil, fmt.Errorf("coll: dup: %w", c.drop(err))
	}
	ranks := make([]int, c.Size())
	for i := range ranks {
		ranks[i] = i
	}
	d, err := c.derive(binary.LittleEndian.Uint32(next), ranks)
	if err != nil {
		return nil, fmt.Errorf("coll: dup: %w", err)
	}
	return d, nil
}

// drop frees the request of a *PendingError of an exchange whose buffers
// are Split's or Dup's own, none of the caller's: nothing need wait for
// it. It returns the context's error.
func (c *Comm) drop(err error) error {
	var p *PendingError
	if errors.As(err, &p) {
		_ = c.x.Free(p.Request)
		return p.Err
	}
	return err
}

// maxUint32 is the maximum of little-endian uint32s.
var maxUint32 = Op{Size: 4, Commutative: true, Fn: Func(func(inout, in []byte) {
	for i := 0; i+4 <= len(inout); i += 4 {
		a, b := binary.LittleEndian.Uint32(inout[i:]), binary.LittleEndian.Uint32(in[i:])
		binary.LittleEndian.PutUint32(inout[i:], max(a, b))
	}
})}
