//go:build ofi && cgo

package ofi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/internal/msgtest"
)

// TestTwoDomainsAreTwoRails runs the PML over a block that names two
// domains (tcp on lo and on eth0): two modules, each a subchannel of every
// peer's channel, and rendezvous data striped over both.
func TestTwoDomainsAreTwoRails(t *testing.T) {
	requireProvider(t, "tcp")
	cfg, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: "stack.hcl", Bytes: []byte(`
job { protocol = "rdma_write" }
btl "self" "self" {}
btl "ofi" "net" {
  provider   = "tcp"
  if_include = ["lo", "eth0"]
}
`)})
	if diags.HasErrors() {
		if strings.Contains(conf.Err(diags).Error(), "eth0") {
			t.Skipf("no eth0 domain here: %v", conf.Err(diags))
		}
		t.Fatal(conf.Err(diags))
	}
	err := gobtl.RunLocal(context.Background(), 3, gobtl.Options{Config: cfg}, func(c *gobtl.Comm) error {
		me, n := c.Rank(), c.Size()
		next, prev := (me+1)%n, (me+n-1)%n
		for i, size := range []int{0, 100, 20000, 1 << 20, 4<<20 + 1} {
			buf := make([]byte, size)
			r, err := c.Irecv(buf, prev, i)
			if err != nil {
				return err
			}
			if err := c.Send(msgtest.Fill(make([]byte, size), uint64(me*10+i)), next, i); err != nil {
				return err
			}
			if _, err := c.Wait(r); err != nil {
				return err
			}
			if err := msgtest.Check(buf, uint64(prev*10+i)); err != nil {
				return fmt.Errorf("rank %d: %d bytes from %d: %w", me, size, prev, err)
			}
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		snap := c.Metrics().Snapshot()
		for _, dom := range []string{"lo", "eth0"} {
			if v, _ := snap["ofi.net."+dom+".frames_sent"].(int64); v == 0 {
				return fmt.Errorf("rank %d: nothing went over the %s rail (%v)", me, dom, snap)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAnUnknownProviderOrDomainIsAnErrorAtItsPlace: the block's schema
// checks both against what libfabric offers, at the value's line.
func TestAnUnknownProviderOrDomainIsAnErrorAtItsPlace(t *testing.T) {
	for _, tc := range []struct{ block, want string }{
		{`provider = "nosuch"`, `stack.hcl:3:14`},
		{`domain = "nosuch0"`, `stack.hcl:3:12`},
	} {
		_, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: "stack.hcl", Bytes: []byte(
			"btl \"self\" \"self\" {}\nbtl \"ofi\" \"net\" {\n  " + tc.block + "\n}\n")})
		err := conf.Err(diags)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "gobtl info ofi") {
			t.Errorf("%s: %v, want an error at %s", tc.block, err, tc.want)
		}
	}
}

// TestStaticFlowControlPoliciesRunAndDynamicOnesAreRefused: the static
// and hardware schemes of a flow_control policy run over ofi (the ring
// arrives); one that grows quotas is refused at open, saying so.
func TestStaticFlowControlPoliciesRunAndDynamicOnesAreRefused(t *testing.T) {
	requireProvider(t, "tcp")
	for _, tc := range []struct{ policy, wantErr string }{
		{`builtin = "ib_static"` + "\n  pre_post = 2\n  credit_threshold = 1", ""},
		{`builtin = "ib_hardware"`, ""},
		{`builtin = "ib_dynamic"`, "grows quotas"},
	} {
		cfg, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: "stack.hcl", Bytes: []byte(`
btl "self" "self" {}
btl "ofi" "net" { provider = "tcp" }
policy "flow_control" {
  ` + tc.policy + `
}
`)})
		if diags.HasErrors() {
			t.Fatal(conf.Err(diags))
		}
		err := gobtl.RunLocal(context.Background(), 3, gobtl.Options{Config: cfg}, func(c *gobtl.Comm) error {
			me, n := c.Rank(), c.Size()
			for i := range 200 {
				buf := make([]byte, 100)
				r, err := c.Irecv(buf, (me+n-1)%n, i)
				if err != nil {
					return err
				}
				if err := c.Send(msgtest.Fill(make([]byte, 100), uint64(me*1000+i)), (me+1)%n, i); err != nil {
					return err
				}
				if _, err := c.Wait(r); err != nil {
					return err
				}
				if err := msgtest.Check(buf, uint64((me+n-1)%n*1000+i)); err != nil {
					return err
				}
			}
			return c.Barrier()
		})
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.policy, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, want an error saying %q", tc.policy, err, tc.wantErr)
		}
	}
}
