package sm

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/jobfile"
	"github.com/gobtl/gobtl/internal/mptest"
	"github.com/gobtl/gobtl/internal/msgtest"
	"github.com/rs/zerolog"
)

// What a peer writes into shared memory is checked before it is used: a
// hostile value fails the peer with ErrBadFrame (or is dropped, where it
// names no peer), and nothing is delivered from, or copied to, a place
// the value chose. Each case writes one hostile value where a peer (rank
// 0) writes, and lets the receiver (rank 1) poll.
func TestHostileValuesInSharedMemoryAreErrors(t *testing.T) {
	big := make([]byte, 8<<10) // past fastbox_max: travels in a fragment
	small := []byte("small")
	frag := func(m *Module) int { return m.seg.lay.frag(int(m.tx.inflight[1][0])) }
	for _, c := range []struct {
		name    string
		payload []byte
		poison  func(sender, receiver *Module, p *peer, slot uint64)
		dead    bool // the receiver fails rank 0
	}{
		{"a FIFO descriptor outside the sender's fragments", nil, func(s, _ *Module, p *peer, _ uint64) {
			p.fifo.push(makeDesc(0, s.seg.lay.fragOff+cacheLine))
		}, true},
		{"a FIFO descriptor past the sender's segment", nil, func(s, _ *Module, p *peer, _ uint64) {
			p.fifo.push(makeDesc(0, len(s.seg.mem)+s.seg.lay.fragStride))
		}, true},
		{"a FIFO descriptor naming no rank", nil, func(s, _ *Module, p *peer, _ uint64) {
			p.fifo.push(makeDesc(7, s.seg.lay.fragOff))
		}, false},
		{"a fragment length past its slot", big, func(s, _ *Module, _ *peer, _ uint64) {
			atomic.StoreUint32(s.seg.u32(frag(s)+fragOffLen), 1<<30)
		}, true},
		{"a fragment frame offset past its line", big, func(s, _ *Module, _ *peer, _ uint64) {
			atomic.StoreUint32(s.seg.u32(frag(s)+fragOffFrame), cacheLine)
		}, true},
		{"a fast-box slot length past the box", small, func(_, _ *Module, p *peer, slot uint64) {
			hdr := p.out.ring[slot : slot+8]
			hdr[0], hdr[1], hdr[2], hdr[3] = 0xff, 0xff, 0xff, 0x7f
		}, true},
		{"an active-sender entry naming no rank", nil, func(_, r *Module, _ *peer, _ uint64) {
			i := atomic.AddUint32(r.seg.u32(offActiveN), 1) - 1
			atomic.StoreUint32(r.seg.u32(r.seg.lay.activeOff+4*int(i)), 1000)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mods, _ := openRanks(t, 2, nil)
			delivered := 0
			mods[1].Register(core.TypeUserBase, func(*core.Header, []byte) { delivered++ })
			var lost error
			mods[1].OnPeerLost(func(_ int, err error) { lost = err })
			ep, err := mods[0].Endpoint(1)
			if err != nil {
				t.Fatal(err)
			}
			p := ep.(*peer)
			slot := p.out.tail & p.out.mask
			if c.payload != nil {
				if err := ep.Send(core.Header{Type: core.TypeUserBase, Src: 0}, c.payload, nil, 0); err != nil {
					t.Fatal(err)
				}
			}
			c.poison(mods[0], mods[1], p, slot)
			for range 100 {
				mods[1].Progress()
			}
			switch {
			case c.dead && (!errors.Is(lost, core.ErrBadFrame) || !mods[1].rx.rxDead[0]):
				t.Fatalf("rank 0 not failed with ErrBadFrame: %v", lost)
			case !c.dead && (lost != nil || mods[1].rx.rxDead[0]):
				t.Fatalf("rank 0 failed: %v", lost)
			case delivered != 0:
				t.Fatalf("%d frames delivered", delivered)
			}
			t.Log(lost)
		})
	}
}

// The claim word of a read record is shared with the sender, which may
// only take chunks below hi: a claim past the read is the sender's error,
// not a copy past the reader's buffer.
func TestAClaimPastTheReadFailsTheSender(t *testing.T) {
	const n = 1 << 20
	mods, _, _, op, done := coopPair(t, n, nil)
	getOp(t, mods[0], 1, op)
	g := mods[0].coop.gets[0]
	gen, _, _ := coopSplit(atomic.LoadUint64(mods[0].seg.u64(g.rec + coopOffClaim)))
	atomic.StoreUint64(mods[0].seg.u64(g.rec+coopOffClaim), coopWord(gen, 0, g.chunks+40))
	mods[0].Progress()
	if done.n != 1 || !errors.Is(done.err, core.ErrBadFrame) || !mods[0].rx.rxDead[1] {
		t.Fatalf("%d completions, %v; rank 1 dead %v", done.n, done.err, mods[0].rx.rxDead[1])
	}
	t.Log(done.err)
}

// A peer's control block is checked field by field before its layout is
// computed: values that would make the layout wrap, or run past the file,
// refuse the segment.
func TestAPeerSegmentWithAHostileLayoutIsRefused(t *testing.T) {
	mods, _ := openRanks(t, 2, nil)
	seg := mods[1].seg
	for _, c := range []struct {
		off  int
		v    uint32
		want string
	}{
		{offFboxSize, 1 << 31, "not a power of two up to"},
		{offFboxSize, 3 << 10, "not a power of two"},
		{offFragCount, 1 << 31, "fragments, want"},
		{offFragCount, 0, "fragments, want"},
		{offMaxFrame, 0xffffffff, "largest frame"},
		{offFragStride, 64, "inconsistent layout"},
		{offFifoCells, 1 << 20, "inconsistent layout"},
		{offSize, 3, "made for 3 ranks"},
	} {
		old := atomic.LoadUint32(seg.u32(c.off))
		atomic.StoreUint32(seg.u32(c.off), c.v)
		s, err := openSegment(seg.path, 1, 2)
		atomic.StoreUint32(seg.u32(c.off), old)
		if err == nil {
			s.unmap()
			t.Errorf("field at %d = %d: segment accepted", c.off, c.v)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("field at %d = %d: %v, want %q", c.off, c.v, err, c.want)
		}
	}
	old := atomic.LoadUint64(seg.u64(offTotal))
	atomic.StoreUint64(seg.u64(offTotal), 1<<40)
	if s, err := openSegment(seg.path, 1, 2); err == nil {
		s.unmap()
		t.Error("a total past the file was accepted")
	}
	atomic.StoreUint64(seg.u64(offTotal), old)
	if s, err := openSegment(seg.path, 1, 2); err != nil {
		t.Fatalf("the restored segment: %v", err)
	} else {
		s.unmap()
	}
}

// A segment is the rank's own file: 0600, one link, named with a random
// part nobody can guess from the job id; what stands at a peer's
// published name that is not the peer's own file (a link, another user's
// file) is refused.
func TestSegmentsAreOwnFilesWithUnguessableNames(t *testing.T) {
	mods, _ := openRanks(t, 2, nil)
	name := regexp.MustCompile(`/gobtl-smtest[0-9]+-[0-9]+-sm-1-[0-9a-f]{16}$`)
	if !name.MatchString(mods[1].seg.path) {
		t.Fatalf("segment name %s", mods[1].seg.path)
	}
	f, err := jobfile.Open(mods[1].seg.path)
	if err != nil {
		t.Fatalf("our own segment: %v", err)
	}
	f.Close()
	// A link put where rank 1's segment was.
	path := mods[1].seg.path
	os.Rename(path, path+".moved")
	os.Symlink(path+".moved", path)
	_, err = mods[0].Endpoint(1)
	os.Remove(path)
	os.Rename(path+".moved", path)
	if !errors.Is(err, jobfile.ErrNotOurs) || !errors.Is(err, core.ErrUnreachable) {
		t.Fatalf("through a link: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("another user's file needs root to make")
	}
	mods, _ = openRanks(t, 2, nil)
	os.Chown(mods[1].seg.path, 65534, 65534)
	_, err = mods[0].Endpoint(1)
	os.Chown(mods[1].seg.path, 0, 0)
	if !errors.Is(err, jobfile.ErrNotOurs) {
		t.Fatalf("another user's file: %v", err)
	}
}

// A /dev/shm without room for the segment is an error at Open that says
// how much was needed and how much is free, never a SIGBUS later (issue
// 30 item 7: 3 of 3 runs crashed in copyLines on a 1 MB tmpfs).
func TestAFullShmIsAnErrorAtOpen(t *testing.T) {
	out, err := mptest.SmallTmpfs(t, "1m", "TestOpenOnASmallTmpfs")
	if err != nil || !strings.Contains(string(out), "--- PASS: TestOpenOnASmallTmpfs") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

// TestOpenOnASmallTmpfs is the child's half of TestAFullShmIsAnErrorAtOpen.
func TestOpenOnASmallTmpfs(t *testing.T) {
	dir := mptest.TmpfsDir()
	if dir == "" {
		t.Skip("the child of TestAFullShmIsAnErrorAtOpen")
	}
	boots := boot.Group(2, msgtest.JobID())
	p := core.MustParams(Params)
	p.SetText("dir", dir)
	_, err := Open(core.BTLEnv{Params: p, Boot: boots[0], Log: zerolog.Nop(), Metrics: core.NewMetrics()})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "needs ") || !strings.Contains(err.Error(), " free of 1048576 bytes") {
		t.Fatalf("Open on a 1 MiB tmpfs: %v", err)
	}
	t.Log(err)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left %d files", len(ents))
	}
}
