package conf

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/gobtl/gobtl/core"
)

// The coll block tunes the collective layer (package coll): the algorithm
// of each collective — "auto" leaves it to the decision table, by
// communicator size and message size — and the segment size of the
// pipelined ones.
//
//	coll {
//	  allreduce = "ring"
//	  bcast     = "pipeline"
//	  segment   = "32KiB"
//	}

// collAlgs are the algorithms of each collective, as package coll names
// them (its tests check that the two lists agree).
var collAlgs = []struct {
	name string
	algs []string
	doc  string
}{
	{"barrier", []string{"dissemination", "linear", "shm"}, "barrier: dissemination, every rank to every rank in one round, or flags in shared memory (shm)"},
	{"bcast", []string{"binomial", "binary", "pipeline", "scatter_allgather", "linear", "shm"}, "broadcast: binomial tree, pipelined binary tree, pipelined chain, scatter + ring allgather, straight from the root, or through shared memory (shm)"},
	{"reduce", []string{"binomial", "binary", "shm"}, "reduce: binomial tree, pipelined binary tree (commutative operations), or through shared memory (shm)"},
	{"allreduce", []string{"recursive_doubling", "rabenseifner", "ring", "reduce_bcast", "linear", "direct", "shm"}, "allreduce: recursive doubling, reduce-scatter + allgather (Rabenseifner), ring, reduce then broadcast, every vector to every rank in one round, every block to its rank and back in two, or through shared memory (shm)"},
	{"allgather", []string{"bruck", "recursive_doubling", "ring", "linear", "shm"}, "allgather: Bruck, recursive doubling (powers of two), ring, every block to every rank in one round, or through shared memory (shm)"},
	{"alltoall", []string{"linear", "pairwise"}, "alltoall and alltoallv: every message at once, or one exchange per step"},
	{"gather", []string{"binomial", "linear"}, "gather: binomial tree or straight to the root"},
	{"scatter", []string{"binomial", "linear"}, "scatter: binomial tree or straight from the root"},
	{"reduce_scatter", []string{"ring", "recursive_halving", "reduce_scatter"}, "reduce-scatter: ring, recursive halving (powers of two), or reduce then scatter"},
	{"scan", []string{"recursive_doubling"}, "scan and exscan algorithm"},
}

// CollAlgorithms returns, for each collective the coll block tunes, the
// algorithms it accepts besides "auto".
func CollAlgorithms() map[string][]string {
	m := map[string][]string{}
	for _, c := range collAlgs {
		m[c.name] = append([]string(nil), c.algs...)
	}
	return m
}

// CollParams is the schema of the coll block.
var CollParams = func() []core.Param {
	var ps []core.Param
	for _, c := range collAlgs {
		ps = append(ps, core.Param{Name: c.name, Type: core.ParamString, Default: "auto",
			Enum: append([]string{"auto"}, c.algs...), Doc: c.doc + `; "auto": by communicator and message size`})
	}
	return append(ps, core.Param{Name: "segment", Type: core.ParamSize, Min: "1",
		Doc: "segment of the pipelined algorithms; unset: the decision table's"})
}()

// decodeColl decodes the coll block (at most one).
func (c *Config) decodeColl(blocks []*hcl.Block) hcl.Diagnostics {
	c.Coll = core.MustParams(CollParams)
	if len(blocks) == 0 {
		return nil
	}
	diags := extraBlocks("coll", blocks)
	b := blocks[0]
	c.CollRange = b.DefRange.Ptr()
	p, ds := c.dec.decodeBody(b.Body, CollParams, b.DefRange)
	diags = append(diags, ds...)
	if !ds.HasErrors() {
		c.Coll = p
	}
	return diags
}
