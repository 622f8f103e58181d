package extollstatic

import (
	"testing"

	"github.com/gobtl/gobtl/core"
)

func TestSetupSplitsTheMailboxAndProposesEquation1(t *testing.T) {
	cases := []struct {
		name                      string
		peers, slots, k           int
		quota, threshold, wantErr int
	}{
		{"58 slots per peer, 2 credit slots (§5.3)", 16, 16 * 58, 2, 56, 19, 0},
		{"Figure 3: quota 20, 2 credit slots", 2, 2 * 22, 2, 20, 7, 0},
		{"Table 1's last row: quota 3", 2, 2 * 5, 2, 3, 2, 0},
		{"too small for Equation 2", 4, 4 * 3, 2, 0, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &Policy{CreditSlots: c.k}
			s, err := p.Setup(core.FlowInfo{Resource: core.ResourceSlotPool, Ranks: c.peers, Senders: c.peers, BufferSize: 64, Buffers: c.slots})
			if (err != nil) != (c.wantErr != 0) {
				t.Fatalf("err %v", err)
			}
			if err == nil && (s.Quota != c.quota || s.CreditThreshold != c.threshold || s.DynamicRegion) {
				t.Fatalf("setup %+v, want quota %d threshold %d", s, c.quota, c.threshold)
			}
		})
	}
}

func TestComponentIsRegistered(t *testing.T) {
	c, ok := core.Lookup(core.KindFlowControl, Name)
	if !ok {
		t.Fatal("not registered")
	}
	pol, err := c.NewPolicy(core.MustParams(c.Params))
	if err != nil {
		t.Fatal(err)
	}
	if p := pol.(*Policy); p.CreditSlots != 2 {
		t.Fatalf("default credit slots %d", p.CreditSlots)
	}
}
