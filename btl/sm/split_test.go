package sm

import (
	"bytes"
	"errors"
	"os/exec"
	"testing"

	"github.com/gobtl/gobtl/core"
)

// The copy split between the two processes (the reader's CMA reads from
// the back, the sender's CMA writes from the front, coop.go) delivers
// every byte of sizes that are no multiple of a chunk or a page, read
// from any offset of the sender's region into a buffer at any address,
// and writes nothing outside it.
func TestASplitCopyDeliversEveryByteOfOddSizesAndOffsets(t *testing.T) {
	const guard = 64
	mods, src, _, _, _ := coopPair(t, 4<<20+8192, nil)
	rg := mods[1].rdma.live[0]
	var helped uint64
	for _, n := range []int{coopMin + 1, 300_001, 1<<20 - 1, 1<<20 + 13, 3<<20 + 4095} {
		for _, off := range []int{0, 1, 4093} {
			for _, skew := range []int{0, 3} {
				mem := bytes.Repeat([]byte{0xa5}, n+2*guard+skew)
				dst := mem[guard+skew : guard+skew+n]
				done := &doneErr{}
				before := mods[1].st.cmaHelpBytes
				getOp(t, mods[0], 1, &core.RDMAOp{Local: dst, Remote: rg.Key(), Offset: uint64(off), Done: done})
				progressUntil(t, mods, func() bool { return done.n == 1 })
				if done.err != nil {
					t.Fatalf("%d bytes at offset %d: %v", n, off, done.err)
				}
				if !bytes.Equal(dst, src[off:off+n]) {
					t.Fatalf("%d bytes at offset %d into an address %d past a line: the bytes differ", n, off, skew)
				}
				for i, b := range mem[:guard+skew] {
					if b != 0xa5 {
						t.Fatalf("%d bytes at offset %d: byte %d before the buffer written", n, off, guard+skew-i)
					}
				}
				for i, b := range mem[guard+skew+n:] {
					if b != 0xa5 {
						t.Fatalf("%d bytes at offset %d: byte %d after the buffer written", n, off, i)
					}
				}
				helped += mods[1].st.cmaHelpBytes - before
			}
		}
	}
	if helped == 0 {
		t.Fatal("the sender moved no byte of any read: the copy was not split")
	}
}

// A reader whose sender's process is gone fails the split read with
// core.ErrPeerLost — at the first chunk it cannot read — and gives its
// record back, rather than wait for chunks nobody will write.
func TestASplitReadFromAGoneProcessFailsAsPeerLost(t *testing.T) {
	mods, _, _, op, done := coopPair(t, 1<<20, nil)
	getOp(t, mods[0], 1, op)
	if len(mods[0].coop.gets) != 1 {
		t.Fatalf("%d split reads in flight, want 1", len(mods[0].coop.gets))
	}
	// A process that has exited and been reaped: its pid names nothing.
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Skipf("no process to outlive: %v", err)
	}
	mods[0].coop.gets[0].p.pid = c.Process.Pid
	progressUntil(t, mods[:1], func() bool { return done.n == 1 })
	if !errors.Is(done.err, core.ErrPeerLost) {
		t.Fatalf("read from a gone process: %v, want %v", done.err, core.ErrPeerLost)
	}
	if len(mods[0].coop.free) != coopRecs || len(mods[0].coop.gets) != 0 {
		t.Fatalf("after the failed read: %d records free, %d reads in flight", len(mods[0].coop.free), len(mods[0].coop.gets))
	}
}
