package shm

// tree is the fan-in and fan-out tree over the relative ranks 0..n−1 of
// a node (rank − root, mod n): rank v's subtree is the contiguous range
// [v, v+size), the rest of which is cut into up to radix blocks of
// nearly equal size, each the subtree of a child. Combining a rank's own
// vector first and then its children's partial results in order thus
// combines the range in rank order — the serial fold, for operations
// that do not commute — and the tree is about log_radix n levels deep.
// Consecutive ranks, which launchers place on neighbouring cores
// (`--map-by core`), share subtrees, so the lower levels stay within the
// cores that share a cache.
type tree struct {
	parent []int   // -1 for the root
	kids   [][]int // in increasing order; sub-slices of one array
}

func newTree(n, radix int) tree {
	t := tree{parent: make([]int, n), kids: make([][]int, n)}
	all := make([]int, 0, n)
	var build func(v, end int)
	build = func(v, end int) {
		rest := end - v - 1
		k := min(radix, rest)
		block := func(i int) int { // the size of block i
			if i < rest%k {
				return rest/k + 1
			}
			return rest / k
		}
		start := len(all)
		for i, c := 0, v+1; i < k; i++ {
			all = append(all, c)
			t.parent[c] = v
			c += block(i)
		}
		t.kids[v] = all[start:len(all):len(all)]
		for i, c := 0, v+1; i < k; i++ {
			build(c, c+block(i))
			c += block(i)
		}
	}
	if n > 0 {
		t.parent[0] = -1
		build(0, n)
	}
	return t
}
