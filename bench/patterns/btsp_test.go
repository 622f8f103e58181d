package patterns

import "testing"

func TestMultiPartitionIsNPBsOnASquareAndFourByTwoOnEight(t *testing.T) {
	for _, tc := range []struct{ n, q, s int }{{16, 4, 4}, {9, 3, 3}, {8, 4, 2}, {4, 2, 2}, {2, 2, 1}, {6, 6, 1}, {1, 1, 1}} {
		if mp := newMultiPartition(tc.n); mp.q != tc.q || mp.s != tc.s {
			t.Errorf("n=%d: q=%d s=%d, want %d, %d", tc.n, mp.q, mp.s, tc.q, tc.s)
		}
	}
}

func TestMultiPartitionIsBalancedWithOnePartnerPerDirection(t *testing.T) {
	for n := 1; n <= 36; n++ {
		mp := newMultiPartition(n)
		if mp.q*mp.s != n || mp.q%mp.s != 0 {
			t.Fatalf("n=%d: q=%d s=%d", n, mp.q, mp.s)
		}
		seen := map[[3]int]int{}
		for me := range n {
			cells := mp.owned(me)
			if len(cells) != mp.q {
				t.Fatalf("n=%d: rank %d owns %d cells, want %d", n, me, len(cells), mp.q)
			}
			perSlab := [3]map[int]int{{}, {}, {}}
			for _, c := range cells {
				if o := mp.owner(c); o != me {
					t.Fatalf("n=%d: rank %d lists cell %v owned by %d", n, me, c, o)
				}
				seen[c]++
				for d := range 3 {
					perSlab[d][c[d]]++
				}
				// Every neighbour of me's cells in one direction is one rank.
				for d := range 3 {
					for _, st := range []int{-1, 1} {
						nc := c
						nc[d] += st
						if nc[d] < 0 || nc[d] >= mp.cells[d] {
							continue
						}
						if o, want := mp.owner(nc), mp.neighbour(me, d, st); o != want {
							t.Fatalf("n=%d: rank %d cell %v: neighbour %+d in %d is rank %d, want %d", n, me, c, st, d, o, want)
						}
					}
				}
			}
			for d := range 3 {
				want := 1 // one cell in every x and y slab, q/s in every z slab
				if d == 2 {
					want = mp.q / mp.s
				}
				for slab := range mp.cells[d] {
					if got := perSlab[d][slab]; got != want {
						t.Fatalf("n=%d: rank %d has %d cells in slab %d of direction %d, want %d", n, me, got, slab, d, want)
					}
				}
			}
		}
		if len(seen) != mp.q*mp.q*mp.s {
			t.Fatalf("n=%d: %d cells owned, want %d", n, len(seen), mp.q*mp.q*mp.s)
		}
	}
}
