package pmi

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gobtl/gobtl/core"
)

// parseMapping reads PMI_process_mapping, the engine's account of which
// node each rank runs on (Slurm's and hydra's job attribute):
//
//	(vector,(start,nodes,ranks_per_node),...)
//
// Each block puts ranks_per_node consecutive ranks on each of nodes
// nodes numbered from start; the blocks are taken in order and, when
// they cover fewer than size ranks, again from the first (a cyclic
// distribution is "(vector,(0,N,1))"). The node numbers are the
// engine's; the result is renumbered densely.
func parseMapping(s string, size int) (core.NodeMap, error) {
	fail := func(why string) (core.NodeMap, error) {
		return nil, fmt.Errorf("PMI_process_mapping %q: %s", s, why)
	}
	t := strings.Join(strings.Fields(s), "")
	body, ok := strings.CutPrefix(t, "(vector,")
	if !ok || !strings.HasSuffix(body, ")") {
		return fail("not (vector,...)")
	}
	body = body[:len(body)-1]
	type block struct{ start, nodes, ppn int }
	var blocks []block
	for body != "" {
		if body[0] != '(' {
			return fail("a block does not start with (")
		}
		end := strings.IndexByte(body, ')')
		if end < 0 {
			return fail("a block does not end")
		}
		f := strings.Split(body[1:end], ",")
		if len(f) != 3 {
			return fail("a block has not three numbers")
		}
		var v [3]int
		for i, x := range f {
			n, err := strconv.Atoi(x)
			if err != nil || n < 0 || n > 1<<24 {
				return fail(fmt.Sprintf("%q is not a count", x))
			}
			v[i] = n
		}
		blocks = append(blocks, block{v[0], v[1], v[2]})
		body = strings.TrimPrefix(body[end+1:], ",")
	}
	if len(blocks) == 0 {
		return fail("no blocks")
	}
	nodes := make([]int, 0, size)
	for len(nodes) < size {
		before := len(nodes)
		for _, b := range blocks {
			for n := b.start; n < b.start+b.nodes && len(nodes) < size; n++ {
				for k := 0; k < b.ppn && len(nodes) < size; k++ {
					nodes = append(nodes, n)
				}
			}
		}
		if len(nodes) == before {
			return fail("its blocks place no rank")
		}
	}
	return core.NewNodeMap(nodes), nil
}
