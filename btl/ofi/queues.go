//go:build ofi && cgo

package ofi

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/btl/ofi/fabric"
	"github.com/gobtl/gobtl/core"
)

// Receive classes. An RDM endpoint has one receive queue for all peers,
// matched in order of posting; buffers of several sizes live side by
// side only if messages name the size they need. So each queue of the
// receive-buffer policy's layout is a class with its own tag: the
// receiver posts the class's buffers under that tag, the sender tags a
// frame with the smallest class that holds it (seed 002 §3: B-SRQ's
// buckets, which InfiniBand gives a QP each). The first class, the
// smallest, is the exception: its buffers go on the endpoint's untagged
// queue and its frames untagged. Providers match a tagged message by
// walking the posted receives in order (tcp under ofi_rxm, sockets, shm
// in libfabric 1.17), and a buffer posted again goes behind every other
// class's: each small frame walked them all. Untagged, it takes the
// first buffer (BenchmarkEagerRate, 8-byte frames: tcp 1.2x, shm 5x).
//
// How the policy's layouts apply:
//
//   - A shared queue (S) is a class whose Count buffers serve every peer,
//     as an SRQ does.
//   - A per-peer queue (P) cannot be given to one peer — libfabric 1.17's
//     tcp provider has no directed receive — so its class posts Count
//     buffers per peer into the common pool and each peer holds Count
//     credits: no peer can have more frames in flight than it was given,
//     and the pool holds all of them, which is what per-peer buffers
//     guarantee.
//   - Every class runs credits (credits.go): per-peer classes with Count
//     per peer, shared ones with the queue's max_pending per peer (else
//     Count divided among the peers). There is no RNR NAK to hold back a
//     frame that finds no buffer: a provider keeps such a frame as
//     unexpected until a buffer is posted (nothing is lost), and credits
//     bound how many there can be.
//   - The provider bounds the receives posted at once (rx_attr.size: 2048
//     for tcp, 1024 for shm, 256 for sockets). When the layout asks for
//     more, every class is scaled down in proportion (at least two
//     buffers each): credits still bound what is in flight, and the
//     surplus waits in the provider as unexpected messages.
//   - Growth on the SRQ-limit event has no libfabric counterpart: the
//     layout is fixed at open.
//
// A tagged message whose tag matches no posted receive waits in the
// provider's unexpected queue until one is posted, that is for ever if
// its tag is none of the classes': a process outside the job could grow
// the queue without bound (before the sinks, of 2000 messages with random
// tags sent to a rank over tcp or sockets, 1978 stayed there). So the
// class bytes no class uses are covered by sink receives, one buffer per
// aligned block of them (sinkBlocks: 5 to 8 blocks, 7 for a layout of
// three queues), posted with the block's bits ignored. What lands in a
// sink is counted as rejected and the buffer posted again, which takes
// the next such message the provider held; one too long for the buffer
// is a truncation error, handled alike. The job's own messages never
// match a sink, and a tagged match walks past the sinks: a few entries.
//
// A class's buffers, and its send buffers (frames above the provider's
// inject size wait in one until their send completes), are slabs of
// mmap'd memory outside Go's heap, registered only where the domain asks
// for local descriptors (FI_MR_LOCAL).

// Operation contexts: kind in the top byte, class and index below.
const (
	kindRecv = 1
	kindSend = 2
	kindRDMA = 3
)

func ctxOf(kind, class, idx int) uint64 {
	return uint64(kind)<<56 | uint64(class)<<32 | uint64(uint32(idx))
}

func ctxParts(ctx uint64) (kind, class, idx int) {
	return int(ctx >> 56), int(ctx>>32) & 0xff, int(uint32(ctx))
}

// rxClass is one receive class: its posted buffers and, on the sending
// side, the send buffers of frames of its size.
type rxClass struct {
	idx    int
	tag    uint64
	size   int  // buffer bytes, header included
	shared bool // the layout's kind
	plain  bool // untagged: the first class, on the endpoint's untagged queue
	window int  // credits each sender starts with
	low    int  // owed credits that make an explicit credit message due
	slab   []byte
	n      int
	blocks []tagBlock // a sink's: the tag and ignore mask of each buffer
	mr     *fabric.MR
	sslab  []byte
	smr    *fabric.MR
	sfree  []int32
	sowner []int32 // the peer a send buffer is in flight to
	repost []int32 // buffers the provider refused to take back yet
}

func (q *rxClass) buf(i int) []byte  { return q.slab[i*q.size : (i+1)*q.size] }
func (q *rxClass) sbuf(i int) []byte { return q.sslab[i*q.size : (i+1)*q.size] }

func (q *rxClass) desc() fabric.Desc {
	if q.mr == nil {
		return fabric.Desc{}
	}
	return q.mr.Desc
}

func (q *rxClass) sdesc() fabric.Desc {
	if q.smr == nil {
		return fabric.Desc{}
	}
	return q.smr.Desc
}

// rxq is a module's receive classes, its control class and the scratch
// buffer injected frames are gathered in.
type rxq struct {
	ep      *fabric.Endpoint
	classes []*rxClass
	ctl     *rxClass
	sink    *rxClass   // the sink receives
	all     []*rxClass // classes, ctl and sink
	held    int        // buffers waiting in some class's repost
	scratch []byte     // frames up to the inject size are gathered here
	inject  int
}

// ctlPosted is how many control buffers a module posts within a budget
// of receives: one per peer and some, so that every peer's hello finds
// one when the job starts (strays cover the rest), within a quarter of
// the budget.
func ctlPosted(budget, peers int) int { return max(min(peers+16, budget/4), 8) }

// postedWant is how many receives a layout would like posted: the
// receive queue depth asked of the provider.
func postedWant(layout core.RecvSetup, peers int) int {
	n := peers + 16
	for _, q := range layout.Queues {
		if q.Kind == core.QueueShared {
			n += q.Count
		} else {
			n += q.Count * max(peers, 1)
		}
	}
	return n
}

// init lays out the classes of layout for peers senders.
func (x *rxq) init(ep *fabric.Endpoint, layout core.RecvSetup, peers, sendBufs int, flow flowCfg) error {
	x.ep, x.inject = ep, ep.Info.InjectSize
	if len(layout.Queues) >= maxClasses {
		return fmt.Errorf("%d receive queues: at most %d", len(layout.Queues), maxClasses-1)
	}
	blocks := sinkBlocks(len(layout.Queues))
	budget := max(ep.Info.RxSize, 64) - len(blocks)
	ctlN := ctlPosted(budget, peers)
	budget -= ctlN
	want := make([]int, len(layout.Queues))
	sum := 0
	for i, q := range layout.Queues {
		c := &rxClass{idx: i, tag: uint64(i), size: q.BufSize, shared: q.Kind == core.QueueShared, plain: i == 0}
		if c.shared {
			c.window = q.MaxPending
			if c.window == 0 {
				c.window = max(1, q.Count/max(peers, 1))
			}
			c.low = max(1, c.window/2)
			want[i] = q.Count
		} else {
			c.window, c.low = q.Count, min(max(q.Low, 1), q.Count)
			want[i] = q.Count * max(peers, 1)
		}
		c.window, c.low = flow.apply(c.window, c.low, c.shared)
		sum += want[i]
		x.classes = append(x.classes, c)
	}
	for i, c := range x.classes {
		c.n = want[i]
		if sum > budget {
			c.n = max(2, want[i]*budget/sum)
		}
	}
	x.ctl = &rxClass{idx: classCtl, tag: tagCtl, size: ctlBufSize, shared: true, n: ctlN}
	x.sink = &rxClass{idx: classSink, size: sinkBufSize, shared: true, n: len(blocks), blocks: blocks}
	x.all = append(append([]*rxClass(nil), x.classes...), x.ctl, x.sink)
	for _, c := range x.all {
		n := sendBufs
		if c == x.sink {
			n = 0 // nothing is sent from a sink
		}
		if err := x.alloc(c, n); err != nil {
			return err
		}
	}
	var err error
	x.scratch, err = mmap(max(x.inject, core.HeaderSize+64))
	return err
}

// sinkBufSize is the size of a sink buffer: what lands there is thrown
// away, and a longer message is a truncation error, thrown away too.
const sinkBufSize = ctlBufSize

// tagBlock is an aligned block of class bytes: the tags that match tag
// outside the bits of ignore.
type tagBlock struct{ tag, ignore uint64 }

// sinkBlocks covers the class bytes the job's messages do not use, from
// classes (the layout's length: tagCtl and the tagged classes' tags are
// 0 up to it) to the last, with the fewest aligned blocks.
func sinkBlocks(classes int) []tagBlock {
	var bs []tagBlock
	for lo := max(classes, 1); lo <= tagClassMask; {
		size := lo & -lo
		for lo+size > tagClassMask+1 {
			size >>= 1
		}
		bs = append(bs, tagBlock{tag: uint64(lo), ignore: tagIgnore | uint64(size-1)})
		lo += size
	}
	return bs
}

// alloc maps and, where the domain asks, registers a class's buffers
// and its sendBufs send buffers.
func (x *rxq) alloc(c *rxClass, sendBufs int) error {
	var err error
	if c.slab, err = mmap(c.n * c.size); err != nil {
		return err
	}
	if sendBufs > 0 {
		if c.sslab, err = mmap(sendBufs * c.size); err != nil {
			return err
		}
	}
	c.sfree = make([]int32, sendBufs)
	c.sowner = make([]int32, sendBufs)
	for i := range c.sfree {
		c.sfree[i] = int32(sendBufs - 1 - i)
	}
	if x.ep.Info.MRMode&fabric.MRLocal == 0 {
		return nil
	}
	if c.mr, err = x.ep.Register(c.slab, fabric.AccessRecv, randomKey(x.ep)); err != nil {
		return err
	}
	if c.sslab != nil {
		c.smr, err = x.ep.Register(c.sslab, fabric.AccessSend, randomKey(x.ep))
	}
	return err
}

func mmap(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", n, err)
	}
	return b, nil
}

// randomKey draws a registration key nobody outside the job can guess,
// within the domain's key size.
func randomKey(ep *fabric.Endpoint) uint64 {
	var b [8]byte
	rand.Read(b[:])
	k := binary.LittleEndian.Uint64(b[:])
	if n := ep.Info.MRKeySize; n > 0 && n < 8 {
		k &= 1<<(8*n) - 1
	}
	return k
}

// free releases the buffers; the endpoint is closed first.
func (x *rxq) free() {
	for _, c := range x.all {
		for _, mr := range []*fabric.MR{c.mr, c.smr} {
			if mr != nil {
				mr.Close()
			}
		}
		for _, b := range [][]byte{c.slab, c.sslab} {
			if b != nil {
				unix.Munmap(b)
			}
		}
		c.slab, c.sslab, c.mr, c.smr = nil, nil, nil, nil
	}
	if x.scratch != nil {
		unix.Munmap(x.scratch)
		x.scratch = nil
	}
}

// class returns the class of index i (classCtl: the control class).
func (x *rxq) class(i int) *rxClass {
	switch i {
	case classCtl:
		return x.ctl
	case classSink:
		return x.sink
	}
	if i < len(x.classes) {
		return x.classes[i]
	}
	return nil
}

// classFor is the smallest class whose buffers hold a frame of n payload
// bytes, or nil.
func (x *rxq) classFor(n int) *rxClass {
	for _, c := range x.classes {
		if c.size >= core.HeaderSize+n {
			return c
		}
	}
	return nil
}

// post gives buffer i of c to the provider, or keeps it for a later try
// when the provider's queue is full (EAGAIN) or its receive entries are
// all taken (shm's ENOMEM: it keeps unexpected messages in the same
// pool).
func (x *rxq) post(c *rxClass, i int) error {
	var err error
	switch {
	case c.plain:
		err = x.ep.Recv(c.buf(i), c.desc(), fabric.AddrUnspec, ctxOf(kindRecv, c.idx, i))
	case c.blocks != nil:
		b := c.blocks[i]
		err = x.ep.TRecv(c.buf(i), c.desc(), fabric.AddrUnspec, b.tag, b.ignore, ctxOf(kindRecv, c.idx, i))
	default:
		err = x.ep.TRecv(c.buf(i), c.desc(), fabric.AddrUnspec, c.tag, tagIgnore, ctxOf(kindRecv, c.idx, i))
	}
	if errors.Is(err, fabric.ErrAgain) || errors.Is(err, fabric.ErrNoMem) {
		c.repost = append(c.repost, int32(i))
		x.held++
		return nil
	}
	return err
}

// postAll posts every receive buffer at open.
func (m *Module) postAll() error {
	for _, c := range m.all {
		for i := range c.n {
			if err := m.post(c, i); err != nil {
				return fmt.Errorf("ofi: post receive buffers: %w", err)
			}
		}
	}
	return nil
}

// retryPosts posts the buffers the provider refused earlier.
func (x *rxq) retryPosts() {
	x.held = 0
	for _, c := range x.all {
		if len(c.repost) == 0 {
			continue
		}
		held := c.repost
		c.repost = nil
		for _, i := range held {
			x.post(c, int(i))
		}
	}
}

// getSend takes a send buffer of c for rank, or -1.
func (c *rxClass) getSend(rank int) int {
	n := len(c.sfree)
	if n == 0 {
		return -1
	}
	i := c.sfree[n-1]
	c.sfree = c.sfree[:n-1]
	c.sowner[i] = int32(rank)
	return int(i)
}

func (c *rxClass) putSend(i int) { c.sfree = append(c.sfree, int32(i)) }

// inject sends a frame of c that fits the provider's inject size: untagged
// on the first class, tagged with the class on the others.
func (c *rxClass) inject(ep *fabric.Endpoint, b []byte, data uint64, to fabric.Addr) error {
	if c.plain {
		return ep.Inject(b, data, to)
	}
	return ep.TInject(b, data, to, c.tag)
}

// send sends a frame of c from its send buffer b.
func (c *rxClass) send(ep *fabric.Endpoint, b []byte, data uint64, to fabric.Addr, ctx uint64) error {
	if c.plain {
		return ep.Send(b, c.sdesc(), data, to, ctx)
	}
	return ep.TSend(b, c.sdesc(), data, to, c.tag, ctx)
}
