package template_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/gobtl/gobtl"
	_ "github.com/gobtl/gobtl/btl/template"
	"github.com/gobtl/gobtl/conf"
)

// TestAJobRunsOverTheTemplate runs the PML over the skeleton, beside self:
// messages from one byte to well past max_send_size (the PML's pipeline,
// since the template has no RDMA) go around a ring of four ranks.
func TestAJobRunsOverTheTemplate(t *testing.T) {
	cfg, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: "stack.hcl", Bytes: []byte(`
btl "template" "t" { max_send_size = "4KiB" }
`)})
	if diags.HasErrors() {
		t.Fatal(conf.Err(diags))
	}
	err := gobtl.RunLocal(context.Background(), 4, gobtl.Options{Config: cfg}, func(c *gobtl.Comm) error {
		next, prev := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
		for i, n := range []int{1, 4 << 10, 1 << 20} {
			out := bytes.Repeat([]byte{byte(c.Rank() + i)}, n)
			in := make([]byte, n)
			r, err := c.Irecv(in, prev, i)
			if err != nil {
				return err
			}
			if err := c.Send(out, next, i); err != nil {
				return err
			}
			if _, err := c.Wait(r); err != nil {
				return err
			}
			if !bytes.Equal(in, bytes.Repeat([]byte{byte(prev + i)}, n)) {
				return fmt.Errorf("%d bytes from rank %d arrived wrong", n, prev)
			}
		}
		return c.Barrier()
	})
	if err != nil {
		t.Fatal(err)
	}
}
