package core

import (
	"fmt"
	"slices"
)

// Locality tells which ranks of the job share a node, and so memory: the
// engine that started the job knows it (PMIx's PMIX_NODEID, PMI-2's
// PMI_process_mapping, `gobtl run`'s one host). A Bootstrap that knows it
// implements Locality; the job finds it by type assertion (LocalityOf)
// and hands it to the BTLs in BTLEnv.Locality. Shared memory serves only
// the ranks of its node; a network BTL publishes an address the other
// nodes can reach when the job spans several.
type Locality interface {
	// Node is the node rank runs on: an index in [0, Nodes()), equal for
	// two ranks exactly when they share a node.
	Node(rank int) int
	// Nodes is the number of nodes the job spans.
	Nodes() int
}

// LocalityOf returns b's Locality, or nil when b does not know where the
// ranks run.
func LocalityOf(b Bootstrap) Locality {
	l, _ := b.(Locality)
	return l
}

// NodeMap is a Locality from a table: NodeMap[r] is the node of rank r,
// numbered densely from 0 in order of first appearance (NewNodeMap).
type NodeMap []int

// NewNodeMap builds the NodeMap of a job whose rank r runs on node
// labels[r]; any comparable label will do (a host name, an engine's node
// id). Labels are renumbered 0, 1, ... in order of first appearance, so
// that equal tables come out equal whatever the engine's numbering.
func NewNodeMap[L comparable](labels []L) NodeMap {
	ids := make(map[L]int, 4)
	m := make(NodeMap, len(labels))
	for r, l := range labels {
		id, ok := ids[l]
		if !ok {
			id = len(ids)
			ids[l] = id
		}
		m[r] = id
	}
	return m
}

// OneNode is the NodeMap of a job of size ranks on one node.
func OneNode(size int) NodeMap { return make(NodeMap, size) }

// Node is the node of rank; a rank outside the table is on no node of
// the job (-1), so it shares a node with nobody.
func (m NodeMap) Node(rank int) int {
	if rank < 0 || rank >= len(m) {
		return -1
	}
	return m[rank]
}

// Nodes is the number of distinct nodes.
func (m NodeMap) Nodes() int {
	if len(m) == 0 {
		return 0
	}
	return slices.Max(m) + 1
}

// Check reports a table that is not dense from 0 or does not cover size
// ranks: an engine's answer that would make ranks disagree about who
// shares a node.
func (m NodeMap) Check(size int) error {
	if len(m) != size {
		return fmt.Errorf("locality: %d ranks mapped, the job has %d", len(m), size)
	}
	seen := make([]bool, len(m))
	for r, n := range m {
		if n < 0 || n >= len(m) {
			return fmt.Errorf("locality: rank %d on node %d of at most %d", r, n, len(m))
		}
		seen[n] = true
	}
	for n, ok := range seen[:m.Nodes()] {
		if !ok {
			return fmt.Errorf("locality: node %d has no rank (nodes are numbered densely)", n)
		}
	}
	return nil
}

// LocalRanks lists, in increasing order, the ranks of a size-rank job
// that share rank's node under l (rank included).
func LocalRanks(l Locality, size, rank int) []int {
	var out []int
	me := l.Node(rank)
	for r := range size {
		if l.Node(r) == me {
			out = append(out, r)
		}
	}
	return out
}

// SpansNodes reports whether l puts the job on more than one node; an
// unknown locality (nil) does not.
func SpansNodes(l Locality) bool { return l != nil && l.Nodes() > 1 }

// Aborter is implemented by bootstraps whose engine can end the whole job
// (PMIx_Abort, PMI's abort, `gobtl run`'s launcher): the engine kills
// every rank, this one included, and reports code and msg. Abort may
// return before that happens, or not at all.
type Aborter interface {
	Abort(code int, msg string) error
}

// Finalizer is implemented by bootstraps that tell the engine a rank
// ends cleanly (PMIx_Finalize, PMI's finalize). Only a rank that
// succeeded calls it: one that fails exits without it, so that the
// engine sees an abnormal end and stops the job.
type Finalizer interface {
	Finalize() error
}

// RanksOnNode is the number of ranks of a size-rank job on rank's node by
// loc, or size when loc is nil (nothing known: one node).
func RanksOnNode(loc Locality, rank, size int) int {
	if loc == nil {
		return size
	}
	n, me := 0, loc.Node(rank)
	for r := range size {
		if loc.Node(r) == me {
			n++
		}
	}
	return n
}
