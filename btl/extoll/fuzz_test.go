package extoll

import (
	"testing"

	"github.com/gobtl/gobtl/btl/extoll/nic"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/policies/flowcontrol/none"
)

// nullDevice is a card that sends nowhere: enough to drive Packet.
type nullDevice struct{}

func (nullDevice) Send(int, []nic.Slot) (int, error) { return 0, nil }
func (nullDevice) Poll() *nic.Slot                   { return nil }
func (nullDevice) Release()                          {}
func (nullDevice) RegisterMem([]byte, core.Access) (core.Region, error) {
	return nil, core.ErrNotSupported
}
func (nullDevice) Register([]byte, core.Access) (core.Region, error) {
	return nil, core.ErrNotSupported
}
func (nullDevice) Deregister(core.Region) error               { return nil }
func (nullDevice) Put(int, nic.Op) error                      { return nil }
func (nullDevice) Get(int, nic.Op) error                      { return nil }
func (nullDevice) PollNotification() (nic.Notification, bool) { return nic.Notification{}, false }
func (nullDevice) Rank() int                                  { return 0 }
func (nullDevice) Size() int                                  { return 4 }
func (nullDevice) Slots() int                                 { return 64 }
func (nullDevice) Lost() (nic.PeerLoss, bool)                 { return nic.PeerLoss{}, false }
func (nullDevice) Close() error                               { return nil }
func (nullDevice) Connect(int) error                          { return nil }

// Arbitrary packet sequences never panic the reassembly and never deliver
// a frame whose header does not check out; whatever is delivered has the
// length its header says.
func FuzzPacketTrains(f *testing.F) {
	var first [nic.MaxPayload]byte
	h := core.Header{Type: core.TypeEager, Tag: 3, Length: 100}
	encodeMatch(first[:], &h, 100)
	f.Add([]byte{0, 0, 56}, first[:])
	f.Add([]byte{1, 1, 56, 1, 1, 44}, first[:])
	f.Fuzz(func(t *testing.T, script, data []byte) {
		m, err := New(nullDevice{}, Config{Rank: 0, Size: 4, Policy: none.Policy{}, MaxSendSize: 2048})
		if err != nil {
			t.Fatal(err)
		}
		m.Register(core.TypeEager, func(h *core.Header, p []byte) {
			if int(h.Length) != len(p) {
				t.Fatalf("delivered %d bytes for a %d-byte frame", len(p), h.Length)
			}
		})
		// Each step: source, tag, length; payload bytes come from data.
		for i := 0; i+2 < len(script); i += 3 {
			src, tag, n := int(script[i]%4), script[i+1]%3, int(script[i+2])%(nic.MaxPayload+1)
			p := make([]byte, n)
			copy(p, data)
			if len(data) > n {
				data = data[n:]
			}
			m.Packet(src, tag, p)
		}
	})
}
