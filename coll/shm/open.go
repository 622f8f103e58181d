package shm

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/pml"
)

// Options tunes the component; zero fields take the defaults.
type Options struct {
	// Label names this rank's node: ranks with equal labels share one.
	// "" takes the host's: its boot id and the inode of Dir, which ranks
	// share exactly when they can share a file there.
	Label string
	// Dir holds the segments (default /dev/shm).
	Dir string
	// Prefix starts every segment's name: core.ShmPrefix of the job, so
	// that the launcher removes what a killed job left (default
	// "gobtl-").
	Prefix string
	// Small is the largest vector that goes through the slots (default
	// 4 KiB); larger ones go through the chunks.
	Small int
	// Chunk and Depth are the size of a chunk (default 64 KiB) and how
	// many each rank has (default 4): the pipeline's step and depth.
	Chunk, Depth int
	// Radix is the fan-out of the tree (default 4, as Open MPI's
	// coll/sm).
	Radix int
	// Flat is the largest node whose barrier and small allreduce every
	// rank reads from every other rank's slot, in one round, rather than
	// over the tree (default 16; negative: always the tree).
	Flat int
	// Spin is how many times a wait polls its flags before it goes to
	// the PML's back-off (default 1024, a few microseconds: the PML's
	// wait spins again, yields, then sleeps; negative: not at all, for
	// ranks that share their CPUs).
	Spin int
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Small, 4<<10)
	def(&o.Chunk, 64<<10)
	def(&o.Depth, 4)
	def(&o.Radix, 4)
	def(&o.Spin, 1024)
	def(&o.Flat, 16)
	o.Spin = max(o.Spin, 0)
	o.Small = align(max(o.Small, 0), 8)
	o.Chunk = align(max(o.Chunk, line), line)
	o.Depth, o.Radix = max(o.Depth, 1), max(o.Radix, 1)
	if o.Dir == "" {
		o.Dir = "/dev/shm"
	}
	if o.Prefix == "" {
		o.Prefix = "gobtl-"
	}
	return o
}

// Component is the shared-memory node component: a coll.NodeComponent
// that a Tuning names (Tuning.Node).
type Component struct {
	opts Options
}

// New returns the component with opts.
func New(opts Options) *Component { return &Component{opts: opts.withDefaults()} }

var _ coll.NodeComponent = (*Component)(nil)

// host is the host's label: its boot id and the inode of dir.
func host(dir string) string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	var st unix.Stat_t
	if err == nil {
		err = unix.Stat(dir, &st)
	}
	if err != nil {
		// Unknown: a node of its own, which shares nothing.
		return fmt.Sprintf("pid %d", os.Getpid())
	}
	return fmt.Sprintf("%s %d %d", b, st.Dev, st.Ino)
}

// Open makes the module of c (coll.NodeComponent): the ranks find their
// nodes, split c into one communicator per node and one of the nodes'
// leaders, and each node with more than one rank sets up its segment.
// Every rank then agrees, over c, that every node's succeeded; if any
// failed, every rank returns an error and c keeps the point-to-point
// algorithms.
func (k *Component) Open(ctx context.Context, c *coll.Comm) (coll.NodeModule, error) {
	m, err := k.layout(ctx, c)
	if m == nil || err != nil {
		return nil, err
	}
	if m.sub, err = c.Split(ctx, m.myNode(), m.rank); err != nil {
		return nil, fmt.Errorf("coll/shm: %w", err)
	}
	if m.nodes > 1 {
		color := coll.Undefined
		if m.leader() {
			color = 0
		}
		if m.leaders, err = c.Split(ctx, color, m.rank); err != nil {
			return nil, fmt.Errorf("coll/shm: %w", err)
		}
	}
	var seg *segment
	var local error
	if m.sub.Size() > 1 {
		seg, local = k.setUp(ctx, m.sub.PML())
	}
	ok := []byte{0}
	if local != nil {
		ok[0] = 1
	}
	if err := c.Allreduce(ctx, ok, ok, coll.Max[uint8]()); err != nil {
		local = errors.Join(local, err)
	}
	if seg != nil && m.local[m.rank] == 0 {
		if err := seg.unlink(); err != nil {
			local = errors.Join(local, err)
		}
	}
	if ok[0] != 0 || local != nil {
		if seg != nil {
			seg.unmap()
		}
		if local == nil {
			local = errors.New("coll/shm: a node of the communicator could not set up its segment")
		}
		return nil, local
	}
	m.px = c.PML()
	if seg != nil {
		m.node = k.newNode(seg, m.sub.PML(), m.px)
	}
	return m, nil
}

// layout finds every rank's node from their labels; nil when no two
// ranks of c share one.
func (k *Component) layout(ctx context.Context, c *coll.Comm) (*module, error) {
	n := c.Size()
	if n == 1 {
		return nil, nil
	}
	label := k.opts.Label
	if label == "" {
		label = host(k.opts.Dir)
	}
	sum := sha256.Sum256([]byte(label))
	all := make([]byte, n*len(sum))
	if err := c.Allgather(ctx, sum[:], all); err != nil {
		return nil, fmt.Errorf("coll/shm: %w", err)
	}
	m := &module{rank: c.Rank(), size: n, nodeOf: make([]int, n), local: make([]int, n)}
	ids := map[[sha256.Size]byte]int{}
	var counts []int
	for r := range n {
		id, ok := ids[[sha256.Size]byte(all[r*len(sum):])]
		if !ok {
			id = len(ids)
			ids[[sha256.Size]byte(all[r*len(sum):])] = id
			counts = append(counts, 0)
		}
		m.nodeOf[r], m.local[r] = id, counts[id]
		counts[id]++
	}
	m.nodes = len(counts)
	if m.nodes == n {
		return nil, nil
	}
	m.contiguous, m.equal = true, true
	for r := 1; r < n; r++ {
		if m.nodeOf[r] != m.nodeOf[r-1] && m.nodeOf[r] != m.nodeOf[r-1]+1 {
			m.contiguous = false
		}
	}
	for _, cnt := range counts {
		m.equal = m.equal && cnt == counts[0]
	}
	return m, nil
}

// Tags of the set-up messages on the node's communicator.
const (
	tagName  = 1
	tagHello = 2
)

// setUp makes the node's segment: its leader creates it and sends the
// name to the others, who map it. Then every rank of the node says hello
// to every other one, so that each rank's PML watches every other — a
// rank that waits on a flag of one that died learns of it from its PML
// (btl/sm's pidfd), not only from its leader.
func (k *Component) setUp(ctx context.Context, x coll.PML) (*segment, error) {
	o := k.opts
	lay := newLayout(x.Size(), o.Small, o.Chunk, o.Depth)
	var seg *segment
	var err error
	var reqs []*pml.Request
	if x.Rank() == 0 {
		var name string // "" tells the others that it failed
		if seg, err = createSegment(o.Dir, o.Prefix, lay); err == nil {
			name = seg.name()
		}
		for r := 1; r < x.Size(); r++ {
			sr, serr := x.Isend([]byte(name), r, tagName)
			if serr != nil {
				err = errors.Join(err, serr)
				break
			}
			reqs = append(reqs, sr)
		}
	} else {
		buf := make([]byte, 256)
		var sts []pml.Status
		r, rerr := x.Irecv(buf, 0, tagName)
		if rerr == nil {
			sts, rerr = waitAll(ctx, x, []*pml.Request{r})
		}
		switch {
		case rerr != nil:
			err = rerr
		case sts[0].Count == 0:
			err = errors.New("coll/shm: the node's leader could not make the segment")
		default:
			seg, err = attachSegment(o.Dir, string(buf[:sts[0].Count]), o.Prefix, lay)
		}
	}
	reqs, herr := hello(x, reqs)
	if herr == nil {
		_, herr = waitAll(ctx, x, reqs)
	}
	if err = errors.Join(err, herr); err != nil && seg != nil {
		if x.Rank() == 0 {
			_ = seg.unlink()
		}
		seg.unmap()
		seg = nil
	}
	return seg, err
}

// hello posts an empty message to and from every other rank of x, after
// reqs.
func hello(x coll.PML, reqs []*pml.Request) ([]*pml.Request, error) {
	for r := range x.Size() {
		if r == x.Rank() {
			continue
		}
		rr, err := x.Irecv(nil, r, tagHello)
		if err != nil {
			return reqs, err
		}
		sr, err := x.Isend(nil, r, tagHello)
		if err != nil {
			return reqs, err
		}
		reqs = append(reqs, rr, sr)
	}
	return reqs, nil
}

// setUpStage names the set-up's messages in the PML's state reports.
type setUpStage struct{}

func (setUpStage) String() string { return "coll/shm: setting up the segment" }

// waitAll waits for reqs on x (failing when a member is lost) and
// returns their statuses; what did not complete is cancelled and freed.
func waitAll(ctx context.Context, x coll.PML, reqs []*pml.Request) ([]pml.Status, error) {
	sts := make([]pml.Status, len(reqs))
	err := x.WaitRound(ctx, reqs, sts, setUpStage{})
	for _, r := range reqs {
		if r != nil {
			_ = x.Cancel(r)
			_ = x.Free(r)
		}
	}
	return sts, err
}

// newNode is this rank's part of the node's collectives, sub the node's
// communicator, px the whole one's, on which it waits. The segment is
// unmapped once the module is unreachable.
func (k *Component) newNode(seg *segment, sub, px coll.PML) *node {
	m := &node{seg: seg, n: sub.Size(), me: sub.Rank(), x: px, spin: k.opts.Spin, flat: k.opts.Flat,
		tree: newTree(sub.Size(), k.opts.Radix)}
	for g := range m.rd {
		m.rd[g].rank = make([]int, 0, max(k.opts.Radix+2, sub.Size()))
	}
	runtime.AddCleanup(m, func(mem []byte) { _ = unix.Munmap(mem) }, seg.mem)
	return m
}
