package gobtl

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/conf"
	"github.com/gobtl/gobtl/core"
)

// Every rank of a job agrees on its coll.Machine, node by node: the ranks
// own their cores only if every node has a core for each of its ranks,
// whatever the rank's own node says.
func TestTheRanksAgreeOnWhetherTheyOwnTheirCores(t *testing.T) {
	defer func(f func(*start) int) { nodeCores = f }(nodeCores)
	for _, c := range []struct {
		name  string
		nodes []int // node of each rank
		cores []int // cores of each node
		want  coll.Machine
	}{
		{"one node, ranks fit", []int{0, 0, 0, 0}, []int{4}, coll.Machine{OwnCore: true, Nodes: 1, PerNode: 4}},
		{"one node, one rank too many", []int{0, 0, 0, 0}, []int{3}, coll.Machine{Nodes: 1, PerNode: 4}},
		{"two nodes that fit", []int{0, 0, 1, 1, 1}, []int{2, 3}, coll.Machine{OwnCore: true, Nodes: 2, PerNode: 3}},
		{"the second node is short", []int{0, 0, 1, 1, 1}, []int{2, 2}, coll.Machine{Nodes: 2, PerNode: 3}},
		{"the first node is short", []int{0, 1, 0, 1}, []int{1, 2}, coll.Machine{Nodes: 2, PerNode: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			boots := boot.GroupOn(fmt.Sprintf("machine%d-%s", os.Getpid(), c.name), core.NewNodeMap(c.nodes))
			nodeCores = func(s *start) int { return c.cores[c.nodes[s.boot.Rank()]] }
			got := make([]coll.Machine, len(boots))
			errs := make([]error, len(boots))
			var wg sync.WaitGroup
			for r, b := range boots {
				wg.Go(func() {
					s := &start{boot: b, ownBoot: true, locality: core.LocalityOf(b)}
					if errs[r] = s.putOwnCore(); errs[r] != nil {
						return
					}
					if errs[r] = b.Fence(context.Background()); errs[r] != nil {
						return
					}
					errs[r] = s.agreeMachine(context.Background())
					got[r] = s.machine
				})
			}
			wg.Wait()
			for r := range boots {
				if errs[r] != nil || got[r] != c.want {
					t.Errorf("rank %d: %+v, %v; want %+v", r, got[r], errs[r], c.want)
				}
			}
		})
	}
}

// A rank bound to one CPU keeps one P for a stack that moves messages in
// the calling goroutine, and gets two for one whose transports or
// protocol run goroutines it waits on; a GOMAXPROCS of the user's stands.
func TestARankOnOneCPUGetsASecondPOnlyWhenItsStackRunsGoroutines(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	btls := func(kinds ...string) []*conf.BTL {
		var out []*conf.BTL
		for _, k := range kinds {
			comp, ok := core.Lookup(core.KindBTL, k)
			if !ok {
				t.Fatalf("no btl %q", k)
			}
			out = append(out, &conf.BTL{Kind: k, Name: k, Component: comp})
		}
		return out
	}
	async := conf.DefaultJob()
	async.Protocol = conf.ProtocolRDMAReadAsync
	for _, c := range []struct {
		name, env string
		cfg       conf.Config
		want      int
	}{
		{"self and sm", "", conf.Config{Job: conf.DefaultJob(), BTLs: btls("self", "sm")}, 1},
		{"ib", "", conf.Config{Job: conf.DefaultJob(), BTLs: btls("self", "sm", "ib")}, 2},
		{"extoll", "", conf.Config{Job: conf.DefaultJob(), BTLs: btls("extoll")}, 2},
		{"rdma_read_async", "", conf.Config{Job: async, BTLs: btls("self", "sm")}, 2},
		{"ib, GOMAXPROCS=1 in the environment", "1", conf.Config{Job: conf.DefaultJob(), BTLs: btls("ib")}, 1},
	} {
		t.Setenv("GOMAXPROCS", c.env)
		runtime.GOMAXPROCS(1)
		(&start{ownBoot: true, cfg: &c.cfg}).fitGOMAXPROCS()
		if got := runtime.GOMAXPROCS(0); got != c.want {
			t.Errorf("%s: GOMAXPROCS %d, want %d", c.name, got, c.want)
		}
	}
}
