package sm

import (
	"errors"
	"testing"

	"github.com/gobtl/gobtl/core"
)

// Two "hosts" that share a kernel and its /dev/shm (network namespaces):
// only the engine's locality tells them apart, and sm must not bridge
// them.
func TestRanksOnAnotherNodeAreUnreachableThoughTheyShareTheMemory(t *testing.T) {
	nodes := core.NodeMap{0, 1, 0, 1}
	mods, _ := openRanksOn(t, nodes, nil)
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
