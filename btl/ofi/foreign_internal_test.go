//go:build ofi && cgo

package ofi

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/ofi/fabric"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/msgtest"
)

// intruder is a process outside the job: an endpoint of its own on the
// job's provider, which reads rank 1's published address (as anyone who
// can see the bootstrap's record, or guess a port, could) and sends to it.
type intruder struct {
	t    *testing.T
	ep   *fabric.Endpoint
	to   fabric.Addr
	buf  []byte
	comp []fabric.Completion
}

func newIntruder(t *testing.T, j *tjob, target int) *intruder {
	m := j.mods[target]
	l, err := fabric.GetInfo(fabric.Hints{Provider: m.ep.Info.Provider, Domain: m.ep.Info.Domain, Caps: caps, Order: fabric.OrderSAS})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Free()
	ep, err := fabric.Open(&l.Infos[0], fabric.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	raw, err := j.boots[0].Get(context.Background(), target, m.pubKey)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := decodePublished(raw)
	if err != nil {
		t.Fatal(err)
	}
	to, err := ep.Insert(pub.name)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := mmap(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	return &intruder{t: t, ep: ep, to: to, buf: buf, comp: make([]fabric.Completion, 16)}
}

// progress moves the intruder's sends along.
func (x *intruder) progress() int {
	n, _ := x.ep.Poll(x.comp)
	return n
}

// send sends msg with tag and CQ data, retrying while the provider is
// busy; the job's ranks progress meanwhile.
func (x *intruder) send(j *tjob, msg []byte, tag, data uint64) {
	copy(x.buf, msg)
	err := msgtest.Poll("the intruder's send", 30e9, func() bool {
		err := x.ep.TSend(x.buf[:len(msg)], fabric.Desc{}, data, x.to, tag, 1)
		if err != nil && !errors.Is(err, fabric.ErrAgain) {
			x.t.Fatal(err)
		}
		return err == nil
	}, j.progress, x.progress)
	if err != nil {
		x.t.Fatal(err)
	}
}

// TestAForeignSenderDoesNotDisturbTheJob runs traffic from rank 0 to
// rank 1 while a process outside the job sends rank 1 garbage on every
// class, frames in rank 0's name with made-up tokens, hellos in rank 0's
// name without the key, and a replay of rank 0's own hello: every frame
// of the job arrives intact and in order, none of the intruder's is
// delivered, and no peer is lost.
func TestAForeignSenderDoesNotDisturbTheJob(t *testing.T) {
	for _, prov := range providersHere {
		t.Run(prov, func(t *testing.T) {
			j := openTestJob(t, prov, 2, nil)
			var got [][]byte
			var lost []error
			j.mods[1].Register(core.TypeUserBase, func(h *core.Header, p []byte) {
				if h.Src != 0 {
					t.Errorf("a frame from rank %d", h.Src)
				}
				got = append(got, append([]byte(nil), p...))
			})
			j.mods[1].OnPeerLost(func(r int, err error) { lost = append(lost, err) })
			j.mods[0].OnPeerLost(func(r int, err error) { lost = append(lost, err) })
			x := newIntruder(t, j, 1)
			rng := rand.New(rand.NewPCG(5, 6))
			var sent [][]byte
			sendOne := func(i int) {
				n := rng.IntN(3000)
				b := msgtest.Fill(make([]byte, n), uint64(i))
				sent = append(sent, b)
				j.send(0, 1, core.Header{Type: core.TypeUserBase, Src: 0, PSN: uint32(i)}, b, nil, 0)
			}
			sendOne(0)
			j.until("the first frame", func() bool { return len(got) == 1 })
			p0 := j.mods[0].peers[1]
			replay := append([]byte(nil), p0.helloMsg[:]...)
			frame := make([]byte, core.HeaderSize+16)
			(&core.Header{Type: core.TypeUserBase, Src: 0, Length: 16}).Encode(frame)
			var fakeProof core.Proof
			for i := 1; i < 200; i++ {
				switch i % 5 {
				case 0: // garbage on a random class, random data
					x.send(j, msgtest.Fill(make([]byte, rng.IntN(200)), uint64(i)), uint64(rng.IntN(5)), rng.Uint64())
				case 1: // a well-formed frame in rank 0's name with a guessed token
					x.send(j, frame, 0, cqData(rng.Uint64()>>seqBits, p0.txSeq))
				case 2: // a hello without the key
					var b [ctlBufSize]byte
					nd := core.NewNonce()
					n := encodeHello(b[:], 0, uint64(1)<<62, (*[16]byte)(&nd), &fakeProof)
					x.send(j, b[:n], tagCtl, 0)
				case 3: // rank 0's own hello, replayed
					x.send(j, replay, tagCtl, 0)
				case 4: // a goodbye and credits in rank 0's name, unauthenticated
					var b [ctlBufSize]byte
					x.send(j, b[:encodeBye(b[:], 0, 0)], tagCtl, 0)
					x.send(j, b[:encodeCredits(b[:], 0, []uint16{1000, 1000})], tagCtl, cqData(rng.Uint64()>>seqBits, 0))
				}
				sendOne(i)
			}
			j.until("every frame of the job", func() bool { return len(got) == len(sent) })
			for i := range sent {
				if !bytes.Equal(got[i], sent[i]) {
					t.Fatalf("frame %d arrived changed or out of order", i)
				}
			}
			if len(lost) > 0 {
				t.Fatalf("a peer was lost: %v", lost[0])
			}
			if p := j.mods[1].peers[0]; p.err != nil || p.byeSeen {
				t.Fatalf("rank 0's session at rank 1 was disturbed: %v, bye %v", p.err, p.byeSeen)
			}
			// The intruder's last messages may still be on their way (the
			// sockets provider moves them on a thread of its own): wait for
			// the rejections rather than count them at once.
			j.until("rank 1 rejecting 150 of the intruder's messages", func() bool { return j.mods[1].st.rejected.Load() >= 150 })
			// The job still talks after the intruder's strays have expired.
			j.mods[1].strays.expire(j.mods[1], j.mods[1].now+2*strayTime)
			sendOne(len(sent))
			j.until("a frame after the attack", func() bool { return len(got) == len(sent) })
			t.Logf("%d job frames delivered, %d foreign messages rejected", len(got), j.mods[1].st.rejected.Load())
		})
	}
}

// TestAPeerOnAnotherHostIsLostWhenAProbeCannotReachIt: a peer the
// module takes for one on another host (no pidfd, no module table to
// look at) is watched by probes; once its endpoint is gone, a probe
// fails at the provider and the peer is lost. Silence alone loses
// nobody: before the kill, probes come and go unanswered.
func TestAPeerOnAnotherHostIsLostWhenAProbeCannotReachIt(t *testing.T) {
	for _, prov := range []string{"tcp", "sockets", "net"} {
		t.Run(prov, func(t *testing.T) {
			j := openTestJob(t, prov, 2, map[string]string{"probe_interval": "10ms", "peer_timeout": "200ms"})
			var lost []error
			j.mods[0].OnPeerLost(func(r int, err error) { lost = append(lost, err) })
			got := 0
			j.mods[0].Register(core.TypeUserBase, func(*core.Header, []byte) { got++ })
			j.mods[1].Register(core.TypeUserBase, func(*core.Header, []byte) { got++ })
			j.send(0, 1, core.Header{Type: core.TypeUserBase, Src: 0}, []byte("hi"), nil, 0)
			j.send(1, 0, core.Header{Type: core.TypeUserBase, Src: 1}, []byte("hi"), nil, 0)
			j.until("the greetings", func() bool { return got == 2 })
			m := j.mods[0]
			p := m.peers[1]
			p.proc, p.remote = nil, true
			m.live.local = nil
			m.live.remote = append(m.live.remote, p)
			// Probes while rank 1 lives but does not answer them.
			quiet := m.clock.Now() + 100*time.Millisecond
			for m.clock.Now() < quiet {
				m.Progress()
			}
			if len(lost) > 0 {
				t.Fatalf("a silent peer was lost: %v", lost[0])
			}
			Kill(j.mods[1])
			msgtest.Until(t, "rank 1 lost", 30*time.Second, func() bool { return len(lost) > 0 }, m.Progress)
			if !errors.Is(lost[0], core.ErrPeerLost) {
				t.Fatalf("lost with %v", lost[0])
			}
			t.Log(lost[0])
		})
	}
}

// TestForeignMessagesOnAnyTagAreTakenAndRejected: a process outside the
// job that sends with tags no class uses cannot park its messages in the
// provider's unexpected queue, where they would stay for the job's life:
// every one lands in a receive of rank 1's (a sink, mostly) and is
// rejected. Where the provider buffers what matches no receive (tcp under
// rxm, sockets), such messages stayed there for the job's life; net
// leaves one in the sender's socket, where it stops every later message
// of that sender. On the network providers: not on shm, whose regions
// only the job's user can write to, and whose libfabric 1.17 matches a
// receive posted later against held messages under the held message's
// ignore mask, not the receive's (smr_generic_recv), so a sink does not
// take back what arrived while it was out.
func TestForeignMessagesOnAnyTagAreTakenAndRejected(t *testing.T) {
	for _, prov := range []string{"tcp", "sockets", "net"} {
		t.Run(prov, func(t *testing.T) {
			j := openTestJob(t, prov, 2, nil)
			got := 0
			j.mods[1].Register(core.TypeUserBase, func(*core.Header, []byte) { got++ })
			j.send(0, 1, core.Header{Type: core.TypeUserBase, Src: 0}, []byte("before"), nil, 0)
			j.until("the first frame", func() bool { return got == 1 })
			x := newIntruder(t, j, 1)
			rng := rand.New(rand.NewPCG(7, 8))
			before := j.mods[1].st.rejected.Load()
			const n = 2000
			for i := range n {
				x.send(j, msgtest.Fill(make([]byte, rng.IntN(sinkBufSize+1)), uint64(i)), rng.Uint64(), rng.Uint64())
			}
			taken := func() int64 { return int64(j.mods[1].st.rejected.Load() - before) }
			if err := msgtest.Poll("", 30e9, func() bool { return taken() >= n }, j.progress, x.progress); err != nil {
				t.Fatalf("rank 1 took %d of %d foreign messages; the provider holds the rest", taken(), n)
			}
			if taken() != n {
				t.Fatalf("%d rejections for %d foreign messages", taken(), n)
			}
			j.send(0, 1, core.Header{Type: core.TypeUserBase, Src: 0, PSN: 1}, []byte("after"), nil, 0)
			j.until("a frame after the flood", func() bool { return got == 2 })
		})
	}
}

// TestSinkBlocksCoverEveryClassByteNoClassUses: for every layout length,
// each class byte at or above it is in exactly one sink block, and none
// below it (the control class's and the tagged classes' tags) is in any.
func TestSinkBlocksCoverEveryClassByteNoClassUses(t *testing.T) {
	for classes := 1; classes < maxClasses; classes++ {
		blocks := sinkBlocks(classes)
		for v := uint64(0); v <= tagClassMask; v++ {
			tag := v | 0xabcd<<16 // the bits above the class byte are the sender's
			in := 0
			for _, b := range blocks {
				if tag|b.ignore == b.tag|b.ignore {
					in++
				}
			}
			if want := min(1, int(v)/classes); in != want {
				t.Fatalf("%d classes: class byte %#x is in %d sink blocks, want %d", classes, v, in, want)
			}
		}
		if len(blocks) > 8 {
			t.Errorf("%d classes: %d sink blocks", classes, len(blocks))
		}
	}
}
