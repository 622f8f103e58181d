package mailbox

import (
	"encoding/binary"
	"runtime"
	"sync"
	"testing"

	"github.com/gobtl/gobtl/btl/extoll/nic"
)

func packet(n int, tag uint8, seq uint64) *nic.Slot {
	var s nic.Slot
	s.SetHeader(n, tag, seq%2 == 0)
	binary.LittleEndian.PutUint64(s.Area(), seq)
	return &s
}

func TestRingDeliversInOrderAndReportsFull(t *testing.T) {
	r, err := New(4)
	if err != nil {
		t.Fatal(err)
	}
	for lap := uint64(0); lap < 3; lap++ {
		for i := uint64(0); i < 4; i++ {
			if !r.TryPut(packet(8+int(i), uint8(i), lap*4+i), 7) {
				t.Fatalf("lap %d: put %d refused on a ring with room", lap, i)
			}
		}
		if r.TryPut(packet(8, 1, 99), 7) {
			t.Fatalf("lap %d: a fifth packet fit a ring of four slots", lap)
		}
		if got := r.Len(); got != 4 {
			t.Fatalf("Len = %d, want 4", got)
		}
		for i := uint64(0); i < 4; i++ {
			s := r.Peek()
			if s == nil {
				t.Fatalf("lap %d: ring empty at %d", lap, i)
			}
			if s.Src() != 7 || s.Len() != 8+int(i) || s.Tag() != uint8(i) || s.Spare() != ((lap*4+i)%2 == 0) {
				t.Fatalf("lap %d slot %d: src %d len %d tag %d spare %v", lap, i, s.Src(), s.Len(), s.Tag(), s.Spare())
			}
			if got := binary.LittleEndian.Uint64(s.Area()); got != lap*4+i {
				t.Fatalf("payload %d, want %d", got, lap*4+i)
			}
			r.Release()
		}
		if r.Peek() != nil {
			t.Fatal("ring not empty after draining")
		}
	}
}

func TestAttachSeesTheOwnersRing(t *testing.T) {
	words := make([]uint64, Size(8)/8)
	mem := unsafeBytes(words)
	owner, err := Format(mem, 8)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := Attach(mem)
	if err != nil {
		t.Fatal(err)
	}
	if !peer.TryPut(packet(3, 2, 42), 5) {
		t.Fatal("put refused")
	}
	s := owner.Peek()
	if s == nil || s.Src() != 5 || binary.LittleEndian.Uint64(s.Area()) != 42 {
		t.Fatalf("owner did not see the peer's packet: %v", s)
	}
	if _, err := Attach(make([]byte, 64)); err == nil {
		t.Fatal("attached to a region that is not a mailbox")
	}
}

// Many producers, one consumer: every packet arrives once, and each
// producer's packets arrive in the order it sent them.
func TestRingManyProducersKeepPerSenderOrder(t *testing.T) {
	const producers, each = 4, 5000
	r, err := New(16)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := uint64(0); i < each; i++ {
				s := packet(8, 0, i)
				for !r.TryPut(s, p) {
					runtime.Gosched()
				}
			}
		}(p)
	}
	next := make([]uint64, producers)
	for got := 0; got < producers*each; {
		s := r.Peek()
		if s == nil {
			runtime.Gosched()
			continue
		}
		src, seq := s.Src(), binary.LittleEndian.Uint64(s.Area())
		if seq != next[src] {
			t.Fatalf("producer %d: got packet %d, want %d", src, seq, next[src])
		}
		next[src]++
		r.Release()
		got++
	}
	wg.Wait()
	if r.Peek() != nil {
		t.Fatal("extra packets in the ring")
	}
}
