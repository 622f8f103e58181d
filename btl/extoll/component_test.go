package extoll

import (
	"bytes"
	"context"
	"testing"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/msgtest"
	"github.com/gobtl/gobtl/pml"
	_ "github.com/gobtl/gobtl/policies/flowcontrol/extoll_dynamic"
)

// boot is a core.Bootstrap over the in-process store.
type boot struct {
	s          *kv
	rank, size int
	job        string
}

func (b *boot) Rank() int                      { return b.rank }
func (b *boot) Size() int                      { return b.size }
func (b *boot) JobID() string                  { return b.job }
func (b *boot) Put(key string, v []byte) error { b.s.put(b.rank, key, v); return nil }
func (b *boot) Fence(context.Context) error    { return nil }
func (b *boot) Get(ctx context.Context, rank int, key string) ([]byte, error) {
	return b.s.get(ctx, rank, key)
}

// The component opens from an HCL-shaped parameter block, publishes its
// address through the bootstrap and defaults to the dynamic scheme.
func TestComponentOpensFromParams(t *testing.T) {
	c, ok := core.Lookup(core.KindBTL, Name)
	if !ok {
		t.Fatal("btl extoll is not registered")
	}
	store := &kv{vals: map[string][]byte{}}
	dir := t.TempDir()
	job := msgtest.JobID()
	key := core.NewJobKey()
	var mods []core.Module
	for r := range 2 {
		p := core.MustParams(c.Params)
		for k, v := range map[string]string{"slots_per_peer": "16", "shm_dir": dir, "transport": "tcp"} {
			if err := p.SetText(k, v); err != nil {
				t.Fatal(err)
			}
		}
		ms, err := c.OpenBTL(core.BTLEnv{Instance: "x", Params: p, Boot: &boot{s: store, rank: r, size: 2, job: job}, Clock: core.SystemClock, Metrics: core.NewMetrics(), JobKey: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ms[0].Close() })
		mods = append(mods, ms...)
	}
	m := mods[0].(*Module)
	if !m.eng.Dynamic() || m.dev.Slots() != 32 || m.attrs.Name != "extoll:x" || m.attrs.EagerLimit != 2048 {
		t.Fatalf("dynamic %v, %d slots, attrs %+v", m.eng.Dynamic(), m.dev.Slots(), m.attrs)
	}
	var comms []*pml.Comm
	for r, mod := range mods {
		cm, err := pml.New(r, 2, []core.Module{mod}, pml.Options{})
		if err != nil {
			t.Fatal(err)
		}
		comms = append(comms, cm)
	}
	msg := bytes.Repeat([]byte("extoll"), 1000)
	parallel(t, comms, func(c *pml.Comm) error {
		if c.Rank() == 0 {
			return c.Send(msg, 1, 3)
		}
		buf := make([]byte, len(msg))
		_, err := c.Recv(buf, 0, 3)
		if err == nil && !bytes.Equal(buf, msg) {
			t.Error("message corrupt over tcp")
		}
		return err
	}, true)
}

func TestComponentRejectsBadParameters(t *testing.T) {
	c, _ := core.Lookup(core.KindBTL, Name)
	p := core.MustParams(c.Params)
	if err := p.SetText("transport", "carrier-pigeon"); err == nil {
		t.Fatal("accepted an unknown transport")
	}
	if err := p.SetText("slots_per_peer", "0"); err == nil {
		t.Fatal("accepted 0 slots per peer")
	}
}
