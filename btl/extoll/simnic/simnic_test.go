package simnic

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/sim"
)

var jobs int

// run runs fn on n ranks of a fresh simulated job, each with its device
// (slots mailbox slots, stall bound stall, ppn ranks to a card).
func run(t *testing.T, n, slots, ppn int, stall time.Duration, fn func(d *Device, s *sim.Sched) error) *Fabric {
	t.Helper()
	jobs++
	s := sim.New(fmt.Sprintf("%s-%d", t.Name(), jobs), n, sim.Options{})
	if err := s.Register(); err != nil {
		t.Fatal(err)
	}
	defer s.Unregister()
	err := s.Run(func(r int) error {
		d, err := Open(Config{JobID: fmt.Sprintf("%s-%d", t.Name(), jobs), Rank: r, Size: n, Name: "x", Slots: slots, NodeSize: ppn, StallTimeout: stall, Prefix: "extoll.x"})
		if err != nil {
			return err
		}
		defer d.Close()
		// Every device is open before anyone sends, as after the modex.
		if err := s.Boot(r).Fence(context.Background()); err != nil {
			return err
		}
		return fn(d, s)
	})
	if err != nil {
		t.Fatal(err)
	}
	return FabricOf(s)
}

func packets(n int) []nic.Slot {
	p := make([]nic.Slot, n)
	for i := range p {
		p[i].SetHeader(4, uint8(i%nic.MaxTag), false)
		p[i].Area()[0] = byte(i)
	}
	return p
}

// recv polls until n packets have come and returns their first payload
// bytes and sources.
func recv(d *Device, n int) ([]byte, []int) {
	var got []byte
	var src []int
	for len(got) < n {
		if s := d.Poll(); s != nil {
			got = append(got, s.Payload()[0])
			src = append(src, s.Src())
			d.Release()
		}
	}
	return got, src
}

func TestPacketsFromOneSenderArriveInOrderWithTheirSource(t *testing.T) {
	const n = 200
	run(t, 3, 64, 1, 0, func(d *Device, s *sim.Sched) error {
		switch d.Rank() {
		case 0, 1:
			if k, err := d.Send(2, packets(n)); k != n || err != nil {
				return fmt.Errorf("sent %d: %v", k, err)
			}
		case 2:
			got, src := recv(d, 2*n)
			next := [2]int{}
			for i, b := range got {
				if int(b) != next[src[i]]%256 {
					return fmt.Errorf("packet %d from rank %d carries %d, want %d", i, src[i], b, next[src[i]]%256)
				}
				next[src[i]]++
			}
		}
		return nil
	})
}

func TestAPacketTakesTheLogGPTime(t *testing.T) {
	l := DefaultLink
	run(t, 2, 16, 1, 0, func(d *Device, s *sim.Sched) error {
		if d.Rank() == 0 {
			_, err := d.Send(1, packets(1))
			return err
		}
		recv(d, 1)
		// Rank 1 polls from time 0 and idles at most IdleMin between
		// polls: it sees the packet within that of its delivery.
		want := l.Overhead + l.Wire(nic.SlotSize) + l.Latency + l.Overhead
		if now := s.Now(); now < want || now > want+10*time.Microsecond {
			return fmt.Errorf("the packet was seen at %v, delivered at %v by the model", now, want)
		}
		return nil
	})
}

func TestAFullMailboxHoldsTheSenderUntilASlotIsFree(t *testing.T) {
	const slots = 4
	m := core.NewMetrics()
	jobs++
	id := fmt.Sprintf("%s-%d", t.Name(), jobs)
	s := sim.New(id, 2, sim.Options{})
	if err := s.Register(); err != nil {
		t.Fatal(err)
	}
	defer s.Unregister()
	var sentAt time.Duration
	err := s.Run(func(r int) error {
		d, err := Open(Config{JobID: id, Rank: r, Size: 2, Name: "x", Slots: slots, Metrics: m, Prefix: fmt.Sprintf("r%d", r)})
		if err != nil {
			return err
		}
		defer d.Close()
		if err := s.Boot(r).Fence(context.Background()); err != nil {
			return err
		}
		if r == 0 {
			if _, err := d.Send(1, packets(slots+1)); err != nil {
				return err
			}
			sentAt = s.Now()
			return nil
		}
		s.Compute(time.Millisecond) // not polling: the mailbox fills
		if d.Occupancy() != slots {
			return fmt.Errorf("%d slots occupied after a millisecond, want %d", d.Occupancy(), slots)
		}
		recv(d, slots+1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sentAt < time.Millisecond {
		t.Fatalf("the sender went on at %v, before the receiver freed a slot at 1ms", sentAt)
	}
	snap := m.Snapshot()
	if snap["r0.velo_blocked"] != int64(1) || snap["r0.velo_stalls"] != int64(0) {
		t.Fatalf("blocked %v, stalls %v; want 1 and 0", snap["r0.velo_blocked"], snap["r0.velo_stalls"])
	}
}

func TestAMailboxThatStaysFullStallsTheSender(t *testing.T) {
	run(t, 2, 4, 1, 100*time.Microsecond, func(d *Device, s *sim.Sched) error {
		if d.Rank() == 1 {
			s.Compute(time.Millisecond)
			return nil
		}
		k, err := d.Send(1, packets(6))
		if k != 4 || !errors.Is(err, core.ErrStalled) {
			return fmt.Errorf("sent %d with %v; want 4 and ErrStalled", k, err)
		}
		return nil
	})
}

// waitNote polls for the next notification.
func waitNote(d *Device) nic.Notification {
	for {
		if n, ok := d.PollNotification(); ok {
			return n
		}
		d.Poll() // lets virtual time move
	}
}

func TestRMAIsCheckedAgainstTheKeyBoundsAndAccess(t *testing.T) {
	keys := make(chan core.MemKey, 2)
	run(t, 2, 16, 1, 0, func(d *Device, s *sim.Sched) error {
		if d.Rank() == 1 {
			rw := make([]byte, 64)
			copy(rw, "target")
			r1, _ := d.Register(rw, core.AccessRemoteRead|core.AccessRemoteWrite)
			ro := make([]byte, 64)
			r2, _ := d.Register(ro, core.AccessRemoteRead)
			keys <- r1.Key()
			keys <- r2.Key()
			// A put with a target notification lands here.
			n := waitNote(d)
			if n.Kind != nic.TargetPut || n.Peer != 0 || n.Key != r1.Key().Key || string(rw[8:14]) != "origin" {
				return fmt.Errorf("target notification %+v, memory %q", n, rw[:16])
			}
			s.Compute(time.Millisecond) // serve the rest
			return nil
		}
		for len(keys) < 2 {
			s.Compute(time.Microsecond)
		}
		rw, ro := <-keys, <-keys
		buf := make([]byte, 6)
		copy(buf, "origin")
		for i, c := range []struct {
			put  bool
			key  core.MemKey
			off  uint64
			fail bool
		}{
			{true, rw, 8, false},
			{false, rw, 0, false},
			{true, ro, 0, true},                             // access
			{false, core.MemKey{Key: 99, Len: 64}, 0, true}, // key
		} {
			op := nic.Op{Local: buf, Remote: c.key, Offset: c.off, Cookie: uint64(i), Notify: nic.NotifyTarget}
			f := d.Get
			if c.put {
				f = d.Put
			}
			if err := f(1, op); err != nil {
				return err
			}
			n := waitNote(d)
			if n.Kind != nic.OriginDone || n.Cookie != uint64(i) || (n.Err != nil) != c.fail {
				return fmt.Errorf("operation %d: %+v", i, n)
			}
			if i == 1 && string(buf) != "target" {
				return fmt.Errorf("get read %q", buf)
			}
		}
		if err := d.Put(1, nic.Op{Local: make([]byte, 65), Remote: rw}); err == nil {
			return errors.New("a put beyond the region started")
		}
		return nil
	})
}

func TestOutstandingRMAIsBounded(t *testing.T) {
	run(t, 2, 16, 1, 0, func(d *Device, s *sim.Sched) error {
		if d.Rank() == 1 {
			return nil
		}
		key := core.MemKey{Key: 1, Len: 8}
		for i := range maxOutstanding {
			if err := d.Put(1, nic.Op{Local: make([]byte, 8), Remote: key}); err != nil {
				return fmt.Errorf("put %d: %w", i, err)
			}
		}
		if err := d.Put(1, nic.Op{Local: make([]byte, 8), Remote: key}); !errors.Is(err, core.ErrNoResources) {
			return fmt.Errorf("put %d: %v, want ErrNoResources", maxOutstanding, err)
		}
		return nil
	})
}

func TestTheRanksOfANodeShareTheirCard(t *testing.T) {
	f := run(t, 4, 16, 2, 0, func(d *Device, s *sim.Sched) error {
		if d.Rank()%2 == 0 {
			_, err := d.Send(d.Rank()+1, packets(10))
			return err
		}
		recv(d, 10)
		return nil
	})
	devs := f.Devices()
	byRank := map[int]*Device{}
	for _, d := range devs {
		byRank[d.Rank()] = d
	}
	if byRank[0].card != byRank[1].card || byRank[0].card == byRank[2].card {
		t.Fatal("ranks 0 and 1 should share a card, 0 and 2 not")
	}
	for r, d := range byRank {
		if st := d.Stats(); st.Mailbox != 16*nic.SlotSize || (r%2 == 0) != (st.Packets == 10) {
			t.Fatalf("rank %d: %+v", r, st)
		}
	}
}

func TestASenderStallsWhenItsCardsTransmitQueueIsFull(t *testing.T) {
	const n = 1000
	l := DefaultLink
	run(t, 2, 2*n, 1, 0, func(d *Device, s *sim.Sched) error {
		if d.Rank() == 1 {
			recv(d, n)
			return nil
		}
		start := s.Now()
		if _, err := d.Send(1, packets(n)); err != nil {
			return err
		}
		// The port sends a packet every g: the last n - 64 must have
		// waited for room.
		if took, want := s.Now()-start, (n-txDepth-1)*l.Gap; took < want || d.Stats().TxWait < want {
			return fmt.Errorf("%d packets written in %v (stalled %v), want at least %v", n, took, d.Stats().TxWait, want)
		}
		return nil
	})
}

// The pml idles after every progress, also one that took packets: a rank
// whose mailbox still holds packets must not sleep.
func TestARankWithPacketsLeftDoesNotSleep(t *testing.T) {
	run(t, 2, 256, 1, 0, func(d *Device, s *sim.Sched) error {
		if d.Rank() == 0 {
			_, err := d.Send(1, packets(100))
			return err
		}
		s.Compute(time.Millisecond) // everything lands
		start := s.Now()
		for d.Occupancy() > 0 {
			for i := 0; i < 10 && d.Poll() != nil; i++ {
				d.Release()
			}
			s.Idle()
		}
		if s.Now() != start {
			return fmt.Errorf("draining a full mailbox in batches took %v of virtual time", s.Now()-start)
		}
		return nil
	})
}
