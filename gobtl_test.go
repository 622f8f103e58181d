package gobtl

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunLocalDefaultStack(t *testing.T) {
	err := RunLocal(context.Background(), 3, Options{}, func(c *Comm) error {
		next, prev := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
		out := bytes.Repeat([]byte{byte(c.Rank())}, 100<<10)
		in := make([]byte, len(out))
		r, err := c.Irecv(in, prev, 0)
		if err != nil {
			return err
		}
		if err := c.Send(out, next, 0); err != nil {
			return err
		}
		if _, err := c.Wait(r); err != nil {
			return err
		}
		if in[0] != byte(prev) || in[len(in)-1] != byte(prev) {
			return errors.New("wrong data")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestInitWithAStackFile(t *testing.T) {
	dir := t.TempDir()
	stack := filepath.Join(dir, "stack.hcl")
	os.WriteFile(stack, []byte(`
job {
  protocol    = "rdma_write"
  eager_limit = "1KiB"
}
btl "inproc" "a" { jitter = "50us" }
btl "inproc" "b" {}
`), 0o644)
	err := RunLocal(context.Background(), 2, Options{ConfigFiles: []string{stack}}, func(c *Comm) error {
		if got := len(c.Weights(1 - c.Rank())); got != 2 {
			return errors.New("the peer should have two subchannels")
		}
		buf := make([]byte, 2<<20)
		if c.Rank() == 0 {
			buf[12345] = 7
			return c.Send(buf, 1, 3)
		}
		_, err := c.Recv(buf, 0, 3)
		if err == nil && buf[12345] != 7 {
			err = errors.New("wrong data")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestInitReportsConfigErrorsWithPositions(t *testing.T) {
	dir := t.TempDir()
	stack := filepath.Join(dir, "bad.hcl")
	os.WriteFile(stack, []byte("job {\n  protocl = \"rdma_read\"\n}\n"), 0o644)
	_, err := Init(context.Background(), Options{ConfigFiles: []string{stack}})
	if err == nil || !strings.Contains(err.Error(), "bad.hcl:2:3") {
		t.Fatalf("err = %v, want a diagnostic at bad.hcl:2:3", err)
	}
}

func TestInitAloneIsAJobOfOneRank(t *testing.T) {
	c, err := Init(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Size() != 1 || c.Rank() != 0 {
		t.Fatalf("rank %d of %d", c.Rank(), c.Size())
	}
	if err := c.Send([]byte("me"), 0, 1); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 2)
	if _, err := c.Recv(b, 0, 1); err != nil || string(b) != "me" {
		t.Fatalf("self receive: %q %v", b, err)
	}
}
