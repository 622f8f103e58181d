package gobtl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/ofi"
	"github.com/gobtl/gobtl/core"
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
		if got := len(c.p.Weights(1 - c.Rank())); got != 2 {
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

// A stack file without btl blocks changes what it names and keeps the
// default transports (the in-process fabric for goroutine ranks): it used
// to leave every rank with no way to reach another.
func TestAStackWithoutBTLBlocksKeepsTheDefaultTransports(t *testing.T) {
	for _, src := range []string{"", "job {\n  protocol = \"rdma_write\"\n}\n", "policy \"sched\" {\n  builtin = \"round_robin\"\n}\n"} {
		stack := filepath.Join(t.TempDir(), "stack.hcl")
		os.WriteFile(stack, []byte(src), 0o644)
		err := RunLocal(context.Background(), 2, Options{ConfigFiles: []string{stack}}, func(c *Comm) error {
			buf := make([]byte, 64<<10)
			if c.Rank() == 0 {
				return c.Send(buf, 1, 3)
			}
			_, err := c.Recv(buf, 0, 3)
			return err
		})
		if err != nil {
			t.Fatalf("stack %q: %v", src, err)
		}
	}
}

// The default stack's transports (conf/examples/default.hcl) fitted to
// the job: goroutine ranks, a job on one node, a job across nodes (over
// softrc, or ofi where the host has fabric hardware) — the same whether
// no file is given or a file without btl blocks.
func TestTheDefaultTransportsFitTheJob(t *testing.T) {
	stack := filepath.Join(t.TempDir(), "proto.hcl")
	os.WriteFile(stack, []byte("job {\n  protocol = \"rdma_write\"\n}\n"), 0o644)
	defer func(f func() ofi.Net) { chooseNet = f }(chooseNet)
	softrc := ofi.Net{Why: "no fabric provider with hardware: found tcp"}
	fabric := ofi.Net{Provider: "tcp", Domain: "lo", Why: "as if tcp had hardware"}
	for _, files := range [][]string{nil, {stack}} {
		for _, tc := range []struct {
			inProcess, spans bool
			net              ofi.Net
			want             string
		}{
			{true, false, fabric, "self/self inproc/default"},
			{false, false, fabric, "self/self sm/local"},
			{false, true, softrc, "self/self sm/local ib/net"},
			{false, true, fabric, "self/self sm/local ofi/net(tcp,lo)"},
		} {
			chooseNet = func() ofi.Net { return tc.net }
			cfg, err := loadConfig(Options{ConfigFiles: files, inProcess: tc.inProcess}, tc.spans)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range cfg.BTLs {
				name := b.Kind + "/" + b.Name
				if b.Kind == ofi.Name {
					name += fmt.Sprintf("(%s,%s)", b.Params.String("provider"), b.Params.String("domain"))
				}
				got = append(got, name)
			}
			if tc.spans && cfg.Net != tc.net.String() {
				t.Errorf("files %v: the configuration says net %q, want %q", files, cfg.Net, tc.net)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("files %v, in process %v, spanning nodes %v: %v, want %s", files, tc.inProcess, tc.spans, got, tc.want)
			}
		}
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

// TestARankThatFailsEndsTheJob: rank 1 gives up at once while rank 0
// waits for a message it will never send, and rank 2 is in a barrier.
// RunLocal must return rank 1's error, not hang: the others see
// core.ErrAborted.
func TestARankThatFailsEndsTheJob(t *testing.T) {
	boom := errors.New("boom")
	aborted := make(chan error, 2)
	done := make(chan error, 1)
	go func() {
		done <- RunLocal(context.Background(), 3, Options{}, func(c *Comm) error {
			switch c.Rank() {
			case 0:
				_, err := c.Recv(make([]byte, 8), 1, 0)
				aborted <- err
				return err
			case 1:
				return boom
			default:
				err := c.Barrier()
				aborted <- err
				return err
			}
		})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("RunLocal returned %v, want rank 1's error", err)
		}
		if errors.Is(err, core.ErrAborted) {
			t.Errorf("the result repeats the ranks that were aborted: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunLocal did not return after rank 1 failed")
	}
	for range 2 {
		if err := <-aborted; !errors.Is(err, core.ErrAborted) || !errors.Is(err, boom) {
			t.Errorf("a waiting rank got %v, want core.ErrAborted wrapping the cause", err)
		}
	}
}
