package sm

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/gobtl/gobtl/core"
)

// A CMA read from both ends. process_vm_readv copies about 11 GB/s on the
// host these defaults come from, whatever the size (half of it pinning
// the peer's pages), so one process reading a large message alone leaves
// the other core idle; the copy pipeline keeps both cores busy but moves
// every byte twice, and its second copy reads lines the other core just
// wrote — fast while the two cores share a last-level cache, three times
// slower when the host puts them on different dies, as this VM's host
// does for minutes at a time. So the reader of a large Get posts a record
// in its own segment and a descriptor of it in the sender's FIFO, and
// reads the message's chunks from the back while the sender, if it polls
// (it does while it waits for the FIN), writes them from the front with
// process_vm_writev: every byte moves once, by whichever process runs,
// both at once while both run, and a sender that is off its CPU or busy
// elsewhere costs nothing but its share.
//
// A record is two lines. Line 0, written by both: the claim word — a
// generation in the top 16 bits, then the next chunk the sender takes
// (lo) and one past the last the reader may take (hi), 24 bits each —
// which both sides advance by CAS, and the bytes the sender has written.
// A sender that cannot write a chunk it took says so (the fail word) and
// the reader reads the sender's share again itself.
// Line 1, written by the reader before it publishes the claim word: the
// sender asked, its region (key and offset), the reader's address, the
// length and the chunk size. The sender trusts none of it beyond the
// chunk it claims: it copies only from a region it has registered and
// not released, by the key.
//
// The reader completes the Get once every chunk is claimed (lo >= hi) and
// the sender's written bytes equal what its chunks [0, lo) hold, and only
// then reuses the record; a sender that comes late finds lo >= hi, or a
// new generation, and does nothing. A record is only reused after it was
// closed, so a sender's CAS against a word it read can succeed only while
// the fields it read after that word still describe it.
const (
	coopRecs     = 64 // records per segment: Gets in flight with help
	coopRecSize  = 2 * cacheLine
	coopOffClaim = 0  // u64: gen<<48 | lo<<24 | hi
	coopOffSent  = 8  // u64: bytes the sender has written
	coopOffFail  = 16 // u32: the sender could not write a chunk it claimed
	coopOffRank  = cacheLine + 0
	coopOffKey   = cacheLine + 8
	coopOffSrc   = cacheLine + 16
	coopOffDst   = cacheLine + 24
	coopOffLen   = cacheLine + 32
	coopOffChunk = cacheLine + 40

	coopIdxBits = 24
	coopIdxMask = 1<<coopIdxBits - 1
)

// coopWord packs a claim word.
func coopWord(gen, lo, hi uint64) uint64 { return gen<<48 | lo<<coopIdxBits | hi }

func coopSplit(w uint64) (gen, lo, hi uint64) {
	return w >> 48, w >> coopIdxBits & coopIdxMask, w & coopIdxMask
}

// coopMin is the smallest Get the sender is asked to help with: below it
// one system call by the reader costs less than a record, a descriptor
// and a pass through Progress.
const coopMin = 16 << 10

// coopChunk is the chunk of an n-byte Get: a quarter of it, between 64
// and 512 KiB. Each chunk is one system call, about 1.5 us of fixed cost
// besides 90 us a MiB. A 1 MiB message alone, ping-pong, fastest
// iteration of 200 (3 runs under load): 70-96 us in chunks of 64 KiB,
// 62-74 in 128 KiB, 58-68 in 256 KiB, 56-66 in 512 KiB — but in two
// chunks the sender, which comes in a little later, often found none
// left (it wrote 13-17 % in two runs of three, 36-48 % with smaller
// chunks).
func coopChunk(n uint64) uint64 {
	return min(max(n/4, 64<<10), 512<<10) &^ 4095
}

// coopGet is a Get in flight with help.
type coopGet struct {
	op     *core.RDMAOp
	p      *peer
	rec    int    // offset of the record in our segment
	src    uint64 // the peer's address of the first byte
	n      uint64
	chunk  uint64
	chunks uint64 // the claim word's hi when posted: no claim goes past it
	gen    uint64
	err    error
}

// coopHelp is a record in a peer's segment that asked us for help.
type coopHelp struct {
	s   int // the reader's rank
	rec int // offset of the record in its segment
}

// coopStart posts op as a Get the peer may help with; false when it must
// be read alone (too small, no record free, more chunks than a claim
// word counts).
func (p *peer) coopStart(op *core.RDMAOp) bool {
	m := p.m
	n := uint64(len(op.Local))
	chunk := coopChunk(n)
	if !m.cfg.helper || n < coopMin || len(m.coop.free) == 0 || (n+chunk-1)/chunk > coopIdxMask {
		return false
	}
	idx := m.coop.free[len(m.coop.free)-1]
	m.coop.free = m.coop.free[:len(m.coop.free)-1]
	rec := m.seg.lay.coop(int(idx))
	m.coop.gen = (m.coop.gen + 1) & 0xffff
	g := coopGet{op: op, p: p, rec: rec, src: op.Remote.Addr + op.Offset, n: n, chunk: chunk, chunks: (n + chunk - 1) / chunk, gen: m.coop.gen}
	s := m.seg
	atomic.StoreUint32(s.u32(rec+coopOffRank), uint32(p.rank))
	atomic.StoreUint64(s.u64(rec+coopOffKey), op.Remote.Key)
	atomic.StoreUint64(s.u64(rec+coopOffSrc), op.Offset)
	atomic.StoreUint64(s.u64(rec+coopOffDst), uint64(uintptr(unsafe.Pointer(unsafe.SliceData(op.Local)))))
	atomic.StoreUint64(s.u64(rec+coopOffLen), n)
	atomic.StoreUint64(s.u64(rec+coopOffChunk), chunk)
	atomic.StoreUint64(s.u64(rec+coopOffSent), 0)
	atomic.StoreUint32(s.u32(rec+coopOffFail), 0)
	atomic.StoreUint64(s.u64(rec+coopOffClaim), coopWord(g.gen, 0, g.chunks))
	m.coop.gets = append(m.coop.gets, g)
	// A full FIFO only means no help: the record is read alone.
	p.fifo.push(makeDesc(m.rank, rec))
	return true
}

// progressCoop is Progress's part in reads from both ends, behind one
// test on the latency path: a chunk for a peer, a chunk of our own, and
// the completions of reads that finished.
func (m *Module) progressCoop() int {
	n := 0
	if len(m.coop.helps) > 0 {
		n += m.progressHelps()
	}
	if len(m.coop.gets) > 0 {
		n += m.progressGets()
	}
	if len(m.rdma.done) > 0 {
		n += m.completeRDMA()
	}
	return n
}

// progressGets reads one chunk of the newest Get that has one left —
// the sender works from the oldest — and completes the Gets whose chunks
// are all in.
func (m *Module) progressGets() int {
	n := 0
	worked := false
	for i := len(m.coop.gets) - 1; i >= 0; i-- {
		g := &m.coop.gets[i]
		claim := m.seg.u64(g.rec + coopOffClaim)
		w := atomic.LoadUint64(claim)
		_, lo, hi := coopSplit(w)
		if hi > g.chunks || lo > g.chunks {
			// The sender shares the claim word, and may only move lo up
			// to hi: a chunk past the read is a copy past its buffer.
			m.failPeer(g.p.rank, fmt.Errorf("sm: rank %d claimed chunks [%d, %d) of a %d-chunk read: %w", g.p.rank, lo, hi, g.chunks, core.ErrBadFrame))
			return n + 1
		}
		if !worked && lo < hi && g.err == nil {
			if !atomic.CompareAndSwapUint64(claim, w, coopWord(g.gen, lo, hi-1)) {
				i++ // the sender took one: look again
				continue
			}
			worked = true
			off := (hi - 1) * g.chunk
			l := min(g.chunk, g.n-off)
			if err := cmaRead(g.p.pid, g.op.Local[off:off+l], g.src+off); err != nil {
				g.err = m.cmaErr(g.p, err)
				m.coopClose(claim)
			}
			_, lo, hi = coopSplit(atomic.LoadUint64(claim))
		}
		sent := min(lo*g.chunk, g.n)
		if lo < hi || atomic.LoadUint64(m.seg.u64(g.rec+coopOffSent)) != sent {
			continue
		}
		if atomic.LoadUint32(m.seg.u32(g.rec+coopOffFail)) != 0 && g.err == nil {
			// The sender could not write a chunk it took: read its share
			// again rather than fail a read we can do alone.
			if err := cmaRead(g.p.pid, g.op.Local[:sent], g.src); err != nil {
				g.err = m.cmaErr(g.p, err)
			}
		}
		m.coopDone(i, g.err)
		n++
	}
	if worked {
		n++
	}
	return n
}

// coopClose stops the sender from claiming more of a record: the reader
// gives up what is left (hi = lo).
func (m *Module) coopClose(claim *uint64) {
	for {
		w := atomic.LoadUint64(claim)
		gen, lo, hi := coopSplit(w)
		if lo >= hi || atomic.CompareAndSwapUint64(claim, w, coopWord(gen, lo, lo)) {
			return
		}
	}
}

// coopDone reports m.coop.gets[i] and frees its record.
func (m *Module) coopDone(i int, err error) {
	g := m.coop.gets[i]
	if err == nil {
		m.st.cmaGets++
		m.st.cmaBytes += g.n
	}
	m.rdma.done = append(m.rdma.done, rdmaCompletion{g.op, err})
	if g.op.Solicited {
		m.notifySelf()
	}
	m.coop.free = append(m.coop.free, int32((g.rec-m.seg.lay.coopOff)/coopRecSize))
	m.coop.gets = append(m.coop.gets[:i], m.coop.gets[i+1:]...)
}

// failGets fails the Gets from rank s, which is lost: whatever it
// claimed it will never write.
func (m *Module) failGets(s int, err error) {
	for i := len(m.coop.gets) - 1; i >= 0; i-- {
		if g := &m.coop.gets[i]; g.p.rank == s {
			m.coopClose(m.seg.u64(g.rec + coopOffClaim))
			m.coopDone(i, fmt.Errorf("sm: cma read from rank %d: %w", s, err))
		}
	}
}

// progressHelps writes one chunk for the oldest record a peer asked us to
// help with, dropping the records that have nothing left for us.
func (m *Module) progressHelps() int {
	for len(m.coop.helps) > 0 {
		h := m.coop.helps[0]
		p := m.peers[h.s]
		if p == nil || p.dead != nil || !p.cma || m.rx.rxDead[h.s] {
			m.dropHelp()
			continue
		}
		seg := p.seg
		claim := seg.u64(h.rec + coopOffClaim)
		w := atomic.LoadUint64(claim)
		gen, lo, hi := coopSplit(w)
		if lo >= hi || int(atomic.LoadUint32(seg.u32(h.rec+coopOffRank))) != m.rank {
			m.dropHelp()
			continue
		}
		src := atomic.LoadUint64(seg.u64(h.rec + coopOffSrc))
		n := atomic.LoadUint64(seg.u64(h.rec + coopOffLen))
		chunk := atomic.LoadUint64(seg.u64(h.rec + coopOffChunk))
		r := m.liveRegion(atomic.LoadUint64(seg.u64(h.rec + coopOffKey)))
		if r == nil || chunk == 0 || src > uint64(len(r.buf)) || n > uint64(len(r.buf))-src || lo*chunk >= n {
			m.dropHelp() // not a region of ours now, or not a sane record
			continue
		}
		dst := atomic.LoadUint64(seg.u64(h.rec + coopOffDst))
		if !atomic.CompareAndSwapUint64(claim, w, coopWord(gen, lo+1, hi)) {
			continue // the reader took one, or closed the record: look again
		}
		off := lo * chunk
		l := min(chunk, n-off)
		if err := cmaWrite(p.pid, r.buf[src+off:src+off+l], dst+off); err != nil {
			atomic.StoreUint32(seg.u32(h.rec+coopOffFail), 1)
			if err == syscall.ESRCH {
				m.health.checkSoon = true
			}
			m.log.Debug().Err(err).Int("peer", h.s).Msg("cma write for a peer's read failed; it reads our share itself")
		}
		atomic.AddUint64(seg.u64(h.rec+coopOffSent), l)
		m.st.cmaHelpBytes += l
		return 1
	}
	return 0
}

func (m *Module) dropHelp() {
	m.coop.helps = append(m.coop.helps[:0], m.coop.helps[1:]...)
}

// liveRegion is our registered region with key k, or nil.
func (m *Module) liveRegion(k uint64) *region {
	for _, r := range m.rdma.live {
		if r.key.Key == k {
			return r
		}
	}
	return nil
}
