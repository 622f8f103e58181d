package ib

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/experiment/recvbuf"
	"github.com/gobtl/gobtl/internal/msgtest"
	"github.com/gobtl/gobtl/pml"
	"github.com/gobtl/gobtl/policies/recvbuf/bsrq"
)

// exchange sends every size from each rank to the next and checks what
// arrives, with all receives posted first (expected) or after (unexpected).
func exchange(c *pml.Comm, sizes []int, preposted bool) error {
	n, me := c.Size(), c.Rank()
	to, from := (me+1)%n, (me-1+n)%n
	recvs := make([][]byte, len(sizes))
	var rs []*pml.Request
	post := func() error {
		for i, sz := range sizes {
			recvs[i] = make([]byte, sz)
			r, err := c.Irecv(recvs[i], from, i)
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
		return nil
	}
	if preposted {
		if err := post(); err != nil {
			return err
		}
		if err := c.Barrier(); err != nil {
			return err
		}
	}
	var ss []*pml.Request
	for i, sz := range sizes {
		s, err := c.Isend(msgtest.Fill(make([]byte, sz), uint64(me*1000+i)), to, i)
		if err != nil {
			return err
		}
		ss = append(ss, s)
	}
	if !preposted {
		if err := post(); err != nil {
			return err
		}
	}
	if err := c.Waitall(append(ss, rs...), nil); err != nil {
		return err
	}
	for i, sz := range sizes {
		if err := msgtest.Check(recvs[i], uint64(from*1000+i)); err != nil {
			return fmt.Errorf("message %d (%d bytes) from rank %d: %w", i, sz, from, err)
		}
	}
	return nil
}

var sizes = []int{0, 1, 100, 4000, 12 << 10, 12<<10 + 1, 65536, 200000, 1 << 20, 3<<20 + 17}

func TestEveryProtocolMovesEverySizeOverIB(t *testing.T) {
	for _, proto := range []pml.Protocol{pml.ProtoRead, pml.ProtoWrite, pml.ProtoReadAsync, pml.ProtoPipeline} {
		for _, pre := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/preposted=%v", proto, pre), func(t *testing.T) {
				j, err := recvbuf.Open(context.Background(), recvbuf.JobSpec{Ranks: 3, Options: pml.Options{Protocol: proto}})
				if err != nil {
					t.Fatal(err)
				}
				defer j.Close()
				if err := j.Run(func(c *pml.Comm) error { return exchange(c, sizes, pre) }); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestTheBSRQLayoutCarriesThePML(t *testing.T) {
	j, err := recvbuf.Open(context.Background(), recvbuf.JobSpec{Ranks: 4, Policy: func() (core.RecvBuffers, error) {
		return bsrq.New(core.MustParams(bsrq.Params))
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Run(func(c *pml.Comm) error { return exchange(c, sizes, false) }); err != nil {
		t.Fatal(err)
	}
}

func TestALostPeerFailsThePendingRequestsThatInvolveIt(t *testing.T) {
	j, err := recvbuf.Open(context.Background(), recvbuf.JobSpec{Ranks: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	// Connect everyone first.
	if err := j.Run(func(c *pml.Comm) error { return c.Barrier() }); err != nil {
		t.Fatal(err)
	}
	// Rank 2 dies: its HCA port goes down and its modules close.
	kill(t, j.Mods[2])
	j.Comms[2].Close()
	j.Comms[2] = nil
	buf := make([]byte, 1<<20)
	_, err = j.Comms[0].Recv(buf, 2, 7)
	if !errors.Is(err, core.ErrPeerLost) {
		t.Fatalf("a receive from the dead rank: %v, want ErrPeerLost", err)
	}
	t.Logf("receive from the dead rank: %v", err)
	// Ranks 0 and 1 still talk.
	done := make(chan error, 1)
	go func() { done <- j.Comms[1].Send([]byte("alive"), 0, 1) }()
	got := make([]byte, 5)
	if _, err := j.Comms[0].Recv(got, 1, 1); err != nil || string(got) != "alive" {
		t.Fatalf("survivors: %q %v", got, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
