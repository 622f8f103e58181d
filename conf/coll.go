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
	{"barrier", []string{"dissemination", "linear"}, "barrier: dissemination, or every rank to every rank in one round"},
	{"bcast", []string{"binomial", "binary", "pipeline", "scatter_allgather", "linear"}, "broadcast: binomial tree, pipelined binary tree, pipelined chain, scatter + ring allgather, or straight from the root"},
	{"reduce", []string{"binomial", "binary"}, "reduce: binomial tree or pipelined binary tree (commutative operations)"},
	{"allreduce", []string{"recursive_doubling", "rabenseifner", "ring", "reduce_bcast", "linear", "direct"}, "allreduce: recursive doubling, reduce-scatter + allgather (Rabenseifner), ring, reduce then broadcast, every vector to every rank in one round, or every block to its rank and back in two"},
	{"allgather", []string{"bruck", "recursive_doubling", "ring", "linear"}, "allgather: Bruck, recursive doubling (powers of two), ring, or every block to every rank in one round"},
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
