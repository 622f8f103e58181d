package sm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
	"github.com/rs/zerolog"
)

// Two "hosts" that share a kernel and its /dev/shm (network namespaces):
// only the engine's locality tells them apart, and sm must not bridge
// them.
func TestRanksOnAnotherNodeAreUnreachableThoughTheyShareTheMemory(t *testing.T) {
	testJob++
	nodes := core.NodeMap{0, 1, 0, 1}
	boots := boot.GroupOn(fmt.Sprintf("smloc%d-%d", os.Getpid(), testJob), nodes)
	mods := make([]*Module, len(boots))
	for r, b := range boots {
		ms, err := Open(core.BTLEnv{Params: core.MustParams(Params), Boot: b, Locality: core.LocalityOf(b), Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		mods[r] = ms[0].(*Module)
		t.Cleanup(func() { mods[r].Close() })
	}
	var wg sync.WaitGroup
	for _, b := range boots {
		wg.Go(func() { b.Fence(context.Background()) })
	}
	wg.Wait()
	for me, m := range mods {
		for p := range nodes {
			_, err := m.Endpoint(p)
			switch same := nodes[p] == nodes[me]; {
			case same && err != nil:
				t.Errorf("rank %d cannot reach rank %d on its node: %v", me, p, err)
			case !same && !errors.Is(err, core.ErrUnreachable):
				t.Errorf("rank %d reaches rank %d on another node: %v", me, p, err)
			}
		}
	}
}
