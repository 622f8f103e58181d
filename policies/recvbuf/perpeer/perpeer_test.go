package perpeer

import (
	"testing"

	"github.com/gobtl/gobtl/core"
)

func TestTheDefaultIsOpenMPI12sFixedPerPeerBuffers(t *testing.T) {
	p, err := New(core.MustParams(Params))
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Setup(core.RecvInfo{Peers: 7, EagerLimit: 12 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Queues) != 2 || s.Queues[0].BufSize != 4096 || s.Queues[1].BufSize != 32768 ||
		s.Queues[0].Count != 8 || s.Queues[1].Kind != core.QueuePerPeer {
		t.Fatalf("layout %+v", s.Queues)
	}
	if d := p.Observe([]core.RecvEvent{{Kind: core.RecvLimit, Queue: 0}}, nil); len(d) != 0 {
		t.Fatalf("a static policy decided %+v", d)
	}
}

func TestSharedQueuesAreRefused(t *testing.T) {
	ps := core.MustParams(Params)
	if err := ps.Set("receive_queues", "P,128,8:S,4096,64"); err != nil {
		t.Fatal(err)
	}
	if _, err := New(ps); err == nil {
		t.Fatal("perpeer accepted an S queue")
	}
}
