package extoll

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
)

// fileBoot is a bootstrap through files in a directory, for ranks that are
// processes started by the test itself (no launcher needed).
type fileBoot struct {
	dir        string
	rank, size int
	fences     atomic.Int32
}

func (b *fileBoot) Rank() int     { return b.rank }
func (b *fileBoot) Size() int     { return b.size }
func (b *fileBoot) JobID() string { return filepath.Base(b.dir) }

func (b *fileBoot) Put(key string, v []byte) error {
	tmp := filepath.Join(b.dir, fmt.Sprintf(".%d.%s", b.rank, key))
	if err := os.WriteFile(tmp, v, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(b.dir, fmt.Sprintf("%d.%s", b.rank, key)))
}

func (b *fileBoot) Fence(ctx context.Context) error {
	f := b.fences.Add(1)
	if err := os.WriteFile(filepath.Join(b.dir, fmt.Sprintf("fence%d.%d", f, b.rank)), nil, 0o644); err != nil {
		return err
	}
	for r := range b.size {
		for {
			if _, err := os.Stat(filepath.Join(b.dir, fmt.Sprintf("fence%d.%d", f, r))); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	return nil
}

func (b *fileBoot) Get(_ context.Context, rank int, key string) ([]byte, error) {
	return os.ReadFile(filepath.Join(b.dir, fmt.Sprintf("%d.%s", rank, key)))
}

// Ranks that are separate processes exchange messages of every size over
// each transport: mailboxes mapped from /dev/shm, and TCP.
func TestRanksThatAreProcesses(t *testing.T) {
	if os.Getenv("EXTOLL_CHILD_DIR") != "" {
		t.Skip("child")
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, tc := range []struct{ transport, policy string }{{"shm", "extoll_dynamic"}, {"tcp", "extoll_static"}} {
		t.Run(tc.transport+"/"+tc.policy, func(t *testing.T) {
			const n = 4
			dir := t.TempDir()
			procs := make([]*exec.Cmd, n)
			outs := make([]*bytes.Buffer, n)
			for r := range n {
				c := exec.Command(os.Args[0], "-test.run", "^TestChildRank$", "-test.v")
				outs[r] = new(bytes.Buffer)
				c.Stdout, c.Stderr = outs[r], outs[r]
				c.Env = append(os.Environ(), "EXTOLL_CHILD_DIR="+dir, "EXTOLL_CHILD_RANK="+strconv.Itoa(r),
					"EXTOLL_CHILD_SIZE="+strconv.Itoa(n), "EXTOLL_CHILD_TRANSPORT="+tc.transport, "EXTOLL_CHILD_POLICY="+tc.policy)
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				procs[r] = c
			}
			for r, c := range procs {
				if err := c.Wait(); err != nil {
					t.Errorf("rank %d: %v\n%s", r, err, outs[r])
				} else if !bytes.Contains(outs[r].Bytes(), []byte("--- PASS: TestChildRank")) {
					t.Errorf("rank %d did not run:\n%s", r, outs[r])
				}
			}
		})
	}
}

// TestChildRank is one rank of TestRanksThatAreProcesses.
func TestChildRank(t *testing.T) {
	dir := os.Getenv("EXTOLL_CHILD_DIR")
	if dir == "" {
		t.Skip("run by TestRanksThatAreProcesses")
	}
	rank, _ := strconv.Atoi(os.Getenv("EXTOLL_CHILD_RANK"))
	size, _ := strconv.Atoi(os.Getenv("EXTOLL_CHILD_SIZE"))
	boot := &fileBoot{dir: dir, rank: rank, size: size}
	comp, _ := core.Lookup(core.KindBTL, Name)
	p := core.MustParams(comp.Params)
	p.SetText("transport", os.Getenv("EXTOLL_CHILD_TRANSPORT"))
	p.SetText("slots_per_peer", "16")
	pc, _ := core.Lookup(core.KindFlowControl, os.Getenv("EXTOLL_CHILD_POLICY"))
	pol, err := pc.NewPolicy(core.MustParams(pc.Params))
	if err != nil {
		t.Fatal(err)
	}
	mods, err := comp.OpenBTL(core.BTLEnv{Instance: "p", Params: p, Boot: boot, Clock: core.SystemClock,
		Metrics: core.NewMetrics(), FlowControl: pol.(core.FlowControl)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := pml.New(rank, size, mods, pml.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sizes := []int{0, 7, 2048, 3000, 1 << 20}
	var reqs []*pml.Request
	bufs := map[[2]int][]byte{}
	for peer := range size {
		for i, sz := range sizes {
			b := make([]byte, sz)
			bufs[[2]int{peer, i}] = b
			r, err := c.Irecv(b, peer, i)
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, r)
		}
	}
	for peer := range size {
		for i, sz := range sizes {
			r, err := c.Isend(pattern(rank, peer, i, sz), peer, i)
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, r)
		}
	}
	if err := c.Waitall(reqs); err != nil {
		t.Fatal(err)
	}
	for k, b := range bufs {
		if !bytes.Equal(b, pattern(k[0], rank, k[1], len(b))) {
			t.Fatalf("message %d from rank %d corrupt", k[1], k[0])
		}
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
}
