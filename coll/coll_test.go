package coll_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gobtl/gobtl/coll"
	"github.com/gobtl/gobtl/conf"
)

// The tests below run every algorithm of every collective, forced through
// a Tuning, against a serial reference, on 1 to 9 ranks (powers of two
// and not), from every root, with lengths that are empty, shorter than
// the ranks, odd, and long enough for several segments and rendezvous
// (four job sizes under the race detector).

var ranks = func() []int {
	if raceEnabled {
		return []int{1, 3, 4, 6} // one, odd, a power of two, even but not one
	}
	return []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
}()

// algs lists a collective's algorithms plus auto.
func algs(kind string) []string {
	return append([]string{"auto"}, coll.Kinds()[kind]...)
}

const seg = 1000 // small segments: long vectors cut into many

func TestBarrierHoldsEveryRankUntilAllArrive(t *testing.T) {
	for _, alg := range algs("barrier") {
		for _, n := range ranks {
			t.Run(fmt.Sprintf("%s/%d", alg, n), func(t *testing.T) {
				barrierHolds(t, n, forced("barrier", alg, 0))
			})
		}
	}
}

func barrierHolds(t *testing.T, n int, tu *coll.Tuning) {
	// The ranks are goroutines of this process: a counter they share
	// says whether a rank left a barrier before every rank had entered
	// it.
	var entered atomic.Int64
	withJob(t, n, tu, func(c *coll.Comm) error {
		for round := range 5 {
			entered.Add(1)
			if err := c.Barrier(bg); err != nil {
				return err
			}
			if got := entered.Load(); got < int64(n*(round+1)) {
				return fmt.Errorf("round %d: left the barrier when %d of %d entries were made", round, got, n*(round+1))
			}
			// and nobody enters the next round before all left this one
			if err := c.Barrier(bg); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestBcastFromEveryRootMatchesTheRoot(t *testing.T) {
	for _, alg := range algs("bcast") {
		for _, n := range ranks {
			t.Run(fmt.Sprintf("%s/%d", alg, n), func(t *testing.T) {
				withJob(t, n, forced("bcast", alg, seg), func(c *coll.Comm) error {
					for root := range n {
						for _, size := range []int{0, 1, 7, 4096, 5003} {
							want := fill(make([]byte, size/8*8), root, size)
							buf := make([]byte, len(want))
							if c.Rank() == root {
								copy(buf, want)
							}
							if err := c.Bcast(bg, buf, root); err != nil {
								return err
							}
							if err := diff(fmt.Sprintf("root %d, %d bytes", root, size), buf, want); err != nil {
								return err
							}
						}
					}
					return nil
				})
			})
		}
	}
}

func TestReduceToEveryRootMatchesTheSerialFold(t *testing.T) {
	for _, alg := range algs("reduce") {
		for _, n := range ranks {
			t.Run(fmt.Sprintf("%s/%d", alg, n), func(t *testing.T) {
				withJob(t, n, forced("reduce", alg, seg*8), func(c *coll.Comm) error {
					for _, op := range []coll.Op{sumInt64, compose} {
						for root := range n {
							for _, count := range []int{0, 1, 3, 700} {
								size := count * op.Size
								send := fill(make([]byte, size), c.Rank(), count)
								var recv []byte
								if c.Rank() == root {
									recv = make([]byte, size)
								}
								if err := c.Reduce(bg, send, recv, op, root); err != nil {
									return err
								}
								if c.Rank() == root {
									if err := diff(fmt.Sprintf("op size %d, root %d, %d elements", op.Size, root, count), recv, fold(op, size, 0, n, count)); err != nil {
										return err
									}
								}
							}
						}
					}
					return nil
				})
			})
		}
	}
}

func TestAllreduceMatchesTheSerialFoldOnEveryRank(t *testing.T) {
	for _, alg := range algs("allreduce") {
		for _, n := range ranks {
			t.Run(fmt.Sprintf("%s/%d", alg, n), func(t *testing.T) {
				withJob(t, n, forced("allreduce", alg, seg*8), func(c *coll.Comm) error {
					for _, op := range []coll.Op{sumInt64, compose} {
						for _, count := range []int{0, 1, 2, n - 1, n + 1, 3 * n, 1000} {
							if count < 0 {
								continue
							}
							for _, inPlace := range []bool{false, true} {
								size := count * op.Size
								send := fill(make([]byte, size), c.Rank(), count)
								recv := make([]byte, size)
								if inPlace {
									recv = send
								}
								sent := bytes.Clone(send)
								if err := c.Allreduce(bg, send, recv, op); err != nil {
									return err
								}
								what := fmt.Sprintf("op size %d, %d elements, in place %v", op.Size, count, inPlace)
								if err := diff(what, recv, fold(op, size, 0, n, count)); err != nil {
									return err
								}
								if !inPlace && !bytes.Equal(send, sent) {
									return fmt.Errorf("%s: the send vector changed", what)
								}
							}
						}
					}
					return nil
				})
			})
		}
	}
}

// Recursive doubling posts every receive of a small vector before its
// first send, each into a buffer of its own, and a large one's round by
// round: both, on every job size, folded or not, give the serial fold —
// also when the ranks run several of them back to back, so that a fast
// rank's messages of the next one meet receives of this one still posted.
func TestRecursiveDoublingAllreduceWithReceivesPostedAheadAndNot(t *testing.T) {
	for _, n := range ranks {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			withJob(t, n, forced("allreduce", "recursive_doubling", 0), func(c *coll.Comm) error {
				for _, op := range []coll.Op{sumInt64, compose} {
					// 1 and 8 KiB vectors are posted ahead; 160 KiB (sum)
					// and 320 KiB (compose) ones are not.
					for _, count := range []int{1, 1024 / op.Size * 8, 20000} {
						size := count * op.Size
						want := fold(op, size, 0, n, count)
						recvs := make([][]byte, 3)
						for i := range recvs {
							recvs[i] = make([]byte, size)
							if err := c.Allreduce(bg, fill(make([]byte, size), c.Rank(), count), recvs[i], op); err != nil {
								return err
							}
						}
						for i, recv := range recvs {
							if err := diff(fmt.Sprintf("op size %d, %d elements, call %d", op.Size, count, i), recv, want); err != nil {
								return err
							}
						}
					}
				}
				return nil
			})
		})
	}
}

func TestAllgatherPutsEveryBlockInRankOrder(t *testing.T) {
	for _, alg := range algs("allgather") {
		for _, n := range ranks {
			t.Run(fmt.Sprintf("%s/%d", alg, n), func(t *testing.T) {
				withJob(t, n, forced("allgather", alg, 0), func(c *coll.Comm) error {
					for _, b := range []int{0, 8, 24, 2000} {
						for _, inPlace := range []bool{false, true} {
							recv := make([]byte, n*b)
							send := fill(make([]byte, b), c.Rank(), b)
							if inPlace {
								copy(recv[c.Rank()*b:], send)
								send = recv[c.Rank()*b : (c.Rank()+1)*b]
							}
							if err := c.Allgather(bg, send, recv); err != nil {
								return err
							}
							for r := range n {
								if err := diff(fmt.Sprintf("block %d of %d bytes, in place %v", r, b, inPlace), recv[r*b:(r+1)*b], fill(make([]byte, b), r, b)); err != nil {
									return err
								}
							}
						}
					}
					return nil
				})
			})
		}
	}
}

// vcounts is a ragged layout: rank r's block is 8·((r·3+s) mod 5) bytes,
// some empty, laid out in reverse rank order with gaps.
func vcounts(n, s int) (counts, displs []int, total int) {
	counts, displs = make([]int, n), make([]int, n)
	for r := n - 1; r >= 0; r-- {
		counts[r] = 8 * ((r*3 + s) % 5)
		displs[r] = total
		total += counts[r] + 8
	}
	return counts, displs, total
}

func TestAllgathervPutsEveryBlockWhereDisplsSay(t *testing.T) {
	for _, n := range ranks {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			withJob(t, n, nil, func(c *coll.Comm) error {
				counts, displs, total := vcounts(n, 1)
				recv := make([]byte, total)
				send := fill(make([]byte, counts[c.Rank()]), c.Rank(), 1)
				if err := c.Allgatherv(bg, send, recv, counts, displs); err != nil {
					return err
				}
				for r := range n {
					if err := diff(fmt.Sprintf("block %d", r), recv[displs[r]:displs[r]+counts[r]], fill(make([]byte, counts[r]), r, 1)); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}

func TestAlltoallDeliversBlockIJToRankJ(t *testing.T) {
	for _, alg := range algs("alltoall") {
		for _, n := range ranks {
			t.Run(fmt.Sprintf("%s/%d", alg, n), func(t *testing.T) {
				withJob(t, n, forced("alltoall", alg, 0), func(c *coll.Comm) error {
					me := c.Rank()
					for _, b := range []int{0, 8, 3000} {
						for _, inPlace := range []bool{false, true} {
							send := make([]byte, n*b)
							for j := range n {
								fill(send[j*b:(j+1)*b], me, j)
							}
							recv := make([]byte, n*b)
							if inPlace {
								recv = send
							}
							if err := c.Alltoall(bg, send, recv, b); err != nil {
								return err
							}
							for i := range n {
								if err := diff(fmt.Sprintf("block from %d, %d bytes, in place %v", i, b, inPlace), recv[i*b:(i+1)*b], fill(make([]byte, b), i, me)); err != nil {
									return err
								}
							}
						}
					}
					// v: rank i sends rank j 8·((i+2j) mod 4) bytes.
					cnt := func(i, j int) int { return 8 * ((i + 2*j) % 4) }
					sc, sd, rc, rd := make([]int, n), make([]int, n), make([]int, n), make([]int, n)
					st, rt := 0, 0
					for j := range n {
						sc[j], sd[j] = cnt(me, j), st
						st += sc[j] + 8
						rc[j], rd[j] = cnt(j, me), rt
						rt += rc[j]
					}
					send, recv := make([]byte, st), make([]byte, rt)
					for j := range n {
						fill(send[sd[j]:sd[j]+sc[j]], me, j)
					}
					if err := c.Alltoallv(bg, send, sc, sd, recv, rc, rd); err != nil {
						return err
					}
					for i := range n {
						if err := diff(fmt.Sprintf("v block from %d", i), recv[rd[i]:rd[i]+rc[i]], fill(make([]byte, rc[i]), i, me)); err != nil {
							return err
						}
					}
					return nil
				})
			})
		}
	}
}

func TestGatherAndScatterOnEveryRoot(t *testing.T) {
	for _, alg := range algs("gather") {
		for _, n := range ranks {
			t.Run(fmt.Sprintf("%s/%d", alg, n), func(t *testing.T) {
				tu := forced("gather", alg, 0)
				if err := tu.Set("scatter", alg); err != nil {
					t.Fatal(err)
				}
				withJob(t, n, tu, func(c *coll.Comm) error {
					me := c.Rank()
					for root := range n {
						for _, b := range []int{0, 8, 2048} {
							all := make([]byte, n*b)
							send := fill(make([]byte, b), me, root)
							if err := c.Gather(bg, send, all, root); err != nil {
								return err
							}
							if me == root {
								for r := range n {
									if err := diff(fmt.Sprintf("gather to %d, block %d of %d bytes", root, r, b), all[r*b:(r+1)*b], fill(make([]byte, b), r, root)); err != nil {
										return err
									}
								}
							}
							// Scatter it back, in place on the root.
							recv := make([]byte, b)
							if me == root {
								recv = all[me*b : (me+1)*b]
							}
							if err := c.Scatter(bg, all, recv, root); err != nil {
								return err
							}
							if err := diff(fmt.Sprintf("scatter from %d, %d bytes", root, b), recv, send); err != nil {
								return err
							}
						}
						counts, displs, total := vcounts(n, root)
						all := make([]byte, total)
						send := fill(make([]byte, counts[me]), me, root)
						if err := c.Gatherv(bg, send, all, counts, displs, root); err != nil {
							return err
						}
						if me == root {
							for r := range n {
								if err := diff(fmt.Sprintf("gatherv to %d, block %d", root, r), all[displs[r]:displs[r]+counts[r]], fill(make([]byte, counts[r]), r, root)); err != nil {
									return err
								}
							}
						}
						recv := make([]byte, counts[me])
						if err := c.Scatterv(bg, all, recv, counts, displs, root); err != nil {
							return err
						}
						if err := diff(fmt.Sprintf("scatterv from %d", root), recv, send); err != nil {
							return err
						}
					}
					return nil
				})
			})
		}
	}
}

func TestReduceScatterBlockLeavesBlockIOnRankI(t *testing.T) {
	for _, alg := range algs("reduce_scatter") {
		for _, n := range ranks {
			t.Run(fmt.Sprintf("%s/%d", alg, n), func(t *testing.T) {
				withJob(t, n, forced("reduce_scatter", alg, 0), func(c *coll.Comm) error {
					me := c.Rank()
					for _, op := range []coll.Op{sumInt64, compose} {
						for _, count := range []int{0, 1, 300} {
							b := count * op.Size
							send := fill(make([]byte, n*b), me, count)
							recv := make([]byte, b)
							if err := c.ReduceScatterBlock(bg, send, recv, op); err != nil {
								return err
							}
							want := fold(op, n*b, 0, n, count)[me*b : (me+1)*b]
							if err := diff(fmt.Sprintf("op size %d, %d elements", op.Size, count), recv, want); err != nil {
								return err
							}
						}
					}
					return nil
				})
			})
		}
	}
}

func TestScanAndExscanArePrefixesInRankOrder(t *testing.T) {
	for _, n := range ranks {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			withJob(t, n, nil, func(c *coll.Comm) error {
				me := c.Rank()
				for _, op := range []coll.Op{sumInt64, compose} {
					for _, count := range []int{0, 1, 50} {
						size := count * op.Size
						send := fill(make([]byte, size), me, count)
						recv := make([]byte, size)
						if err := c.Scan(bg, send, recv, op); err != nil {
							return err
						}
						if err := diff(fmt.Sprintf("scan, op size %d, %d elements", op.Size, count), recv, fold(op, size, 0, me+1, count)); err != nil {
							return err
						}
						ex := bytes.Repeat([]byte{0xee}, size)
						if err := c.Exscan(bg, send, ex, op); err != nil {
							return err
						}
						want := bytes.Repeat([]byte{0xee}, size) // rank 0's is left alone
						if me > 0 {
							want = fold(op, size, 0, me, count)
						}
						if err := diff(fmt.Sprintf("exscan, op size %d, %d elements", op.Size, count), ex, want); err != nil {
							return err
						}
						// In place.
						if err := c.Scan(bg, send, send, op); err != nil {
							return err
						}
						if err := diff("scan in place", send, fold(op, size, 0, me+1, count)); err != nil {
							return err
						}
					}
				}
				return nil
			})
		})
	}
}

func TestSplitMakesCommunicatorsOfEachColorRankedByKey(t *testing.T) {
	for _, n := range ranks {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			withJob(t, n, nil, func(c *coll.Comm) error {
				me := c.Rank()
				// Colors 0, 1, 2 by rank mod 3, except rank 1, which joins
				// none; keys reverse the order.
				color := me % 3
				if me == 1 {
					color = coll.Undefined
				}
				sub, err := c.Split(bg, color, -me)
				if err != nil {
					return err
				}
				if color == coll.Undefined {
					if sub != nil {
						return fmt.Errorf("rank 1 got a communicator")
					}
				} else {
					var members []int
					for r := n - 1; r >= 0; r-- {
						if r%3 == color && r != 1 {
							members = append(members, r)
						}
					}
					if sub.Size() != len(members) || members[sub.Rank()] != me {
						return fmt.Errorf("rank %d is %d of %d in color %d, want %d of %v", me, sub.Rank(), sub.Size(), color, len(members), members)
					}
					// A sum over the subcommunicator, and a message from
					// every member to every other on it.
					v := make([]byte, 8)
					binary.LittleEndian.PutUint64(v, uint64(me))
					if err := sub.Allreduce(bg, v, v, sumInt64); err != nil {
						return err
					}
					want := 0
					for _, m := range members {
						want += m
					}
					if got := int(binary.LittleEndian.Uint64(v)); got != want {
						return fmt.Errorf("sum over color %d is %d, want %d", color, got, want)
					}
					if err := pointToPoint(sub); err != nil {
						return err
					}
					// Split again (a Split of a Split), then Dup the world.
					sub2, err := sub.Split(bg, sub.Rank()%2, sub.Rank())
					if err != nil {
						return err
					}
					if err := sub2.Barrier(bg); err != nil {
						return err
					}
				}
				d, err := c.Dup(bg)
				if err != nil {
					return err
				}
				return pointToPoint(d)
			})
		})
	}
}

// pointToPoint sends every other rank of c its rank and checks what
// arrives: sources are c's ranks.
func pointToPoint(c *coll.Comm) error {
	p := pmlOf(c)
	n, me := p.Size(), p.Rank()
	for i := 1; i < n; i++ {
		dst, src := (me+i)%n, (me-i+n)%n
		in := make([]byte, 8)
		r, err := p.Irecv(in, src, 5)
		if err != nil {
			return err
		}
		out := make([]byte, 8)
		binary.LittleEndian.PutUint64(out, uint64(me))
		if err := p.Send(out, dst, 5); err != nil {
			return err
		}
		st, err := p.Wait(r)
		if err != nil {
			return err
		}
		if st.Source != src {
			return fmt.Errorf("message from %d reports source %d", src, st.Source)
		}
		if got := binary.LittleEndian.Uint64(in); got != uint64(src) {
			return fmt.Errorf("message from %d carries %d", src, got)
		}
	}
	return nil
}

func TestTheStackFileKnowsEveryAlgorithm(t *testing.T) {
	if got, want := conf.CollAlgorithms(), coll.Kinds(); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("conf's coll block offers %v, package coll has %v", got, want)
	}
}
