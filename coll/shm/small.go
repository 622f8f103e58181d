package shm

import (
	"fmt"
	"sync/atomic"

	"github.com/gobtl/gobtl/coll"
)

// The barrier and the small allreduce, reduce and broadcast (up to
// Options.Small bytes): each rank has two generations of an up slot and
// a down slot — a flag line holding the collective's sequence number,
// the data after it, its first 48 bytes in the flag's line — and the
// collective with sequence number s uses generation s mod 2. Fan-in: a
// rank copies its vector into its up slot, waits for each child's flag
// to read s and combines the child's data into its own, then stores s
// in its own flag for its parent; the root combines into its down slot.
// Fan-out: a rank waits for its parent's down flag, copies the data and,
// if it has children, stores it and s in its own down slot. A barrier is
// the same with no data.
//
// A rank writes a slot of generation g again only once the ranks that
// read it in the collective that last wrote it have finished that
// collective (node.free: their done counters); after a barrier or an
// allreduce every rank has finished the one before, so a run of them
// never looks. Flags are compared for equality: a slot holds s−2 or s.

// slot reports whether the slot at off holds this collective's data; a
// rank that put another length there, or named another root, fails the
// collective (ErrMismatch). While it does not, slot looks whether rank
// x, whose slot it is, never writes it in this collective (missing).
func (o *op) slot(x, off, n int) (bool, error) {
	s := o.m.seg
	if atomic.LoadUint64(s.u64(off+sSeq)) != o.seq {
		return o.missing(x, off)
	}
	if got := *s.u64(off + sLen); got != slotWord(n, o.root) {
		if uint32(got) != uint32(n) {
			return true, fmt.Errorf("coll/shm: %s: a rank passed %d bytes, this one %d: %w", o, uint32(got), n, coll.ErrMismatch)
		}
		return true, fmt.Errorf("coll/shm: %s: rank %d named root %d, this one %d: %w", o, x, got>>32, o.root, coll.ErrMismatch)
	}
	return true, nil
}

// publish announces the n bytes already in the slot at off, and the root
// this rank named.
func (o *op) publish(off, n int) {
	s := o.m.seg
	*s.u64(off + sLen) = slotWord(n, o.root)
	atomic.StoreUint64(s.u64(off+sSeq), o.seq)
}

// read records the ranks that will read this rank's slots of o's
// generation: parent (-1: none), and kids, of a tree rotated by rot.
func (o *op) read(parent int, kids []int, rot, extra int) {
	m := o.m
	r := &m.rd[o.g]
	r.seq = o.seq
	r.rank = r.rank[:0]
	if parent >= 0 {
		r.rank = append(r.rank, (parent+rot)%m.n)
	}
	for _, k := range kids {
		r.rank = append(r.rank, (k+rot)%m.n)
	}
	if extra >= 0 {
		r.rank = append(r.rank, extra)
	}
}

// fold waits for each child's up slot in turn and combines its data into
// acc; done when every child's is in.
func (o *op) fold(kids []int, acc []byte) (bool, error) {
	s := o.m.seg
	for ; o.i < len(kids); o.i++ {
		off := s.up(kids[o.i], o.g)
		if ok, err := o.slot(kids[o.i], off, len(acc)); !ok || err != nil {
			return err != nil, err
		}
		if len(acc) > 0 {
			o.fn.Fn.Combine(acc, s.data(off, len(acc)))
		}
	}
	return true, nil
}

// flat is the barrier (no data) and the small allreduce on a node of up
// to Options.Flat ranks: every rank puts its vector in its up slot and
// reads every other rank's, and folds the n vectors itself, in rank
// order — the same bits on every rank. One round of waits instead of the
// tree's two per level, for n−1 line reads per rank instead of radix:
// on a node of a few ranks, and with more ranks than CPUs above all,
// where each wait may be a wait for a rank to be scheduled, the waits
// are the cost (coll's table takes its linear allreduce and barrier up
// to 16 ranks for the same reason; xhc reads its groups flat). Every
// rank reads every other one's slot, so a rank that finished the
// collective knows that every rank has begun it.
func (o *op) flat() (bool, error) {
	m, s := o.m, o.m.seg
	n, me, g := len(o.send), m.me, o.g
	if o.pc == 0 {
		if !m.free(g) {
			return false, nil
		}
		r := &m.rd[g]
		r.seq, r.rank = o.seq, r.rank[:0]
		for x := range m.n {
			if x != me {
				r.rank = append(r.rank, x)
			}
		}
		copy(s.data(s.up(me, g), n), o.send)
		o.publish(s.up(me, g), n)
		o.pc = 1
	}
	for ; o.i < m.n; o.i++ {
		if ok, err := o.slot(o.i, s.up(o.i, g), n); !ok || err != nil {
			return err != nil, err
		}
	}
	if n > 0 {
		copy(o.recv, s.data(s.up(0, g), n))
		for x := 1; x < m.n; x++ {
			o.fn.Fn.Combine(o.recv, s.data(s.up(x, g), n))
		}
	}
	return true, nil
}

// allreduce is the barrier (no data) and the small allreduce, over the
// tree rooted at rank 0, which combines in rank order.
func (o *op) allreduce() (bool, error) {
	m, s := o.m, o.m.seg
	n, me, g := len(o.send), m.me, o.g
	kids := m.tree.kids[me]
	for {
		switch o.pc {
		case 0:
			if !m.free(g) {
				return false, nil
			}
			o.read(m.tree.parent[me], kids, 0, -1)
			copy(o.acc(), o.send)
			o.pc = 1
		case 1:
			if done, err := o.fold(kids, o.acc()); !done || err != nil {
				return done, err
			}
			if me == 0 {
				copy(o.recv, o.acc())
				o.pc = 3
				continue
			}
			o.publish(s.up(me, g), n)
			o.pc = 2
		case 2:
			p := m.tree.parent[me]
			off := s.down(p, g)
			if ok, err := o.slot(p, off, n); !ok || err != nil {
				return err != nil, err
			}
			copy(o.recv, s.data(off, n))
			if len(kids) > 0 {
				copy(s.data(s.down(me, g), n), o.recv)
			}
			o.pc = 3
		default:
			if len(kids) > 0 {
				o.publish(s.down(me, g), n)
			}
			return true, nil
		}
	}
}

// acc is where this rank combines: its up slot, or the root's down slot,
// from which the result fans out.
func (o *op) acc() []byte {
	s, n := o.m.seg, len(o.send)
	if o.m.me == 0 && o.kind == kAllreduce {
		return s.data(s.down(0, o.g), n)
	}
	return s.data(s.up(o.m.me, o.g), n)
}

// reduce is the small reduce: the fan-in of allreduce to rank 0, which
// hands the result to the root through its down slot.
func (o *op) reduce() (bool, error) {
	m, s := o.m, o.m.seg
	n, me, g := len(o.send), m.me, o.g
	kids := m.tree.kids[me]
	for {
		switch o.pc {
		case 0:
			if !m.free(g) {
				return false, nil
			}
			extra := -1
			if me == 0 && o.root != 0 {
				extra = o.root
			}
			o.read(m.tree.parent[me], kids, 0, extra)
			copy(o.acc(), o.send)
			o.pc = 1
		case 1:
			if done, err := o.fold(kids, o.acc()); !done || err != nil {
				return done, err
			}
			switch {
			case me == 0 && o.root == 0:
				copy(o.recv, o.acc())
			case me == 0:
				copy(s.data(s.down(0, g), n), o.acc())
				o.publish(s.down(0, g), n)
			default:
				o.publish(s.up(me, g), n)
			}
			if me == 0 || me != o.root {
				return true, nil
			}
			o.pc = 2
		default:
			off := s.down(0, g)
			if ok, err := o.slot(0, off, n); !ok || err != nil {
				return err != nil, err
			}
			copy(o.recv, s.data(off, n))
			return true, nil
		}
	}
}

// bcast is the small broadcast, over the tree rotated to the root.
func (o *op) bcast() (bool, error) {
	m, s := o.m, o.m.seg
	n, me, g := len(o.recv), m.me, o.g
	v := (me - o.root + m.n) % m.n
	kids := m.tree.kids[v]
	if o.pc == 0 {
		if !m.free(g) {
			return false, nil
		}
		o.read(-1, kids, o.root, -1)
		o.pc = 1
		if v == 0 {
			o.pass(kids)
			return true, nil
		}
	}
	p := (m.tree.parent[v] + o.root) % m.n
	off := s.down(p, g)
	if ok, err := o.slot(p, off, n); !ok || err != nil {
		return err != nil, err
	}
	copy(o.recv, s.data(off, n))
	o.pass(kids)
	return true, nil
}

// pass hands the broadcast's data on to this rank's children.
func (o *op) pass(kids []int) {
	if len(kids) > 0 {
		s := o.m.seg
		off := s.down(o.m.me, o.g)
		copy(s.data(off, len(o.recv)), o.recv)
		o.publish(off, len(o.recv))
	}
}
