package pml

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A rank's state names every pending request with its peer, tag, size
// and where its protocol is; Routes names which module reaches which
// peer.
func TestStateDescribesEveryPendingRequest(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{Protocol: ProtoWrite})
	c0, c1 := w.comms[0], w.comms[1]
	big := make([]byte, 256<<10)
	small := make([]byte, 64)

	recv7, err := c1.Irecv(small, 0, 7) // nothing is sent on tag 7 yet
	if err != nil {
		t.Fatal(err)
	}
	send9, err := c0.Isend(big, 1, 9) // rendezvous: nobody receives tag 9 yet
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		c0.Progress()
		c1.Progress()
	}
	var out strings.Builder
	st := c0.State(time.Second)
	st.Report(&out, "")
	if st.Busy || len(st.Requests) != 1 || !strings.Contains(out.String(),
		"send to 1 tag 9, 262144 bytes (1024 done): rdma_write, START sent, waiting for the receiver's REPLY") {
		t.Fatalf("rank 0's state:\n%s", out.String())
	}
	out.Reset()
	c1.State(time.Second).Report(&out, "[1] ")
	if !strings.Contains(out.String(), "[1]   recv from 0 tag 7, 64 bytes (0 done): posted, no matching message yet") {
		t.Fatalf("rank 1's state:\n%s", out.String())
	}

	routes, unreachable := c0.Routes()
	if len(unreachable) != 0 || len(routes) != 2 || !slices.Equal(routes[0].Peers, []int{0}) || !slices.Equal(routes[1].Peers, []int{1}) {
		t.Fatalf("routes %+v, unreachable %v; want self to 0 and the rail to 1", routes, unreachable)
	}

	// The job completes what it left pending.
	w.run(t, func(c *Comm) error {
		if c.Rank() == 0 {
			if err := c.Send(small, 1, 7); err != nil {
				return err
			}
			_, err := c.Wait(send9)
			return err
		}
		if _, err := c.Recv(big, 0, 9); err != nil {
			return err
		}
		_, err := c.Wait(recv7)
		return err
	})
}
